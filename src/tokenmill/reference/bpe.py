"""Textbook BPE, written to be read: the oracle the C++ core is tested against.

Training recounts every adjacent pair in every round (Sennrich et al. 2016, "Neural Machine
Translation of Rare Words with Subword Units", Algorithm 1), so it is O(merges * corpus): fine
for a few hundred words, which is all a test or a lesson needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal


def spell(word: str, *, end_of_word_marker: str | None = None,
          end_of_word_suffix: str | None = None,
          continuing_subword_prefix: str | None = None) -> list[str]:
    """A word's initial symbols: its characters, with the end-of-word convention applied.

    >>> spell("low", end_of_word_marker="</w>")
    ['l', 'o', 'w', '</w>']
    >>> spell("low", end_of_word_suffix="</w>", continuing_subword_prefix="##")
    ['l', '##o', '##w</w>']
    """
    symbols = [(continuing_subword_prefix or "") + c if i else c for i, c in enumerate(word)]
    if symbols and end_of_word_suffix:
        symbols[-1] += end_of_word_suffix
    if symbols and end_of_word_marker:
        symbols.append(end_of_word_marker)
    return symbols


def train(word_counts: Mapping[str, int], num_merges: int, *,
          end_of_word_marker: str | None = None, end_of_word_suffix: str | None = None,
          continuing_subword_prefix: str | None = None,
          tie_break: Literal["lexicographic", "first_seen"] = "lexicographic",
          ) -> list[tuple[str, str, str, int]]:
    """Learn ``num_merges`` merges; returns ``(left, right, new symbol, count)`` per step.

    >>> [m[:3] for m in train({"low": 2, "lower": 1}, 3, end_of_word_marker="</w>")]
    [('l', 'o', 'lo'), ('lo', 'w', 'low'), ('low', '</w>', 'low</w>')]
    """
    # Words keep the order they arrive in: "first seen" means first in this order.
    words = [(spell(w, end_of_word_marker=end_of_word_marker,
                    end_of_word_suffix=end_of_word_suffix,
                    continuing_subword_prefix=continuing_subword_prefix), c)
             for w, c in word_counts.items() if w]
    steps = []
    for _ in range(num_merges):
        # 1. Count every adjacent pair, weighted by word count. Overlapping pairs count twice:
        #    "aaa" holds ("a", "a") at positions 0 and 1. A dict remembers first-seen order.
        pairs: dict[tuple[str, str], int] = {}
        for symbols, count in words:
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] = pairs.get(pair, 0) + count
        if not pairs:
            break
        # 2. The most frequent pair; ties go to the smallest pair, or to the first one seen
        #    (max() returns the first maximum it meets, as the textbook code relies on).
        best_count = max(pairs.values())
        tied = [p for p, c in pairs.items() if c == best_count]
        best = min(tied) if tie_break == "lexicographic" else tied[0]
        left, right = best
        # subtle: a continuing-subword prefix lives only at the start of the merged symbol.
        if continuing_subword_prefix and right.startswith(continuing_subword_prefix):
            new = left + right[len(continuing_subword_prefix):]
        else:
            new = left + right
        steps.append((left, right, new, best_count))
        # 3. Replace each occurrence, left to right, without overlaps ("a a a" -> "aa a").
        words = [(_replace(symbols, best, new), count) for symbols, count in words]
    return steps


def _replace(symbols: list[str], pair: tuple[str, str], new: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def encode(symbols: Sequence[str], merges: Sequence[tuple[str, str]],
           continuing_subword_prefix: str | None = None) -> list[str]:
    """Apply merges by rank: repeatedly merge the adjacent pair whose merge came earliest in
    training (on equal rank, the leftmost), until no pair has a merge.

    >>> encode(["l", "o", "w", "e", "r", "</w>"], [("l", "o"), ("lo", "w"), ("e", "r")])
    ['low', 'er', '</w>']
    """
    ranks = {pair: i for i, pair in reversed(list(enumerate(merges)))}  # first rank wins
    symbols = list(symbols)
    while len(symbols) > 1:
        candidates = [(ranks[p], i) for i, p in enumerate(zip(symbols, symbols[1:]))
                      if p in ranks]
        if not candidates:
            break
        _, i = min(candidates)
        left, right = symbols[i], symbols[i + 1]
        if continuing_subword_prefix and right.startswith(continuing_subword_prefix):
            right = right[len(continuing_subword_prefix):]
        symbols[i:i + 2] = [left + right]
    return symbols


def splitmix64(state: int) -> tuple[int, int]:
    """One step of the splitmix64 generator: (new state, output), all 64-bit."""
    mask = (1 << 64) - 1
    state = (state + 0x9E3779B97F4A7C15) & mask
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return state, z ^ (z >> 31)


def encode_dropout(symbols: Sequence[str], merges: Sequence[tuple[str, str]], dropout: float,
                   seed: int, continuing_subword_prefix: str | None = None) -> list[str]:
    """BPE-dropout (Provilkov et al., 2020): at each step, walk the applicable merges in rank
    order (on equal rank, leftmost first), skip each with probability ``dropout``, and apply the
    first one kept; stop when every one was skipped. Draws are ``splitmix64(seed)``'s top 53
    bits as a fraction, one per merge considered, so the core's encoder can be held equal.

    >>> [encode_dropout(["a", "b"], [("a", "b")], p, seed=1) for p in (0.0, 1.0)]
    [['ab'], ['a', 'b']]
    """
    ranks = {pair: i for i, pair in reversed(list(enumerate(merges)))}
    symbols = list(symbols)
    state = seed
    while True:
        candidates = sorted((ranks[p], i) for i, p in enumerate(zip(symbols, symbols[1:]))
                            if p in ranks)
        for _, i in candidates:
            state, value = splitmix64(state)
            if (value >> 11) / 2.0**53 >= dropout:  # kept: apply it, then start a new step
                right = symbols[i + 1]
                if continuing_subword_prefix and right.startswith(continuing_subword_prefix):
                    right = right[len(continuing_subword_prefix):]
                symbols[i:i + 2] = [symbols[i] + right]
                break
        else:
            return symbols


def trace_lines(steps: Sequence[tuple[str, str, str, int]]) -> list[str]:
    """The teaching trace, one line per merge.

    >>> trace_lines([("l", "o", "lo", 3)])
    ["Step 0: merge 'l' + 'o' -> 'lo' (count=3)"]
    """
    return [f"Step {i}: merge {a!r} + {b!r} -> {c!r} (count={n})"
            for i, (a, b, c, n) in enumerate(steps)]
