"""Models: the step from pre-tokens to ids."""

from tokenmill.models.bpe import BPE
from tokenmill.models.unigram import Unigram
from tokenmill.models.wordpiece import WordPiece

__all__ = ["BPE", "Unigram", "WordPiece"]
