"""Models: the step from pre-tokens to ids."""

from tokenmill.models.bpe import BPE

__all__ = ["BPE"]
