"""Encoding: what a tokenizer makes of one input (ids, tokens, offsets and masks), with
truncation and padding."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from tokenmill.errors import InputError

Side = Literal["right", "left"]
Strategy = Literal["LongestFirst", "OnlyFirst", "OnlySecond"]
SIDES: tuple[Side, ...] = ("right", "left")
STRATEGIES: tuple[Strategy, ...] = ("LongestFirst", "OnlyFirst", "OnlySecond")


class Encoding:
    """The ids of one input and what each id stands for.

    ``offsets[i]`` is the span of the ORIGINAL input's characters that token ``i`` came from;
    special tokens added by a post-processor have ``(0, 0)``. Tokens, offsets and masks are made
    on first access (most callers want only the ids): an encoding from the core holds the ids
    and two flat offset lists until asked.
    """

    __slots__ = ("ids", "_tokens", "_offsets", "_type_ids", "_attention_mask",
                 "_special_tokens_mask", "overflowing", "_id_to_token")

    def __init__(self, ids: list[int], tokens: list[str] | None = None,
                 offsets: list[tuple[int, int]] | tuple[list[int], list[int]] | None = None,
                 type_ids: list[int] | None = None, attention_mask: list[int] | None = None,
                 special_tokens_mask: list[int] | None = None,
                 overflowing: list[Encoding] | None = None, *,
                 id_to_token: Callable[[int], str | None] | None = None) -> None:
        self.ids = ids
        self._tokens = tokens
        self._offsets = offsets
        self._type_ids = type_ids or None
        self._attention_mask = attention_mask or None
        self._special_tokens_mask = special_tokens_mask or None
        self.overflowing = overflowing if overflowing is not None else []
        self._id_to_token = id_to_token

    @property
    def tokens(self) -> list[str]:
        if self._tokens is None:
            to_token = self._id_to_token
            self._tokens = [to_token(i) or "" for i in self.ids] if to_token else \
                [""] * len(self.ids)
        return self._tokens

    @tokens.setter
    def tokens(self, value: list[str]) -> None:
        self._tokens = value

    @property
    def offsets(self) -> list[tuple[int, int]]:
        if self._offsets is None:
            self._offsets = [(0, 0)] * len(self.ids)
        elif isinstance(self._offsets, tuple):
            self._offsets = list(zip(*self._offsets))
        return self._offsets

    @offsets.setter
    def offsets(self, value: list[tuple[int, int]]) -> None:
        self._offsets = value

    @property
    def type_ids(self) -> list[int]:
        if self._type_ids is None:
            self._type_ids = [0] * len(self.ids)
        return self._type_ids

    @type_ids.setter
    def type_ids(self, value: list[int]) -> None:
        self._type_ids = value

    @property
    def attention_mask(self) -> list[int]:
        if self._attention_mask is None:
            self._attention_mask = [1] * len(self.ids)
        return self._attention_mask

    @attention_mask.setter
    def attention_mask(self, value: list[int]) -> None:
        self._attention_mask = value

    @property
    def special_tokens_mask(self) -> list[int]:
        if self._special_tokens_mask is None:
            self._special_tokens_mask = [0] * len(self.ids)
        return self._special_tokens_mask

    @special_tokens_mask.setter
    def special_tokens_mask(self, value: list[int]) -> None:
        self._special_tokens_mask = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Encoding):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in
                   ("ids", "tokens", "offsets", "type_ids", "attention_mask",
                    "special_tokens_mask", "overflowing"))

    __hash__ = None  # type: ignore[assignment]

    def replace(self, **changes: object) -> Encoding:
        """A copy with some fields changed (``ids``, ``tokens``, ``offsets``, masks...)."""
        fields = {f: getattr(self, f) for f in
                  ("ids", "tokens", "offsets", "type_ids", "attention_mask",
                   "special_tokens_mask", "overflowing")}
        fields.update(changes)
        return Encoding(**fields)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        more = "..." if len(self) > 8 else ""
        return f"Encoding(num_tokens={len(self.ids)}, ids={self.ids[:8]}{more})"

    def _window(self, i: int, j: int) -> Encoding:
        return Encoding(self.ids[i:j], self.tokens[i:j], self.offsets[i:j], self.type_ids[i:j],
                        self.attention_mask[i:j], self.special_tokens_mask[i:j])

    @staticmethod
    def whole(encoded: tuple[list[int], list[int], list[int]],
              id_to_token: Callable[[int], str | None] | None) -> Encoding:
        """The Encoding of a text that is one stretch, from its (ids, starts, ends): tokens
        and offset pairs are made only if they are asked for."""
        ids, starts, ends = encoded
        return Encoding(ids, offsets=(starts, ends), id_to_token=id_to_token)

    @staticmethod
    def spliced(cut: list[tuple[int | None, int, int]],
                encoded: list[tuple[list[int], list[int], list[int]]],
                id_to_token: Callable[[int], str | None] | None) -> Encoding:
        """The Encoding of a text cut into ``(added token id or None, start, end)``, given the
        (ids, starts, ends) of its stretches of text in ``encoded`` (in order, offsets counted
        from each stretch's start)."""
        if len(cut) == 1 and cut[0][0] is None and cut[0][1] == 0:
            return Encoding.whole(encoded[0], id_to_token)  # no added token in the text
        ids = []
        starts = []
        ends = []
        parts = iter(encoded)
        for token, a, b in cut:
            if token is not None:
                ids.append(token)
                starts.append(a)
                ends.append(b)
                continue
            seg_ids, seg_starts, seg_ends = next(parts)
            ids += seg_ids
            starts += [a + s for s in seg_starts]
            ends += [a + e for e in seg_ends]
        return Encoding(ids, offsets=(starts, ends), id_to_token=id_to_token)

    @property
    def token_source(self) -> Callable[[int], str | None] | None:
        """The id -> token function this encoding's tokens are made with when asked for (None:
        they were given)."""
        return self._id_to_token

    def retyped(self, type_id: int) -> Encoding:
        """This encoding with every type id ``type_id``; its tokens and offsets are still made
        only if asked for."""
        return Encoding(self.ids, self._tokens, self._offsets,
                        [type_id] * len(self.ids) if type_id else None,  # (None: all 0)
                        self._attention_mask, self._special_tokens_mask,
                        id_to_token=self._id_to_token)

    def _lazy_tokens(self) -> Callable[[int], str | None] | None:
        """The id -> token function this encoding's tokens are (or would be) made with, if its
        tokens are exactly what it gives its ids; else None."""
        to_token = self._id_to_token
        if to_token is None or self._tokens is None:
            return to_token
        for i, t in zip(self.ids, self._tokens):  # (a special token's one or two)
            if (to_token(i) or "") != t:
                return None
        return to_token

    def _starts_ends(self) -> tuple[list[int], list[int]]:
        """Where each token starts and ends, as two lists."""
        if isinstance(self._offsets, tuple):
            return self._offsets
        if self._offsets is None:
            return [0] * len(self.ids), [0] * len(self.ids)
        return [s for s, _ in self._offsets], [e for _, e in self._offsets]

    @staticmethod
    def concat(parts: list[Encoding]) -> Encoding:
        """One encoding holding ``parts`` one after another. Where every part's tokens are
        what one id -> token function gives their ids (the model's tokens, and special tokens
        spelled as in the vocabulary), the tokens stay unmade, and the offsets stay in two
        lists until asked for."""
        ids: list[int] = []
        starts: list[int] = []
        ends: list[int] = []
        to_token = parts[0]._lazy_tokens() if parts else None
        # Masks left unmade in every part (their defaults) stay so.
        types = attention = special = False
        for k, p in enumerate(parts):
            if k and to_token is not None and p._lazy_tokens() != to_token:
                to_token = None
            ids += p.ids
            s, e = p._starts_ends()
            starts += s
            ends += e
            types = types or p._type_ids is not None
            attention = attention or p._attention_mask is not None
            special = special or p._special_tokens_mask is not None
        tokens = None if to_token is not None else [t for p in parts for t in p.tokens]
        out = Encoding(ids, tokens, (starts, ends), id_to_token=to_token)
        if types:
            out.type_ids = [x for p in parts for x in p.type_ids]
        if attention:
            out.attention_mask = [x for p in parts for x in p.attention_mask]
        if special:
            out.special_tokens_mask = [x for p in parts for x in p.special_tokens_mask]
        return out

    def truncated(self, max_length: int, stride: int = 0, side: Side = "right") -> Encoding:
        """At most ``max_length`` tokens; what is cut goes to ``overflowing`` in windows that
        overlap by ``stride`` tokens (the windows a question-answering model reads)."""
        if max_length < 0:
            raise InputError(f"truncation max_length must be >= 0, got {max_length}")
        n = len(self.ids)
        if n <= max_length:
            return self
        if max_length == 0:
            kept = self._window(0, 0)
            kept.overflowing = [self._window(0, n)]
            return kept
        if stride >= max_length:
            raise InputError(f"truncation stride ({stride}) must be smaller than max_length "
                             f"({max_length})")
        step = max_length - stride
        windows: list[Encoding] = []
        if side == "right":
            start = 0
            while True:
                windows.append(self._window(start, min(start + max_length, n)))
                if start + max_length >= n:
                    break
                start += step
        else:
            end = n
            while True:
                windows.append(self._window(max(0, end - max_length), end))
                if end - max_length <= 0:
                    break
                end -= step
        first, rest = windows[0], windows[1:]
        first.overflowing = rest
        return first

    def padded(self, length: int, *, pad_id: int = 0, pad_token: str = "[PAD]",
               pad_type_id: int = 0, side: Side = "right") -> Encoding:
        """The encoding padded to ``length`` with masked-out pad tokens (longer ones unchanged)."""
        missing = length - len(self.ids)
        if missing <= 0:
            if not self.overflowing:
                return self
            # tokenizers pads the overflowing windows even when the first needs none.
            return self.replace(overflowing=[o.padded(length, pad_id=pad_id, pad_token=pad_token,
                                                      pad_type_id=pad_type_id, side=side)
                                             for o in self.overflowing])
        pad = Encoding([pad_id] * missing, [pad_token] * missing, [(0, 0)] * missing,
                       [pad_type_id] * missing, [0] * missing, [1] * missing)
        parts = [self, pad] if side == "right" else [pad, self]
        out = Encoding.concat(parts)
        out.overflowing = [o.padded(length, pad_id=pad_id, pad_token=pad_token,
                                    pad_type_id=pad_type_id, side=side) for o in self.overflowing]
        return out


@dataclass(frozen=True, kw_only=True)
class Truncation:
    """Keep at most ``max_length`` tokens (special tokens included); overflow in ``stride``-
    overlapping windows; cut on the ``side`` given.

    A pair is cut by ``strategy``: "LongestFirst" takes from the longer input until both are
    as long, then from both; "OnlyFirst"/"OnlySecond" take from that input only.

    >>> Truncation(max_length=8, strategy="OnlySecond").to_dict()["strategy"]
    'OnlySecond'
    """

    max_length: int
    stride: int = 0
    side: Side = "right"
    strategy: Strategy = "LongestFirst"

    def __post_init__(self) -> None:
        _check_int("truncation", "max_length", self.max_length, 1)
        _check_int("truncation", "stride", self.stride, 0)
        _check_choice("truncation", "side", self.side, SIDES)
        _check_choice("truncation", "strategy", self.strategy, STRATEGIES)

    def to_dict(self) -> dict:
        return {"direction": self.side.capitalize(), "max_length": self.max_length,
                "strategy": self.strategy, "stride": self.stride}


@dataclass(frozen=True, kw_only=True)
class Padding:
    """Pad a batch to its longest member (or to ``length``), rounded up to a multiple."""

    side: Side = "right"
    pad_id: int = 0
    pad_token: str = "[PAD]"
    pad_type_id: int = 0
    length: int | None = None
    pad_to_multiple_of: int | None = None

    def __post_init__(self) -> None:
        _check_choice("padding", "side", self.side, SIDES)
        _check_int("padding", "pad_id", self.pad_id, 0)
        _check_int("padding", "pad_type_id", self.pad_type_id, 0)
        if not isinstance(self.pad_token, str):
            raise InputError(f"padding pad_token must be a string, got {self.pad_token!r}")
        if self.length is not None:
            _check_int("padding", "length", self.length, 1)
        if self.pad_to_multiple_of is not None:
            _check_int("padding", "pad_to_multiple_of", self.pad_to_multiple_of, 1)

    def target(self, longest: int) -> int:
        n = self.length if self.length is not None else longest
        m = self.pad_to_multiple_of
        if m:
            n = -(-n // m) * m
        return n

    def pad(self, encoding: Encoding, longest: int) -> Encoding:
        """``encoding`` padded to :meth:`target` of ``longest`` (the longest of its batch)."""
        return encoding.padded(self.target(longest), pad_id=self.pad_id,
                               pad_token=self.pad_token, pad_type_id=self.pad_type_id,
                               side=self.side)

    def to_dict(self) -> dict:
        strategy: object = {"Fixed": self.length} if self.length is not None else "BatchLongest"
        return {"strategy": strategy, "direction": self.side.capitalize(),
                "pad_to_multiple_of": self.pad_to_multiple_of, "pad_id": self.pad_id,
                "pad_type_id": self.pad_type_id, "pad_token": self.pad_token}


def _check_int(option: str, name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InputError(f"{option} {name} must be an integer >= {least}, got {value!r}")


def _check_choice(option: str, name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        expected = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
        raise InputError(f"{option} {name} must be {expected}, got {value!r}")
