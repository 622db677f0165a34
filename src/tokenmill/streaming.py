"""Decoding ids as they arrive: text is released only once it is whole.

A server streaming a model's output gets ids one at a time; a character may be split across ids
(byte-level tokens), and some decoders look at neighbours (a leading space, a ``</w>``). The
stream keeps the ids of the text not yet released and decodes a short window: the new text is
what decoding the window gives beyond what decoding it without the new ids gave, held back
while it ends in an incomplete character (U+FFFD).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from tokenmill.errors import InputError

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer

_REPLACEMENT = "\ufffd"


class DecodeStream:
    """Feed ids with :meth:`step`; each call returns the text completed by that id, or None.

    >>> from tokenmill import BPE, Tokenizer, decoders
    >>> tok = Tokenizer(BPE({"a": 0, "b": 1}, []), decoder=decoders.Fuse())
    >>> stream = tok.decode_stream()
    >>> [stream.step(i) for i in (0, 1, 0)]
    ['a', 'b', 'a']
    """

    def __init__(self, tokenizer: Tokenizer, *, skip_special_tokens: bool = True) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix = 0  # ids before this one only give context
        self._read = 0    # ids before this one have been released

    def _decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=self._skip)

    def step(self, id: int) -> str | None:
        """Add one id; the text it completes, or None while a character is still cut. An id
        the tokenizer does not have raises InputError and is not kept: the stream goes on
        with the next."""
        try:
            i = operator.index(id)
        except TypeError:
            i = -1  # (no id: named below)
        if self._tok.id_to_token(i) is None:
            raise InputError(f"decode_stream: {id!r} is not an id of this tokenizer "
                             f"(vocabulary size {self._tok.get_vocab_size()})")
        self._ids.append(i)
        before, after = self._window_texts()
        if len(after) <= len(before) or after.endswith(_REPLACEMENT):
            return None
        return self._release(after[len(before):])

    def flush(self) -> str | None:
        """The text of the ids :meth:`step` has held back (a character still cut, or text
        that ends in U+FFFD), as :meth:`Tokenizer.decode` gives it: what a server sends once
        the model stops. None if nothing is held."""
        before, after = self._window_texts()
        if len(after) <= len(before):
            self._read = len(self._ids)
            return None
        return self._release(after[len(before):])

    def _window_texts(self) -> tuple[str, str]:
        """The window's text without the ids not yet released, and with them."""
        return (self._decode(self._ids[self._prefix:self._read]),
                self._decode(self._ids[self._prefix:]))

    def _release(self, new: str) -> str:
        """Marks every id as released, ``new`` being their text."""
        # Keep the last released id as context (for decoders that look back), forget the rest.
        self._prefix = self._read
        self._read = len(self._ids)
        if self._prefix > 64:
            drop = self._prefix
            self._ids = self._ids[drop:]
            self._prefix -= drop
            self._read -= drop
        return new

    def feed(self, ids: Iterable[int]) -> Iterator[str]:
        """The text pieces of ``ids``, as :meth:`step` releases them."""
        for id in ids:
            text = self.step(id)
            if text is not None:
                yield text
