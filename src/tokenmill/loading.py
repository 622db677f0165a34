"""One door to every tokenizer file tokenmill reads."""

from __future__ import annotations

import os
from pathlib import Path

from tokenmill.errors import InputError
from tokenmill.formats import bert_vocab, gpt2, tiktoken
from tokenmill.tokenizer import Tokenizer


def load(name_or_path: str | os.PathLike[str], *,
         path: str | os.PathLike[str] | None = None) -> Tokenizer:
    """A tokenizer by preset name or file.

    - ``load("cl100k_base", path="cl100k_base.tiktoken")``: one of tiktoken's encodings
      (``gpt2``, ``r50k_base``, ``p50k_base``, ``cl100k_base``, ``o200k_base``) with its ranks
      file (or a folder holding it); nothing is downloaded;
    - ``load("tokenizer.json")``: a Hugging Face tokenizer file;
    - ``load("dir/")`` with ``vocab.json`` and ``merges.txt`` in it: a GPT-2 style BPE;
    - ``load("vocab.txt")``, or a folder with only that: a BERT WordPiece tokenizer, uncased as
      ``BertWordPieceTokenizer`` (``tokenmill.formats.bert_vocab.load`` takes the options).
    - ``load("spiece.model")``: a SentencePiece model file (Unigram or BPE).
    """
    name = os.fspath(name_or_path)
    if name in tiktoken.PRESETS:
        return tiktoken.load(name, path)
    p = Path(name)
    if p.is_dir():
        if (p / "tokenizer.json").is_file():
            return Tokenizer.from_file(p / "tokenizer.json")
        if (p / "vocab.json").is_file() and (p / "merges.txt").is_file():
            return gpt2.load(p / "vocab.json", p / "merges.txt")
        if (p / "vocab.txt").is_file():
            return bert_vocab.load(p / "vocab.txt")
        raise InputError(f"{p}: no tokenizer.json, nor vocab.json with merges.txt, nor "
                         "vocab.txt, in it")
    if p.suffix == ".tiktoken":
        raise InputError(f"{p}: a .tiktoken file needs its pattern: load(PRESET, path={str(p)!r})"
                         f" with PRESET one of {', '.join(sorted(tiktoken.PRESETS))}")
    if p.suffix == ".model" and p.is_file():
        from tokenmill.formats import sentencepiece

        return sentencepiece.load(p)
    if not p.exists():
        if os.sep not in name and "." not in name:
            raise InputError(f"unknown preset {name!r}; expected one of "
                             f"{', '.join(sorted(tiktoken.PRESETS))} or a file")
        raise InputError(f"{p}: no such file")
    if p.suffix == ".txt":
        if p.name == "merges.txt" or _first_line(p).startswith("#version"):
            raise InputError(f"{p}: a merges file is half of a GPT-2 style tokenizer; give the "
                             "folder that holds it with its vocab.json")
        return bert_vocab.load(p)
    return Tokenizer.from_file(p)


def _first_line(path: Path) -> str:
    with open(path, "rb") as f:
        return f.readline(64).decode("utf-8", "replace")
