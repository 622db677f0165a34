"""Models: the step from pre-tokens to ids."""

from tokenmill.models.bpe import BPE
from tokenmill.models.unigram import Unigram

__all__ = ["BPE", "Unigram"]
