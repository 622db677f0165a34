"""Unigram LM, slowly and plainly: the test oracle for the core's lattice algorithms.

A word's segmentations are the ways to cut it into pieces of the vocabulary; a segmentation's
score is the sum of its pieces' scores (log probabilities), so its probability under the model
is exp(score) / Z, Z summing exp(score) over all segmentations. Everything below is either an
explicit enumeration of the segmentations (exponential: only for tiny words) or the dynamic
programme over the lattice that computes the same thing in linear time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping


def segmentations(word: str, scores: Mapping[str, float]) -> Iterator[list[str]]:
    """Every way to cut ``word`` into pieces of ``scores`` (exponentially many)."""
    if not word:
        yield []
        return
    for end in range(1, len(word) + 1):
        head = word[:end]
        if head in scores:
            for rest in segmentations(word[end:], scores):
                yield [head, *rest]


def score(pieces: list[str], scores: Mapping[str, float]) -> float:
    return sum(scores[p] for p in pieces)


def brute_force_expected_counts(word: str, scores: Mapping[str, float]) -> dict[str, float]:
    """E[number of times each piece is used] under P(seg) = exp(score) / Z, by enumeration."""
    segs = list(segmentations(word, scores))
    weights = [math.exp(score(s, scores)) for s in segs]
    z = sum(weights)
    expected: dict[str, float] = {}
    for seg, w in zip(segs, weights):
        for piece in seg:
            expected[piece] = expected.get(piece, 0.0) + w / z
    return expected


def expected_counts(word: str, scores: Mapping[str, float]) -> tuple[dict[str, float], float]:
    """The same by forward-backward over the lattice, and log Z.

    forward[i]: log of the summed probability mass of all segmentations of word[:i];
    backward[i]: the same for word[i:]. A piece spanning [i, j) is used with probability
    exp(forward[i] + score + backward[j] - log Z).
    """
    n = len(word)
    edges = [(i, j, word[i:j]) for i in range(n) for j in range(i + 1, n + 1)
             if word[i:j] in scores]
    forward = [-math.inf] * (n + 1)
    backward = [-math.inf] * (n + 1)
    forward[0] = backward[n] = 0.0
    for i, j, piece in edges:  # edges in order of start: forward[i] is final when used
        forward[j] = _log_add(forward[j], forward[i] + scores[piece])
    for i, j, piece in reversed(edges):
        backward[i] = _log_add(backward[i], scores[piece] + backward[j])
    log_z = forward[n]
    expected: dict[str, float] = {}
    for i, j, piece in edges:
        p = math.exp(forward[i] + scores[piece] + backward[j] - log_z)
        expected[piece] = expected.get(piece, 0.0) + p
    return expected, log_z


def viterbi(word: str, scores: Mapping[str, float]) -> list[str]:
    """The best segmentation: best[j] = max over pieces word[i:j] of best[i] + score."""
    n = len(word)
    best: list[float] = [0.0] + [-math.inf] * n
    back = [0] * (n + 1)
    for i in range(n):
        for j in range(i + 1, n + 1):
            piece = word[i:j]
            if piece in scores and best[i] + scores[piece] > best[j]:
                best[j], back[j] = best[i] + scores[piece], i
    pieces = []
    j = n
    while j > 0:
        pieces.append(word[back[j]:j])
        j = back[j]
    return pieces[::-1]


def nbest_scores(word: str, scores: Mapping[str, float], n: int) -> list[float]:
    """The scores of the ``n`` best segmentations, by enumeration."""
    return sorted((score(s, scores) for s in segmentations(word, scores)), reverse=True)[:n]


def sample_distribution(word: str, scores: Mapping[str, float], alpha: float,
                        nbest_size: int) -> dict[tuple[str, ...], float]:
    """What sampling should draw: P(seg) ∝ exp(alpha * score) over all segmentations
    (``nbest_size < 0``) or over the ``nbest_size`` best."""
    segs = sorted(segmentations(word, scores), key=lambda s: -score(s, scores))
    if nbest_size > 0:
        segs = segs[:nbest_size]
    weights = [math.exp(alpha * score(s, scores)) for s in segs]
    z = sum(weights)
    return {tuple(s): w / z for s, w in zip(segs, weights)}


def _log_add(a: float, b: float) -> float:
    if a < b:
        a, b = b, a
    return a if b == -math.inf else a + math.log1p(math.exp(b - a))
