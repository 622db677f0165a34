"""Models: the step from pre-tokens to ids."""

from tokenmill.models.bpe import BPE
from tokenmill.models.wordpiece import WordPiece

__all__ = ["BPE", "WordPiece"]
