"""The Unigram language model: pieces with log probabilities; a word's tokens are its most
probable segmentation (Kudo 2018, https://arxiv.org/abs/1804.10959).

The data lives here; the lattice, Viterbi, n-best and sampling run in the C++ core
(``tokenmill._core.UnigramModel``), which is immutable, so encoding runs with the GIL released.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from tokenmill import _core
from tokenmill._registry import field, register
from tokenmill.errors import FormatError, InputError
from tokenmill.models._vocab import VocabLookups

# SentencePiece's piece types; a model from tokenizer.json has only NORMAL pieces and its unk.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# A model with piece types or float32 sums, which the Hugging Face schema cannot hold.
SP_TYPE = "tokenmill.Unigram"


@register("model", "Unigram")
class Unigram(VocabLookups):
    """Pieces and their scores (log probabilities); ``unk_id`` is the piece for characters no
    piece covers (consecutive ones become one), or their ``<0xNN>`` pieces with ``byte_fallback``.

    ``kinds`` are SentencePiece's piece types (default: all NORMAL but the unk); USER_DEFINED
    pieces are always tokens of their own, CONTROL, BYTE and UNUSED ones never match text.
    ``float32_sums`` sums scores in single precision, as sentencepiece does (Hugging Face uses
    double): it decides near-ties such as "!|!!!" against "!!!|!" their way.

    >>> m = Unigram([("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("ab", -1.5)], unk_id=0)
    >>> m.encode_word("abc")
    ['ab', '<unk>']
    >>> [(tokens, round(score, 2)) for tokens, score in m.nbest("ab", 2)]
    [(['ab'], -1.5), (['a', 'b'], -2.0)]
    """

    # Only a byte-level BPE runs the whole pipeline in the core.
    byte_level_core = None

    def __init__(self, vocab: Sequence[tuple[str, float]], *, unk_id: int | None = None,
                 byte_fallback: bool = False, kinds: Sequence[int] | None = None,
                 float32_sums: bool = False) -> None:
        self.pieces = [(str(p), float(s)) for p, s in vocab]
        if unk_id is not None and not 0 <= unk_id < len(self.pieces):
            raise InputError(f"unk_id {unk_id} is not the id of a piece (there are "
                             f"{len(self.pieces)})")
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        if kinds is None:
            kinds = [UNKNOWN if i == unk_id else NORMAL for i in range(len(self.pieces))]
        if len(kinds) != len(self.pieces):
            raise InputError(f"kinds has {len(kinds)} entries for {len(self.pieces)} pieces")
        self.kinds = list(kinds)
        # (out of the cyclic collector's sight: a full run walked their items one by one)
        _core.untrack_lists(self.pieces, self.kinds)
        self.float32_sums = float32_sums
        self.vocab: dict[str, int] = {}
        for i, (piece, _) in enumerate(self.pieces):
            self.vocab.setdefault(piece, i)  # the first of duplicates, as sentencepiece
        self._id_to_token = dict(enumerate(p for p, _ in self.pieces))

    @functools.cached_property
    def _core(self) -> _core.UnigramModel:
        return _core.UnigramModel([p for p, _ in self.pieces], [s for _, s in self.pieces],
                                  bytes(self.kinds), -1 if self.unk_id is None else self.unk_id,
                                  self.byte_fallback, self.float32_sums)

    # -- encoding --------------------------------------------------------------------------

    def encode_pieces(self, pieces: list[str]) -> list[int]:
        """Tokens of a batch of pre-tokens as one flat list ``[id, piece, start, end] * n``
        (``start``/``end``: characters of the piece)."""
        return self._core.encode_words(pieces)

    def encode_word(self, word: str) -> list[str]:
        """The tokens of one pre-token: its Viterbi segmentation."""
        return self._tokens(self._core.encode_words([word]))

    def nbest(self, word: str, n: int) -> list[tuple[list[str], float]]:
        """The ``n`` most probable segmentations of ``word`` and their scores, best first."""
        if n < 0:
            raise InputError(f"n must be >= 0, got {n}")
        return [(self._tokens(flat), score) for flat, score in self._core.nbest(word, n)]

    def sample_pieces(self, pieces: list[str], *, alpha: float = 0.1, nbest_size: int = -1,
                      seed: int = 0) -> list[int]:
        """As :meth:`encode_pieces`, but each segmentation drawn for subword regularization
        exactly as sentencepiece defines the options: ``nbest_size < 0`` samples from all
        segmentations with P ∝ exp(alpha * score); ``nbest_size > 1`` from the ``nbest_size``
        best with the same weights; 0 or 1 do not sample. The same seed gives the same draw."""
        if not alpha >= 0.0:
            raise InputError(f"alpha must be >= 0, got {alpha}")
        return self._core.sample_words(pieces, alpha, nbest_size, seed % 2**64)

    def sample_word(self, word: str, *, alpha: float = 0.1, nbest_size: int = -1,
                    seed: int = 0) -> list[str]:
        """One sampled segmentation of ``word`` (see :meth:`sample_pieces`)."""
        return self._tokens(self.sample_pieces([word], alpha=alpha, nbest_size=nbest_size,
                                               seed=seed))

    def _tokens(self, flat: list[int]) -> list[str]:
        return [self._id_to_token[i] for i in flat[0::4]]

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    @property
    def unk_token(self) -> str | None:
        return None if self.unk_id is None else self.pieces[self.unk_id][0]

    # -- files -----------------------------------------------------------------------------

    @property
    def _default_kinds(self) -> bool:
        return all(k == (UNKNOWN if i == self.unk_id else NORMAL)
                   for i, k in enumerate(self.kinds))

    @property
    def hf_compatible(self) -> str | None:
        """None if ``tokenizers`` can read this model, else the reason it cannot."""
        special = [p for (p, _), k in zip(self.pieces, self.kinds) if k == USER_DEFINED]
        if special:
            return (f"its user-defined piece {special[0]!r} gets sentencepiece's bonus score, "
                    "which the Hugging Face Unigram model does not give")
        if not self._default_kinds:
            return ("it has SentencePiece piece types (control, byte or unused pieces) that "
                    "the Hugging Face Unigram model has no way to express")
        if self.float32_sums:
            return ("it sums scores in float32 as sentencepiece does; Hugging Face sums in "
                    "double, which can settle near-ties differently")
        return None

    def to_dict(self) -> dict[str, Any]:
        # What Hugging Face's schema cannot say goes under tokenmill's own type name.
        own = not self._default_kinds or self.float32_sums
        out: dict[str, Any] = {"type": SP_TYPE if own else "Unigram", "unk_id": self.unk_id,
                               "vocab": [[p, s] for p, s in self.pieces],
                               "byte_fallback": self.byte_fallback}
        if own:
            out["kinds"] = self.kinds
            out["float32_sums"] = self.float32_sums
        return out

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Unigram:
        raw = field(data, "vocab", list, where)
        vocab = []
        for i, item in enumerate(raw):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], (int, float)) and not isinstance(item[1], bool)):
                raise FormatError(f"{where}.vocab[{i}]: expected [piece, score], got {item!r}")
            vocab.append((item[0], float(item[1])))
        unk_id = field(data, "unk_id", int, where, None)
        if unk_id is not None and not 0 <= unk_id < len(vocab):
            raise FormatError(f"{where}.unk_id: {unk_id} is not the index of a piece (the vocab "
                              f"has {len(vocab)})")
        kinds = field(data, "kinds", list, where, None)
        if kinds is not None and (len(kinds) != len(vocab) or
                                  not all(type(k) is int and 1 <= k <= 6 for k in kinds)):
            raise FormatError(f"{where}.kinds: expected one piece type (1..6) per piece")
        return cls(vocab, unk_id=unk_id, kinds=kinds,
                   byte_fallback=field(data, "byte_fallback", bool, where, False),
                   float32_sums=field(data, "float32_sums", bool, where, False))


# The SentencePiece variant is read by the same class.
register("model", SP_TYPE)(Unigram)
Unigram.type_name = "Unigram"  # type: ignore[attr-defined]
