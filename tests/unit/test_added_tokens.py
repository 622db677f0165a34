"""Added tokens with Hugging Face's rules: leftmost-longest matches, single_word, lstrip/rstrip
(quirks included), and normalized tokens found in the normalized text. Known answers, and the
same ids and offsets as `tokenizers` on random texts.

``segments`` is the contract for a tokenizer with a normalizer: ``encode`` below runs the
pipeline on it the way the Tokenizer does.
"""

from __future__ import annotations

import doctest
import random
import time
from typing import Any

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import BPE, AddedToken, Tokenizer, added_tokens
from tokenmill import normalizers as n
from tokenmill import pre_tokenizers as p
from tokenmill.added_tokens import AddedVocabulary, LiteralFinder
from tokenmill.errors import FormatError
from tokenmill.normalized import NormalizedString

CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ▁!.,<>\t\n\u3000é_'ﬁ"


def cuts(vocab: AddedVocabulary, text: str) -> list[tuple[str | int, str]]:
    """The segments of ``text`` as (token id or "text", covered text)."""
    return [("text" if i is None else i, text[a:b]) for i, a, b in vocab.split(text)]


def token(content: str, id: int, **flags: bool) -> AddedToken:
    return AddedToken(content, id, special=flags.pop("special", False), **flags)


def encode(tok: Tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """The Tokenizer's pipeline over ``segments``: tokens where the vocabulary finds them, the
    model on the pre-tokenized normalized text between."""
    ids: list[int] = []
    offsets: list[tuple[int, int]] = []
    for segment in AddedVocabulary(tok.added_tokens).segments(text, tok.normalizer):
        part = segment.normalized
        if part is None:
            assert segment.id is not None
            ids.append(segment.id)
            offsets.append((segment.start, segment.end))
            continue
        pieces = tok.pre_tokenizer.split(part) if tok.pre_tokenizer else [part]
        pieces = [piece for piece in pieces if piece.text]
        if pieces:
            flat = tok.model.encode_pieces([piece.text for piece in pieces])
            ids += flat[0::4]
            offsets += [pieces[k].span(i, j) for k, i, j in zip(flat[1::4], flat[2::4],
                                                                 flat[3::4])]
    return ids, offsets


def char_model() -> BPE:
    vocab = {c: i for i, c in enumerate(dict.fromkeys(CHARS))}
    vocab["<unk>"] = len(vocab)
    return BPE(vocab, [], unk_token="<unk>")


# ---- known answers ---------------------------------------------------------------------------

def test_leftmost_then_longest() -> None:
    vocab = AddedVocabulary([token("ab", 1), token("abc", 2), token("bcd", 3)])
    assert cuts(vocab, "abcd") == [(2, "abc"), ("text", "d")]
    assert cuts(vocab, "xbcd abd") == [("text", "x"), (3, "bcd"), ("text", " "), (1, "ab"),
                                       ("text", "d")]
    assert cuts(AddedVocabulary([]), "x") == [("text", "x")]
    assert cuts(AddedVocabulary([token("a", 1)]), "") == []


def test_single_word_looks_at_word_characters_beside_the_match() -> None:
    vocab = AddedVocabulary([token("ab", 1, single_word=True)])
    for text in ["ab", "x ab!", "'ab'", "½ab", "-ab", "ab\u3000"]:
        assert 1 in [i for i, _ in cuts(vocab, text)], text
    for text in ["xab", "abx", "1ab", "_ab", "éab", "\u200dab", "ab\u0301"]:
        assert cuts(vocab, text) == [("text", text)], text


def test_a_rejected_single_word_match_hides_what_it_covered() -> None:
    vocab = AddedVocabulary([token("ab", 1, single_word=True), token("b", 2)])
    assert cuts(vocab, "xab") == [("text", "xab")]


def test_lstrip_and_rstrip_take_unicode_whitespace() -> None:
    vocab = AddedVocabulary([token("ab", 1, lstrip=True, rstrip=True)])
    assert cuts(vocab, "x \t\u3000ab\u00a0\n y") == [("text", "x"), (1, " \t\u3000ab\u00a0\n "),
                                                    ("text", "y")]
    assert cuts(vocab, "\x1cab\u200b") == [("text", "\x1c"), (1, "ab"), ("text", "\u200b")]


def test_lstrip_stops_at_the_previous_token_but_rstrip_does_not() -> None:
    vocab = AddedVocabulary([token("x ", 1), token("ab", 2, lstrip=True)])
    assert vocab.split("x  ab") == [(1, 0, 2), (2, 2, 5)]
    # rstrip runs over the next token's own match: the spans overlap, as in Hugging Face.
    vocab = AddedVocabulary([token("ab", 1, rstrip=True), token(" x", 2)])
    assert vocab.split("ab x") == [(1, 0, 3), (2, 2, 4)]
    vocab = AddedVocabulary([token("ab", 1, rstrip=True), token(" e", 2, lstrip=True)])
    assert vocab.split("ab  e") == [(1, 0, 4), (2, 4, 5)]


def test_normalized_tokens_are_found_in_the_normalized_text() -> None:
    vocab = AddedVocabulary([token("ABC", 1, normalized=True), token("XYZ", 2)])
    got = [(s.id, s.start, s.end, s.normalized and s.normalized.text)
           for s in vocab.segments("ABC abc XYZ xyz", n.Lowercase())]
    assert got == [(1, 0, 3, None), (None, 3, 4, " "), (1, 4, 7, None), (None, 7, 8, " "),
                   (2, 8, 11, None), (None, 11, 15, " xyz")]


def test_normalized_tokens_are_spelled_as_normalized() -> None:
    # Prepend turns the content "ab" into "▁ab": found only where the text also has "▁ab".
    vocab = AddedVocabulary([token("ab", 1, normalized=True)])
    prepend = n.Prepend("▁")
    assert [s.id for s in vocab.segments("ab", prepend)] == [1]
    assert [s.id for s in vocab.segments("xab", prepend)] == [None]


def test_tokens_on_the_original_text_come_first() -> None:
    vocab = AddedVocabulary([token("abcd", 1, normalized=True), token("cde", 2)])
    assert cuts(vocab, "abcde") == [("text", "ab"), (2, "cde")]


def test_text_after_a_token_does_not_start_the_input() -> None:
    vocab = AddedVocabulary([token("<s>", 1)])
    first, special, rest = vocab.segments("a<s>b")
    assert first.normalized is not None and rest.normalized is not None
    first_scheme = p.Metaspace(prepend_scheme="first")
    assert [q.text for q in first_scheme.split(first.normalized)] == ["▁a"]
    assert [q.text for q in first_scheme.split(rest.normalized)] == ["b"]
    assert special == (1, 1, 4, None)


def test_segments_keep_offsets_through_the_normalizer() -> None:
    vocab = AddedVocabulary([token("<x>", 1), token("fin", 2, normalized=True)])
    got = [(s.id, s.start, s.end, s.normalized and s.normalized.text)
           for s in vocab.segments("ﬁn<x>AB", n.Sequence([n.NFKC(), n.Lowercase()]))]
    assert got == [(2, 0, 2, None), (1, 2, 5, None), (None, 5, 7, "ab")]


def test_from_fields_defaults_follow_hugging_face() -> None:
    special = AddedToken.from_fields({"content": "<s>", "id": 1, "special": True}, "x")
    plain = AddedToken.from_fields({"content": "hi", "id": 2}, "x")
    assert (special.special, special.normalized) == (True, False)
    assert (plain.special, plain.normalized) == (False, True)
    with pytest.raises(FormatError, match=r"^x\.content:"):
        AddedToken.from_fields({"id": 1}, "x")


def test_docstring_examples_run() -> None:
    assert doctest.testmod(added_tokens).failed == 0


# ---- the same ids and offsets as `tokenizers` ------------------------------------------------

CONTENTS = ["ab", "b c", "<x>", "cd", "ﬁn", " e", "éb", "ab ", "FIN"]
NORMALIZERS: list[Any] = [
    None, n.Lowercase(), n.Strip(), n.Replace("q", " "), n.NFKC(),
    n.Sequence([n.Prepend("▁"), n.Replace(" ", "▁")]),
    n.Sequence([n.Replace("q", "  "), n.Lowercase(), n.Prepend("▁")]),
]
PRE_TOKENIZERS: list[Any] = [None, p.Metaspace(prepend_scheme="first"),
                             p.Metaspace(split=False), p.WhitespaceSplit()]
PIECES = list("abcqe ABC<x>ﬁn\t") + ["fin", "ab", "AB", "b c", "<x>", "cd", " e", "é", "  "]


def random_tokenizer(rng: random.Random, normalizer: Any) -> Tokenizer:
    model = char_model()
    tokens = [AddedToken(c, len(model.vocab) + k, special=rng.random() < .5,
                         single_word=rng.random() < .3, lstrip=rng.random() < .3,
                         rstrip=rng.random() < .3, normalized=rng.random() < .5)
              for k, c in enumerate(rng.sample(CONTENTS, 4))]
    return Tokenizer(model, normalizer=normalizer, pre_tokenizer=rng.choice(PRE_TOKENIZERS),
                     added_tokens=tokens)


@pytest.mark.parametrize("normalizer", NORMALIZERS, ids=repr)
def test_same_as_tokenizers_on_random_texts(normalizer: Any) -> None:
    rng = random.Random(repr(normalizer))
    for _ in range(30):
        tok = random_tokenizer(rng, normalizer)
        theirs = tokenizers.Tokenizer.from_str(tok.to_str())
        for _ in range(30):
            text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
            expected = theirs.encode(text, add_special_tokens=False)
            assert encode(tok, text) == (expected.ids, expected.offsets), (text, tok.to_dict())
            if normalizer is None:  # the Tokenizer's own path
                got = tok.encode(text, add_special_tokens=False)
                assert (got.ids, got.offsets) == (expected.ids, expected.offsets)


def test_normalized_segments_are_never_empty() -> None:
    vocab = AddedVocabulary([token("ab", 1, normalized=True)])
    parts = vocab.split_normalized(NormalizedString("xabab", base=2), None)
    assert [(s.id, s.start, s.end) for s in parts] == [(None, 2, 3), (1, 3, 5), (1, 5, 7)]
    assert vocab.split_normalized(NormalizedString(""), None) == []
    assert AddedVocabulary([]).split_normalized(NormalizedString(""), None) == []


def test_matching_stays_linear_with_stretching_space_tokens() -> None:
    # Each " " takes the rest of the run (the spans overlap, as in Hugging Face), without
    # walking or copying the run again for every token; one that strips both ways leaves the
    # others nothing (Hugging Face drops them): one token.
    for flags, count in (({"rstrip": True}, 100_000), ({"lstrip": True}, 100_000),
                         ({"lstrip": True, "rstrip": True}, 1)):
        vocab = AddedVocabulary([token(" ", 1, **flags)])
        text = " " * 100_000
        start = time.perf_counter()
        segments = vocab.segments(text)
        assert len(segments) == count
        assert time.perf_counter() - start < 30  # quadratic would take hours (0.1 s here)


def test_split_cuts_as_segments_do_without_a_normalizer() -> None:
    # split (the core's paths) skips segments' NormalizedStrings and answers at once when no
    # token's text is in the text: the same cut, on random vocabularies and texts.
    rng = random.Random(7)
    for _ in range(200):
        vocab = AddedVocabulary([
            AddedToken(c, 100 + k, single_word=rng.random() < .3, lstrip=rng.random() < .3,
                       rstrip=rng.random() < .3, normalized=rng.random() < .5)
            for k, c in enumerate(rng.sample(CONTENTS, rng.randint(0, 4)))])
        for _ in range(20):
            text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
            assert vocab.split(text) == [(s.id, s.start, s.end) for s in vocab.segments(text)], \
                (text, [t.content for t in vocab.tokens])


def first_by_find(strings: list[str], text: str) -> tuple[int, str] | None:
    """The reference: every string's first place by str.find, the leftmost, the longest there."""
    found = [(at, -len(s), s) for s in strings if s and (at := text.find(s)) >= 0]
    return (min(found)[0], min(found)[2]) if found else None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("ab<>", max_size=5), max_size=12), st.text("ab<>c", max_size=30))
def test_literal_finder_finds_the_leftmost_then_longest(strings: list[str], text: str) -> None:
    # (up to four strings by str.find, more by the trie's pattern)
    assert LiteralFinder(strings).first(text) == first_by_find(strings, text)
    assert LiteralFinder(strings).found_in(text) == (first_by_find(strings, text) is not None)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("abcdefghijk<", min_size=1, max_size=3), min_size=5, max_size=30),
       st.text("abcdefghijkz<", max_size=30))
def test_literal_finder_with_few_and_many_first_characters(strings: list[str], text: str) -> None:
    # (up to eight first characters are each looked for before the pattern's search; with
    # more, the pattern alone)
    assert LiteralFinder(strings).first(text) == first_by_find(strings, text)
    assert LiteralFinder(strings).found_in(text) == (first_by_find(strings, text) is not None)


def test_literal_finder_of_strings_nested_deeper_than_its_trie_goes() -> None:
    # "a", "aa", ... nest a group a string; past what the compiler takes, the plain
    # alternation (longest first) finds the same.
    strings = ["a" * k for k in range(1, 3000)] + ["b" * 5]
    finder = LiteralFinder(strings)
    assert finder.first("xa" + "a" * 5000) == (1, "a" * 2999)
    assert finder.first("bbbbbb") == (0, "bbbbb")
    assert LiteralFinder([f"[control_{k}]" for k in range(800)]).first(
        "[control_1 [control_10]") == (11, "[control_10]")


def test_many_added_tokens_cut_as_the_reference_does() -> None:
    # 800 tokens sharing prefixes (Mistral's control tokens): the leftmost-longest cut.
    vocab = AddedVocabulary([token(f"[c_{k}]", k) for k in range(800)] + [token("[c_1", 900)])
    assert cuts(vocab, "x[c_1[c_12][c_799]]") == [
        ("text", "x"), (900, "[c_1"), (12, "[c_12]"), (799, "[c_799]"), ("text", "]")]
