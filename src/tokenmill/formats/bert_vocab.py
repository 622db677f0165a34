"""BERT's ``vocab.txt``: one token per line, its id the line number (from 0).

Trailing whitespace (a ``\\r`` too) is not part of a token, as in Hugging Face. A token given
twice or an empty line is an error naming the line: Hugging Face would let the later line win
and leave a hole in the ids.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tokenmill._io import atomic_write_text, read_file
from tokenmill.errors import FormatError, InputError


def read_vocab(path: str | os.PathLike[str]) -> dict[str, int]:
    """token -> id of a ``vocab.txt``."""
    path = Path(path)
    raw = read_file(path, "a vocab.txt file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise FormatError(f"{path}:{line}: not UTF-8 (byte offset {e.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    vocab: dict[str, int] = {}
    for number, text_line in enumerate(lines):
        token = text_line.rstrip()
        if not token:
            raise FormatError(f"{path}:{number + 1}: empty line (expected one token per line)")
        if token in vocab:
            raise FormatError(f"{path}:{number + 1}: token {token!r} is already on line "
                              f"{vocab[token] + 1} (expected each token once)")
        vocab[token] = number
    if not vocab:
        raise FormatError(f"{path}: empty (expected one token per line)")
    return vocab


def write_vocab(path: str | os.PathLike[str], vocab: dict[str, int]) -> None:
    """Write ``vocab`` as a ``vocab.txt`` (atomically); ids must be 0..n-1."""
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    for line, (token, i) in enumerate(by_id):
        if i != line:
            raise InputError(f"vocab ids must be 0..{len(by_id) - 1} to be written as lines; "
                             f"id {line} is missing")
        if not token or token != token.rstrip() or "\n" in token:
            raise InputError(f"token {token!r} (id {i}) cannot be a line of a vocab.txt")
    atomic_write_text(path, "".join(token + "\n" for token, _ in by_id))


def load(path: str | os.PathLike[str], **options: Any) -> Any:
    """A BERT tokenizer from ``vocab.txt``; ``options`` are those of
    :func:`tokenmill.bert.bert_tokenizer` (``lowercase=True`` by default, as uncased BERT)."""
    from tokenmill.bert import bert_tokenizer
    from tokenmill.models.wordpiece import WordPiece

    return bert_tokenizer(WordPiece(read_vocab(path)), source=str(path), **options)
