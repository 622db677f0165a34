"""Unigram lattice algorithms against enumeration of every segmentation (reference/unigram.py).

The textbook check: the E-step's expected piece counts, computed by forward-backward in the core,
equal the counts obtained by listing all segmentations of each word with their probabilities.
"""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import _core
from tokenmill.models.unigram import Unigram
from tokenmill.reference import unigram as ref

ALPHABET = "abc"
SUBSTRINGS = sorted({ALPHABET[i % 3] + ALPHABET[j % 3] + ALPHABET[k % 3][:n]
                     for i in range(3) for j in range(3) for k in range(3) for n in (0, 1)})


@st.composite
def vocabularies(draw: st.DrawFn) -> dict[str, float]:
    """Every character (so every word has a segmentation) and some longer pieces."""
    longer = draw(st.lists(st.sampled_from(SUBSTRINGS), unique=True, max_size=10))
    # float32 values: the core keeps scores as sentencepiece does, in single precision
    score = st.floats(min_value=-8.0, max_value=-0.125, allow_nan=False, width=32)
    return {piece: draw(score) for piece in [*ALPHABET, *longer]}


words = st.text(alphabet=ALPHABET, min_size=1, max_size=8)


def model_of(scores: dict[str, float]) -> Unigram:
    return Unigram([("<unk>", 0.0), *scores.items()], unk_id=0)


@settings(max_examples=150)
@given(vocabularies(), st.dictionaries(words, st.integers(1, 5), min_size=1, max_size=4))
def test_e_step_expected_counts_equal_enumeration(scores, corpus):
    model = model_of(scores)
    expected, log_likelihood = _core.unigram_e_step(model._core, list(corpus),
                                                    list(corpus.values()), 2)
    brute: Counter[str] = Counter()
    brute_likelihood = 0.0
    for word, count in corpus.items():
        for piece, e in ref.brute_force_expected_counts(word, scores).items():
            brute[piece] += count * e
        z = sum(math.exp(ref.score(s, scores)) for s in ref.segmentations(word, scores))
        brute_likelihood += count * math.log(z)
    for piece, i in model.vocab.items():
        assert math.isclose(expected[i], brute.get(piece, 0.0), rel_tol=1e-9, abs_tol=1e-12), piece
    assert math.isclose(log_likelihood, brute_likelihood, rel_tol=1e-9, abs_tol=1e-9)


@given(vocabularies(), words)
def test_forward_backward_twin_equals_enumeration(scores, word):
    expected, _ = ref.expected_counts(word, scores)
    brute = ref.brute_force_expected_counts(word, scores)
    assert expected.keys() == brute.keys()
    for piece, e in brute.items():
        assert math.isclose(expected[piece], e, rel_tol=1e-9)


@given(vocabularies(), words)
def test_viterbi_is_the_best_segmentation(scores, word):
    tokens = model_of(scores).encode_word(word)
    assert "".join(tokens) == word
    best = max(ref.score(s, scores) for s in ref.segmentations(word, scores))
    # float32 scores summed in float32, as sentencepiece does
    assert math.isclose(ref.score(tokens, scores), best, abs_tol=1e-4)
    assert math.isclose(ref.score(ref.viterbi(word, scores), scores), best, abs_tol=1e-9)


@given(vocabularies(), words, st.integers(1, 12))
def test_nbest_are_the_n_best(scores, word, n):
    got = model_of(scores).nbest(word, n)
    want = ref.nbest_scores(word, scores, n)
    assert len(got) == len(want)
    assert len({tuple(tokens) for tokens, _ in got}) == len(got)  # all different
    for (tokens, total), expected in zip(got, want):
        assert "".join(tokens) == word
        assert math.isclose(total, expected, abs_tol=1e-4)


# Characters of one to four bytes: the walk finds where each ends from the bytes themselves.
WIDE = "aé中😀"
WIDE_SUBSTRINGS = sorted({a + b + c[:n] for a in WIDE for b in WIDE for c in WIDE for n in (0, 1)})


@given(st.lists(st.sampled_from(WIDE_SUBSTRINGS), unique=True, max_size=12),
       st.text(alphabet=WIDE, min_size=1, max_size=7), st.data())
def test_viterbi_over_characters_of_every_width(longer, word, data):
    score = st.floats(min_value=-8.0, max_value=-0.125, allow_nan=False, width=32)
    scores = {piece: data.draw(score) for piece in [*WIDE, *longer]}
    model = model_of(scores)
    tokens = model.encode_word(word)
    assert "".join(tokens) == word
    best = max(ref.score(s, scores) for s in ref.segmentations(word, scores))
    assert math.isclose(ref.score(tokens, scores), best, abs_tol=1e-4)
    # spans in characters, one after the other
    flat = model.encode_pieces([word])
    spans = [(flat[k + 2], flat[k + 3]) for k in range(0, len(flat), 4)]
    ends = [sum(map(len, tokens[:k + 1])) for k in range(len(tokens))]
    assert spans == list(zip([0, *ends[:-1]], ends))
