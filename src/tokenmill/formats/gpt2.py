"""GPT-2's own files: ``vocab.json`` (token -> id, tokens in the byte-level alphabet) and
``merges.txt`` (a ``#version`` line, then one ``left right`` merge per line, in rank order)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill.added_tokens import AddedToken
from tokenmill.errors import FormatError, InputError

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: not UTF-8 at byte offset {e.start}") from None


def load(vocab_path: str | os.PathLike[str], merges_path: str | os.PathLike[str]) -> Tokenizer:
    """A byte-level BPE Tokenizer from GPT-2's two files; ``<|endoftext|>`` is its special
    token. A merge whose parts or result are not in the vocabulary is an error naming its line.
    """
    from tokenmill.decoders import ByteLevel as ByteLevelDecoder
    from tokenmill.models.bpe import BPE
    from tokenmill.pre_tokenizers import ByteLevel
    from tokenmill.tokenizer import Tokenizer

    vocab_path, merges_path = Path(vocab_path), Path(merges_path)
    try:
        vocab = json.loads(_read(vocab_path))
    except json.JSONDecodeError as e:
        raise FormatError(f"{vocab_path}: not valid JSON at line {e.lineno} column {e.colno}: "
                          f"{e.msg}") from None
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise FormatError(f"{vocab_path}: expected an object of token -> integer id")
    merges: list[tuple[str, str]] = []
    for n, line in enumerate(_read(merges_path).splitlines(), start=1):
        if not line.strip() or (n == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise FormatError(f"{merges_path}:{n}: expected 'left right', got {line!r}")
        left, right = parts
        for part in (left, right, left + right):
            if part not in vocab:
                raise FormatError(f"{merges_path}:{n}: merge {left!r} + {right!r} needs "
                                  f"{part!r}, which is not in {vocab_path.name}")
        merges.append((left, right))
    added = [AddedToken("<|endoftext|>", vocab["<|endoftext|>"], special=True)] \
        if "<|endoftext|>" in vocab else []
    return Tokenizer(BPE(vocab, merges), pre_tokenizer=ByteLevel(add_prefix_space=False),
                     decoder=ByteLevelDecoder(), added_tokens=added)
