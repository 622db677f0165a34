"""The BPE model: a vocabulary plus an ORDERED list of merges, applied strictly by rank.

The data lives here; the merge loop runs in the C++ core (``tokenmill._core.BPEModel``), which is
built once and never changes, so encoding can run with the GIL released.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tokenmill import _core
from tokenmill._registry import field, register
from tokenmill.errors import FormatError, InputError
from tokenmill.models._vocab import VocabLookups
from tokenmill.pre_tokenizers import bytes_to_unicode

# Marker models cannot be written as Hugging Face "BPE": that schema has no separate
# end-of-word symbol, so `tokenizers` would silently produce other ids. They get their own name.
MARKER_TYPE = "tokenmill.BPE"
CACHE_CAPACITY = 1 << 16  # words the core remembers by default
SPACE_MARK = "\u2581"  # SentencePiece's "▁", a space in its pieces
_BEFORE_MARK = re.compile(f"[^{SPACE_MARK}]{SPACE_MARK}")


@register("model", "BPE")
class BPE(VocabLookups):
    """Byte-pair encoding with merges applied by rank (lowest first; on a tie, the leftmost).

    ``end_of_word_suffix`` is glued to a word's last character (Hugging Face, subword-nmt);
    ``end_of_word_marker`` is a separate symbol after every word (the textbooks' ``</w>``).

    >>> bpe = BPE({"l": 0, "o": 1, "w": 2, "lo": 3, "low": 4}, [("l", "o"), ("lo", "w")])
    >>> bpe.encode_word("lowl")
    ['low', 'l']
    """

    def __init__(self, vocab: Mapping[str, int], merges: Sequence[tuple[str, str]], *,
                 unk_token: str | None = None, continuing_subword_prefix: str | None = None,
                 end_of_word_suffix: str | None = None, end_of_word_marker: str | None = None,
                 byte_fallback: bool = False, fuse_unk: bool = False,
                 ignore_merges: bool = False, cache_capacity: int = CACHE_CAPACITY,
                 dropout: float | None = None) -> None:
        self._set(dict(vocab), [tuple(m) for m in merges], unk_token,  # type: ignore[misc]
                  continuing_subword_prefix, end_of_word_suffix, end_of_word_marker,
                  byte_fallback, fuse_unk, ignore_merges, cache_capacity)
        self._triples: Sequence[int] = self._merge_triples()  # checks each merge against the vocab
        self.dropout = check_dropout(dropout)

    @classmethod
    def from_id_merges(cls, vocab: dict[str, int], triples: Sequence[int], *,
                       byte_level_core: _core.BPEModel | None = None, **options: Any) -> BPE:
        """A model from merges given as flat ``(left id, right id, result id)`` triples that the
        caller vouches for (the core derived them): nothing is re-checked, and the merges as
        token pairs (and the id -> token map) are only built if asked for, which is what makes
        loading a 200k-token vocabulary quick. ``byte_level_core``, if the caller built it
        with the same vocabulary, merges and options, saves building it again."""
        self = cls.__new__(cls)
        self._set(vocab, None, options.pop("unk_token", None),
                  options.pop("continuing_subword_prefix", None),
                  options.pop("end_of_word_suffix", None), options.pop("end_of_word_marker", None),
                  options.pop("byte_fallback", False), options.pop("fuse_unk", False),
                  options.pop("ignore_merges", False),
                  options.pop("cache_capacity", CACHE_CAPACITY))
        self.dropout = check_dropout(options.pop("dropout", None))
        if options:
            raise InputError(f"unknown BPE option {next(iter(options))!r}")
        self._triples = triples
        if byte_level_core is not None:
            self.__dict__["byte_level_core"] = byte_level_core  # the cached property's slot
        return self

    def _set(self, vocab: dict[str, int], merges: list[tuple[str, str]] | None,
             unk_token: str | None, continuing_subword_prefix: str | None,
             end_of_word_suffix: str | None, end_of_word_marker: str | None, byte_fallback: bool,
             fuse_unk: bool, ignore_merges: bool, cache_capacity: int) -> None:
        if end_of_word_marker and end_of_word_suffix:
            raise InputError("give end_of_word_marker or end_of_word_suffix, not both")
        self.vocab = vocab
        if merges is not None:
            self.__dict__["merges"] = merges  # else built from the triples on first use
            _core.untrack_lists(merges)  # (see _merge_triples)
        self.unk_token = unk_token
        self.continuing_subword_prefix = continuing_subword_prefix
        self.end_of_word_suffix = end_of_word_suffix
        self.end_of_word_marker = end_of_word_marker
        self.byte_fallback = byte_fallback
        self.fuse_unk = fuse_unk
        self.ignore_merges = ignore_merges
        self.cache_capacity = cache_capacity
        for name, token in (("unk_token", unk_token), ("end_of_word_marker", end_of_word_marker)):
            if token is not None and token not in vocab:
                raise InputError(f"{name} {token!r} is not in the vocab")

    @functools.cached_property
    def merges(self) -> list[tuple[str, str]]:
        """The merges in rank order, as (left, right) token pairs."""
        by_id = self._id_to_token
        t = self._triples
        merges = [(by_id[t[k]], by_id[t[k + 1]]) for k in range(0, len(t), 3)]
        _core.untrack_lists(merges)  # (see _merge_triples)
        return merges

    @functools.cached_property  # built on first use (a 200k-token load need not pay for it)
    def _id_to_token(self) -> dict[int, str]:  # type: ignore[override]
        return {i: t for t, i in self.vocab.items()}

    @functools.cached_property
    def _char_core(self) -> _core.BPEModel:
        """The core over characters (built on first use: byte-level pipelines may never ask)."""
        return _core.BPEModel(
            list(self.vocab), list(self.vocab.values()), self._triples,
            self.vocab[self.unk_token] if self.unk_token is not None else -1,
            self.continuing_subword_prefix or "", self.end_of_word_suffix or "",
            self.vocab[self.end_of_word_marker] if self.end_of_word_marker else -1,
            self.byte_fallback, self.fuse_unk, self.ignore_merges, self.cache_capacity,
            word_mark=self.word_mark)

    @functools.cached_property
    def word_mark(self) -> str:
        """"▁" if the core may cut a piece before each run of "▁" that follows another
        character and merge the parts alone (SentencePiece's texts are one piece each: a
        sentence merged whole scans all its symbols at each merge, and never repeats for a
        cache), else "".

        The tokens are the same when no token holds another character followed by "▁": a
        merge across a cut would make one (its result is its two parts joined), so none
        applies there, and merges on either side do not meet. "▁" must be a token, so an
        unknown one cannot join unknown characters on both sides into one unk; and the unk
        token must not end in "▁", which would let an unknown character before a cut merge
        with the "▁" after it. Merges on a prefix or suffix, or ``ignore_merges`` (which asks
        whether the whole piece is a token), are left whole.

        >>> BPE({"▁": 0, "a": 1, "▁a": 2}, [("▁", "a")]).word_mark == SPACE_MARK
        True
        >>> BPE({"▁": 0, "a": 1, "a▁": 2}, [("a", "▁")]).word_mark
        ''
        """
        if self.continuing_subword_prefix or self.end_of_word_suffix or \
                self.end_of_word_marker or self.ignore_merges or SPACE_MARK not in self.vocab \
                or (self.unk_token or "").endswith(SPACE_MARK):
            return ""
        inner = (t for t in self.vocab if SPACE_MARK in t[1:])  # (a quick test before the regex)
        return "" if any(_BEFORE_MARK.search(t) for t in inner) else SPACE_MARK

    @functools.cached_property
    def byte_level_core(self) -> _core.BPEModel | None:
        """The core over raw bytes, for byte-level pipelines that the core runs end to end;
        None unless this is a plain byte-level BPE (every byte of GPT-2's alphabet a token, no
        prefix, suffix or marker)."""
        if self.continuing_subword_prefix or self.end_of_word_suffix or self.end_of_word_marker:
            return None
        if not all(c in self.vocab for c in bytes_to_unicode().values()):
            return None
        return _core.BPEModel(
            list(self.vocab), list(self.vocab.values()), self._triples,
            self.vocab[self.unk_token] if self.unk_token is not None else -1, "", "", -1,
            False, self.fuse_unk, self.ignore_merges, self.cache_capacity, byte_symbols=True)

    def merged_token(self, left: str, right: str) -> str:
        """The token a merge of ``left`` and ``right`` makes (the right's prefix is dropped)."""
        prefix = self.continuing_subword_prefix
        if prefix and right.startswith(prefix):
            right = right[len(prefix):]
        return left + right

    def _merge_triples(self) -> list[int]:
        vocab = self.vocab
        lefts = [m[0] for m in self.merges]
        rights = [m[1] for m in self.merges]
        prefix = self.continuing_subword_prefix
        news = [self.merged_token(a, b) for a, b in self.merges] if prefix else \
            [a + b for a, b in self.merges]
        try:
            # One pass of dict lookups per column; the slow search below runs only on error.
            flat = [0] * (3 * len(lefts))
            flat[0::3] = [vocab[t] for t in lefts]
            flat[1::3] = [vocab[t] for t in rights]
            flat[2::3] = [vocab[t] for t in news]
        except KeyError:
            for rank, (left, right, new) in enumerate(zip(lefts, rights, news)):
                for part in (left, right, new):
                    if part not in vocab:
                        raise InputError(f"merges[{rank}] ({left!r}, {right!r}): {part!r} is "
                                         "not in the vocab") from None
            raise
        # Out of the cyclic collector's sight, with the merges: ints (and pairs of strings)
        # cannot form cycles, and every full run of the collector walked the two lists item by
        # item (Mistral's 177,000 ints and 59,000 pairs: 4 of its 6 ms), runs that a loop
        # keeping its encodings makes every so often.
        _core.untrack_lists(flat)
        return flat

    # -- encoding --------------------------------------------------------------------------

    def encode_pieces(self, pieces: list[str], *, dropout: float | None = None,
                      seed: int = 0) -> list[int]:
        """Tokens of a batch of pre-tokens as one flat list ``[id, piece, start, end] * n``
        (``start``/``end``: characters of the piece).

        With ``dropout`` (BPE-dropout, Provilkov et al. 2020), each applicable merge is skipped
        with that probability at every step; ``seed`` makes the draws reproducible."""
        if dropout:  # None and 0 merge as usual (and may use the caches)
            return self._char_core.encode_words_dropout(pieces, check_dropout(dropout) or 0.0,
                                                        seed & 0xFFFFFFFFFFFFFFFF)
        return self._char_core.encode_words(pieces)

    def encode_word(self, word: str, *, dropout: float | None = None, seed: int = 0) -> list[str]:
        """The tokens of one pre-token (with BPE-dropout if ``dropout`` is given).

        >>> bpe = BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")])
        >>> bpe.encode_word("ab"), bpe.encode_word("ab", dropout=1.0)
        (['ab'], ['a', 'b'])
        """
        flat = self.encode_pieces([word], dropout=dropout, seed=seed)
        return [self._id_to_token[i] for i in flat[0::4]]

    def merge_symbols(self, symbols: Sequence[str]) -> list[str]:
        """Apply the merges by rank to symbols the caller chose (the teaching path).

        >>> bpe = BPE({"l": 0, "o": 1, "w": 2, "e": 3, "r": 4, "</w>": 5, "lo": 6, "low": 7,
        ...            "er": 8}, [("l", "o"), ("lo", "w"), ("e", "r")])
        >>> bpe.merge_symbols(["l", "o", "w", "e", "r", "</w>"])
        ['low', 'er', '</w>']
        """
        missing = [s for s in symbols if s not in self.vocab]
        if missing:
            raise InputError(f"symbol {missing[0]!r} is not in the vocab")
        ids = self._char_core.merge_ids([self.vocab[s] for s in symbols])
        return [self._id_to_token[i] for i in ids]

    # -- files -----------------------------------------------------------------------------

    @property
    def hf_compatible(self) -> str | None:
        """None if ``tokenizers`` can read this model, else the reason it cannot."""
        if self.end_of_word_marker:
            return (f"its end-of-word marker {self.end_of_word_marker!r} is a separate symbol "
                    "after every word, which the Hugging Face BPE model has no way to express "
                    "(train with end_of_word_suffix instead)")
        return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": MARKER_TYPE if self.end_of_word_marker else "BPE",
            "dropout": self.dropout,
            "unk_token": self.unk_token,
            "continuing_subword_prefix": self.continuing_subword_prefix,
            "end_of_word_suffix": self.end_of_word_suffix,
            "fuse_unk": self.fuse_unk,
            "byte_fallback": self.byte_fallback,
            "ignore_merges": self.ignore_merges,
        }
        if self.end_of_word_marker:
            out["end_of_word_marker"] = self.end_of_word_marker
        out["vocab"] = self.vocab
        out["merges"] = [list(m) for m in self.merges]
        return out

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> BPE:
        vocab = field(data, "vocab", dict, where)
        ids = vocab.values()
        if set(map(type, ids)) - {int} or (ids and not 0 <= min(ids) <= max(ids) < 2**32):
            for token, i in vocab.items():  # name the first bad one
                if type(i) is not int or not 0 <= i < 2**32:
                    raise FormatError(f"{where}.vocab[{token!r}]: expected an id (integer "
                                      f">= 0), got {i!r}")
        dropout = field(data, "dropout", (float, int), where, None)
        if dropout is not None and not 0 <= dropout <= 1:
            raise FormatError(f"{where}.dropout: expected a probability in [0, 1] or null, got "
                              f"{dropout!r}")
        # Required, as in tokenizers: a file without merges is a broken file, not a model
        # with none (an empty list says that).
        raw = field(data, "merges", list, where)
        try:
            # Both spellings: "left right" strings (older files) and [left, right] lists.
            merges = [tuple(m.split(" ")) if type(m) is str else tuple(m) for m in raw]
            well_formed = all(len(m) == 2 and type(m[0]) is str and type(m[1]) is str
                              for m in merges)
        except TypeError:
            well_formed = False
        if not well_formed:
            for rank, m in enumerate(raw):
                ok = (type(m) is str and m.count(" ") == 1) or (
                    type(m) is list and len(m) == 2 and all(type(x) is str for x in m))
                if not ok:
                    raise FormatError(f"{where}.merges[{rank}]: expected \"left right\" or "
                                      f"[left, right], got {m!r}")
        try:
            return cls(
                vocab, merges,  # type: ignore[arg-type]
                unk_token=field(data, "unk_token", str, where, None),
                continuing_subword_prefix=field(data, "continuing_subword_prefix", str, where,
                                                None),
                end_of_word_suffix=field(data, "end_of_word_suffix", str, where, None),
                end_of_word_marker=field(data, "end_of_word_marker", str, where, None),
                byte_fallback=field(data, "byte_fallback", bool, where, False),
                fuse_unk=field(data, "fuse_unk", bool, where, False),
                ignore_merges=field(data, "ignore_merges", bool, where, False),
                dropout=dropout,
            )
        except InputError as e:
            raise FormatError(f"{where}: {e}") from None


def check_dropout(dropout: float | None) -> float | None:
    """``dropout`` if it is None or a probability, else an InputError saying so."""
    if dropout is not None and (isinstance(dropout, bool) or not 0 <= dropout <= 1):
        raise InputError(f"dropout must be a probability in [0, 1], got {dropout!r}")
    return None if dropout is None else float(dropout)


# The marker variant is read by the same class.
register("model", MARKER_TYPE)(BPE)
BPE.type_name = "BPE"  # type: ignore[attr-defined]
