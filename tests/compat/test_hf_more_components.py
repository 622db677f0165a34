"""Components of real tokenizer.json files beyond BERT's, GPT-2's and Llama's (RoBERTa's
post-processor, the StripAccents normalizer of ALBERT's and XLNet's files) and added tokens
that overlap, against Hugging Face tokenizers on the same file, field by field."""

from __future__ import annotations

import gzip
import json
import random

import pytest
import tokenizers

from tokenmill import FormatError, Tokenizer
from tokenmill.encoding import Padding, Truncation


def fields(e):
    return (e.ids, e.tokens, e.offsets, e.type_ids, e.special_tokens_mask, e.attention_mask)


def both(tmp_path, data):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return tokenizers.Tokenizer.from_file(str(path)), Tokenizer.from_file(path)


@pytest.fixture(scope="module")
def lines(shared_data):
    return (shared_data / "text" / "en" / "tinyshakespeare.txt").read_text(
        encoding="utf-8").splitlines()[:300]


@pytest.mark.parametrize("add_prefix_space, trim_offsets",
                         [(True, True), (False, True), (True, False)])
def test_roberta_processing(shared_data, tmp_path, lines, add_prefix_space, trim_offsets):
    # GPT-2's vocabulary behind RoBERTa's layout: <s> A </s> (</s> B </s>), type ids all 0,
    # offsets trimmed of spaces, with truncation, overflowing windows and padding too.
    data = json.loads((shared_data / "tokenizers" / "gpt2" / "tokenizer.json").read_text())
    data["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
                             "trim_offsets": True, "use_regex": True}
    data["post_processor"] = {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 50256],
                              "cls": ["<|endoftext|>", 50256], "trim_offsets": trim_offsets,
                              "add_prefix_space": add_prefix_space}
    theirs, ours = both(tmp_path, data)
    assert ours.to_dict()["post_processor"] == data["post_processor"]
    inputs = []
    for i in range(0, 200, 2):
        a, b = lines[i], lines[i + 1] + "  trailing  "
        inputs += [(a,), (a, b), (" " + a, "  " + b)]
    for args in inputs:
        for special in (True, False):
            assert fields(ours.encode(*args, add_special_tokens=special)) == \
                fields(theirs.encode(*args, add_special_tokens=special)), args
    batch = [args if len(args) == 2 else args[0] for args in inputs[:60]]
    assert [fields(e) for e in ours.encode_batch(batch)] == \
        [fields(e) for e in theirs.encode_batch(batch)]
    theirs.enable_truncation(12, stride=3)
    theirs.enable_padding(length=14, pad_id=50256, pad_token="<|endoftext|>")
    ours.truncation = Truncation(max_length=12, stride=3)
    ours.padding = Padding(length=14, pad_id=50256, pad_token="<|endoftext|>")
    for args in inputs[:90]:
        mine, ref = ours.encode(*args), theirs.encode(*args)
        assert fields(mine) == fields(ref), args
        assert [fields(o) for o in mine.overflowing] == [fields(o) for o in ref.overflowing]


def test_roberta_processing_defaults_and_bad_fields(shared_data, tmp_path):
    data = json.loads((shared_data / "tokenizers" / "gpt2" / "tokenizer.json").read_text())
    data["post_processor"] = {"type": "RobertaProcessing", "sep": ["</s>", 2]}
    tok = Tokenizer.from_dict(data, "t.json")
    assert tok.post_processor.cls == ("<s>", 0) and tok.post_processor.trim_offsets
    data["post_processor"] = {"type": "RobertaProcessing", "sep": ["</s>"]}
    with pytest.raises(FormatError, match=r"post_processor.sep: expected \[token, id\]"):
        Tokenizer.from_dict(data, "t.json")


def test_strip_accents(shared_data, tmp_path):
    # As ALBERT's file has it: NFKD, then StripAccents, then Lowercase; over accented Latin,
    # Vietnamese and Devanagari (whose vowel signs are marks too).
    data = json.loads((shared_data / "tokenizers" / "all-MiniLM-L6-v2" / "tokenizer.json")
                      .read_text())
    data["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]}
    theirs, ours = both(tmp_path, data)
    flores = shared_data / "text" / "flores200_dev"
    texts = ["Café Ñandú naïve", "e\u0301cole x\u0308\u0301", "ﬁancé ²", "Ǆ ǅ ǆ"]
    for language in ("vie_Latn", "hin_Deva", "fra_Latn"):
        texts += gzip.open(flores / f"{language}.dev.gz", "rt",
                           encoding="utf-8").read().splitlines()[:150]
    for text in texts:
        mine, ref = ours.encode(text), theirs.encode(text)
        assert mine.ids == ref.ids, text
        assert ours.normalizer.normalize_str(text) == theirs.normalizer.normalize_str(text)
    assert ours.to_dict()["normalizer"] == data["normalizer"]


def test_added_tokens_inside_anothers_stripped_whitespace(shared_data, tmp_path):
    # A token found inside the whitespace an rstrip token took ("<r> \n x": "\n" at 4, in
    # <r>'s span 0-6): Hugging Face goes on after the inner token, so " x" is encoded (the
    # space twice covered); the text after the outer span alone was encoded before.
    theirs = tokenizers.Tokenizer.from_file(str(shared_data / "tokenizers" / "gpt2" /
                                                "tokenizer.json"))
    theirs.add_special_tokens([tokenizers.AddedToken("<r>", rstrip=True),
                               tokenizers.AddedToken("<l>", lstrip=True),
                               tokenizers.AddedToken("<b>", lstrip=True, rstrip=True)])
    theirs.add_tokens([tokenizers.AddedToken("\n", normalized=False),
                       tokenizers.AddedToken(" ", normalized=False)])
    path = tmp_path / "added.json"
    theirs.save(str(path))
    ours = Tokenizer.from_file(path)
    mine, ref = ours.encode("<r> \n x"), theirs.encode("<r> \n x")
    assert (mine.ids, mine.offsets) == (ref.ids, ref.offsets)
    assert mine.tokens[-1] == "x" and mine.offsets[-2:] == [(5, 6), (6, 7)]  # " " then "x"
    rnd = random.Random(4)
    pieces = ["<r>", "<l>", "<b>", "\n", " ", "x", "ab", "  ", "\t"]
    for _ in range(3000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 12)))
        mine, ref = ours.encode(text), theirs.encode(text)
        assert (mine.ids, mine.offsets) == (ref.ids, ref.offsets), text


@pytest.mark.parametrize("newline", [{}, {"lstrip": True}, {"rstrip": True}])
def test_lstrip_tokens_inside_anothers_stripped_whitespace(shared_data, tmp_path, newline):
    # An lstrip token found inside the whitespace the previous token took has nothing left
    # once it starts after it: Hugging Face drops it ("<r>\n" with "\n" lstrip: one token;
    # "  " with " " lstrip and rstrip: one token), where an empty token was made here.
    theirs = tokenizers.Tokenizer.from_file(str(shared_data / "tokenizers" / "gpt2" /
                                                "tokenizer.json"))
    theirs.add_special_tokens([tokenizers.AddedToken("<r>", rstrip=True),
                               tokenizers.AddedToken("\n", **newline),
                               tokenizers.AddedToken(" ", lstrip=True, rstrip=True)])
    path = tmp_path / "added.json"
    theirs.save(str(path))
    ours = Tokenizer.from_file(path)
    assert ours.encode("  ").offsets == theirs.encode("  ").offsets == [(0, 2)]
    rnd = random.Random(5)
    pieces = ["<r>", "\n", " ", "x", "  ", "\t", "ab"]
    compared = 0
    for _ in range(3000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 10)))
        try:
            ref = theirs.encode(text)
        except BaseException:  # ("AddedVocabulary bad split": tokenizers panics on some)
            continue
        mine = ours.encode(text)
        assert (mine.ids, mine.offsets) == (ref.ids, ref.offsets), text
        compared += 1
    assert compared > 1000


def test_word_characters_in_patterns_are_oniguruma_s():
    # Hugging Face runs a Split's or Replace's regular expression with Oniguruma, whose \w
    # takes ² ½ (and four more) and leaves out ZWNJ/ZWJ, unlike Python's regex. Every
    # character Python's unicodedata assigns, through tokenizers' own Split and ours.
    import unicodedata

    from tokenmill import pre_tokenizers

    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000
             and unicodedata.category(chr(c)) != "Cn" and c != ord("!")]
    for pattern in (r"\w", r"[\w]", r"\W", r"[^\w!]"):
        theirs = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), "isolated")
        ours = pre_tokenizers.Split(pattern, "isolated")
        for start in range(0, len(chars), 40_000):
            text = "!".join(chars[start:start + 40_000])
            assert [p for p, _ in ours.pre_tokenize_str(text)] == \
                [p for p, _ in theirs.pre_tokenize_str(text)], (pattern, start)
    assert ours.to_dict()["pattern"] == {"Regex": r"[^\w!]"}  # (the file keeps its spelling)


def test_code_points_newer_than_unicode_16_in_python_side_patterns():
    # Oniguruma knows Unicode 16.0: a letter assigned in 17.0 (U+0558, Tangut U+18E00, CJK
    # extension J U+323B0) is of no class to it, where the pinned regex module calls it a
    # letter. A Split's pattern, Whitespace and its counting path see it as Oniguruma does;
    # a pattern that names such a code point still matches it.
    from tokenmill import pre_tokenizers

    text = "a\u0558b \U00018e00x1 \U000323b0\u0558! \u0558"
    for pattern in (r"\w+", r"\p{L}+", r"[^\s\p{L}]+", r"\W"):
        theirs = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), "isolated")
        ours = pre_tokenizers.Split(pattern, "isolated")
        assert ours.pre_tokenize_str(text) == theirs.pre_tokenize_str(text), pattern
    ours_ws, theirs_ws = pre_tokenizers.Whitespace(), tokenizers.pre_tokenizers.Whitespace()
    assert ours_ws.pre_tokenize_str(text) == theirs_ws.pre_tokenize_str(text)
    assert ours_ws.split_text(text) == [p for p, _ in theirs_ws.pre_tokenize_str(text)]
    named = pre_tokenizers.Split("\u0558", "isolated")
    assert [p for p, _ in named.pre_tokenize_str("a\u0558b")] == ["a", "\u0558", "b"]
