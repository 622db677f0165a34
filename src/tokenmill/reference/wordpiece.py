"""Textbook WordPiece, written to be read: the oracle the C++ core is tested against.

Encoding is BERT's greedy longest-match-first (Devlin et al. 2018; Wu et al. 2016, "Google's
Neural Machine Translation System", section 4.1). Training merges, each round, the pair with the
highest likelihood gain count(ab) / (count(a) * count(b)) (Schuster & Nakajima 2012, "Japanese
and Korean Voice Search"), recounting everything every round: O(merges * corpus), fine for the
few hundred words a test or a lesson needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from tokenmill.reference.bpe import _replace  # every occurrence, left to right, no overlaps


def encode(word: str, vocab: Mapping[str, int] | set[str], *, unk_token: str = "[UNK]",
           continuing_subword_prefix: str = "##",
           max_input_chars_per_word: int = 100) -> list[tuple[str, int, int]]:
    """The tokens of one word with their character spans ``(token, start, end)``.

    >>> encode("unaffable", {"un", "##aff", "##able"})
    [('un', 0, 2), ('##aff', 2, 5), ('##able', 5, 9)]
    >>> encode("unknown", {"un", "##aff"})
    [('[UNK]', 0, 7)]
    """
    whole = [(unk_token, 0, len(word))]
    if len(word) > max_input_chars_per_word:
        return whole
    tokens = []
    start = 0
    while start < len(word):
        # The longest piece from `start` that is a token; pieces after the first carry the
        # prefix, so "##able" can follow "un" but never start a word.
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else continuing_subword_prefix + word[start:end]
            if piece in vocab:
                tokens.append((piece, start, end))
                break
        else:
            # subtle: one unmatchable part makes the WHOLE word unknown, not just that part.
            return whole
        start = end
    return tokens


def alphabet(word_counts: Mapping[str, int], *, initial_alphabet: Sequence[str] = (),
             limit_alphabet: int | None = None, continuing_subword_prefix: str = "##",
             ) -> tuple[list[str], list[str]]:
    """``(characters, symbols)``: the characters kept, and the initial symbols in id order.

    Characters are ranked by how often they occur (word counts weigh); ``limit_alphabet`` keeps
    the most frequent (ties: the smaller code point), the initial alphabet always among them.
    Symbols are every kept character, then the ``##`` forms seen inside a kept word (and those of
    the initial alphabet), each group in code point order.

    >>> alphabet({"ab": 2, "b": 1})
    (['a', 'b'], ['a', 'b', '##b'])
    """
    freq: dict[str, float] = {}
    for word, count in word_counts.items():
        for c in word:
            freq[c] = freq.get(c, 0) + count
    for c in initial_alphabet:
        freq[c] = float("inf")
    chars = sorted(freq)
    if limit_alphabet is not None and len(chars) > limit_alphabet:
        chars = sorted(sorted(chars, key=lambda c: -freq[c])[:limit_alphabet])
    kept = set(chars)
    prefix = continuing_subword_prefix
    continuing = {prefix + c for c in initial_alphabet}
    for word in word_counts:
        if word and set(word) <= kept:
            continuing.update(prefix + c for c in word[1:])
    return chars, chars + sorted(continuing - set(chars))


def train(word_counts: Mapping[str, int], vocab_size: int, *, min_frequency: int = 0,
          special_tokens: Sequence[str] = (), initial_alphabet: Sequence[str] = (),
          limit_alphabet: int | None = None, continuing_subword_prefix: str = "##",
          ) -> tuple[list[str], list[tuple[str, str, str, int, Fraction]]]:
    """The vocabulary (by id) and the merges ``(left, right, token, count(ab), score)``.

    >>> vocab, steps = train({"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}, 14)
    >>> steps[0][:3], steps[0][4]
    (('##g', '##s', '##gs'), Fraction(1, 20))
    """
    prefix = continuing_subword_prefix
    chars, symbols = alphabet(word_counts, initial_alphabet=initial_alphabet,
                              limit_alphabet=limit_alphabet, continuing_subword_prefix=prefix)
    vocab = list(dict.fromkeys([*special_tokens, *symbols]))
    if vocab_size < len(vocab):
        raise ValueError(f"vocab_size {vocab_size} < {len(vocab)}")
    kept = set(chars)
    # A word with a character outside the alphabet is left out (it encodes as unknown anyway).
    words = [([c if i == 0 else prefix + c for i, c in enumerate(w)], n)
             for w, n in word_counts.items() if w and set(w) <= kept]
    steps = []
    while len(vocab) < vocab_size:
        # 1. Count symbols and adjacent pairs, weighted by word count.
        symbol_counts: dict[str, int] = {}
        pair_counts: dict[tuple[str, str], int] = {}
        for symbols_of_word, n in words:
            for s in symbols_of_word:
                symbol_counts[s] = symbol_counts.get(s, 0) + n
            for pair in zip(symbols_of_word, symbols_of_word[1:]):
                pair_counts[pair] = pair_counts.get(pair, 0) + n
        candidates = [(p, n) for p, n in pair_counts.items() if n >= max(min_frequency, 1)]
        if not candidates:
            break
        # 2. The best score, exactly; ties to the more frequent pair, then the smaller strings.
        (left, right), count = min(candidates, key=lambda item: (
            -Fraction(item[1], symbol_counts[item[0][0]] * symbol_counts[item[0][1]]),
            -item[1], item[0]))
        # 3. The right symbol never starts a word, so it carries the prefix: drop it.
        token = left + right[len(prefix):]
        steps.append((left, right, token, count,
                      Fraction(count, symbol_counts[left] * symbol_counts[right])))
        if token not in vocab:
            vocab.append(token)
        words = [(_replace(s, (left, right), token), n) for s, n in words]
    return vocab, steps
