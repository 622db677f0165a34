"""The textbook examples, exactly: merges, counts, vocabulary size and encodings."""

import pytest

from tokenmill import BPE, BPETrainer, InputError
from tokenmill.reference import bpe as reference

MARKER = "</w>"


def merges(counts, n, **kw):
    trainer = BPETrainer(num_merges=n, end_of_word_marker=MARKER, **kw)
    return trainer.train_from_counts(counts).merges


@pytest.mark.parametrize("counts, n, expected", [
    ({"low": 2, "lower": 1}, 3, [("l", "o"), ("lo", "w"), ("low", MARKER)]),
    ({"low": 3, "lower": 1}, 5,
     [("l", "o"), ("lo", "w"), ("low", MARKER), ("e", "r"), ("er", MARKER)]),
    ({"apple": 3, "applet": 2}, 2, [("a", "p"), ("ap", "p")]),
    ({"aaab": 2, "aaac": 1}, 2, [("a", "a"), ("aa", "a")]),
    (dict.fromkeys("low lower lowest new newer newest".split(), 1), 3,
     [("w", "e"), ("l", "o"), ("n", "e")]),
])
def test_textbook_merges(counts, n, expected):
    assert merges(counts, n) == expected
    assert [m[:2] for m in reference.train(counts, n, end_of_word_marker=MARKER)] == expected


def test_words_end_as_in_the_textbook():
    result = BPETrainer(num_merges=5, end_of_word_marker=MARKER).train_from_counts(
        {"low": 3, "lower": 1})
    assert result.model.encode_word("low") == ["low</w>"]
    assert result.model.encode_word("lower") == ["low", "er</w>"]
    # 6 initial symbols (l o w e r and the marker) + 5 merges
    assert result.alphabet_size == 6
    assert result.model.vocab_size == 11


def test_vocab_size_and_num_merges_agree():
    by_size = BPETrainer(vocab_size=11, end_of_word_marker=MARKER).train_from_counts(
        {"low": 3, "lower": 1})
    assert by_size.merges == merges({"low": 3, "lower": 1}, 5)


def test_special_tokens_come_first():
    result = BPETrainer(num_merges=1, special_tokens=("<pad>", "<unk>"),
                        unk_token="<unk>").train_from_counts({"ab": 2})
    vocab = result.model.vocab
    assert vocab["<pad>"] == 0 and vocab["<unk>"] == 1
    assert vocab["a"] == 2 and vocab["b"] == 3 and vocab["ab"] == 4


def test_encoding_applies_merges_by_rank():
    bpe = BPE({s: i for i, s in enumerate(["l", "o", "w", "e", "r", MARKER, "lo", "low", "er"])},
              [("l", "o"), ("lo", "w"), ("e", "r")], end_of_word_marker=MARKER)
    assert bpe.merge_symbols(["l", "o", "w", "e", "r", MARKER]) == ["low", "er", MARKER]
    assert bpe.encode_word("lower") == ["low", "er", MARKER]


def test_rank_not_longest_match():
    # "abc" is in the vocab, but merge ranks say b+c first, and a+bc is not a merge.
    bpe = BPE({"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5}, [("b", "c"), ("a", "b")])
    assert bpe.encode_word("abc") == ["a", "bc"]


def test_equal_rank_takes_leftmost():
    bpe = BPE({"a": 0, "aa": 1}, [("a", "a")])
    assert bpe.encode_word("aaa") == ["aa", "a"]


CHINESE = ["自然语言处理是人工智能的重要分支", "自然语言处理需要语言模型",
           "语言模型可以处理自然语言文本", "人工智能与自然语言处理关系密切"]


def test_chinese_first_seen_trace():
    counts = dict.fromkeys(CHINESE, 1)
    result = BPETrainer(num_merges=12, end_of_word_marker=MARKER,
                        tie_break="first_seen").train_from_counts(counts)
    assert [(s.token, s.count) for s in result.steps] == [
        ("语言", 6), ("自然", 4), ("自然语言", 4), ("处理", 4), ("自然语言处理", 3), ("人工", 2),
        ("人工智", 2), ("人工智能", 2), ("语言模", 2), ("语言模型", 2), ("自然语言处理是", 1),
        ("自然语言处理是人工智能", 1)]
    assert result.model.encode_word("自然语言处理是人工智能的分支") == [
        "自然语言处理是人工智能", "的", "分", "支", MARKER]
    steps = reference.train(counts, 12, end_of_word_marker=MARKER, tie_break="first_seen")
    assert [(c, n) for _, _, c, n in steps] == [(s.token, s.count) for s in result.steps]


def test_trace_lines():
    result = BPETrainer(num_merges=2, end_of_word_marker=MARKER).train_from_counts(
        {"low": 2, "lower": 1})
    assert result.trace_lines() == ["Step 0: merge 'l' + 'o' -> 'lo' (count=3)",
                                    "Step 1: merge 'lo' + 'w' -> 'low' (count=3)"]


def test_counts_are_64_bit():
    big = 2**40
    result = BPETrainer(num_merges=2, end_of_word_marker=MARKER).train_from_counts(
        {"ab": big + 1, "abc": big, "bc": 5})
    first = result.steps[0]
    assert (first.left, first.right, first.count) == ("a", "b", 2 * big + 1)
    # words now: ab </w> (2**40+1), ab c </w> (2**40), b c </w> (5)
    assert result.steps[1] == ("c", MARKER, "c</w>", big + 5)


def test_suffix_and_prefix_conventions():
    result = BPETrainer(num_merges=2, end_of_word_suffix="</w>",
                        continuing_subword_prefix="##").train_from_counts({"low": 3, "lo": 1})
    # symbols: l ##o ##w</w> (3) and l ##o</w> (1); '#' sorts before 'l'
    assert result.steps == [("##o", "##w</w>", "##ow</w>", 3), ("l", "##ow</w>", "low</w>", 3)]
    assert result.model.encode_word("low") == ["low</w>"]
    assert result.model.encode_word("lo") == ["l", "##o</w>"]
    ref = reference.train({"low": 3, "lo": 1}, 2, end_of_word_suffix="</w>",
                          continuing_subword_prefix="##")
    assert ref == [tuple(s) for s in result.steps]


def test_max_token_length_and_min_frequency():
    result = BPETrainer(num_merges=10, max_token_length=2).train_from_counts({"aaaa": 5})
    assert all(len(t) <= 2 for t in result.model.vocab)
    result = BPETrainer(vocab_size=100, min_frequency=3).train_from_counts({"ab": 2, "cd": 3})
    assert result.merges == [("c", "d")]


def test_limit_alphabet_keeps_most_frequent():
    result = BPETrainer(num_merges=0, limit_alphabet=2).train_from_counts(
        {"aaab": 1, "bc": 1})
    assert set(result.model.vocab) == {"a", "b"}


def test_initial_alphabet_joins_the_alphabet_and_outranks_the_limit():
    result = BPETrainer(num_merges=0, initial_alphabet=("z", "q")).train_from_counts({"ab": 1})
    assert result.model.vocab == {"a": 0, "b": 1, "q": 2, "z": 3}
    # as in tokenizers, the characters asked for are kept before the most frequent seen ones
    result = BPETrainer(num_merges=0, initial_alphabet=("z",), limit_alphabet=2
                        ).train_from_counts({"aab": 1})
    assert set(result.model.vocab) == {"z", "a"}


def test_show_progress_draws_a_bar_only_when_asked(capsys):
    BPETrainer(num_merges=3).train_from_counts({"abcd": 3})
    assert capsys.readouterr().err == ""
    BPETrainer(num_merges=3, show_progress=True).train_from_counts({"abcd": 3})
    assert "merging" in capsys.readouterr().err


def test_the_word_cache_gives_what_merging_gives():
    result = BPETrainer(num_merges=40, end_of_word_suffix="</w>").train_from_counts(
        {"lower": 4, "lowest": 3, "newer": 2, "wider": 2, "low": 5})
    words = ["lower", "lowest", "newest", "wider", "lowlow", "new"] * 3
    uncached = BPE(result.model.vocab, result.merges, end_of_word_suffix="</w>",
                   cache_capacity=0)
    cached = BPE(result.model.vocab, result.merges, end_of_word_suffix="</w>",
                 cache_capacity=4)  # smaller than the words: entries are replaced as it goes
    expected = [reference.encode(reference.spell(w, end_of_word_suffix="</w>"), result.merges)
                for w in words]
    assert [uncached.encode_word(w) for w in words] == expected
    assert [cached.encode_word(w) for w in words] == expected


@pytest.mark.parametrize("kwargs, counts, message", [
    ({"vocab_size": 3}, {"abcd": 1}, "smaller than the alphabet"),
    ({"special_tokens": ("<s>", "<s>")}, {"a": 1}, "given twice"),
    ({}, {}, "empty corpus"),
    ({}, {"a\ud800": 1}, "lone surrogate"),
    ({"num_merges": 1}, {"a": -1}, "count of 'a'"),
    ({"end_of_word_marker": "</w>", "end_of_word_suffix": "</w>"}, {"a": 1}, "not both"),
    ({"unk_token": "<unk>"}, {"a": 1}, "must be one of the special_tokens"),
])
def test_bad_input(kwargs, counts, message):
    with pytest.raises(InputError, match=message):
        BPETrainer(**kwargs).train_from_counts(counts)


def test_byte_fallback_is_per_character():
    # Only é's bytes have <0xNN> tokens: é falls back to them, € (no byte tokens) is unknown,
    # as in Hugging Face tokenizers.
    bpe = BPE({"a": 0, "<0xC3>": 1, "<0xA9>": 2, "<unk>": 3}, [], byte_fallback=True,
              unk_token="<unk>")
    assert bpe.encode_word("aé€") == ["a", "<0xC3>", "<0xA9>", "<unk>"]
