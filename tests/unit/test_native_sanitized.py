"""The C++ core's own tests, compiled with AddressSanitizer and UndefinedBehaviorSanitizer."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPP = ROOT / "cpp"


# Each C++ test file (its own main) and what it prints when every check passed.
TESTS = {"test_core.cc": "core tests: all passed",
         "test_wordpiece.cc": "wordpiece tests: all passed"}
FLAGS = ["g++", "-std=c++17", "-O1", "-g", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Wpedantic", "-Wconversion", "-Wshadow",
         "-Werror", f"-I{CPP / 'include'}"]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_core_under_sanitizers(tmp_path):
    # The Unicode tables the build generates (tools/gen_unicode_tables.py), here by hand.
    subprocess.run([sys.executable, str(ROOT / "tools" / "gen_unicode_tables.py"),
                    str(tmp_path / "unicode_tables.inc")], check=True)
    # The core is compiled once, then linked with each test's main.
    sources = sorted(str(p) for p in (CPP / "src").glob("*.cc"))
    build = subprocess.run([*FLAGS, f"-I{tmp_path}", "-c", *sources], cwd=tmp_path,
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    objects = sorted(str(p) for p in tmp_path.glob("*.o"))
    for test, passed in TESTS.items():
        exe = tmp_path / test.removesuffix(".cc")
        build = subprocess.run([*FLAGS, str(CPP / "tests" / test), *objects, "-o", str(exe)],
                               capture_output=True, text=True)
        assert build.returncode == 0, build.stderr
        run = subprocess.run([str(exe)], capture_output=True, text=True,
                             env={"ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS":
                                  "print_stacktrace=1"})
        assert run.returncode == 0, run.stdout + run.stderr
        assert passed in run.stdout
