"""Shared fixtures: where ../shared/data is, and a rule for when it is missing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import hypothesis.configuration
import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TOKENMILL_SHARED_DATA", ROOT.parent / "shared" / "data"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``. Missing data fails under CI (CI=true) and skips elsewhere."""
    if not (SHARED_DATA / "README.md").is_file():
        message = f"shared data not found at {SHARED_DATA} (set TOKENMILL_SHARED_DATA)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return SHARED_DATA


# Tests write nothing outside temporary directories: no example database, and hypothesis's
# home (it would otherwise create ./.hypothesis) in the temporary directory.
hypothesis.configuration.set_hypothesis_home_dir(
    Path(tempfile.gettempdir(), "tokenmill-hypothesis"))
settings.register_profile("tokenmill", deadline=None, database=None)
# CI draws the same examples on every run (a failure there can be replayed, and a change is
# judged on the inputs its parent passed); elsewhere each run draws new ones, which is how
# the property tests keep finding what CI's fixed draw does not.
settings.register_profile("tokenmill-ci", deadline=None, database=None, derandomize=True,
                          print_blob=True)
settings.load_profile("tokenmill-ci" if IN_CI else "tokenmill")
