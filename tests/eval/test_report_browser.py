"""The HTML reports, rendered in headless Chromium: every plot present and loaded, no console
message. CI installs Debian's chromium (.ci/run); elsewhere the test skips without it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tokenmill.cli import main

EVAL_PLOTS = {"plot-tokens-per-byte", "plot-parity", "plot-vocab-use", "plot-token-lengths",
              "plot-merge-counts"}
SWEEP_PLOTS = EVAL_PLOTS | {"plot-sweep-by-corpus", "plot-sweep-tails"}


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "chromium is not installed (apt-get install chromium; .ci/run does)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def render(chromium: str, page: Path, profile: Path) -> tuple[str, list[str]]:
    """(the DOM after the page's load event, the console messages) of ``page``."""
    run = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=1",
         "--virtual-time-budget=10000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    return run.stdout, console


def check_page(chromium: str, page: Path, profile: Path, expected: set[str]) -> None:
    html = page.read_text(encoding="utf-8")
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing to fetch
    dom, console = render(chromium, page, profile)
    assert console == []
    assert set(re.findall(r'<figure id="([^"]+)"', dom)) == expected
    assert dom.count('data-loaded="true"') == len(expected)
    assert 'data-loaded="false"' not in dom
    assert f'data-plots-loaded="{len(expected)}"' in dom


def test_eval_report_in_chromium(chromium, trained_file, corpora, sample_lines, tmp_path):
    char_level = tmp_path / "char.json"
    assert main(["train", str(corpora["more"]), "--vocab-size", "200", "--quiet", "-o",
                 str(char_level)]) == 0
    page = tmp_path / "report.html"
    assert main(["eval", f"bytes={trained_file}", f"chars={char_level}",
                 "--corpus", f"en={corpora['en']}", "--corpus", f"upper={corpora['upper']}",
                 "--reference", "en", "--html", str(page), "--json", str(tmp_path / "m.json")
                 ]) == 0
    check_page(chromium, page, tmp_path / "profile", EVAL_PLOTS)


def test_sweep_report_in_chromium(chromium, corpora, tmp_path):
    page = tmp_path / "sweep.html"
    assert main(["sweep", str(corpora["more"]), "--vocab-sizes", "300,350,400",
                 "--corpus", f"en={corpora['en']}", "--corpus", f"upper={corpora['upper']}",
                 "--reference", "en", "--html", str(page), "--json", str(tmp_path / "s.json")
                 ]) == 0
    check_page(chromium, page, tmp_path / "profile", SWEEP_PLOTS)


def test_the_check_sees_broken_plots_and_errors(chromium, tmp_path):
    # The harness itself: a plot that does not load and a script error are both caught.
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><figure id="plot-x"><img '
                    'src="data:image/svg+xml;base64,AAAA"></figure><script>'
                    "window.addEventListener('load', function () {"
                    "document.querySelectorAll('img').forEach(function (i) {"
                    "i.setAttribute('data-loaded', String(i.naturalWidth > 0)); }); });"
                    "undefinedFunction();</script></body></html>", encoding="utf-8")
    dom, console = render(chromium, page, tmp_path / "profile")
    assert 'data-loaded="false"' in dom
    assert any("undefinedFunction is not defined" in line for line in console)
