"""The trainers' limits: options that are not valid text, and counts too large for 64 bits."""

import pytest

from tokenmill import BPETrainer, InputError
from tokenmill.cli import main
from tokenmill.trainers import UnigramTrainer, WordPieceTrainer

LIMIT = 2**64 - 1
TOO_LARGE = ("counts too large: the sum of count x {what} over the words is {total}, over the "
             f"limit 2**64-1 = {LIMIT}, so a count could wrap; scale the counts down")


def surrogate(what, shown="'\\ud800'", code="D800", at=0):
    return (f"{what}: {shown} holds a lone surrogate U+{code} at character {at}; it is not "
            "valid Unicode text")


@pytest.mark.parametrize("trainer, options, message", [
    (BPETrainer, {"special_tokens": ("\ud800",)}, surrogate("special_tokens[0]")),
    (BPETrainer, {"special_tokens": ("<s>", "x\ud800")},
     surrogate("special_tokens[1]", "'x\\ud800'", at=1)),
    (BPETrainer, {"special_tokens": ("<s>",), "unk_token": "\udcff"},
     surrogate("unk_token", "'\\udcff'", "DCFF")),
    (BPETrainer, {"initial_alphabet": ("a", "\udfff")},
     surrogate("initial_alphabet[1]", "'\\udfff'", "DFFF")),
    (BPETrainer, {"end_of_word_marker": "</w\ud800>"},
     surrogate("end_of_word_marker", "'</w\\ud800>'", at=3)),
    (BPETrainer, {"end_of_word_suffix": "\ud800"}, surrogate("end_of_word_suffix")),
    (BPETrainer, {"continuing_subword_prefix": "\ud800"},
     surrogate("continuing_subword_prefix")),
    (WordPieceTrainer, {"special_tokens": ("[UNK]", "\ud800")}, surrogate("special_tokens[1]")),
    (WordPieceTrainer, {"special_tokens": ("\ud800",), "unk_token": "\ud800"},
     surrogate("special_tokens[0]")),
    (WordPieceTrainer, {"initial_alphabet": ("\ud800",)}, surrogate("initial_alphabet[0]")),
    (WordPieceTrainer, {"continuing_subword_prefix": "\ud800"},
     surrogate("continuing_subword_prefix")),
    (UnigramTrainer, {"special_tokens": ("\ud800",)}, surrogate("special_tokens[0]")),
    (UnigramTrainer, {"unk_token": "\ud800"}, surrogate("unk_token")),
    (UnigramTrainer, {"initial_alphabet": ("\ud800",)}, surrogate("initial_alphabet[0]")),
])
def test_a_lone_surrogate_in_an_option_is_named(trainer, options, message):
    with pytest.raises(InputError) as e:
        trainer(**options)
    assert str(e.value) == message


@pytest.mark.parametrize("args, message", [
    (["--special-tokens", "\udcff"], surrogate("special_tokens[0]", "'\\udcff'", "DCFF")),
    (["--special-tokens", "<s>", "--unk-token", "\udcff"],
     surrogate("unk_token", "'\\udcff'", "DCFF")),
    (["--end-of-word-marker", "\udcff"], surrogate("end_of_word_marker", "'\\udcff'", "DCFF")),
    (["--end-of-word-suffix", "\udcff"], surrogate("end_of_word_suffix", "'\\udcff'", "DCFF")),
    (["--initial-alphabet", "a\udcff"],
     surrogate("initial_alphabet[1]", "'\\udcff'", "DCFF")),
    (["--continuing-subword-prefix", "\udcff"],
     surrogate("continuing_subword_prefix", "'\\udcff'", "DCFF")),
    (["--model", "wordpiece", "--vocab-size", "40", "--unk-token", "\udcff"],
     surrogate("unk_token", "'\\udcff'", "DCFF")),
    (["--model", "unigram", "--vocab-size", "40", "--special-tokens", "\udcff"],
     surrogate("special_tokens[0]", "'\\udcff'", "DCFF")),
])
def test_cli_a_byte_that_is_not_utf8_in_an_option_exits_2(tmp_path, capsys, args, message):
    # The shell hands Python a byte such as 0xff as the surrogate escape U+DCFF.
    corpus = tmp_path / "c.txt"
    corpus.write_text("low lower lowest\n", encoding="utf-8")
    if "--vocab-size" not in args:
        args = ["--num-merges", "2", *args]
    code = main(["train", str(corpus), *args, "--quiet", "-o", str(tmp_path / "x.json")])
    assert code == 2
    assert capsys.readouterr().err == f"tokenmill: error: {message}\n"
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("counts, total", [
    # ('a', 'b') is seen 2**64 times: it wrapped to 0, and ('x', 'a') was merged.
    ({"ab": 2**63, "xab": 2**63}, 3 * 2**63),
    # ('a', 'b') twice in one word: 2**64 again, and ('b', 'a') was merged.
    ({"abab": 2**63}, 3 * 2**63),
    ({"ab": LIMIT, "cd": 1}, LIMIT + 1),
])
@pytest.mark.parametrize("tie_break", ["lexicographic", "first_seen"])
def test_bpe_counts_that_could_wrap_are_refused(counts, total, tie_break):
    with pytest.raises(InputError) as e:
        BPETrainer(num_merges=1, tie_break=tie_break).train_from_counts(counts)
    assert str(e.value) == TOO_LARGE.format(what="(symbols - 1)", total=total)


@pytest.mark.parametrize("tie_break", ["lexicographic", "first_seen"])
def test_bpe_counts_at_the_limit_train_exactly(tie_break):
    trainer = BPETrainer(num_merges=3, tie_break=tie_break)
    # count x (symbols - 1): 2 * 2**62 + (2**63 - 1) = 2**64 - 1, the limit itself.
    result = trainer.train_from_counts({"abc": 2**62, "bc": 2**63 - 1})
    assert result.steps == [("b", "c", "bc", 2**62 + 2**63 - 1), ("a", "bc", "abc", 2**62)]
    assert trainer.train_from_counts({"ab": LIMIT}).steps == [("a", "b", "ab", LIMIT)]
    with pytest.raises(InputError) as e:
        trainer.train_from_counts({"abc": 2**62, "bc": 2**63})
    assert str(e.value) == TOO_LARGE.format(what="(symbols - 1)", total=2**64)


def test_bpe_the_bound_counts_only_symbols_kept():
    # 'z' is left out of the alphabet, so 'abz' is 'a' 'b': ('a', 'b') is seen 2**64 - 1 times.
    result = BPETrainer(num_merges=1, limit_alphabet=2).train_from_counts(
        {"ab": 2**63, "abz": 2**63 - 1})
    assert result.steps == [("a", "b", "ab", LIMIT)]
    # a one-character word has no pairs: 'a' weighs 2**64 in the alphabet and is kept
    result = BPETrainer(num_merges=1, limit_alphabet=2).train_from_counts(
        {"a": LIMIT, "ab": 1, "cc": 2})
    assert result.model.vocab == {"a": 0, "c": 1, "cc": 2}
    assert result.steps == [("c", "c", "cc", 2)]


def test_wordpiece_counts_that_could_wrap_are_refused():
    trainer = WordPieceTrainer(vocab_size=8, special_tokens=("[UNK]",))
    # 'a' is seen 2**64 times: it wrapped to 0, and ('a', '##b') scored 1 / 0.
    with pytest.raises(InputError) as e:
        trainer.train_from_counts({"a": LIMIT, "ab": 1, "cd": 1})
    assert str(e.value) == TOO_LARGE.format(what="symbols", total=LIMIT + 4)
    with pytest.raises(InputError) as e:
        trainer.train_from_counts({"ab": 2**63 - 1, "a": 2})
    assert str(e.value) == TOO_LARGE.format(what="symbols", total=2**64)


def test_wordpiece_counts_at_the_limit_train_exactly():
    trainer = WordPieceTrainer(vocab_size=5, special_tokens=("[UNK]",))
    # count x symbols: 2 * (2**63 - 1) + 1 = 2**64 - 1
    result = trainer.train_from_counts({"ab": 2**63 - 1, "a": 1})
    assert result.steps == [("a", "##b", "ab", 2**63 - 1, 2**63, 2**63 - 1)]


def test_wordpiece_alphabet_weights_do_not_wrap():
    # 'a' weighs 2**64 + 1 in the alphabet, 'c' 2**63 + 2 and 'z' 2**63; wrapped, 'a' would
    # weigh 1 and lose its place to 'z'. Only 'a' and 'cc' are kept, well within the bound.
    trainer = WordPieceTrainer(vocab_size=5, special_tokens=("[UNK]",), limit_alphabet=2)
    result = trainer.train_from_counts({"aaz": 2**63, "a": 1, "cc": 2**62 + 1})
    assert list(result.model.vocab) == ["[UNK]", "a", "c", "##c", "cc"]
    assert result.steps == [("c", "##c", "cc", 2**62 + 1, 2**62 + 1, 2**62 + 1)]
    assert result.words_dropped == 1


def test_unigram_takes_counts_up_to_the_limit():
    # The Unigram trainer sums counts as doubles (expected counts are fractional): nothing
    # wraps, and 2**64 - 1 learns what 2**40 does.
    def train(count):
        return UnigramTrainer(vocab_size=8, special_tokens=("<unk>",)).train_from_counts(
            {"▁ab": count, "▁ba": count, "▁abab": count})

    big, limit = train(2**40), train(LIMIT)
    assert list(limit.model.vocab) == list(big.model.vocab) == \
        ["<unk>", "▁ab", "▁", "ab", "ba", "a", "b"]
    assert limit.model.encode_word("▁abab") == ["▁ab", "ab"]


@pytest.mark.parametrize("trainer", [BPETrainer, WordPieceTrainer, UnigramTrainer])
def test_an_option_item_that_is_not_a_string_is_named(trainer):
    with pytest.raises(InputError, match=r"^special_tokens\[1\]: expected a string, got int$"):
        trainer(special_tokens=("<s>", 1))
    # A list is taken as the tuple it stands for (as tokenizers' trainers take lists).
    with pytest.raises(InputError, match=r"^initial_alphabet\[0\]: "):
        trainer(initial_alphabet=["\ud800"])
