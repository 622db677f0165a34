"""Decoding ids as they arrive: text is released only once it is whole and settled.

A server streaming a model's output gets ids one at a time; a character may be split across ids
(byte-level tokens), and some decoders look at neighbours (a leading space, a ``</w>``). Whatever
the ids, the pieces a stream releases, with its :meth:`~DecodeStream.flush`, join to the text
:meth:`Tokenizer.decode` gives for them all.

- Byte-level tokenizers (GPT-2's, tiktoken's encodings: text is the UTF-8 of the ids' bytes)
  pass each id's bytes through an incremental UTF-8 decoder, which holds back only a character
  still cut.
- Other decoders: the stream keeps the ids of the text not yet released and decodes a short
  window (the last released id as context): the new text is what decoding the window gives
  beyond what decoding it without the new ids gave. A run of ByteFallback's byte tokens
  ``<0xNN>`` is held until it ends (under Hugging Face's a later byte can turn all of it into
  U+FFFD); in a chain with ByteLevel, text that ends in U+FFFD (a character still cut) is held.
  Special tokens that decoding leaves out are not kept.

Every id is decoded a bounded number of times, so a stream's cost grows with its ids, whatever
they are.
"""

from __future__ import annotations

import codecs
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tokenmill.decoders import (
    ByteFallback,
    ByteLevel,
    Strip,
    chain_has,
    chain_of,
    is_byte_token,
    skips_end_byte_runs,
)
from tokenmill.errors import InputError

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer

_REPLACEMENT = "\ufffd"
_WINDOW = 8          # released ids decoded again with each new one, before the window is cut
_CONTEXT_KEPT = 64  # ids kept before the list is cut back to the window
_PICKLE_VERSION = 1  # (of a pickled stream's state)


class DecodeStream:
    """Feed ids with :meth:`step`; each call returns the text completed by that id, or None.
    :meth:`flush` ends the text: it returns what is held back, and ids after it start anew.

    >>> from tokenmill import BPE, Tokenizer, decoders
    >>> tok = Tokenizer(BPE({"a": 0, "b": 1}, []), decoder=decoders.Fuse())
    >>> stream = tok.decode_stream()
    >>> [stream.step(i) for i in (0, 1, 0)]
    ['a', 'b', 'a']
    """

    def __init__(self, tokenizer: Tokenizer, *, skip_special_tokens: bool = True) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._ids: list[int] = []
        self._prefix = 0  # the window: ids from this one on (those before it are done)
        self._read = 0    # ids before this one have been released
        self._before: str | None = None  # the text of ids[prefix:read], once decoded
        self._configure()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as its tokenizer (which pickles as its tokenizer.json), its option and
        where it is: the bytes of a character still cut, and the ids not yet settled with
        those kept as context. What it reads from the tokenizer is made again on loading."""
        return {"version": _PICKLE_VERSION, "tokenizer": self._tok,
                "skip_special_tokens": self._skip, "cut_bytes": self._utf8.getstate(),
                "ids": list(self._ids), "prefix": self._prefix, "read": self._read}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if state.get("version") != _PICKLE_VERSION:
            raise InputError(f"a pickled DecodeStream of version {state.get('version')!r}; "
                             f"this tokenmill reads version {_PICKLE_VERSION}")
        DecodeStream.__init__(self, state["tokenizer"],
                              skip_special_tokens=state["skip_special_tokens"])
        self._utf8.setstate(state["cut_bytes"])
        self._ids = list(state["ids"])
        self._prefix, self._read = state["prefix"], state["read"]

    def _configure(self) -> None:
        """What the stream reads from the tokenizer's model, decoder and added tokens, made
        again whenever one of them changes (a decoder set, tokens added) between ids."""
        tok = self._tok
        decoder = tok.decoder
        self._generation = tok._generation
        self._bytes = type(decoder) is ByteLevel  # (its text is its bytes' UTF-8)
        self._bytes_of: dict[int, bytes] = {}  # (ids met so far)
        self._token_of: dict[int, str] = {}  # (the same, their tokens)
        self._special = tok._added.special_ids if self._skip else frozenset()
        # A skipped special token still ends a run of byte tokens (sentencepiece's decoding):
        # kept, once for a row of them.
        self._keep_skipped = skips_end_byte_runs(decoder)
        self._byte_runs = chain_has(decoder, ByteFallback)
        self._cut_characters = chain_has(decoder, ByteLevel)
        # A table decoder's, called straight (decode's dispatch was a third of a step).
        self._table = None if self._bytes else tok._table_decoder()
        # A Strip of the leading pieces (a .model that removes extra whitespace) treats each
        # token as the first while the text is empty: a window must not begin with ids whose
        # text is empty there.
        self._leading = any(isinstance(d, Strip) and d.leading for d in chain_of(decoder))
        self._before = None  # (the old tokenizer's text of the window)

    def _check_tokenizer(self) -> None:
        if self._tok._generation != self._generation:
            self._configure()

    def _decode(self, ids: list[int]) -> str:
        if self._table is not None:
            text = self._table.decode(ids, self._skip)
            if text is not None:
                return text
        return self._tok.decode(ids, skip_special_tokens=self._skip)

    def step(self, id: int) -> str | None:
        """Add one id; the text it completes, or None while a character is still cut (or a
        run of byte tokens ``<0xNN>`` goes on). An id the tokenizer does not have raises
        InputError and is not kept: the stream goes on with the next."""
        if self._tok._generation != self._generation:  # (_check_tokenizer, inline: a call
            self._configure()                          # was a sixth of a byte-level step)
        if type(id) is int:  # (an id met before: checked then)
            if self._bytes and (data := self._bytes_of.get(id)) is not None:
                return self._utf8.decode(data) or None
            if (token := self._token_of.get(id)) is not None:
                return self._step(id, token)
        return self._step(*self._checked(id, "decode_stream"))

    def _checked(self, id: Any, where: str) -> tuple[int, str]:
        """The id and its token; InputError naming ``where`` if it is no id of the tokenizer."""
        try:
            i = operator.index(id)
        except TypeError:
            i = -1  # (no id: named below)
        token = self._tok.id_to_token(i)
        if token is None:
            raise InputError(f"{where}: {id!r} is not an id of this tokenizer "
                             f"(vocabulary size {self._tok.get_vocab_size()})")
        self._token_of[i] = token
        return i, token

    def _step(self, i: int, token: str) -> str | None:
        if self._bytes:
            data = self._bytes_of.get(i)
            if data is None:
                data = self._bytes_of[i] = self._tok.decode_bytes([i],
                                                                  skip_special_tokens=self._skip)
            return self._utf8.decode(data) or None
        if i in self._special:
            # Left out by decode: nothing to add, unless it ends a run of byte tokens.
            if self._keep_skipped and self._ids and self._ids[-1] not in self._special:
                self._ids.append(i)
            return None
        self._ids.append(i)
        if self._byte_runs and is_byte_token(token):
            return None  # (settled when the run ends)
        before, after = self._window_texts()
        if len(after) <= len(before) or (self._cut_characters and after.endswith(_REPLACEMENT)):
            return None
        return self._release(before, after)

    def flush(self) -> str | None:
        """End the text: what :meth:`step` has held back (a character still cut, text that
        ends in U+FFFD, a run of byte tokens), as :meth:`Tokenizer.decode` gives it; None if
        nothing is held. What a server sends once the model stops; ids given after it start
        a new text, as if decoded apart."""
        self._check_tokenizer()
        if self._bytes:
            text = self._utf8.decode(b"", final=True)
            self._utf8.reset()
            return text or None
        before, after = self._window_texts()
        self._ids.clear()
        self._prefix = self._read = 0
        self._before = None
        return after[len(before):] or None

    def _window_texts(self) -> tuple[str, str]:
        """The window's text without the ids not yet released (kept from the last step while
        the window's start stays), and with them."""
        if self._before is None:
            self._before = self._decode(self._ids[self._prefix:self._read])
        return self._before, self._decode(self._ids[self._prefix:])

    def _release(self, before: str, after: str) -> str:
        """Marks every id as released, ``after`` being the window's text with them."""
        self._read = len(self._ids)
        self._before = after
        if self._read - self._prefix > _WINDOW:
            # Cut back to the last released id as context (for decoders that look back: a
            # leading space, a "##"); it gave text, so it is never one decoding leaves out.
            cut = self._read - 1
            while self._leading and cut > self._prefix and \
                    not self._decode(self._ids[cut:self._read]):
                cut -= 1  # (a bare "▁" alone is empty, and would strip the next one)
            self._prefix = cut
            self._before = None
            if self._prefix > _CONTEXT_KEPT:
                del self._ids[:self._prefix]
                self._read -= self._prefix
                self._prefix = 0
        return after[len(before):]

    def feed(self, ids: Iterable[int]) -> Iterator[str]:
        """The text pieces of ``ids``, as :meth:`step` releases them. A sequence's ids are
        checked before any is decoded, so a bad one (named by its position) loses no piece."""
        if isinstance(ids, Sequence) or hasattr(ids, "__array__"):
            checked = [self._checked(id, f"ids[{k}]") for k, id in enumerate(ids)]
            return self._pieces(checked)
        return self._pieces(self._checked(id, f"ids[{k}]") for k, id in enumerate(ids))

    def _pieces(self, ids: Iterable[tuple[int, str]]) -> Iterator[str]:
        for i, token in ids:
            self._check_tokenizer()
            text = self._step(i, token)
            if text is not None:
                yield text
