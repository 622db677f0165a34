"""Decoding SentencePiece-style and WordPiece tokenizers through a table of each id's text.

The decoders of a SentencePiece model (a ``.model``, or a tokenizer.json with Metaspace or
Replace "▁" and ByteFallback) change each token alone, then read runs of byte tokens, then fuse
the tokens; WordPiece's changes each token alone (a space or the "##" off, the cleanup) and
joins them. Running such a chain in Python cost about 0.3 µs a token on every call. Here the
per-token steps run once over the vocabulary, as every token is changed anywhere but first
and as the first token given to the chain is (a dummy prefix's strip, no space before it), and
the native ``DecodeTable`` makes the text of ids in one pass: their texts joined, byte runs read
as the chain's ByteFallback reads them, skipped special tokens left out. Steps after the fuse
run on the one string, as the chain would run them.

A chain of any other shape (ByteLevel, CTC, BPEDecoder's suffix, ...) has no plan; ``plan_of``
says None and the caller runs the chain.
"""

from __future__ import annotations

import dataclasses
import itertools
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from tokenmill._core import DecodeTable
from tokenmill.added_tokens import AddedVocabulary
from tokenmill.bert import WordPieceDecoder
from tokenmill.decoders import (
    _BYTE_VALUES,
    _RAW_BYTES,
    ByteFallback,
    Decoder,
    Fuse,
    Metaspace,
    Replace,
    Strip,
    chain_of,
)
from tokenmill.decoders import Sequence as Chain

# The decoders that change each token alone (the first one in their own way).
_PER_TOKEN = (Replace, Strip, Metaspace, WordPieceDecoder)

# How DecodeTable reads a run of byte tokens (its ByteRuns).
_RUNS_WHOLE, _RUNS_PER_BYTE, _RUNS_RAW = 0, 1, 2


@dataclass(frozen=True)
class Plan:
    """A chain read as: ``each`` on every token (``first`` on the first one instead, and on
    each one after it while the text is empty if ``first_while_empty``), then
    ``byte_fallback`` if any, then a fuse, then ``after`` on the fused text."""

    each: tuple[Decoder, ...]
    first: tuple[Decoder, ...]
    byte_fallback: ByteFallback | None
    after: tuple[Decoder, ...]
    first_while_empty: bool = False


@dataclass(frozen=True)
class AsFirst(Decoder):
    """Changes every token as ``inner`` changes the first token it is given (a token at a
    time: for the decoders without a faster twin, WordPiece's)."""

    inner: Decoder

    def decode_chain(self, tokens: list[str]) -> list[str]:
        inner = self.inner.decode_chain
        return [inner([token])[0] for token in tokens]


def _as_first(d: Decoder) -> Decoder:
    """A decoder that changes every token as ``d`` changes the first token it is given."""
    if isinstance(d, Strip) and d.first_only:
        return dataclasses.replace(d, first_only=False, leading=False)
    if isinstance(d, Metaspace) and d.prepend_scheme != "never":
        return Replace(d.replacement, "")
    if isinstance(d, WordPieceDecoder):
        return AsFirst(d)
    return d


def plan_of(decoder: Decoder | None) -> Plan | None:
    """The table plan of ``decoder``'s chain, or None if it has another shape."""
    if decoder is None:
        return None
    chain = list(chain_of(decoder))
    k = 0
    while k < len(chain) and isinstance(chain[k], _PER_TOKEN):
        k += 1
    each = tuple(chain[:k])
    byte_fallback = None
    if k < len(chain):
        step = chain[k]
        if isinstance(step, ByteFallback):
            byte_fallback = step
            k += 1
    if k < len(chain):
        if not isinstance(chain[k], Fuse):
            return None
        k += 1
    # A Strip of the leading tokens: the first one's treatment goes on while the text is
    # empty, which holds only where nothing else treats the first token its own way.
    # (The chain asks whether a token is empty once stripped, the table whether its text is:
    # the steps after the Strip must keep a token empty or not, as literal Replaces that
    # neither match nor make nothing do.)
    leading = [d for d in each if isinstance(d, Strip) and d.leading]
    if leading and (any(_as_first(d) != d for d in each if d not in leading) or any(
            not (isinstance(d, Replace) and not d.regex and d.pattern and d.content)
            for d in each[each.index(leading[0]) + 1:])):
        return None
    each = tuple(dataclasses.replace(d, leading=False) if d in leading else d for d in each)
    # (Without a fuse, decode joins the pieces: the same text.)
    return Plan(each, tuple(map(_as_first, each)), byte_fallback, tuple(chain[k:]),
                bool(leading))


class TableDecoder:
    """A tokenizer's DecodeTable and how to call it; build with :func:`table_decoder`."""

    def __init__(self, plan: Plan, table: DecodeTable, parted_runs: bool) -> None:
        """``parted_runs``: whether two runs of byte tokens can be parted by nothing, a token
        whose text is empty or a skipped special token (the raw bytes then join them)."""
        self.plan = plan
        self.table = table
        per_byte = plan.byte_fallback is not None and plan.byte_fallback.per_byte
        self._runs = _RUNS_PER_BYTE if per_byte else _RUNS_WHOLE
        # (A skipped special token is an empty token to such a chain: it ends a byte run.)
        self._ends_runs = per_byte
        self._parted_runs = parted_runs
        self._leading = plan.first_while_empty
        # After the fuse, most often one Strip(" ", 1, 0) (a tokenizer.json's dummy prefix):
        # the character it takes, tested inline (a call of the chain was most of a short
        # decode's time, which a stream makes at every id).
        after = plan.after
        self._after = Chain(after)
        lead = after[0] if len(after) == 1 and isinstance(after[0], Strip) else None
        self._lead = lead.content if lead is not None and (lead.start, lead.stop) == (1, 0) \
            else None

    def decode(self, ids: Sequence[int], skip_special_tokens: bool) -> str | None:
        """The text of ``ids``, or None where an id is not one of the tokenizer's or not an
        int (the caller's general path names it)."""
        try:
            text = cast("str | None", self.table.decode(
                ids, skip_special_tokens, self._ends_runs, self._leading, self._runs, True))
        except TypeError:
            return None
        if text is None or not self.plan.after:
            return text
        if self._lead is not None:
            return text[1:] if text[:1] == self._lead else text
        return self._after.decode([text])

    def decode_bytes(self, ids: Sequence[int], skip_special_tokens: bool) -> bytes | None:
        """The bytes of ``ids``, byte tokens as they are (``decode_raw``'s), or None as
        :meth:`decode`."""
        try:
            data = cast("bytes | None", self.table.decode(
                ids, skip_special_tokens, self._ends_runs, self._leading, _RUNS_RAW, False))
        except TypeError:
            return None
        if data is None or not self.plan.after:
            return data
        if self._lead is not None and self._lead.isascii():
            # (An ASCII character is the same byte whether or not the raw runs beside it were
            # joined; any other could be spelled by two runs that the chain reads apart.)
            return data[1:] if data[:1] == self._lead.encode() else data
        if self._parted_runs:
            return None  # (the chain, which reads such runs apart)
        mark = _RAW_BYTES.set(True)
        try:
            text = self._after.decode([data.decode("utf-8", "surrogateescape")])
        finally:
            _RAW_BYTES.reset(mark)
        return text.encode("utf-8", "surrogateescape")


def table_decoder(model: Any, decoder: Decoder | None,
                  added: AddedVocabulary) -> TableDecoder | None:
    """A TableDecoder for a tokenizer of ``model``, ``decoder`` and ``added`` tokens, or None
    if its decoder has no plan or a token's text cannot be held (a lone surrogate)."""
    plan = plan_of(decoder)
    if plan is None:
        return None
    # (As Tokenizer.id_to_token and get_vocab_size read them.)
    size = max(model.max_id(), max(added.by_id, default=-1)) + 1
    lookup = model.vocab_tokens()
    tokens: list[str | None] = list(map(lookup.get, range(size))) if lookup is not None \
        else [model.id_to_token(i) for i in range(size)]
    for i, added_token in added.by_id.items():
        tokens[i] = added_token.content
    held = [t if t is not None else "" for t in tokens]
    # Every token but the first: the chain sees a token before it (an empty one, changed by
    # nothing that changes only the first).
    each_steps = Chain(plan.each)
    each = each_steps.decode_chain(["", *held])[1:]
    first = Chain(plan.first).decode_chain(held)
    if plan.byte_fallback is not None and plan.byte_fallback.per_byte and \
            each_steps.decode_chain(["", ""])[1] != "":
        return None  # (the empty token standing for a skipped special would make text)
    values = _BYTE_VALUES if plan.byte_fallback is not None else {}
    try:
        texts = [t.encode("utf-8") for t in itertools.chain(each, first)]
    except UnicodeEncodeError:
        return None
    try:  # (where each text ends in their join: 4 bytes an entry, the core's uint32)
        ends = array("I", itertools.accumulate(map(len, texts)))
    except OverflowError:
        return None
    bytes_of = array("h", map(values.get, itertools.chain(each, first), itertools.repeat(-1)))
    for k, t in enumerate(tokens):
        if t is None:
            bytes_of[k] = bytes_of[k + size] = -2
    special_ids = added.special_ids
    special = bytes(i in special_ids for i in range(size))
    parted_runs = plan.byte_fallback is not None and (
        plan.byte_fallback.per_byte or any(not t for t, b in zip(each, bytes_of) if b == -1))
    table = DecodeTable(b"".join(texts), ends.tobytes(), bytes_of.tobytes(), special)
    return TableDecoder(plan, table, parted_runs)
