"""Shared fixtures: where ../shared/data is, and a rule for when it is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TOKENMILL_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``. Missing data fails under CI (CI=true) and skips elsewhere."""
    if not (SHARED_DATA / "README.md").is_file():
        message = f"shared data not found at {SHARED_DATA} (set TOKENMILL_SHARED_DATA)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return SHARED_DATA
