"""Fixtures of the compatibility tests."""

from __future__ import annotations

import gzip
import json

import pytest


@pytest.fixture(scope="session")
def corpus_lines(shared_data) -> list[str]:
    """Every line of every corpus in ../shared/data: the text files, the gzipped ones, and the
    code (its lines keep their line ends)."""
    lines: list[str] = []
    for path in sorted((shared_data / "text").rglob("*.txt")):
        lines += path.read_text("utf-8").splitlines()
    for path in sorted((shared_data / "text").rglob("*.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines += f.read().splitlines()
    for path in sorted((shared_data / "code").glob("*.jsonl")):
        for doc in path.read_text("utf-8").splitlines():
            lines += json.loads(doc)["text"].splitlines(keepends=True)
    return lines
