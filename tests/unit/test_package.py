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


def _cli_reference_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_cli_reference",
                                                  ROOT / "docs" / "make_cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_names_every_option_and_no_other():
    # docs/cli.md is each command's --help; run `python docs/make_cli_reference.py` after
    # changing a command. Compared option by option (argparse's layout differs by version).
    from tokenmill.cli import _parser

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## `([^`]+)`\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M))
    found = {}
    for path, parser in _cli_reference_module().commands(_parser()):
        title = " ".join(("tokenmill", *path))
        assert title in sections, f"docs/cli.md has no section for {title}"
        options = {s for a in parser._actions for s in a.option_strings}
        listed = re.findall(r"^  (-\S.*?)(?:  |$)", sections[title], flags=re.M)
        written = {o for line in listed for o in re.findall(r"--?[A-Za-z][\w-]*", line)}
        assert options <= written, f"{title}: not in docs/cli.md: {sorted(options - written)}"
        assert written <= options, f"{title}: docs/cli.md names {sorted(written - options)}"
        found[title] = options
    assert set(sections) == set(found), sorted(set(sections) - set(found))
    assert "--vocab-size" in found["tokenmill train"]
