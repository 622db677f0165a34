"""The package as a user meets it: a small import, the README's examples, the docstrings."""

import doctest
import re
import subprocess
import sys
from pathlib import Path

import tokenmill

ROOT = Path(__file__).resolve().parents[2]


def test_import_pulls_in_no_optional_dependency():
    code = ("import sys, tokenmill; "
            "print(sorted(m for m in ('tokenizers', 'numpy', 'tqdm', 'hypothesis', 'rich') "
            "if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_the_package_type_checks():
    # The public API's type hints are checked, not only written: mypy over the package's own
    # source, with the settings of pyproject.toml (no cache: nothing is written).
    from mypy import api

    out, err, status = api.run([str(ROOT / "src" / "tokenmill"), "--config-file",
                                str(ROOT / "pyproject.toml"), "--cache-dir", "/dev/null"])
    assert status == 0, out + err
    assert out.startswith("Success: no issues found")


def test_public_api_is_listed():
    for name in tokenmill.__all__:
        assert hasattr(tokenmill, name), name


def test_readme_examples_run():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(>>>.*?)```", readme, flags=re.S)
    assert blocks, "the README has a >>> example"
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner()
    for i, block in enumerate(blocks):
        runner.run(parser.get_doctest(block, {}, f"README[{i}]", "README.md", 0))
    assert runner.failures == 0


def test_docstring_examples_run():
    import importlib
    import pkgutil

    runner_failures = 0
    for info in pkgutil.walk_packages(tokenmill.__path__, "tokenmill."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        runner_failures += result.failed
    assert runner_failures == 0
