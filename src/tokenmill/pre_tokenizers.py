"""Pre-tokenizers: cut normalized text into pieces, each keeping its alignment to the original.

Each pre-tokenizer is a small frozen class with one method, ``split``; ``Sequence`` applies
each to every piece of the previous. Pieces are never empty. ``to_dict``/``from_fields`` follow
the ``"pre_tokenizer"`` entries of Hugging Face's ``tokenizer.json``.

Character classes (letters, numbers, punctuation, whitespace) come from the ``regex`` module's
Unicode tables, the same for every pre-tokenizer.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from array import array
from dataclasses import KW_ONLY, dataclass
from dataclasses import field as dataclass_field
from typing import Any, ClassVar, Self

import regex

from tokenmill import _core
from tokenmill._registry import field, register
from tokenmill.errors import FormatError, InputError
from tokenmill.normalized import NormalizedString
from tokenmill.normalizers import (
    CompiledPattern,
    as_references_see,
    build_item,
    compile_pattern,
    find_matches,
    pattern_dict,
    prefixed,
    read_pattern,
)

# Hugging Face's SplitDelimiterBehavior: our option name -> its name in tokenizer.json.
BEHAVIORS = {
    "isolated": "Isolated",
    "removed": "Removed",
    "merged_with_previous": "MergedWithPrevious",
    "merged_with_next": "MergedWithNext",
    "contiguous": "Contiguous",
}
_BEHAVIOR_OF_NAME = {name: behavior for behavior, name in BEHAVIORS.items()}

_WORDS = regex.compile(r"\w+|[^\w\s]+")
_NON_SPACE = regex.compile(r"\S+")
# Hugging Face counts ASCII symbols such as $ + < = > ^ ` | ~ (category S*) as punctuation too.
_PUNCTUATION = regex.compile(r"[\p{P}!-/:-@\[-`{-~]")
# Any Unicode number (Nd, Nl, No), as Rust's char::is_numeric: '½' and 'Ⅻ' count as digits.
_DIGIT = regex.compile(r"\p{N}")
_GPT2 = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)

# Patterns the C++ core scans by hand (exactly as `regex` splits them; tests hold them equal),
# mapped to the core's scanner id. Their matches cover any text, so an "isolated" split is just
# the list of matches.
WORDS_SCANNER = 3  # the core's scanner of Whitespace's \w+|[^\w\s]+ (whitespace dropped)
NATIVE_PATTERNS: dict[str, int] = {
    _GPT2.pattern: 0,
    # tiktoken's r50k/p50k spelling of GPT-2's pattern splits identically
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""": 0,
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s""": 1,
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"""
    r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""": 2,
}


def native_ends(pattern: CompiledPattern, text: str) -> array[int] | None:
    """Where each piece of ``text`` ends (character offsets, an ``array('I')``), if the core
    scans ``pattern``."""
    scanner = NATIVE_PATTERNS.get(pattern.pattern)
    if scanner is None:
        return None
    return _core.pretokenize(scanner, text)


class PreTokenizer(ABC):
    """Base of the pre-tokenizers: subclasses implement ``split``."""

    type_name: ClassVar[str]

    @abstractmethod
    def split(self, s: NormalizedString) -> list[NormalizedString]:
        """``s`` cut into pieces (empty ones dropped), each aligned to the original input."""

    def split_text(self, text: str) -> list[str]:
        """The pieces' text alone (what training counts); subclasses make it fast."""
        return [p.text for p in self.split(NormalizedString(text))]

    def pre_tokenize_str(self, text: str) -> list[tuple[str, tuple[int, int]]]:
        """Pieces of ``text`` with their character offsets in it, like Hugging Face's."""
        return [(p.text, p.span(0, len(p))) for p in self.split(NormalizedString(text))]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls()


def native_counting(pre_tokenizer: Any) -> tuple[int, bool] | None:
    """``(scanner, byte_level)`` if the core can count this pre-tokenizer's pieces by itself:
    a GPT-family split, optionally spelled byte by byte afterwards (the spelling then applies
    to each distinct piece once, not to every occurrence)."""
    steps = list(pre_tokenizer.pre_tokenizers) if isinstance(pre_tokenizer, Sequence) \
        else [pre_tokenizer]
    byte_level = False
    if steps and isinstance(steps[-1], ByteLevel) and not steps[-1].add_prefix_space:
        if steps[-1].use_regex:
            return (NATIVE_PATTERNS[_GPT2.pattern], True) if len(steps) == 1 else None
        byte_level = True
        steps = steps[:-1]
    if len(steps) == 1 and isinstance(steps[0], Whitespace):
        return WORDS_SCANNER, byte_level
    if len(steps) == 1 and isinstance(steps[0], Split) and steps[0].behavior == "isolated" \
            and not steps[0].invert and steps[0].regex:
        scanner = NATIVE_PATTERNS.get(steps[0].pattern)
        if scanner is not None:
            return scanner, byte_level
    return None


def spell_bytes(piece: bytes) -> str:
    """A piece's bytes in the byte-level alphabet (one printable character per byte)."""
    return piece.decode("latin-1").translate(bytes_to_unicode())


def split_on(s: NormalizedString, pattern: CompiledPattern, behavior: str,
             invert: bool = False) -> list[NormalizedString]:
    """Cut ``s`` at the matches of ``pattern`` (at what lies between them if ``invert``).

    The text becomes a run of delimiters (matches) and gaps; ``behavior`` says what happens to
    each delimiter: ``isolated`` keeps it as its own piece, ``removed`` drops it,
    ``merged_with_previous``/``merged_with_next`` glue it to the gap before/after it, and
    ``contiguous`` keeps it but joins it with the delimiters right next to it.

    >>> [p.text for p in split_on(NormalizedString("a!!b"), _PUNCTUATION, "merged_with_previous")]
    ['a!', '!', 'b']
    """
    if behavior == "isolated" and not invert:
        ends = native_ends(pattern, s.text)
        if ends is not None:
            return [s.slice(i, j) for i, j in zip([0, *ends], ends)]
    events = _events(s.text, pattern, invert)
    return [s.slice(i, j) for i, j in _glue(events, behavior) if j > i]


def split_text(text: str, pattern: CompiledPattern, behavior: str,
               invert: bool = False) -> list[str]:
    """The pieces' text alone, as :func:`split_on` cuts them (no alignment: for counting)."""
    if behavior == "isolated" and not invert:
        ends = native_ends(pattern, text)
        if ends is not None:
            return [text[i:j] for i, j in zip([0, *ends], ends)]
    return [p.text for p in split_on(NormalizedString(text), pattern, behavior, invert)]


def _events(text: str, pattern: CompiledPattern, invert: bool) -> list[tuple[int, int, bool]]:
    """``(i, j, is_delimiter)`` covering ``text``: each match, and each non-empty gap."""
    events: list[tuple[int, int, bool]] = []
    done = 0
    for i, j in find_matches(pattern, text):
        if i > done:
            events.append((done, i, invert))
        events.append((i, j, not invert))
        done = j
    if done < len(text):
        events.append((done, len(text), invert))
    return events


def _glue(events: list[tuple[int, int, bool]], behavior: str) -> list[tuple[int, int]]:
    """The spans of the pieces ``behavior`` makes from ``events``.

    Subtle, as in Hugging Face: ``merged_with_previous``/``next`` glue a delimiter only to a
    gap, never to another delimiter, so "a!!" gives "a!" and "!"; and ``contiguous`` joins
    adjacent gaps too, which exist only with ``invert`` (adjacent matches).
    """
    pieces: list[tuple[int, int]] = []
    carry: int | None = None  # start of a delimiter waiting to join the next gap
    for k, (i, j, is_delimiter) in enumerate(events):
        before = events[k - 1][2] if k > 0 else None  # None: nothing before this event
        after = events[k + 1][2] if k + 1 < len(events) else None
        if behavior == "contiguous" and before == is_delimiter:
            pieces[-1] = (pieces[-1][0], j)
        elif not is_delimiter:
            pieces.append((i if carry is None else carry, j))
            carry = None
        elif behavior == "removed":
            continue
        elif behavior == "merged_with_previous" and before is False:
            pieces[-1] = (pieces[-1][0], j)
        elif behavior == "merged_with_next" and after is False:
            carry = i
        else:
            pieces.append((i, j))
    return pieces


def _check_behavior(behavior: str) -> None:
    if behavior not in BEHAVIORS:
        raise InputError(f"unknown behavior {behavior!r}; use one of {', '.join(BEHAVIORS)}")


def _read_behavior(data: dict[str, Any], where: str, default: str | None = None) -> str:
    """Our name of the ``"behavior"`` field, which is in Hugging Face's CamelCase."""
    if default is None:
        name = field(data, "behavior", str, where)
    else:
        name = field(data, "behavior", str, where, default=default)
    if name not in _BEHAVIOR_OF_NAME:
        raise FormatError(f"{where}.behavior: expected one of {', '.join(_BEHAVIOR_OF_NAME)}, "
                          f"got {name!r}")
    return _BEHAVIOR_OF_NAME[name]


@register("pre_tokenizer", "Whitespace")
@dataclass(frozen=True)
class Whitespace(PreTokenizer):
    """Runs of word characters, and runs of other non-space characters (``\\w+|[^\\w\\s]+``).

    >>> Whitespace().pre_tokenize_str("Hi, you!")
    [('Hi', (0, 2)), (',', (2, 3)), ('you', (4, 7)), ('!', (7, 8))]
    """

    def split(self, s: NormalizedString) -> list[NormalizedString]:
        return split_on(s, _WORDS, "removed", invert=True)

    def split_text(self, text: str) -> list[str]:
        seen = as_references_see(_WORDS, text)
        if seen is text:
            return _WORDS.findall(text)
        return [text[m.start():m.end()] for m in _WORDS.finditer(seen)]


@register("pre_tokenizer", "WhitespaceSplit")
@dataclass(frozen=True)
class WhitespaceSplit(PreTokenizer):
    """Runs of non-whitespace characters; whitespace is dropped.

    >>> WhitespaceSplit().pre_tokenize_str("Hi, you!")
    [('Hi,', (0, 3)), ('you!', (4, 8))]
    """

    def split(self, s: NormalizedString) -> list[NormalizedString]:
        return split_on(s, _NON_SPACE, "removed", invert=True)


@register("pre_tokenizer", "Punctuation")
@dataclass(frozen=True)
class Punctuation(PreTokenizer):
    """Cut at each punctuation character (Unicode P* or ASCII punctuation), per ``behavior``.

    >>> Punctuation().pre_tokenize_str("a+b")
    [('a', (0, 1)), ('+', (1, 2)), ('b', (2, 3))]
    >>> Punctuation(behavior="contiguous").pre_tokenize_str("ok?!")
    [('ok', (0, 2)), ('?!', (2, 4))]
    """

    _: KW_ONLY
    behavior: str = "isolated"

    def __post_init__(self) -> None:
        _check_behavior(self.behavior)

    def split(self, s: NormalizedString) -> list[NormalizedString]:
        return split_on(s, _PUNCTUATION, self.behavior)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "behavior": BEHAVIORS[self.behavior]}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls(behavior=_read_behavior(data, where, default="Isolated"))


@register("pre_tokenizer", "Digits")
@dataclass(frozen=True)
class Digits(PreTokenizer):
    """Separate numbers from the rest: runs of them, or each one alone if ``individual_digits``.

    >>> Digits().pre_tokenize_str("in 2024")
    [('in ', (0, 3)), ('2024', (3, 7))]
    >>> [p for p, _ in Digits(individual_digits=True).pre_tokenize_str("v12")]
    ['v', '1', '2']
    """

    _: KW_ONLY
    individual_digits: bool = False

    def split(self, s: NormalizedString) -> list[NormalizedString]:
        return split_on(s, _DIGIT, "isolated" if self.individual_digits else "contiguous")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "individual_digits": self.individual_digits}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls(individual_digits=field(data, "individual_digits", bool, where))


@register("pre_tokenizer", "Split")
@dataclass(frozen=True)
class Split(PreTokenizer):
    """Cut at the matches of ``pattern`` (a regex, or a literal string if not ``regex``).

    With ``invert``, the matches are the pieces and what lies between them is the delimiter.

    >>> Split(r"\\d+", "merged_with_next").pre_tokenize_str("a1b22c")
    [('a', (0, 1)), ('1b', (1, 3)), ('22c', (3, 6))]
    >>> [p for p, _ in Split("--", "removed", regex=False).pre_tokenize_str("a--b")]
    ['a', 'b']
    """

    pattern: str
    behavior: str
    _: KW_ONLY
    invert: bool = False
    regex: bool = True
    compiled: CompiledPattern = dataclass_field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_behavior(self.behavior)
        object.__setattr__(self, "compiled", compile_pattern(self.pattern, self.regex))

    def split(self, s: NormalizedString) -> list[NormalizedString]:
        return split_on(s, self.compiled, self.behavior, self.invert)

    def split_text(self, text: str) -> list[str]:
        return split_text(text, self.compiled, self.behavior, self.invert)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "pattern": pattern_dict(self.pattern, self.regex),
                "behavior": BEHAVIORS[self.behavior], "invert": self.invert}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        pattern, is_regex = read_pattern(data, where)
        behavior = _read_behavior(data, where)
        invert = field(data, "invert", bool, where)
        try:
            return cls(pattern, behavior, invert=invert, regex=is_regex)
        except InputError as error:
            raise FormatError(f"{where}.pattern.Regex: {error}") from None


class ByteLevelFields:
    """The file fields the ByteLevel pre-tokenizer and decoder share (and Hugging Face writes
    for both): ``add_prefix_space``, ``trim_offsets``, ``use_regex``."""

    type_name: str
    add_prefix_space: bool
    trim_offsets: bool
    use_regex: bool

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "add_prefix_space": self.add_prefix_space,
                "trim_offsets": self.trim_offsets, "use_regex": self.use_regex}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        # Files written before use_regex existed lack it; Hugging Face then takes true.
        return cls(add_prefix_space=field(data, "add_prefix_space", bool, where),  # type: ignore
                   trim_offsets=field(data, "trim_offsets", bool, where),
                   use_regex=field(data, "use_regex", bool, where, default=True))


@register("pre_tokenizer", "ByteLevel")
@dataclass(frozen=True)
class ByteLevel(ByteLevelFields, PreTokenizer):
    """GPT-2's pre-tokenizer: split with its regex, then spell each piece's UTF-8 bytes with
    one printable character per byte (``ByteLevel.alphabet()``).

    ``add_prefix_space`` puts a space before a piece that does not start with one. As in
    Hugging Face, the space gets the span of the piece's first character, not an empty span:
    it shows when the space becomes a piece of its own ("\\t0" gives "Ġ" at (0, 1)).
    ``trim_offsets`` is kept for the file format only: it matters to post-processing.

    >>> ByteLevel(add_prefix_space=True).pre_tokenize_str("Hi é")
    [('ĠHi', (0, 2)), ('ĠÃ©', (2, 4))]
    >>> ByteLevel(add_prefix_space=True).pre_tokenize_str("\\t0")
    [('Ġ', (0, 1)), ('ĉ', (0, 1)), ('0', (1, 2))]
    """

    _: KW_ONLY
    add_prefix_space: bool = False
    use_regex: bool = True
    trim_offsets: bool = True

    @staticmethod
    def alphabet() -> list[str]:
        """The 256 characters bytes are spelled with, sorted."""
        return sorted(bytes_to_unicode().values())

    def split(self, s: NormalizedString) -> list[NormalizedString]:
        if self.add_prefix_space and s.text and not s.text.startswith(" "):
            s = s.transform([(" " + s.text[0], 0, 1), (s.text[1:], 1, len(s))])
        pieces = split_on(s, _GPT2, "isolated") if self.use_regex else [s] if s.text else []
        return [_spell_bytes(p) for p in pieces]

    def split_text(self, text: str) -> list[str]:
        if self.add_prefix_space and text and not text.startswith(" "):
            text = " " + text
        pieces = split_text(text, _GPT2, "isolated") if self.use_regex else [text] if text else []
        table = bytes_to_unicode()
        return [p.translate(table) if p.isascii() else
                p.encode("utf-8").decode("latin-1").translate(table) for p in pieces]



PREPEND_SCHEMES = ("always", "first", "never")


class MetaspaceFields:
    """What the Metaspace pre-tokenizer and decoder share: their options and file fields.

    ``split`` is stored as ``splits`` (``split`` is the pre-tokenizers' method).
    """

    type_name: str
    replacement: str
    prepend_scheme: str
    splits: bool

    def __init__(self, replacement: str = "▁", *, prepend_scheme: str = "always",
                 split: bool = True) -> None:
        if len(replacement) != 1:
            raise InputError(f"replacement must be one character, got {replacement!r}")
        if prepend_scheme not in PREPEND_SCHEMES:
            raise InputError(f"unknown prepend_scheme {prepend_scheme!r}; use one of "
                             f"{', '.join(PREPEND_SCHEMES)}")
        object.__setattr__(self, "replacement", replacement)
        object.__setattr__(self, "prepend_scheme", prepend_scheme)
        object.__setattr__(self, "splits", split)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "replacement": self.replacement,
                "prepend_scheme": self.prepend_scheme, "split": self.splits}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        replacement = field(data, "replacement", str, where)
        if len(replacement) != 1:
            raise FormatError(f"{where}.replacement: expected one character, got "
                              f"{replacement!r}")
        # Files from before prepend_scheme existed say add_prefix_space instead.
        prefix = field(data, "add_prefix_space", bool, where, None)
        scheme = field(data, "prepend_scheme", str, where,
                       "always" if prefix in (None, True) else "never")
        if scheme not in PREPEND_SCHEMES:
            raise FormatError(f"{where}.prepend_scheme: expected one of "
                              f"{', '.join(PREPEND_SCHEMES)}, got {scheme!r}")
        if prefix is False and scheme != "never":
            raise FormatError(f"{where}.add_prefix_space: false contradicts prepend_scheme "
                              f"{scheme!r} (drop add_prefix_space, or use \"never\")")
        return cls(replacement, prepend_scheme=scheme,
                   split=field(data, "split", bool, where, True))


@register("pre_tokenizer", "Metaspace")
@dataclass(frozen=True, init=False)
class Metaspace(MetaspaceFields, PreTokenizer):
    """SentencePiece's spaces: each " " becomes ``replacement`` ("▁"), which starts the words.

    ``prepend_scheme`` puts a ``replacement`` before text that does not start with one:
    ``"always"``, ``"first"`` (only text that starts the original input, so not the text after
    an added token) or ``"never"``. The prefix gets the first character's span, as in Hugging
    Face. With ``split``, the text is cut before each ``replacement``.

    >>> Metaspace().pre_tokenize_str("Hey  you")
    [('▁Hey', (0, 3)), ('▁', (3, 4)), ('▁you', (4, 8))]
    >>> Metaspace(prepend_scheme="first", split=False).split(NormalizedString("a b", base=5))
    [NormalizedString('a▁b', span=(5, 8))]
    """

    replacement: str
    prepend_scheme: str
    splits: bool

    def split(self, s: NormalizedString) -> list[NormalizedString]:
        mark = self.replacement
        if " " in s.text:  # one character for one: the alignment is unchanged
            s = NormalizedString(s.text.replace(" ", mark), s.base, s.starts, s.ends)
        if s.text and not s.text.startswith(mark) and (
                self.prepend_scheme == "always" or
                self.prepend_scheme == "first" and s.span(0, 1)[0] == 0):
            s = prefixed(s, mark)
        if not self.splits:
            return [s] if s.text else []
        return split_on(s, _literal(mark), "merged_with_next")


@functools.cache
def _literal(text: str) -> CompiledPattern:
    return compile_pattern(text, False)


@register("pre_tokenizer", "Sequence")
@dataclass(frozen=True, init=False)
class Sequence(PreTokenizer):
    """Apply each pre-tokenizer to every piece of the previous one.

    >>> Sequence([WhitespaceSplit(), Digits()]).pre_tokenize_str("ab12 c")
    [('ab', (0, 2)), ('12', (2, 4)), ('c', (5, 6))]
    """

    pre_tokenizers: tuple[PreTokenizer, ...]

    def __init__(self, pre_tokenizers: list[PreTokenizer] | tuple[PreTokenizer, ...]) -> None:
        object.__setattr__(self, "pre_tokenizers", tuple(pre_tokenizers))

    def split(self, s: NormalizedString) -> list[NormalizedString]:
        pieces = [s] if s.text else []
        for pre_tokenizer in self.pre_tokenizers:
            pieces = [q for p in pieces for q in pre_tokenizer.split(p)]
        return pieces

    def split_text(self, text: str) -> list[str]:
        pieces = [text] if text else []
        for pre_tokenizer in self.pre_tokenizers:
            pieces = [q for p in pieces for q in pre_tokenizer.split_text(p)]
        return pieces

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name,
                "pretokenizers": [p.to_dict() for p in self.pre_tokenizers]}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        items = field(data, "pretokenizers", list, where)
        return cls([build_item("pre_tokenizer", item, f"{where}.pretokenizers[{k}]")
                    for k, item in enumerate(items)])


# ---- the byte-level alphabet ----------------------------------------------------------------

@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's spelling of bytes: printable Latin-1 bytes stand for themselves; the rest (controls,
    space, DEL, NBSP, soft hyphen) take U+0100, U+0101, ... in byte order, so 32 -> 'Ġ'.

    >>> bytes_to_unicode()[32], bytes_to_unicode()[ord("a")]
    ('Ġ', 'a')
    """
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = [b for b in range(256) if b not in printable]
    spelling = {b: chr(b) for b in printable}
    spelling.update({b: chr(256 + k) for k, b in enumerate(others)})
    return dict(sorted(spelling.items()))


@functools.cache
def unicode_to_bytes() -> dict[str, int]:
    """The inverse of :func:`bytes_to_unicode`."""
    return {char: b for b, char in bytes_to_unicode().items()}


def _spell_bytes(p: NormalizedString) -> NormalizedString:
    """``p`` spelled byte by byte; each byte's character keeps its source character's span."""
    # bytes_to_unicode() is keyed by byte value, which str.translate reads as a code point: the
    # bytes of a character decoded as Latin-1 are spelled at C speed, and ASCII text is already
    # its own Latin-1 decoding.
    table = bytes_to_unicode()
    if p.text.isascii():
        return NormalizedString(p.text.translate(table), p.base, p.starts, p.ends)
    return p.transform(
        (c.encode("utf-8").decode("latin-1").translate(table), k, k + 1)
        for k, c in enumerate(p.text)
    )
