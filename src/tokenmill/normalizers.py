"""Normalizers: text -> text, keeping every character's alignment to the original input.

Each normalizer is a small frozen class with one method, ``normalize``; ``Sequence`` composes
them. ``to_dict``/``from_fields`` follow the ``"normalizer"`` entries of Hugging Face's
``tokenizer.json``. The pattern helpers at the bottom are shared with ``pre_tokenizers``.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass
from dataclasses import field as dataclass_field
from typing import Any, ClassVar, Literal, Self, TypeAlias

import regex

from tokenmill import _core
from tokenmill._registry import build, field, register
from tokenmill.errors import FormatError, InputError
from tokenmill.normalized import NormalizedString

# Unicode's White_Space property: what Rust's char::is_whitespace (and so Hugging Face) strips.
# Python's str.isspace would also strip U+001C..U+001F, which are not White_Space.
WHITE_SPACE = ("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
               "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")

Form: TypeAlias = Literal["NFC", "NFD", "NFKC", "NFKD"]
# A compiled pattern of the regex module (a name, because `regex` is also an option's name).
CompiledPattern: TypeAlias = "regex.Pattern[str]"

# Blocks this long are checked with the C-speed unicodedata.is_normalized before any
# per-character work, so a long text with one stray accent costs little more than the check.
_BLOCK = 64


class Normalizer(ABC):
    """Base of the normalizers: subclasses implement ``normalize``."""

    type_name: ClassVar[str]

    @abstractmethod
    def normalize(self, s: NormalizedString) -> NormalizedString:
        """``s`` normalized, each character still aligned to the original input."""

    def normalize_str(self, text: str) -> str:
        """The normalized text alone (no alignment)."""
        return self.normalize(NormalizedString(text)).text

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls()


class _UnicodeForm(Normalizer):
    """Unicode normalization to ``form``.

    An output character points at the character it came from; where characters compose or
    reorder, at the whole cluster (a starter and its marks) they came from.
    """

    form: ClassVar[Form]

    def normalize(self, s: NormalizedString) -> NormalizedString:
        if unicodedata.is_normalized(self.form, s.text):
            return s
        compat = self.form in ("NFKC", "NFKD")
        return s.transform(_form_chunks(s.text, self.form, compat))


@register("normalizer", "NFC")
@dataclass(frozen=True)
class NFC(_UnicodeForm):
    """Canonical composition.

    >>> n = NFC().normalize(NormalizedString("e\\u0301!"))
    >>> n.text, n.alignment()
    ('é!', ([0, 2], [2, 3]))
    """

    form = "NFC"


@register("normalizer", "NFD")
@dataclass(frozen=True)
class NFD(_UnicodeForm):
    """Canonical decomposition.

    >>> n = NFD().normalize(NormalizedString("é"))
    >>> [hex(ord(c)) for c in n.text], n.alignment()
    (['0x65', '0x301'], ([0, 0], [1, 1]))
    """

    form = "NFD"


@register("normalizer", "NFKC")
@dataclass(frozen=True)
class NFKC(_UnicodeForm):
    """Compatibility decomposition, then canonical composition.

    >>> n = NFKC().normalize(NormalizedString("ﬁx"))
    >>> n.text, n.alignment()
    ('fix', ([0, 0, 1], [1, 1, 2]))
    """

    form = "NFKC"


@register("normalizer", "NFKD")
@dataclass(frozen=True)
class NFKD(_UnicodeForm):
    """Compatibility decomposition.

    >>> NFKD().normalize_str("²é") == "2e\\u0301"
    True
    """

    form = "NFKD"


@register("normalizer", "StripAccents")
@dataclass(frozen=True)
class StripAccents(Normalizer):
    """Drop every combining mark (Unicode category M: Mn, Mc, Me), as Hugging Face's does; it
    decomposes nothing, so a file puts NFD or NFKD before it to strip the accents of composed
    letters (ALBERT's and XLNet's tokenizer.json do).

    >>> n = StripAccents().normalize(NormalizedString("cafe\u0301 e\u0301"))
    >>> n.text, n.span(4, 5)
    ('cafe e', (5, 6))
    """

    def normalize(self, s: NormalizedString) -> NormalizedString:
        if s.text.isascii() or _MARKS.search(s.text) is None:
            return s
        return s.transform(_unmarked(s.text))

    def normalize_str(self, text: str) -> str:
        return text if text.isascii() else _MARKS.sub("", text)


_MARKS = regex.compile(r"\p{M}+")


def _unmarked(text: str) -> Iterator[tuple[str, int, int]]:
    """The chunks of ``text`` between its runs of marks (which are dropped)."""
    done = 0
    for m in _MARKS.finditer(text):
        yield text[done:m.start()], done, m.start()
        done = m.end()
    yield text[done:], done, len(text)


@register("normalizer", "Lowercase")
@dataclass(frozen=True)
class Lowercase(Normalizer):
    """Lowercase one character at a time, as Rust's ``char::to_lowercase`` (so Hugging Face) does.

    Subtle: Python's ``str.lower`` on a whole string turns a word-final 'Σ' into 'ς'; per
    character it is always 'σ', which is what Hugging Face produces.

    >>> n = Lowercase().normalize(NormalizedString("İΣ"))
    >>> n.text == "i\\u0307σ", n.alignment()
    (True, ([0, 0, 1], [1, 1, 2]))
    """

    def normalize(self, s: NormalizedString) -> NormalizedString:
        text = s.text
        # Whole-string lowering differs from per-character only at 'Σ'; if it also keeps the
        # length, every character maps one-to-one (always so for ASCII).
        if "Σ" not in text:
            lowered = text.lower()
            if len(lowered) == len(text):
                return NormalizedString(lowered, s.base, s.starts, s.ends)
        return s.transform((c.lower(), k, k + 1) for k, c in enumerate(text))


@register("normalizer", "Strip")
@dataclass(frozen=True)
class Strip(Normalizer):
    """Remove Unicode White_Space from the left and/or right end.

    >>> n = Strip(right=False).normalize(NormalizedString(" a "))
    >>> n.text, n.span(0, len(n))
    ('a ', (1, 3))
    """

    _: KW_ONLY
    left: bool = True
    right: bool = True

    def normalize(self, s: NormalizedString) -> NormalizedString:
        text = s.text
        i = len(text) - len(text.lstrip(WHITE_SPACE)) if self.left else 0
        j = len(text.rstrip(WHITE_SPACE)) if self.right else len(text)
        if i == 0 and j == len(text):
            return s
        return s.slice(i, max(i, j))

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "strip_left": self.left, "strip_right": self.right}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls(left=field(data, "strip_left", bool, where),
                   right=field(data, "strip_right", bool, where))


class ReplaceFields:
    """The file fields the Replace normalizer and decoder share: ``pattern`` (``{"String": ..}``
    or ``{"Regex": ..}``) and ``content``."""

    type_name: ClassVar[str]
    pattern: str
    content: str
    regex: bool

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "pattern": pattern_dict(self.pattern, self.regex),
                "content": self.content}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        pattern, is_regex = read_pattern(data, where)
        content = field(data, "content", str, where)
        try:
            return cls(pattern, content, regex=is_regex)  # type: ignore[call-arg]
        except InputError as error:
            raise FormatError(f"{where}.pattern.Regex: {error}") from None


@register("normalizer", "Replace")
@dataclass(frozen=True)
class Replace(ReplaceFields, Normalizer):
    """Replace each match of ``pattern`` (a literal string, or a regex if ``regex``) by ``content``.

    ``content`` is literal (no group references), as in Hugging Face. Text that did not match
    keeps its alignment; the replacement points at the span it replaced.

    >>> n = Replace("''", '"').normalize(NormalizedString("''hi''"))
    >>> n.text, n.alignment()
    ('"hi"', ([0, 2, 3, 4], [2, 3, 4, 6]))
    >>> Replace(r"\\s+", " ", regex=True).normalize_str("a \\t\\n b")
    'a b'
    """

    pattern: str
    content: str
    _: KW_ONLY
    regex: bool = False
    compiled: CompiledPattern = dataclass_field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", compile_pattern(self.pattern, self.regex))

    def normalize(self, s: NormalizedString) -> NormalizedString:
        if not self.regex and self.pattern and self.pattern not in s.text:
            return s
        return s.transform(self._chunks(s))

    def _chunks(self, s: NormalizedString) -> Iterator[tuple[str, int, int]]:
        text, done = s.text, 0
        for i, j in find_matches(self.compiled, text):
            yield text[done:i], done, i
            yield self.content, i, j
            done = j
        yield text[done:], done, len(text)



@register("normalizer", "Prepend")
@dataclass(frozen=True)
class Prepend(Normalizer):
    """Put ``prepend`` before any non-empty text (SentencePiece's dummy prefix, as a normalizer).

    Every added character points at the first character's span, as in Hugging Face: the
    prefix shows in offsets only when it becomes a token of its own. Empty text stays empty.

    >>> n = Prepend("▁").normalize(NormalizedString("hi", base=4))
    >>> n.text, n.alignment()
    ('▁hi', ([4, 4, 5], [5, 5, 6]))
    """

    prepend: str

    def normalize(self, s: NormalizedString) -> NormalizedString:
        return prefixed(s, self.prepend) if s.text else s

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "prepend": self.prepend}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls(field(data, "prepend", str, where))


def prefixed(s: NormalizedString, prefix: str) -> NormalizedString:
    """``prefix + s`` for a non-empty ``s``, the prefix aligned with the first character."""
    if not prefix:
        return s
    return s.transform([(prefix + s.text[0], 0, 1), (s.text[1:], 1, len(s))])


@register("normalizer", "Sequence")
@dataclass(frozen=True, init=False)
class Sequence(Normalizer):
    """Apply ``normalizers`` in order.

    >>> Sequence([NFKC(), Lowercase()]).normalize_str("ＡＢｃ")
    'abc'
    """

    normalizers: tuple[Normalizer, ...]

    def __init__(self, normalizers: list[Normalizer] | tuple[Normalizer, ...]) -> None:
        object.__setattr__(self, "normalizers", tuple(normalizers))

    def normalize(self, s: NormalizedString) -> NormalizedString:
        for normalizer in self.normalizers:
            s = normalizer.normalize(s)
        return s

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "normalizers": [n.to_dict() for n in self.normalizers]}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        items = field(data, "normalizers", list, where)
        return cls([build_item("normalizer", item, f"{where}.normalizers[{k}]")
                    for k, item in enumerate(items)])


def build_item(kind: str, data: Any, where: str) -> Any:
    """One member of a ``Sequence``: like ``build``, but null is not allowed there."""
    if data is None:
        raise FormatError(f"{where}: expected an object with a \"type\", got null")
    return build(kind, data, where)


# ---- Unicode normalization in independent segments ------------------------------------------

def _form_chunks(text: str, form: Form, compat: bool) -> Iterator[tuple[str, int, int]]:
    """``(normalized, i, j)`` chunks covering ``text``; their concatenation is the normal form."""
    for start, end in _blocks(text, compat):
        block = text[start:end]
        if unicodedata.is_normalized(form, block):
            yield block, start, end
            continue
        for i, j in _segments(text, start, end, compat):
            yield from _segment_chunks(text[i:j], i, j, form)


def _segment_chunks(segment: str, i: int, j: int, form: Form) -> Iterator[tuple[str, int, int]]:
    out = unicodedata.normalize(form, segment)
    if out == segment or j - i == 1:
        yield out, i, j
        return
    parts = [unicodedata.normalize(form, c) for c in segment]
    if "".join(parts) == out:
        # Nothing composed or reordered across characters: each keeps its own source.
        yield from ((part, i + k, i + k + 1) for k, part in enumerate(parts))
    else:
        # Composed or reordered: every output character came from the whole segment. One chunk
        # per character, because a same-length chunk would be aligned one-to-one (wrongly).
        yield from ((c, i, j) for c in out)


def _blocks(text: str, compat: bool) -> Iterator[tuple[int, int]]:
    """About ``_BLOCK``-long pieces of ``text``, each ending before a segment start."""
    start, n = 0, len(text)
    while start < n:
        end = min(start + _BLOCK, n)
        while end < n and not _starts_segment(text[end], compat):
            end += 1
        yield start, end
        start = end


def _segments(text: str, start: int, end: int, compat: bool) -> Iterator[tuple[int, int]]:
    """Pieces of ``text[start:end]`` that normalize independently of their neighbours."""
    i = start
    for k in range(start + 1, end):
        if _starts_segment(text[k], compat):
            yield i, k
            i = k
    if i < end:
        yield i, end


@functools.cache
def _starts_segment(char: str, compat: bool) -> bool:
    """Whether normalization never looks across a boundary just before ``char``.

    True when ``char`` decomposes to a starter (combining class 0) that no canonical composition
    takes as its second character; otherwise it may reorder or compose with what precedes it.
    """
    first = unicodedata.normalize("NFKD" if compat else "NFD", char)[0]
    return unicodedata.combining(first) == 0 and first not in _composition_seconds()


@functools.cache
def _composition_seconds() -> frozenset[str]:
    """Characters that can be the second of a canonical composition pair.

    Most are combining marks, but some are starters: Hangul vowel and trailing jamo (composed
    algorithmically, so absent from the decomposition table) and vowel signs such as U+09BE.
    """
    seconds = {chr(cp) for cp in range(0x1161, 0x1176)} | {chr(cp) for cp in range(0x11A8, 0x11C3)}
    for cp in range(sys.maxunicode + 1):
        decomposition = unicodedata.decomposition(chr(cp))
        if decomposition and not decomposition.startswith("<"):
            parts = decomposition.split()
            if len(parts) == 2:
                seconds.add(chr(int(parts[1], 16)))
    return frozenset(seconds)


# ---- patterns, shared with pre_tokenizers ---------------------------------------------------

def compile_pattern(pattern: str, is_regex: bool) -> CompiledPattern:
    """``pattern`` compiled with the ``regex`` module; a literal string is escaped first, and a
    regular expression has its ``\\w`` and ``\\W`` read as Oniguruma reads them."""
    try:
        return regex.compile(oniguruma_words(pattern) if is_regex else regex.escape(pattern))
    except regex.error as error:
        raise InputError(
            f"invalid regular expression {pattern!r}: {error}; "
            'to match it as a literal string, pass regex=False (in a file, {"String": ...})'
        ) from None


# Oniguruma's word characters, what Hugging Face's patterns mean by \w (read off tokenizers'
# Split over every code point: equal on every character Python's unicodedata assigns):
# Alphabetic, Mark, Decimal_Number and Connector_Punctuation, and outside brackets Latin-1's
# ² ³ ¹ ¼ ½ ¾ too. Python's `regex` takes the joiners ZWNJ and ZWJ as well, which Oniguruma
# does not, and never those six.
_WORD_CLASS = r"\p{Alphabetic}\p{M}\p{Nd}\p{Pc}"
_WORD_LATIN1 = r"\xb2\xb3\xb9\xbc-\xbe"


def oniguruma_words(pattern: str) -> str:
    """``pattern`` with ``\\w`` and ``\\W`` spelled as Oniguruma's classes, in and out of
    brackets (``\\W`` inside brackets, which a class of Python's cannot spell, is left as it
    is). Its other escapes mean the same in both (``\\s`` is White_Space in both, ``\\d``
    Decimal_Number)."""
    if "\\w" not in pattern and "\\W" not in pattern:
        return pattern
    out: list[str] = []
    depth = 0  # inside how many brackets
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e == "w":
                out.append(_WORD_CLASS if depth else f"[{_WORD_CLASS}{_WORD_LATIN1}]")
            elif e == "W" and not depth:
                out.append(f"[^{_WORD_CLASS}{_WORD_LATIN1}]")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[":
            depth += 1
            out.append(c)
            i += 1
            # ("[]..." and "[^]...": a first "]" is a literal)
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":
                out.append("\\]")
                i += 1
            continue
        if c == "]" and depth:
            depth -= 1
        out.append(c)
        i += 1
    return "".join(out)


@functools.cache
def _newer_unicode() -> CompiledPattern | None:
    """The code points the core's tables leave without a class, assigned after Unicode 16.0
    (the Unicode of tiktoken's and tokenizers' engines), that the pinned ``regex`` classes."""
    ranges = _core.UNICODE_NEWER_RANGES
    if not ranges:
        return None
    return regex.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]")


def as_references_see(pattern: CompiledPattern, text: str) -> str:
    """``text`` with each code point newer than Unicode 16.0 that ``regex`` gives a class
    replaced by U+0378 (which no Unicode assigns), so that ``pattern`` classes it as the
    references and the core's scanners do; the same length, so spans carry over. Text the
    pattern names such a code point in is left as it is.

    >>> as_references_see(regex.compile(r"\\w+"), "a\u0558b") == "a\u0378b"
    True
    """
    if text.isascii():
        return text
    newer = _newer_unicode()
    if newer is None or newer.search(text) is None or newer.search(pattern.pattern):
        return text
    return newer.sub("\u0378", text)


def find_matches(pattern: CompiledPattern, text: str) -> Iterator[tuple[int, int]]:
    """Spans of the successive matches of ``pattern``, as Hugging Face's Oniguruma finds them.

    Subtle: Python (since 3.7) also reports an empty match right where the previous match ended
    ("x*" on "xxa": (0, 2), (2, 2), ...). Oniguruma skips it and resumes one character later,
    which changes how delimiters merge in ``Split``; we do the same. Code points assigned after
    Unicode 16.0 are of no class, as to Oniguruma (``as_references_see``).
    """
    text = as_references_see(pattern, text)
    pos, last_end, n = 0, -1, len(text)
    while pos <= n:
        match = pattern.search(text, pos)
        if match is None:
            return
        i, j = match.span()
        if i == j == last_end:
            pos = j + 1
            continue
        yield i, j
        pos = last_end = j


def pattern_dict(pattern: str, is_regex: bool) -> dict[str, str]:
    """The Hugging Face form of a pattern: ``{"Regex": ...}`` or ``{"String": ...}``."""
    return {"Regex" if is_regex else "String": pattern}


def read_pattern(data: dict[str, Any], where: str) -> tuple[str, bool]:
    """``(pattern, is_regex)`` from a ``"pattern"`` field in Hugging Face form."""
    value = field(data, "pattern", dict, where)
    if len(value) != 1 or not ({"String", "Regex"} & value.keys()):
        raise FormatError(
            f'{where}.pattern: expected {{"String": ...}} or {{"Regex": ...}}, '
            f"got keys {sorted(value)}"
        )
    key = "Regex" if "Regex" in value else "String"
    return field(value, key, str, f"{where}.pattern"), key == "Regex"
