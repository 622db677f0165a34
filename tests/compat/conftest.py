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


@pytest.fixture(scope="session")
def assert_same_ids():
    """check(name, ours, theirs): the two engines' ids per line are equal; a failure says how
    many lines differ and where the first ones are."""
    def check(name: str, ours: list[list[int]], theirs: list[list[int]]) -> None:
        assert len(ours) == len(theirs), name
        mismatches = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
        assert mismatches == [], f"{name}: {len(mismatches)} lines differ, first {mismatches[:3]}"
    return check
