"""Writes docs/cli.md: every ``tokenmill`` command's ``--help``, as the installed package gives it.

    python docs/make_cli_reference.py

tests/unit/test_package.py checks that the file names every option of every command, and no
option that a command lacks, so a new flag fails the tests until this is run again.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent


def commands(parser: argparse.ArgumentParser,
             path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                          argparse.ArgumentParser]]:
    """(words after ``tokenmill``, parser) for the command and each subcommand, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def reference() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal's width
    from tokenmill.cli import _parser

    parts = ["# The `tokenmill` command\n",
             "Each command's `--help`, written by `python docs/make_cli_reference.py` "
             "(do not edit by hand). Bad input ends with one line on stderr and exit code 2; "
             "`golden check` and `check-config` exit 1 on a difference.\n"]
    for path, parser in commands(_parser()):
        title = " ".join(("tokenmill", *path))
        parts.append(f"## `{title}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
    return "\n".join(parts)


def main() -> int:
    target = HERE / "cli.md"
    target.write_text(reference(), encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
