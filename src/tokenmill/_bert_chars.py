"""The character classes of BERT's normalizer and pre-tokenizer, as Hugging Face draws them.

Hugging Face classifies punctuation, non-spacing marks and format characters with the Unicode
8.0 tables of the crate it uses, while Python's ``unicodedata`` is newer (14.0 on Python 3.11).
The classes are therefore Python's, corrected by the lists below: characters whose category
changed since 8.0 or that were assigned later (they count as unassigned there, which the BERT
rules leave alone). The later additions up to Unicode 17 are listed too, so that a newer Python
gives the same classes. tests/compat/test_bert_files.py checks every code point against
``tokenizers``.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable
from itertools import chain
from typing import TypeVar

import regex

from tokenmill import _core

T = TypeVar("T")

# Punctuation in Unicode 8.0 that is not any more (U+166D became a symbol, U+111C9 a mark).
_PUNCTUATION_BEFORE = "166D 111C9"
# Punctuation assigned (or recategorized as such) after Unicode 8.0.
_PUNCTUATION_AFTER = (
    "61D 9FD A76 C77 C84 1B4E-1B4F 1B7D-1B7F 2E43-2E4F 2E52-2E5D 2E60-2E63 10D6E 10EAD 10ED0 "
    "10F55-10F59 10F86-10F89 113D4-113D5 113D7-113D8 1144B-1144F 1145A-1145B 1145D 11660-1166C "
    "116B9 1183B 11944-11946 119E2 11A3F-11A46 11A9A-11A9C 11A9E-11AA2 11B00-11B09 11BE1 "
    "11C41-11C45 11C70-11C71 11EF7-11EF8 11F43-11F4F 11FFF 12FF1-12FF2 16D6D-16D6F 16E97-16E9A "
    "16FE2 1E5FF 1E95E-1E95F")
# A non-spacing mark in Unicode 8.0 that is a spacing one now.
_MARKS_BEFORE = "1734"
# Non-spacing marks assigned (or recategorized as such) after Unicode 8.0.
_MARKS_AFTER = (
    "5C8-5C9 7FD 897-89F 8CA-8E1 9FE AFA-AFF B53-B55 C04 C3C D00 D3B-D3C D81 EBA ECE 180F "
    "1885-1886 1ABF-1AF0 1DF6-1DFB A82C A8C5 A8FF A9BD 10D24-10D27 10D69-10D6D 10EAB-10EAC "
    "10ECB-10ECF 10EF0-10EFF 10F46-10F50 10F82-10F85 11070 11073-11074 110C2 111C9 111CF 1123E "
    "11241 1133B 113BB-113C0 113CE 113D0 113D2 113E1-113E2 11438-1143F 11442-11444 11446 1145E "
    "1182F-11837 11839-1183A 1193B-1193C 1193E 11943 119D4-119D7 119DA-119DB 119E0 11A01-11A0A "
    "11A33-11A38 11A3B-11A3E 11A47 11A51-11A56 11A59-11A5B 11A8A-11A96 11A98-11A99 11B60 "
    "11B62-11B64 11B66 11C30-11C36 11C38-11C3D 11C3F 11C92-11CA7 11CAA-11CB0 11CB2-11CB3 "
    "11CB5-11CB6 11D31-11D36 11D3A 11D3C-11D3D 11D3F-11D45 11D47 11D90-11D91 11D95 11D97 11DF0 "
    "11EF3-11EF4 11F00-11F01 11F36-11F3A 11F40 11F42 11F5A 13440 13447-13455 1611E-16129 "
    "1612D-1612F 16F4F 16FE4 1CF00-1CF2D 1CF30-1CF46 1D127-1D128 1D25B-1D25C 1E000-1E006 "
    "1E008-1E018 1E01B-1E021 1E023-1E024 1E026-1E02A 1E08F 1E130-1E136 1E2AE 1E2EC-1E2EF "
    "1E4EC-1E4EF 1E5EE-1E5EF 1E6E3 1E6E6 1E6EE-1E6EF 1E6F5 1E944-1E94A")
# Format characters assigned after Unicode 8.0 (clean_text keeps them).
_FORMAT_AFTER = "890-891 8E2 110CD 13430-1343F"

# CJK ideographs, the blocks Google's BERT puts spaces around (not Hangul, kana or CJK
# punctuation: those are other scripts' letters or already punctuation).
CJK_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF),
              (0x2A700, 0x2B81F), (0x2B920, 0x2CEAF), (0x2F800, 0x2FA1F))


# Where Unicode assigns anything but private use: planes 0-3 and 14. Planes 4-13 are unassigned
# and planes 15-16 are private use (Co) save their last two noncharacters, by Unicode's
# stability policy; walking only these ranges makes building the classes 3x faster.
_ASSIGNED = (range(0x40000), range(0xE0000, 0xF0000))
_PRIVATE_PLANES = (range(0xF0000, 0xFFFFE), range(0x100000, 0x10FFFE))


def _code_points(spec: str) -> set[int]:
    out: set[int] = set()
    for item in spec.split():
        first, _, last = item.partition("-")
        out.update(range(int(first, 16), int(last or first, 16) + 1))
    return out


def _with_category(*prefixes: str) -> set[int]:
    return {cp for category in _by_category() if category.startswith(prefixes)
            for cp in _by_category()[category]}


def _kept(make: Callable[[], T]) -> Callable[[], T]:
    """functools.cache for the classes, each taken out of the cyclic collector's sight (sets
    and lists of ints, which cannot form cycles): kept for the process once a BERT file is
    loaded, their 290,000 ints were walked one by one at every full run of the collector,
    17 of its 23 ms."""
    @functools.cache
    @functools.wraps(make)
    def kept() -> T:
        out = make()
        _core.untrack_parts(out)
        return out
    return kept


@_kept
def _by_category() -> dict[str, list[int]]:
    """The code points of the categories the classes start from, in one pass over Unicode."""
    out: dict[str, list[int]] = {name: [] for name in ("Cc", "Cf", "Co", "Mn")}
    for cp in chain(*_ASSIGNED):
        category = unicodedata.category(chr(cp))
        if category in out:
            out[category].append(cp)
        elif category[0] == "P":
            out.setdefault(category, []).append(cp)
    out["Co"] += chain(*_PRIVATE_PLANES)
    return out


@_kept
def punctuation() -> frozenset[int]:
    """What BERT isolates: ASCII punctuation and symbols, and Unicode 8.0's P* characters."""
    ascii_punctuation = {ord(c) for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"}
    return frozenset((_with_category("P") - _code_points(_PUNCTUATION_AFTER))
                     | _code_points(_PUNCTUATION_BEFORE) | ascii_punctuation)


@_kept
def nonspacing_marks() -> frozenset[int]:
    """What strip_accents removes after NFD: Unicode 8.0's Mn characters."""
    return frozenset((_with_category("Mn") - _code_points(_MARKS_AFTER))
                     | _code_points(_MARKS_BEFORE))


@_kept
def cleaned() -> frozenset[int]:
    """What clean_text removes: NUL, U+FFFD and the control, format (Unicode 8.0) and
    private-use characters, except tab, newline and carriage return (those become spaces)."""
    others = _with_category("Cc", "Co") | (_with_category("Cf") - _code_points(_FORMAT_AFTER))
    return frozenset((others | {0, 0xFFFD}) - {ord("\t"), ord("\n"), ord("\r")})


@_kept
def decomposed() -> frozenset[int]:
    """The characters NFD changes."""
    return frozenset(cp for cp in chain(*_ASSIGNED)
                     if not unicodedata.is_normalized("NFD", chr(cp)))


@_kept
def lowercased() -> frozenset[int]:
    """The characters lowercasing changes."""
    return frozenset(cp for cp in chain(*_ASSIGNED) if chr(cp).lower() != chr(cp))


def character_class(code_points: frozenset[int] | set[int]) -> str:
    """A regex character class (``[...]``) matching exactly ``code_points``."""
    parts = []
    run: list[int] = []
    for cp in sorted(code_points):
        if run and cp == run[-1] + 1:
            run.append(cp)
            continue
        if run:
            parts.append(_range(run[0], run[-1]))
        run = [cp]
    if run:
        parts.append(_range(run[0], run[-1]))
    return "[" + "".join(parts) + "]"


def _range(first: int, last: int) -> str:
    return regex.escape(chr(first)) if first == last else \
        f"{regex.escape(chr(first))}-{regex.escape(chr(last))}"
