"""Normalizers: known answers by hand, the same text as `tokenizers`, and the file schema."""

from __future__ import annotations

import doctest
import json
import unicodedata
from collections.abc import Callable
from typing import Any

import pytest
import tokenizers
from tokenizers import normalizers as hf

from tokenmill import _registry, normalizers
from tokenmill.errors import FormatError, InputError
from tokenmill.normalized import NormalizedString
from tokenmill.normalizers import (
    NFC,
    NFD,
    NFKC,
    NFKD,
    Lowercase,
    Replace,
    Sequence,
    Strip,
)

SAMPLES = [
    "",
    " ",
    "Hello, world!",
    "héllo wörld",
    "e\u0301cole, cafe\u0301, nai\u0308ve",
    "a\u0301\u0323 o\u031b\u0323 \u0958",
    "日本語のテキスト、中文，标点。",
    "emoji 👍🏽 and 👨\u200d👩\u200d👧 family 🇫🇷",
    "tabs\tand\nnewlines\r\n\v\f",
    "  leading and trailing \u3000",
    "numbers 12 345.67 ½ Ⅻ ² ٣",
    "punct: (a) [b] {c} \"q\" 'x' — … ¿¡ «»",
    "Hangul 한국어 and jamo \u1112\u1161\u11ab \u1100\u1161",
    "ﬁ ﬂ ㎏ Ａｂｃ ｶﾞ ㈱ ⑴",
    "İstanbul ΣΑΣ ΟΔΟΣ ß ǅ",
    "Bengali \u09c7\u09be Kannada \u0cbf\u0cd5",
    "x\u00a0y\u2003z\u202fw\x1c",
    "Ω Å K ﬀ \u212b",
    "don't I'll we've",
    "$100 + 5% = <x> ^ ` | ~",
]

UNICODE_FORMS = [(NFC, hf.NFC), (NFD, hf.NFD), (NFKC, hf.NFKC), (NFKD, hf.NFKD)]


def aligned(n: NormalizedString) -> list[tuple[int, int]]:
    starts, ends = n.alignment()
    return list(zip(starts, ends, strict=True))


def run(normalizer: normalizers.Normalizer, text: str) -> NormalizedString:
    return normalizer.normalize(NormalizedString(text))


# ---- known answers ---------------------------------------------------------------------------

def test_nfkc_ligature_points_both_letters_at_it() -> None:
    n = run(NFKC(), "ﬁ")
    assert n.text == "fi"
    assert aligned(n) == [(0, 1), (0, 1)]


def test_nfc_composition_points_at_both_sources() -> None:
    n = run(NFC(), "xe\u0301y")
    assert n.text == "x\u00e9y"
    assert aligned(n) == [(0, 1), (1, 3), (3, 4)]


def test_nfd_decomposition_points_every_part_at_the_source() -> None:
    n = run(NFD(), "\u00e9!")
    assert n.text == "e\u0301!"
    assert aligned(n) == [(0, 1), (0, 1), (1, 2)]


def test_reordered_marks_point_at_the_whole_cluster() -> None:
    # NFD puts dot below (class 220) before acute (class 230): a reordering, not a 1:1 map.
    n = run(NFD(), "a\u0301\u0323b")
    assert n.text == "a\u0323\u0301b"
    assert aligned(n) == [(0, 3), (0, 3), (0, 3), (3, 4)]


def test_separable_segment_keeps_per_character_alignment() -> None:
    # "é" + acute decompose each on their own (no reordering): no need to blur them together.
    n = run(NFD(), "\u00e9\u0301")
    assert n.text == "e\u0301\u0301"
    assert aligned(n) == [(0, 1), (0, 1), (1, 2)]
    n = run(NFKD(), "ﬁ²")
    assert n.text == "fi2"
    assert aligned(n) == [(0, 1), (0, 1), (1, 2)]


@pytest.mark.parametrize(
    ("form", "text", "expected"),
    [
        (NFC, "\u1112\u1161\u11ab!", "한!"),         # Hangul L V T compose algorithmically
        (NFC, "\u09c7\u09be", "\u09cb"),             # a starter (U+09BE) composing backwards
        (NFC, "\u0cbf\u0cd5", "\u0cc0"),             # and U+0CD5
        (NFKC, "\uff76\uff9e", "\u30ac"),            # halfwidth voiced mark joins its kana
        (NFKC, "\u1100\u314f", "\uac00"),            # compatibility jamo becomes a vowel jamo
    ],
)
def test_compositions_across_starters(form: type[normalizers.NFC | normalizers.NFKC], text: str,
                                      expected: str) -> None:
    n = run(form(), text)
    assert n.text == expected
    assert n.text == unicodedata.normalize(form.form, text)
    assert aligned(n)[0] == (0, len(text) - (1 if text.endswith("!") else 0))


def test_normalized_input_is_returned_unchanged() -> None:
    s = NormalizedString("already fine \u00e9", base=4)
    assert NFC().normalize(s) is s
    assert NFKC().normalize(s) is s


def test_long_text_with_one_change_keeps_the_rest_one_to_one() -> None:
    text = "plain words " * 20 + "caf\u00e9" + " more" * 20
    n = run(NFD(), text)
    assert n.text == unicodedata.normalize("NFD", text)
    k = text.index("\u00e9")
    assert aligned(n)[: k] == [(i, i + 1) for i in range(k)]
    assert aligned(n)[k : k + 2] == [(k, k + 1), (k, k + 1)]
    assert aligned(n)[-1] == (len(text) - 1, len(text))


def test_lowercase_ascii_keeps_the_identity_alignment() -> None:
    n = run(Lowercase(), "HeLLo")
    assert n.text == "hello"
    assert n.is_identity


def test_lowercase_is_per_character() -> None:
    assert Lowercase().normalize_str("ΟΔΟΣ ΣΑΣ") == "οδοσ σασ"  # never the final 'ς'
    n = run(Lowercase(), "aİb")
    assert n.text == "ai\u0307b"
    assert aligned(n) == [(0, 1), (1, 2), (1, 2), (2, 3)]


def test_strip() -> None:
    n = run(Strip(), " \t a b \u3000\n")
    assert (n.text, n.span(0, len(n))) == ("a b", (3, 6))
    assert Strip(left=False).normalize_str("  a  ") == "  a"
    assert Strip(right=False).normalize_str("  a  ") == "a  "
    assert Strip().normalize_str(" \n ") == ""
    # U+001C is a Python space (str.isspace) but not Unicode White_Space.
    assert Strip().normalize_str("\x1ca\x1c") == "\x1ca\x1c"


def test_replace_literal_and_regex() -> None:
    n = run(Replace("ab", "X"), "abcab")
    assert n.text == "XcX"
    assert aligned(n) == [(0, 2), (2, 3), (3, 5)]
    n = run(Replace(r"\d+", "", regex=True), "a12b3")
    assert n.text == "ab"
    assert aligned(n) == [(0, 1), (3, 4)]
    n = run(Replace(".", "<dot>"), "a.b")
    assert n.text == "a<dot>b"
    assert aligned(n) == [(0, 1)] + [(1, 2)] * 5 + [(2, 3)]
    assert Replace("(", ")").normalize_str("f(x(") == "f)x)"


def test_replace_empty_matches_as_hugging_face_does() -> None:
    # No empty match right after "xx": Oniguruma resumes one character later.
    assert Replace("x*", "-", regex=True).normalize_str("abxxc") == "-a-b-c-"
    n = run(Replace("", "-"), "ab")
    assert n.text == "-a-b-"
    assert aligned(n) == [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2)]


def test_insertion_inside_an_expansion_keeps_offsets_monotone() -> None:
    n = run(Sequence([NFKC(), Replace("x*", "-", regex=True)]), "ﬁ")
    assert n.text == "-f-i-"
    assert aligned(n) == [(0, 0), (0, 1), (0, 1), (0, 1), (1, 1)]


def test_sequence_composes_alignments() -> None:
    n = run(Sequence([NFKC(), Lowercase(), Strip()]), " ＡﬁB ")
    assert n.text == "afib"
    assert aligned(n) == [(1, 2), (2, 3), (2, 3), (3, 4)]


def test_bad_regex_is_an_input_error_naming_the_fix() -> None:
    with pytest.raises(InputError, match="regex=False"):
        Replace("(", "x", regex=True)


def test_docstring_examples_run() -> None:
    assert doctest.testmod(normalizers).failed == 0


# ---- the same text as `tokenizers` -----------------------------------------------------------

COMPARED = [
    *UNICODE_FORMS,
    (Lowercase, hf.Lowercase),
    (lambda: Strip(), lambda: hf.Strip()),
    (lambda: Strip(left=False), lambda: hf.Strip(left=False)),
    (lambda: Strip(right=False), lambda: hf.Strip(right=False)),
    (lambda: Replace("a", "ZZ"), lambda: hf.Replace("a", "ZZ")),
    (lambda: Replace(r"\s+", " ", regex=True),
     lambda: hf.Replace(tokenizers.Regex(r"\s+"), " ")),
    (lambda: Replace(r"\p{P}", "", regex=True),
     lambda: hf.Replace(tokenizers.Regex(r"\p{P}"), "")),
    (lambda: Sequence([NFD(), Replace(r"\p{Mn}", "", regex=True), Lowercase()]),
     lambda: hf.Sequence([hf.NFD(), hf.Replace(tokenizers.Regex(r"\p{Mn}"), ""),
                          hf.Lowercase()])),
]


@pytest.mark.parametrize(("ours", "theirs"), COMPARED)
@pytest.mark.parametrize("text", SAMPLES)
def test_same_text_as_tokenizers(ours: Callable[[], normalizers.Normalizer],
                                 theirs: Callable[[], Any], text: str) -> None:
    assert ours().normalize_str(text) == theirs().normalize_str(text)


# ---- the file schema -------------------------------------------------------------------------

SCHEMA = [
    (NFC(), hf.NFC()),
    (NFD(), hf.NFD()),
    (NFKC(), hf.NFKC()),
    (NFKD(), hf.NFKD()),
    (Lowercase(), hf.Lowercase()),
    (Strip(), hf.Strip()),
    (Strip(left=False), hf.Strip(left=False)),
    (Replace("a", "b"), hf.Replace("a", "b")),
    (Replace("a+", "b", regex=True), hf.Replace(tokenizers.Regex("a+"), "b")),
    (Sequence([NFC(), Strip(right=False)]), hf.Sequence([hf.NFC(), hf.Strip(right=False)])),
    (Sequence([]), hf.Sequence([])),
]


@pytest.mark.parametrize(("ours", "theirs"), SCHEMA, ids=lambda x: type(x).__name__)
def test_to_dict_is_what_tokenizers_writes(ours: normalizers.Normalizer, theirs: Any) -> None:
    assert ours.to_dict() == json.loads(theirs.__getstate__())


@pytest.mark.parametrize(("ours", "theirs"), SCHEMA, ids=lambda x: type(x).__name__)
def test_round_trip(ours: normalizers.Normalizer, theirs: Any) -> None:
    assert _registry.build("normalizer", ours.to_dict(), "x") == ours
    assert _registry.build("normalizer", json.loads(theirs.__getstate__()), "x") == ours


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"type": "Strip", "strip_left": "yes", "strip_right": True}, "x.strip_left"),
        ({"type": "Strip", "strip_left": True}, "x.strip_right"),
        ({"type": "Replace", "content": "b"}, "x.pattern"),
        ({"type": "Replace", "pattern": "a", "content": "b"}, "x.pattern"),
        ({"type": "Replace", "pattern": {"Glob": "a"}, "content": "b"}, "x.pattern"),
        ({"type": "Replace", "pattern": {"String": 1}, "content": "b"}, "x.pattern.String"),
        ({"type": "Replace", "pattern": {"Regex": "("}, "content": "b"}, "x.pattern.Regex"),
        ({"type": "Replace", "pattern": {"String": "a"}}, "x.content"),
        ({"type": "Sequence"}, "x.normalizers"),
        ({"type": "Sequence", "normalizers": {"type": "NFC"}}, "x.normalizers"),
        ({"type": "Sequence", "normalizers": [{"type": "NFC"}, None]}, "x.normalizers[1]"),
        ({"type": "Sequence", "normalizers": [{"type": "NFX"}]}, "x.normalizers[0].type"),
        ({"type": "Sequence", "normalizers": [{"type": "Strip"}]},
         "x.normalizers[0].strip_left"),
        ({"type": "Lowercased"}, "x.type"),
        ([], "x"),
    ],
)
def test_malformed_dicts_name_the_field(data: object, path: str) -> None:
    with pytest.raises(FormatError) as caught:
        _registry.build("normalizer", data, "x")
    assert str(caught.value).startswith(path + ":")
