"""Decoders: tokens -> text, undoing what the pre-tokenizer and model did to the spelling.

Each decoder is a small frozen class with one method, ``decode_chain`` (tokens -> tokens, so
decoders compose in a ``Sequence``); ``decode`` joins the result. ``to_dict``/``from_fields``
follow the ``"decoder"`` entries of Hugging Face's ``tokenizer.json``.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import KW_ONLY, dataclass
from dataclasses import field as dataclass_field
from typing import Any, ClassVar, Self

import regex

from tokenmill._registry import field, register
from tokenmill.errors import FormatError, InputError
from tokenmill.normalizers import (
    CompiledPattern,
    ReplaceFields,
    build_item,
    compile_pattern,
    find_matches,
)
from tokenmill.pre_tokenizers import ByteLevelFields, MetaspaceFields, unicode_to_bytes

# Set while decode_bytes runs a chain: bytes that are not valid UTF-8 (a byte-level token's, a
# byte-fallback <0xNN>'s) are kept as surrogate escapes instead of becoming U+FFFD, so the
# joined text encodes back to the very bytes the ids stand for.
_RAW_BYTES: ContextVar[bool] = ContextVar("tokenmill_raw_bytes", default=False)


def decode_raw(decoder: Decoder, tokens: list[str]) -> bytes:
    """The bytes ``tokens`` stand for under ``decoder``: its text, but with the bytes of
    byte tokens as they are, valid UTF-8 or not (tiktoken's ``decode_bytes``, for any chain).

    >>> decode_raw(Sequence([Replace("▁", " "), ByteFallback(), Fuse()]), ["▁a", "<0xC3>"])
    b' a\\xc3'
    """
    mark = _RAW_BYTES.set(True)
    try:
        text = decoder.decode(tokens)
    finally:
        _RAW_BYTES.reset(mark)
    return text.encode("utf-8", errors="surrogateescape")


def chain_of(decoder: Decoder | None) -> Iterator[Decoder]:
    """The decoders ``decoder`` runs: itself, or those of a Sequence, nested ones included."""
    if isinstance(decoder, Sequence):
        for d in decoder.decoders:
            yield from chain_of(d)
    elif decoder is not None:
        yield decoder


def skips_end_byte_runs(decoder: Decoder | None) -> bool:
    """Whether a special token that decoding leaves out still ends a run of byte tokens, as a
    control piece does in sentencepiece's decoding (a ``.model``'s per-byte ByteFallback):
    the caller then passes an empty token in its place."""
    return any(isinstance(d, ByteFallback) and d.per_byte for d in chain_of(decoder))


def chain_has(decoder: Decoder | None, kind: type[Decoder]) -> bool:
    """Whether ``decoder`` is a ``kind`` or a Sequence holding one."""
    return any(isinstance(d, kind) for d in chain_of(decoder))


def is_byte_token(token: str) -> bool:
    """Whether ``token`` is a byte token ``<0xNN>`` of ByteFallback."""
    return token in _BYTE_VALUES


class Decoder(ABC):
    """Base of the decoders: subclasses implement ``decode_chain``."""

    type_name: ClassVar[str]

    @abstractmethod
    def decode_chain(self, tokens: list[str]) -> list[str]:
        """``tokens`` turned into the strings whose concatenation is the text."""

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
        invalid = "surrogateescape" if _RAW_BYTES.get() else "replace"  # (see decode_raw)
        return [data.decode("utf-8", errors=invalid)]



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


@register("decoder", "Replace")
@dataclass(frozen=True)
class Replace(ReplaceFields, Decoder):
    """Replace each match of ``pattern`` (a literal string, or a regex if ``regex``) by
    ``content`` in every token, as the normalizer of the same name does to text.

    >>> Replace("▁", " ").decode_chain(["▁Hello", "▁wor", "ld"])
    [' Hello', ' wor', 'ld']
    """

    pattern: str
    content: str
    _: KW_ONLY
    regex: bool = False
    compiled: CompiledPattern = dataclass_field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", compile_pattern(self.pattern, self.regex))

    def decode_chain(self, tokens: list[str]) -> list[str]:
        if not self.regex and self.pattern:
            if len(tokens) > 1 and self.pattern not in "\0".join(tokens):
                return tokens  # (one search in C for many tokens holding none: "<unk>")
            return [token.replace(self.pattern, self.content) for token in tokens]
        return [self._replace(token) for token in tokens]

    def _replace(self, token: str) -> str:
        # The normalizer's matching rules, empty matches included (see find_matches).
        out: list[str] = []
        done = 0
        for i, j in find_matches(self.compiled, token):
            out += (token[done:i], self.content)
            done = j
        out.append(token[done:])
        return "".join(out)



# "<0xHH>": one byte. subtle: Hugging Face parses the two characters with Rust's
# u8::from_str_radix, which also takes a plus sign, so "<0x+4>" is byte 4 there too.
_BYTE_TOKEN = regex.compile(r"<0x([0-9A-Fa-f]{2}|\+[0-9A-Fa-f])>")
# Every spelling _BYTE_TOKEN takes (506: either case of each hex digit, and the signed ones),
# with its byte, so that a dict answers for a token.
_HEX = "0123456789abcdefABCDEF"
_BYTE_VALUES = {f"<0x{digits}>": int(digits, 16)
                for digits in [a + b for a in _HEX for b in _HEX] + ["+" + a for a in _HEX]}


@register("decoder", "ByteFallback")
@dataclass(frozen=True)
class ByteFallback(Decoder):
    """Turn byte tokens ``<0xHH>`` (what a BPE model with ``byte_fallback`` emits for
    characters outside its vocabulary) back into text.

    Each run of consecutive byte tokens becomes one token holding its UTF-8 text; a run that
    is not valid UTF-8 becomes one U+FFFD per byte token instead, as in Hugging Face. With
    ``per_byte`` (the decoder of a SentencePiece ``.model``), as sentencepiece decodes: the
    run's valid characters are kept, and each byte that starts no valid character is one
    U+FFFD. Other tokens pass through.

    >>> ByteFallback().decode_chain(["a", "<0xE6>", "<0x97>", "<0xA5>", "<0x41>", "b"])
    ['a', '日A', 'b']
    >>> ByteFallback().decode_chain(["<0xE6>", "<0x97>", "<0x41>", "x"])
    ['�', '�', '�', 'x']
    >>> ByteFallback(per_byte=True).decode_chain(["<0xE6>", "<0x97>", "<0x41>", "x"])
    ['��A', 'x']
    """

    _: KW_ONLY
    per_byte: bool = False

    def to_dict(self) -> dict[str, Any]:
        # (Hugging Face's ByteFallback has no fields, and its reader ignores this one.)
        return {"type": self.type_name, **({"per_byte": True} if self.per_byte else {})}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls(per_byte=field(data, "per_byte", bool, where, False))

    def decode_chain(self, tokens: list[str]) -> list[str]:
        decode_run = _decode_per_byte if self.per_byte else _decode_run
        if _RAW_BYTES.get():
            decode_run = _decode_raw_run
        values = _BYTE_VALUES  # (a dict answers for a token: no pattern match)
        out: list[str] = []
        run = bytearray()
        for token in tokens:
            byte = values.get(token)
            if byte is not None:
                run.append(byte)
                continue
            if run:
                out += decode_run(run)
                run = bytearray()
            out.append(token)
        if run:
            out += decode_run(run)
        return out


def _decode_raw_run(run: bytearray) -> list[str]:
    return [run.decode("utf-8", errors="surrogateescape")]


def _decode_run(run: bytearray) -> list[str]:
    try:
        return [run.decode("utf-8")]
    except UnicodeDecodeError:
        return ["\ufffd"] * len(run)


def _decode_per_byte(run: bytearray) -> list[str]:
    """sentencepiece's reading of a run of bytes: a character at a time, its length told by its
    first byte; a byte that starts no valid character (a stray continuation byte, a character
    cut short, overlong, a surrogate, past U+10FFFF) is one U+FFFD, and reading goes on at the
    next byte."""
    try:
        return [run.decode("utf-8")]  # (valid UTF-8 reads the same a character at a time)
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    at = 0
    while at < len(run):
        first = run[at]
        size = 1 if first < 0x80 else 2 if first < 0xE0 else 3 if first < 0xF0 else 4
        try:
            out.append(run[at:at + size].decode("utf-8"))
            at += size
        except UnicodeDecodeError:
            out.append("\ufffd")
            at += 1
    return ["".join(out)]


@register("decoder", "Fuse")
@dataclass(frozen=True)
class Fuse(Decoder):
    """Join all tokens into one (so that the decoders after it see the whole text).

    >>> Fuse().decode_chain(["a", " b", "c"])
    ['a bc']
    """

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return ["".join(tokens)]


@register("decoder", "Strip")
@dataclass(frozen=True)
class Strip(Decoder):
    """Remove up to ``start`` copies of the character ``content`` from the start of every
    token and up to ``stop`` from its end; with ``first_only`` (a SentencePiece ``.model``'s
    dummy prefix, which sentencepiece takes off the first piece alone), of the first token
    only; with ``leading`` too, of each token from the first as long as the tokens before it
    are all empty once stripped (a model that removes extra whitespace: sentencepiece then
    takes "▁" off every piece until the text holds something).

    Where the two would overlap (``Strip("a", 1, 1)`` on "a") Hugging Face panics; the token
    becomes empty here.

    >>> Strip(" ", 1, 0).decode_chain(["  a ", " b"])
    [' a ', 'b']
    >>> Strip("▁", 1, 0, first_only=True).decode_chain(["▁", "▁a", "▁b"])
    ['', '▁a', '▁b']
    >>> Strip("▁", 1, 0, first_only=True, leading=True).decode_chain(["▁", "▁a", "▁b"])
    ['', 'a', '▁b']
    """

    content: str
    start: int
    stop: int
    _: KW_ONLY
    first_only: bool = False
    leading: bool = False

    def __post_init__(self) -> None:
        if len(self.content) != 1:
            raise InputError(f"Strip content must be one character, got {self.content!r}")
        if self.start < 0 or self.stop < 0:
            raise InputError(f"Strip start and stop must be >= 0, got {self.start}, "
                             f"{self.stop}")
        if self.leading and not self.first_only:
            raise InputError("Strip leading needs first_only")

    def decode_chain(self, tokens: list[str]) -> list[str]:
        if self.leading:
            out = list(tokens)
            for k, token in enumerate(out):
                out[k] = self._strip(token)
                if out[k]:
                    break
            return out
        if self.first_only:
            return [self._strip(tokens[0]), *tokens[1:]] if tokens else []
        c = self.content
        if self.start == 1 and self.stop == 0:  # (the common one, over a vocabulary at once)
            return [token[1:] if token[:1] == c else token for token in tokens]
        return [self._strip(token) for token in tokens]

    def _strip(self, token: str) -> str:
        c = self.content
        i = len(token) - len(token.lstrip(c))
        j = len(token.rstrip(c))
        i = min(i, self.start)
        j = max(j, len(token) - self.stop)
        return token[i:max(i, j)]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "content": self.content, "start": self.start,
                "stop": self.stop, **({"first_only": True} if self.first_only else {}),
                **({"leading": True} if self.leading else {})}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        content = field(data, "content", str, where)
        if len(content) != 1:
            raise FormatError(f"{where}.content: expected one character, got {content!r}")
        start, stop = field(data, "start", int, where), field(data, "stop", int, where)
        for name, value in (("start", start), ("stop", stop)):
            if value < 0:
                raise FormatError(f"{where}.{name}: expected an integer >= 0, got {value}")
        first_only = field(data, "first_only", bool, where, False)
        leading = field(data, "leading", bool, where, False)
        if leading and not first_only:
            raise FormatError(f"{where}.leading: needs first_only")
        return cls(content, start, stop, first_only=first_only, leading=leading)


@register("decoder", "Metaspace")
@dataclass(frozen=True, init=False)
class Metaspace(MetaspaceFields, Decoder):
    """Undo the Metaspace pre-tokenizer: ``replacement`` becomes a space again.

    Unless ``prepend_scheme`` is ``"never"``, the first token's replacements are dropped
    instead (its first one is the prefix the pre-tokenizer added). subtle: Hugging Face drops
    every replacement of the first token, not only a leading one ("▁a▁b" -> "ab"); so do we.
    ``split`` only round-trips the file format.

    >>> Metaspace().decode_chain(["▁Hey", "▁", "▁you"])
    ['Hey', ' ', ' you']
    """

    replacement: str
    prepend_scheme: str
    splits: bool

    def decode_chain(self, tokens: list[str]) -> list[str]:
        mark = self.replacement
        out = [token.replace(mark, " ") for token in tokens]
        if out and self.prepend_scheme != "never":
            out[0] = tokens[0].replace(mark, "")
        return out


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
