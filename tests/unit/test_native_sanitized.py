"""The C++ core's own tests, compiled with AddressSanitizer and UndefinedBehaviorSanitizer."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPP = ROOT / "cpp"


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_core_under_sanitizers(tmp_path):
    exe = tmp_path / "test_core"
    # The Unicode tables the build generates (tools/gen_unicode_tables.py), here by hand.
    subprocess.run([sys.executable, str(ROOT / "tools" / "gen_unicode_tables.py"),
                    str(tmp_path / "unicode_tables.inc")], check=True)
    sources = sorted(str(p) for p in (CPP / "src").glob("*.cc")) + [str(CPP / "tests" /
                                                                         "test_core.cc")]
    build = subprocess.run(
        ["g++", "-std=c++17", "-O1", "-g", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Wpedantic", "-Wconversion",
         "-Wshadow", "-Werror", f"-I{CPP / 'include'}", f"-I{tmp_path}", *sources, "-o", str(exe)],
        capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True,
                         env={"ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS":
                              "print_stacktrace=1"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "core tests: all passed" in run.stdout
