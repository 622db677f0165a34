"""Fixtures of the evaluation tests: a small trained tokenizer and small corpora."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from tokenmill import Tokenizer
from tokenmill._io import read_lines
from tokenmill.sweep import train_sizes


@pytest.fixture(scope="session")
def sample_lines() -> list[str]:
    """The bundled sample corpus (Alice in Wonderland), one line a document."""
    with resources.as_file(resources.files("tokenmill") / "data" / "sample.txt") as path:
        return list(read_lines(path))


@pytest.fixture(scope="session")
def trained(sample_lines) -> Tokenizer:
    """A byte-level BPE of 500 rows with two special tokens, as `tokenmill train` makes it."""
    toks, _, _ = train_sizes(sample_lines, [500], special_tokens=["<|endoftext|>", "<|pad|>"])
    return toks[500]


@pytest.fixture
def trained_file(trained, tmp_path) -> Path:
    path = tmp_path / "tok.json"
    trained.save(path)
    return path


@pytest.fixture
def corpora(tmp_path, sample_lines) -> dict[str, Path]:
    """Three small corpora: two parallel ones (same line count) and a longer one."""
    out = {}
    for name, lines in (("en", sample_lines[100:160]), ("upper", [s.upper() for s in
                                                                    sample_lines[100:160]]),
                        ("more", sample_lines[200:400])):
        out[name] = tmp_path / f"{name}.txt"
        out[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
