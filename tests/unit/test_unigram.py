"""The Unigram model and trainer: known answers, sampling, bad input."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from tokenmill import InputError
from tokenmill.models.unigram import Unigram
from tokenmill.reference import unigram as ref
from tokenmill.trainers.unigram import UnigramTrainer

SCORES = {"a": -2.0, "b": -2.5, "c": -3.0, "ab": -3.0, "bc": -3.5, "abc": -6.0, "ca": -4.0}


def model() -> Unigram:
    return Unigram([("<unk>", 0.0), *SCORES.items()], unk_id=0)


def test_viterbi_known_answer():
    # a+bc+ab = -8.5 beats ab+c+ab = -9.0 and abc+ab = -9.0
    assert model().encode_word("abcab") == ["a", "bc", "ab"]


def test_unknowns_merge_into_one_unk():
    assert model().encode_word("axyb") == ["a", "<unk>", "b"]
    flat = model().encode_pieces(["axyb"])
    assert flat[4:8] == [0, 0, 1, 3]  # the unk spans both unknown characters


def test_byte_fallback_spells_unknown_characters():
    vocab = [("<unk>", 0.0), ("a", -1.0)] + [(f"<0x{b:02X}>", 0.0) for b in range(256)]
    m = Unigram(vocab, unk_id=0, byte_fallback=True, kinds=[2, 1] + [6] * 256)
    assert m.encode_word("aé") == ["a", "<0xC3>", "<0xA9>"]


def test_sampling_is_reproducible_with_a_seed():
    m = model()
    words = ["abcab", "cabca", "abcabc"] * 20
    assert m.sample_pieces(words, alpha=0.5, seed=7) == m.sample_pieces(words, alpha=0.5, seed=7)
    assert m.sample_pieces(words, alpha=0.5, seed=7) != m.sample_pieces(words, alpha=0.5, seed=8)


def test_no_sampling_for_nbest_size_0_or_1():
    m = model()
    for nbest_size in (0, 1):
        assert m.sample_word("abcab", nbest_size=nbest_size, seed=3) == m.encode_word("abcab")


@pytest.mark.parametrize("alpha, nbest_size", [(1.0, -1), (0.3, -1), (1.0, 3), (0.5, 64)])
def test_sampled_segmentations_follow_the_model(alpha, nbest_size):
    """Chi-square goodness of fit of 20,000 draws against P(seg) ∝ exp(alpha * score). With
    k - 1 degrees of freedom (k <= 12 segmentations here) the statistic stays below 40 with
    probability far above 1 - 1e-4; a biased sampler (say, ignoring alpha) lands in the
    thousands."""
    word = "abcab"
    want = ref.sample_distribution(word, SCORES, alpha, nbest_size)
    m = model()
    draws = 20_000
    seen: Counter[tuple[str, ...]] = Counter()
    flat = m.sample_pieces([word] * draws, alpha=alpha, nbest_size=nbest_size, seed=1234)
    tokens, current = [], -1
    for i, w in zip(flat[0::4], flat[1::4]):
        if w != current and current >= 0:
            seen[tuple(tokens)] += 1
            tokens = []
        current = w
        tokens.append(m.id_to_token(i))
    seen[tuple(tokens)] += 1
    assert sum(seen.values()) == draws
    assert set(seen) <= set(want)
    chi2 = sum((seen[s] - draws * p) ** 2 / (draws * p) for s, p in want.items())
    assert len(want) >= 3
    assert chi2 < 40, (chi2, seen, want)


def test_trainer_learns_frequent_words_and_keeps_every_character():
    counts = {"▁the": 50, "▁then": 10, "▁there": 10, "▁cat": 20, "▁cats": 5, "▁zq": 1}
    result = UnigramTrainer(vocab_size=20, special_tokens=("<pad>",)).train_from_counts(counts)
    m = result.model
    assert m.pieces[0][0] == "<pad>" and m.pieces[1][0] == "<unk>" and m.unk_id == 1
    assert m.vocab_size <= 20
    assert set("▁thercaszq") <= set(m.vocab)
    assert m.encode_word("▁the") == ["▁the"]
    # EM never lowers the likelihood within a round of two steps
    assert result.log_likelihoods[1] >= result.log_likelihoods[0] - 1e-6


def test_trainer_rejects_a_vocab_smaller_than_the_alphabet():
    with pytest.raises(InputError, match="smaller than the alphabet: 5 characters"):
        UnigramTrainer(vocab_size=4).train_from_counts({"abcde": 1})


@pytest.mark.parametrize("options", [{"shrinking_factor": 1.0}, {"vocab_size": 0},
                                     {"character_coverage": 0.0}, {"max_piece_length": 0}])
def test_trainer_rejects_bad_options(options):
    with pytest.raises(InputError):
        UnigramTrainer(**options)


def test_character_coverage_leaves_rare_characters_to_unk():
    counts = {"aaaa": 100, "bbbb": 100, "z": 1}
    m = UnigramTrainer(vocab_size=10, character_coverage=0.99).train_from_counts(counts).model
    assert "z" not in m.vocab
    assert m.encode_word("az") == ["a", "<unk>"]


def test_bad_model_arguments():
    with pytest.raises(InputError, match="unk_id 9"):
        Unigram([("a", -1.0)], unk_id=9)
    with pytest.raises(InputError, match="n must be"):
        model().nbest("ab", -1)


def test_scores_are_log_probabilities_after_training():
    m = UnigramTrainer(vocab_size=12).train_from_counts({"▁ab": 3, "▁abc": 2}).model
    assert all(s <= 0 for _, s in m.pieces)
    assert math.isfinite(sum(s for _, s in m.pieces))


def test_byte_fallback_spells_a_run_of_unknown_characters_of_every_width():
    vocab = [("<unk>", 0.0), ("a", -1.0)] + [(f"<0x{b:02X}>", 0.0) for b in range(256)]
    m = Unigram(vocab, unk_id=0, byte_fallback=True, kinds=[2, 1] + [6] * 256)
    assert m.encode_word("a中é😀a") == ["a", "<0xE4>", "<0xB8>", "<0xAD>", "<0xC3>", "<0xA9>",
                                       "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "a"]
    # each byte token spans the character it comes from (characters 1, 2, 3)
    flat = m.encode_pieces(["a中é😀a"])
    assert [(flat[k + 2], flat[k + 3]) for k in range(0, len(flat), 4)] == [
        (0, 1), (1, 2), (1, 2), (1, 2), (2, 3), (2, 3), (3, 4), (3, 4), (3, 4), (3, 4), (4, 5)]


def test_unknowns_of_every_width_merge_into_one_unk():
    assert model().encode_word("a中é😀b") == ["a", "<unk>", "b"]
    flat = model().encode_pieces(["a中é😀b"])
    assert flat[4:8] == [0, 0, 1, 4]  # the unk spans the three unknown characters


def test_a_character_in_no_piece_without_an_unk_is_named_by_its_place():
    # (the place counts characters: the walk finds where each ends as it goes)
    m = Unigram([("a", -1.0), ("b", -1.0), ("é", -1.0)], unk_id=None)
    assert m.encode_word("éab") == ["é", "a", "b"]
    with pytest.raises(InputError, match=r"^the character at 2 of 'éa中b' is in no piece and "
                                         r"the model has no unk$"):
        m.encode_word("éa中b")
