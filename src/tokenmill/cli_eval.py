"""The evaluation commands of ``tokenmill``: registered into the main parser by cli.py."""

from __future__ import annotations

import argparse
from collections.abc import Callable

# name -> handler(args) -> exit code; filled as the commands are added.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the evaluation subcommands to the main parser's subparsers."""
