"""Decoders: tokens -> text, undoing what the pre-tokenizer and model did to the spelling.

Each decoder is a small frozen class with one method, ``decode_chain`` (tokens -> tokens, so
decoders compose in a ``Sequence``); ``decode`` joins the result. ``to_dict``/``from_fields``
follow the ``"decoder"`` entries of Hugging Face's ``tokenizer.json``.
"""

from __future__ import annotations

import functools
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar, Self

from tokenmill._registry import field, register
from tokenmill.normalizers import build_item
from tokenmill.pre_tokenizers import ByteLevelFields, unicode_to_bytes


class Decoder:
    """Base of the decoders: subclasses implement ``decode_chain``."""

    type_name: ClassVar[str]

    def decode_chain(self, tokens: list[str]) -> list[str]:
        raise NotImplementedError

    def decode(self, tokens: list[str]) -> str:
        """The decoded text: the pieces of ``decode_chain``, joined."""
        return "".join(self.decode_chain(tokens))

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls()


@register("decoder", "ByteLevel")
@dataclass(frozen=True)
class ByteLevel(ByteLevelFields, Decoder):
    """Read tokens spelled in the byte-level alphabet back as bytes, then as UTF-8.

    The result is one piece: a character may be split across tokens, so tokens cannot be
    decoded one by one. Invalid UTF-8 becomes U+FFFD. A token holding any character outside
    the alphabet (say an added token "<ｍask>") is taken as its own UTF-8, whole, as Hugging
    Face does. The three options only round-trip the file format.

    >>> ByteLevel().decode_chain(["Hello", "Ġw", "Ã¶", "rld"])
    ['Hello wörld']
    """

    _: KW_ONLY
    add_prefix_space: bool = False
    trim_offsets: bool = True
    use_regex: bool = True

    def decode_chain(self, tokens: list[str]) -> list[str]:
        table = _latin1_table()
        data = bytearray()
        for token in tokens:
            try:
                data += token.translate(table).encode("latin-1")
            except UnicodeEncodeError:
                data += token.encode("utf-8")
        return [data.decode("utf-8", errors="replace")]



@functools.cache
def _latin1_table() -> dict[int, str]:
    """str.translate table: alphabet character -> the Latin-1 character of its byte.

    Characters below U+0100 that are not in the alphabet (space, controls, ...) map to U+FFFF so
    that the Latin-1 encoding fails and the token falls back to UTF-8; characters from U+0100 up
    that are not in the alphabet fail that encoding as they are.
    """
    table = {cp: "\uffff" for cp in range(256)}
    table.update({ord(char): chr(b) for char, b in unicode_to_bytes().items()})
    return table


@register("decoder", "BPEDecoder")
@dataclass(frozen=True)
class BPEDecoder(Decoder):
    """Turn the end-of-word ``suffix`` into a space (into nothing in the last token).

    As in Hugging Face, every occurrence of the suffix in a token is replaced, not only a
    trailing one.

    >>> BPEDecoder().decode_chain(["hel", "lo</w>", "world</w>"])
    ['hel', 'lo ', 'world']
    """

    _: KW_ONLY
    suffix: str = "</w>"

    def decode_chain(self, tokens: list[str]) -> list[str]:
        last = len(tokens) - 1
        return [token.replace(self.suffix, "" if k == last else " ")
                for k, token in enumerate(tokens)]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "suffix": self.suffix}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls(suffix=field(data, "suffix", str, where))


@register("decoder", "Sequence")
@dataclass(frozen=True, init=False)
class Sequence(Decoder):
    """Apply each decoder's ``decode_chain`` to the tokens the previous one produced.

    >>> Sequence([ByteLevel(), BPEDecoder()]).decode(["a</w>", "Ġb</w>"])
    'a b'
    """

    decoders: tuple[Decoder, ...]

    def __init__(self, decoders: list[Decoder] | tuple[Decoder, ...]) -> None:
        object.__setattr__(self, "decoders", tuple(decoders))

    def decode_chain(self, tokens: list[str]) -> list[str]:
        for decoder in self.decoders:
            tokens = decoder.decode_chain(tokens)
        return tokens

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "decoders": [d.to_dict() for d in self.decoders]}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        items = field(data, "decoders", list, where)
        return cls([build_item("decoder", item, f"{where}.decoders[{k}]")
                    for k, item in enumerate(items)])
