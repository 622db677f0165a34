"""BPE-dropout: the core's encoder against the reference twin draw for draw, the textbook edge
cases, reproducibility through the Tokenizer, and the distribution of segmentations."""

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import BPE, BPETrainer, InputError, Tokenizer
from tokenmill.pre_tokenizers import WhitespaceSplit
from tokenmill.reference import bpe as reference

LETTERS = "abcde语😀"
words = st.text(alphabet=LETTERS, min_size=1, max_size=9)
corpora = st.dictionaries(words, st.integers(1, 6), min_size=1, max_size=12)
conventions = st.sampled_from([
    {"end_of_word_marker": "</w>"},
    {"end_of_word_suffix": "</w>", "continuing_subword_prefix": "##"},
    {},
])


@settings(max_examples=200, deadline=None)
@given(corpora, st.integers(0, 30), conventions, st.floats(0, 1), st.integers(0, 2**64 - 1),
       st.lists(st.text(alphabet=LETTERS, min_size=1, max_size=80), min_size=1, max_size=4))
def test_dropout_equals_reference(counts, n, convention, p, seed, probes):
    result = BPETrainer(num_merges=n, initial_alphabet=tuple(LETTERS),
                        **convention).train_from_counts(counts)
    model = result.model
    for word in list(counts) + probes:
        symbols = [s for s in reference.spell(word, **convention) if s in model.vocab]
        expected = reference.encode_dropout(symbols, result.merges, p, seed,
                                            convention.get("continuing_subword_prefix"))
        assert model.encode_word(word, dropout=p, seed=seed) == expected


MODEL = BPE({"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5},
            [("a", "b"), ("b", "c"), ("ab", "c")])


def test_no_dropout_and_full_dropout():
    assert MODEL.encode_word("abcabc", dropout=0.0, seed=3) == ["abc", "abc"]
    assert MODEL.encode_word("abcabc", dropout=1.0, seed=3) == list("abcabc")
    with pytest.raises(InputError, match=r"dropout must be a probability in \[0, 1\], got 1.5"):
        MODEL.encode_word("abc", dropout=1.5)


def exact_distribution(symbols: tuple[str, ...], p: float) -> dict[tuple[str, ...], float]:
    """Every segmentation BPE-dropout can give and its probability: at each step the k-th
    applicable merge in rank order is applied with probability p^k (1 - p); all are skipped
    with probability p^m, which ends the word."""
    ranks = {("a", "b"): 0, ("b", "c"): 1, ("ab", "c"): 2}
    candidates = sorted((ranks[q], i) for i, q in enumerate(zip(symbols, symbols[1:]))
                        if q in ranks)
    out: Counter = Counter()
    out[symbols] += p ** len(candidates)
    for k, (_, i) in enumerate(candidates):
        merged = symbols[:i] + (symbols[i] + symbols[i + 1],) + symbols[i + 2:]
        for seg, q in exact_distribution(merged, p).items():
            out[seg] += p ** k * (1 - p) * q
    return out


def test_segmentations_follow_the_model():
    # "abc" can end as abc, ab|c, a|bc or a|b|c. Chi-square over 20,000 fixed seeds against the
    # exact probabilities; 16.27 is the 99.9% point of chi-square with 3 degrees of freedom.
    p, n = 0.3, 20000
    expected = exact_distribution(("a", "b", "c"), p)
    seen = Counter(tuple(MODEL.encode_word("abc", dropout=p, seed=s)) for s in range(n))
    assert set(seen) == set(expected) == {("abc",), ("ab", "c"), ("a", "bc"), ("a", "b", "c")}
    chi2 = sum((seen[k] - n * q) ** 2 / (n * q) for k, q in expected.items())
    assert chi2 < 16.27, (chi2, seen, expected)


def test_tokenizer_dropout_is_reproducible_and_per_input():
    tok = Tokenizer(MODEL, pre_tokenizer=WhitespaceSplit())
    text = " ".join(["abc"] * 30)
    first = tok.encode(text, dropout=0.5, seed=11).tokens
    assert tok.encode(text, dropout=0.5, seed=11).tokens == first
    assert any(tok.encode(text, dropout=0.5, seed=s).tokens != first for s in range(12, 20))
    assert tok.encode(text).tokens == ["abc"] * 30  # no dropout unless asked
    # An input's tokens depend on its seed and place in the batch, not on its neighbours.
    a = tok.encode_batch([text, "abc abc"], dropout=0.5, seed=5)
    b = tok.encode_batch([text, "cab"], dropout=0.5, seed=5)
    assert a[0].tokens == b[0].tokens


def test_model_dropout_from_file_round_trips():
    data = Tokenizer(MODEL, pre_tokenizer=WhitespaceSplit()).to_dict()
    data["model"]["dropout"] = 1.0
    tok = Tokenizer.from_dict(data)
    assert tok.model.dropout == 1.0
    assert tok.encode("abc", seed=1).tokens == ["a", "b", "c"]  # the file's dropout applies
    assert tok.to_dict()["model"]["dropout"] == 1.0
    data["model"]["dropout"] = 2
    with pytest.raises(Exception, match=r"model.dropout: expected a probability in \[0, 1\]"):
        Tokenizer.from_dict(data)


def test_dropout_keeps_offsets_on_the_text():
    tok = Tokenizer(MODEL, pre_tokenizer=WhitespaceSplit())
    enc = tok.encode("abc ab", dropout=0.5, seed=2)
    assert enc.tokens == ["abc ab"[s:e] for s, e in enc.offsets]


def test_byte_level_dropout_round_trips(shared_data):
    tok = Tokenizer.from_file(shared_data / "tokenizers" / "gpt2" / "tokenizer.json")
    text = "Hello world, ümlauts and 中文 text! "
    plain = tok.encode(text)
    dropped = tok.encode(text, dropout=0.4, seed=9)
    assert len(dropped.ids) > len(plain.ids)
    assert tok.decode(dropped.ids) == text
    assert tok.encode(text, dropout=0.0, seed=9).ids == plain.ids


def test_all_segmentations_reachable():
    # With p = 0.5 every segmentation of "abcabc" into vocabulary tokens along the merge paths
    # appears among a few thousand seeds.
    seen = {tuple(MODEL.encode_word("abcabc", dropout=0.5, seed=s)) for s in range(3000)}
    halves = {("abc",), ("ab", "c"), ("a", "bc"), ("a", "b", "c")}
    assert seen == {x + y for x, y in itertools.product(halves, repeat=2)}
