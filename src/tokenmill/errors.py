"""The one exception family of tokenmill."""

from __future__ import annotations


class TokenmillError(Exception):
    """Base of every error tokenmill raises on bad input; the message names what and where."""


class InputError(TokenmillError, ValueError):
    """A corpus, string or argument that cannot be used as given. Also a ValueError, which is
    what tiktoken raises for a special token in text that does not allow it, so code written
    for it (``except ValueError``) catches this one too."""


class FormatError(TokenmillError):
    """A tokenizer file that is malformed, truncated or of an unknown kind."""
