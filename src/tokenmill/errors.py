"""The one exception family of tokenmill."""

from __future__ import annotations


class TokenmillError(Exception):
    """Base of every error tokenmill raises on bad input; the message names what and where."""


class InputError(TokenmillError):
    """A corpus, string or argument that cannot be used as given."""


class FormatError(TokenmillError):
    """A tokenizer file that is malformed, truncated or of an unknown kind."""
