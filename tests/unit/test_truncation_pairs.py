"""Truncation of pairs (strategies, sides, stride, the overflowing windows) and the tokenizer's
own padding on single encodes: known answers, and every field of every encoding against
`tokenizers` on a small byte-level tokenizer."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest
import tokenizers

from tokenmill import (
    BPE,
    BPETrainer,
    Encoding,
    FormatError,
    InputError,
    Padding,
    Tokenizer,
    Truncation,
    decoders,
    pre_tokenizers,
)
from tokenmill.processors import TemplateProcessing

VOCAB = {"<s>": 0, "</s>": 1, "<pad>": 2, "h": 3, "i": 4, "o": 5, "hi": 6, "ho": 7, "hih": 8}
MERGES = [("h", "i"), ("h", "o"), ("hi", "h")]
TEMPLATE = TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                              special_tokens=[("<s>", 0), ("</s>", 1)])


def make(**kw: Any) -> Tokenizer:
    tok = Tokenizer(BPE(VOCAB, MERGES), **kw)
    tok.add_special_tokens(["<s>", "</s>", "<pad>"])
    return tok


def tree(e: Encoding) -> tuple:
    """Every field of ``e`` and of its overflowing windows, nested as they are."""
    return (list(e.ids), list(e.tokens), [tuple(o) for o in e.offsets], list(e.type_ids),
            list(e.attention_mask), list(e.special_tokens_mask),
            [tree(o) for o in e.overflowing])


# ---- known answers ---------------------------------------------------------------------------

def test_longest_first_cuts_the_longer_input_then_shares_the_room():
    tok = make()
    # 3 + 2 tokens in 4: the longer input is cut to the shorter one's length.
    enc = tok.encode("hohoho", "hihi", truncation=Truncation(max_length=4, stride=1))
    assert enc.ids == [7, 7, 6, 6] and enc.type_ids == [0, 0, 1, 1]
    assert [o.offsets for o in enc.overflowing] == [[(2, 4), (4, 6), (0, 2), (2, 4)]]
    # 3 + 4 tokens in 5: they share it, the longer input getting the odd token.
    enc = tok.encode("hohoho", "hihihihi", truncation=Truncation(max_length=5))
    assert enc.ids == [7, 7, 6, 6, 6]


def test_every_window_of_one_input_meets_every_window_of_the_other():
    # Windows A0 A1 A2 of "hohoho" and B0 B1 of "hihi", one token each, nested as tokenizers
    # nests them: (Ai, B0) holds (Ai, B1); (A0, B1) holds (A1, B1) and (A2, B1).
    enc = make().encode("hohoho", "hihi", truncation=Truncation(max_length=2))
    assert enc.offsets == [(0, 2), (0, 2)]

    def spans(e: Encoding) -> tuple:
        return tuple(s for s, _ in e.offsets), [spans(o) for o in e.overflowing]

    assert [spans(o) for o in enc.overflowing] == [
        ((2, 0), [((2, 2), [])]), ((2, 2), []),
        ((4, 0), [((4, 2), [])]), ((4, 2), []),
        ((0, 2), [((2, 2), []), ((4, 2), [])])]
    assert all(o.type_ids == [0, 1] for o in enc.overflowing)


def test_only_first_and_only_second_cut_one_input_with_stride():
    tok = make(post_processor=TEMPLATE)
    first = tok.encode("hohoho", "hi", truncation=Truncation(
        max_length=6, stride=1, strategy="OnlyFirst"))
    assert first.ids == [0, 7, 7, 1, 6, 1]
    assert [o.ids for o in first.overflowing] == [[0, 7, 7, 1, 6, 1]]
    assert [o.offsets[1:3] for o in first.overflowing] == [[(2, 4), (4, 6)]]
    second = tok.encode("hi", "hohoho", truncation=Truncation(
        max_length=6, strategy="OnlySecond", side="left"))
    assert second.offsets == [(0, 0), (0, 2), (0, 0), (2, 4), (4, 6), (0, 0)]
    assert [o.offsets for o in second.overflowing] == [[(0, 0), (0, 2), (0, 0), (0, 2), (0, 0)]]
    # The overflowing windows keep the type id the second input was encoded with.
    assert second.overflowing[0].type_ids == [0, 0, 0, 1, 1]


@pytest.mark.parametrize("strategy, pair, message", [
    ("OnlySecond", None, r"^truncation strategy 'OnlySecond' cuts the second input, but only "
                         r"one input was given and it is 1 tokens too long$"),
    ("OnlyFirst", "hihihi", r"^truncation strategy 'OnlyFirst': the first input has 3 tokens, "
                            r"too few to remove the 3 needed to fit max_length 3$"),
    ("LongestFirst", "hihihi", r"^truncation stride 1 must be smaller than the 1 tokens the "
                               r"first input is cut to \(max_length 3 less 0 special tokens, "
                               r"shared by the pair\)$"),
])
def test_a_pair_that_cannot_be_cut_is_a_clear_error(strategy, pair, message):
    truncation = Truncation(max_length=3, stride=1 if strategy == "LongestFirst" else 0,
                            strategy=strategy)
    with pytest.raises(InputError, match=message):
        make().encode("hohoho" if pair else "hohohoho", pair, truncation=truncation)


def test_the_tokenizer_pads_a_single_encode_with_its_own_setting():
    tok = make(padding=Padding(pad_id=2, pad_token="<pad>", pad_to_multiple_of=4, side="left"))
    enc = tok.encode("hiho")
    assert enc.ids == [2, 2, 6, 7]
    assert enc.attention_mask == [0, 0, 1, 1] and enc.tokens == ["<pad>", "<pad>", "hi", "ho"]
    # Batch-longest with no multiple: one encode is its own longest, so nothing is added.
    assert make(padding=Padding(pad_id=2)).encode("hiho").ids == [6, 7]
    fixed = make(padding=Padding(pad_id=2, length=3), truncation=Truncation(max_length=2))
    enc = fixed.encode("hohoho")
    assert enc.ids == [7, 7, 2] and [o.ids for o in enc.overflowing] == [[7, 2, 2]]


def test_batch_padding_overrides_the_tokenizer_setting_without_padding_twice():
    tok = make(padding=Padding(pad_id=2, length=6))
    assert [e.ids for e in tok.encode_batch(["hi", "hoho"])] == [[6, 2, 2, 2, 2, 2],
                                                                 [7, 7, 2, 2, 2, 2]]
    assert [e.ids for e in tok.encode_batch(["hi", "hoho"], padding=Padding(pad_id=2))] == [
        [6, 2], [7, 7]]


def test_padding_reaches_overflowing_windows_when_the_first_needs_none():
    enc = Encoding([1, 2, 3], ["a", "b", "c"], [(0, 1), (1, 2), (2, 3)]).truncated(2)
    padded = enc.padded(2, pad_id=0, pad_token="<pad>", side="left")
    assert padded.ids == [1, 2]
    assert [(o.ids, o.attention_mask) for o in padded.overflowing] == [([0, 3], [0, 1])]


def test_windows_leave_unmade_what_their_encoding_has_not_made():
    # A window's tokens, offset pairs and default masks are made when asked for, as its
    # encoding's are (a truncated batch made every window's tokens in Python).
    tok = make(truncation=Truncation(max_length=5, stride=1), post_processor=TEMPLATE)
    e = tok.encode("hihohoho")
    windows = [e, *e.overflowing]
    assert [w.ids for w in windows] == [[0, 6, 7, 7, 1], [0, 7, 7, 1]]
    assert all(w._tokens is None and type(w._offsets) is tuple for w in windows)
    assert [w.tokens for w in windows] == [["<s>", "hi", "ho", "ho", "</s>"],
                                           ["<s>", "ho", "ho", "</s>"]]
    assert [w.offsets for w in windows] == [[(0, 0), (0, 2), (2, 4), (4, 6), (0, 0)],
                                            [(0, 0), (4, 6), (6, 8), (0, 0)]]
    assert [w.word_ids for w in windows] == [[None, 0, 0, 0, None], [None, 0, 0, None]]
    # Tokens and masks given are cut with the window.
    given = Encoding([1, 2, 3], ["x", "y", "z"], [(0, 1), (1, 2), (2, 3)], type_ids=[0, 1, 1],
                     special_tokens_mask=[1, 0, 0]).truncated(2)
    assert (given.tokens, given.type_ids, given.special_tokens_mask) == (["x", "y"], [0, 1],
                                                                         [1, 0])
    o = given.overflowing[0]
    assert (o.tokens, o.type_ids, o.special_tokens_mask, o.offsets) == (["z"], [1], [0],
                                                                        [(2, 3)])


# ---- options and their file fields -----------------------------------------------------------

@pytest.mark.parametrize("make_option, message", [
    (lambda: Truncation(max_length=0), r"^truncation max_length must be an integer >= 1, got 0$"),
    (lambda: Truncation(max_length=4, stride=-1), r"^truncation stride must be an integer >= 0"),
    (lambda: Truncation(max_length=4, side="Left"),
     r"^truncation side must be 'right' or 'left', got 'Left'$"),
    (lambda: Truncation(max_length=4, strategy="only_first"),
     r"^truncation strategy must be 'LongestFirst', 'OnlyFirst' or 'OnlySecond', got "
     r"'only_first'$"),
    (lambda: Padding(side="LEFT"), r"^padding side must be 'right' or 'left', got 'LEFT'$"),
    (lambda: Padding(length=0), r"^padding length must be an integer >= 1, got 0$"),
    (lambda: Padding(pad_to_multiple_of=0),
     r"^padding pad_to_multiple_of must be an integer >= 1, got 0$"),
    (lambda: Padding(pad_id=-1), r"^padding pad_id must be an integer >= 0, got -1$"),
])
def test_options_are_checked_when_made(make_option, message):
    with pytest.raises(InputError, match=message):
        make_option()


def test_strategy_is_saved_and_loaded(tmp_path):
    tok = make(truncation=Truncation(max_length=8, stride=2, side="left", strategy="OnlySecond"))
    tok.save(tmp_path / "tok.json")
    saved = json.loads((tmp_path / "tok.json").read_text("utf-8"))["truncation"]
    assert saved == {"direction": "Left", "max_length": 8, "strategy": "OnlySecond", "stride": 2}
    assert Tokenizer.from_file(tmp_path / "tok.json").truncation == tok.truncation
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tok.json")).truncation
    assert theirs == {"max_length": 8, "stride": 2, "strategy": "only_second",
                      "direction": "left"}


@pytest.mark.parametrize("part, value, message", [
    ("truncation", {"max_length": 8, "strategy": "only_second"},
     r"tok\.json: truncation\.strategy: expected one of LongestFirst, OnlyFirst, OnlySecond, "
     r"got 'only_second'$"),
    ("truncation", {"max_length": 0}, r"tok\.json: truncation\.max_length: expected an integer "
                                      r">= 1, got 0$"),
    ("truncation", {"max_length": 4, "direction": "left"},
     r"tok\.json: truncation\.direction: expected \"Right\" or \"Left\", got 'left'$"),
    ("padding", {"strategy": {"Fixed": 0}},
     r"tok\.json: padding\.strategy\.Fixed: expected an integer >= 1, got 0$"),
])
def test_bad_option_fields_name_the_field(tmp_path, part, value, message):
    data = make().to_dict()
    data[part] = value
    (tmp_path / "tok.json").write_text(json.dumps(data), "utf-8")
    with pytest.raises(FormatError, match=message):
        Tokenizer.from_file(tmp_path / "tok.json")


def test_pad_to_multiple_of_zero_in_a_file_means_none():
    data = make().to_dict()
    data["padding"] = {"strategy": "BatchLongest", "pad_to_multiple_of": 0, "pad_id": 2}
    assert Tokenizer.from_dict(data).padding == Padding(pad_id=2)


# ---- the same encodings as `tokenizers` ------------------------------------------------------

WORDS = "the quick brown fox jumps over lazy dog hello world tokens 0123 a b , .".split()


@pytest.fixture(scope="module")
def byte_level() -> dict[str, Any]:
    """A small byte-level BPE with a ``<s> $A </s> $B:1 </s>:1`` template, as a file dict."""
    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=False),
                    decoder=decoders.ByteLevel())
    trainer = BPETrainer(vocab_size=300, special_tokens=("<s>", "</s>", "<pad>"),
                         initial_alphabet=tuple(pre_tokenizers.ByteLevel.alphabet()))
    tok.train_from_iterator([" ".join(WORDS)] * 3 + ["hello tokens, the lazy world"], trainer)
    tok.post_processor = TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    return tok.to_dict()


def inputs(seed: int) -> list[tuple[str, str | None]]:
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    return [(text(rng.randint(0, 8)), text(rng.randint(0, 8))) for _ in range(8)] + \
        [(text(rng.randint(0, 12)), None) for _ in range(3)] + [("", ""), ("hello", "")]


def with_processor(data: dict[str, Any], variant: str) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    if variant == "swapped":  # the second input first, and type ids of the template's own
        data["post_processor"]["pair"] = [
            {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 2}},
            {"SpecialToken": {"id": "</s>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 3}}]
    elif variant == "byte_level":
        data["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False,
                                  "trim_offsets": True, "use_regex": True}
    elif variant == "none":
        data["post_processor"] = None
    return data


def compare(data: dict[str, Any], cases: list[tuple[str, str | None]],
            **encode: Any) -> tuple[int, int, int, list]:
    """(equal, equal with overflowing windows, errors in both, mismatches) of ``cases``."""
    text = json.dumps(data)
    theirs, ours = tokenizers.Tokenizer.from_str(text), Tokenizer.from_str(text)
    same = overflowing = errors = 0
    mismatches = []
    for a, b in cases:
        try:
            expected = tree(theirs.encode(a, b, **encode) if b is not None
                            else theirs.encode(a, **encode))
        except BaseException:  # noqa: BLE001 (tokenizers panics on some, a BaseException)
            expected = None
        try:
            got = tree(ours.encode(a, b, **encode))
        except InputError:
            got = None
        if got == expected:
            same += expected is not None
            overflowing += bool(expected and expected[6])
            errors += expected is None
        else:
            mismatches.append((a, b, expected is None, got is None))
    return same, overflowing, errors, mismatches


@pytest.mark.parametrize("variant", ["template", "swapped", "byte_level", "none"])
@pytest.mark.parametrize("strategy", ["LongestFirst", "OnlyFirst", "OnlySecond"])
def test_truncation_matches_tokenizers(byte_level, variant, strategy):
    data = with_processor(byte_level, variant)
    cases = inputs(len(variant) * 7 + len(strategy))
    totals = [0, 0, 0]
    # From max_length 4 up: the template's 3 special tokens always leave room (with less,
    # tokenizers skips truncation and tokenmill refuses).
    for side, max_length, stride, special in itertools.product(
            ["Right", "Left"], range(4, 12), range(4), [True, False]):
        data["truncation"] = {"direction": side, "max_length": max_length,
                              "strategy": strategy, "stride": stride}
        same, overflowing, errors, mismatches = compare(data, cases,
                                                        add_special_tokens=special)
        assert mismatches == [], (side, max_length, stride, special, mismatches[:3])
        totals = [t + n for t, n in zip(totals, (same, overflowing, errors))]
    # 2 x 8 x 4 x 2 settings of 13 inputs each: most give overflowing windows, some errors
    # (a stride too long for a window, an input too short for OnlyFirst/OnlySecond).
    assert sum(totals) - totals[1] == 2 * 8 * 4 * 2 * 13
    assert totals[1] > 100 and totals[2] > 100


@pytest.mark.parametrize("length, multiple", [(None, None), (None, 4), (9, None), (16, 3)])
@pytest.mark.parametrize("side", ["Left", "Right"])
def test_own_padding_matches_tokenizers(byte_level, length, multiple, side):
    data = json.loads(json.dumps(byte_level))
    data["padding"] = {"strategy": {"Fixed": length} if length else "BatchLongest",
                       "direction": side, "pad_to_multiple_of": multiple, "pad_id": 2,
                       "pad_type_id": 1, "pad_token": "<pad>"}
    cases = inputs(length or 0)
    for truncation in (None, {"direction": "Right", "max_length": 12, "strategy": "LongestFirst",
                              "stride": 1}):
        data["truncation"] = truncation
        same, overflowing, errors, mismatches = compare(data, cases)
        assert mismatches == [] and errors == 0 and same == len(cases)
        assert (overflowing > 0) == (truncation is not None)
        text = json.dumps(data)
        batch = [a if b is None else (a, b) for a, b in cases]
        assert [tree(e) for e in Tokenizer.from_str(text).encode_batch(batch)] == \
            [tree(e) for e in tokenizers.Tokenizer.from_str(text).encode_batch(batch)]
