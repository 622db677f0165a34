"""WordPiece training options and orchestration; the merge loop itself runs in the C++ core."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from tokenmill import _core
from tokenmill._io import check_text
from tokenmill.errors import InputError
from tokenmill.models.wordpiece import WordPiece
from tokenmill.trainers.bpe import _progress_bar, check_options

_MAX_COUNT = 2**64 - 1


class WordPieceStep(NamedTuple):
    """One round of training: ``left`` + ``right`` -> ``token``, the pair seen ``count`` times
    and its symbols ``left_count`` and ``right_count`` times; its score is
    ``count / (left_count * right_count)``."""

    left: str
    right: str
    token: str
    count: int  # type: ignore[assignment]  # the trace's word for it; shadows tuple.count
    left_count: int
    right_count: int

    @property
    def score(self) -> float:
        return self.count / (self.left_count * self.right_count)


@dataclass(frozen=True)
class WordPieceTrainResult:
    """The trained model, the trace of how it was learnt, and what was left out."""

    model: WordPiece
    steps: list[WordPieceStep]
    alphabet_size: int
    words_dropped: int  # distinct words with a character outside the (limited) alphabet

    @property
    def merges(self) -> list[tuple[str, str]]:
        return [(s.left, s.right) for s in self.steps]

    def trace_lines(self) -> list[str]:
        """``Step 0: merge '##g' + '##s' -> '##gs' (count=5, score=5/(20*5)=0.05)``."""
        return [f"Step {i}: merge {s.left!r} + {s.right!r} -> {s.token!r} (count={s.count}, "
                f"score={s.count}/({s.left_count}*{s.right_count})={s.score:.6g})"
                for i, s in enumerate(self.steps)]


@dataclass(frozen=True, kw_only=True)
class WordPieceTrainer:
    """Options of WordPiece training. Defaults live here and only here (the CLI reads them).

    Each round merges the adjacent pair with the highest likelihood gain
    ``count(ab) / (count(a) * count(b))``: a pair of symbols that are rare apart but often
    together beats a pair that is merely frequent. Ties go to the more frequent pair, then to
    the pair with the smaller (left, right) strings, so training is deterministic. Symbols
    after a word's first carry ``continuing_subword_prefix``. A word holding a character
    outside the alphabet (see ``limit_alphabet``) is left out: it will encode as the unknown
    token whatever is learnt.

    With no frequency floor the criterion favours rare pairs (two symbols seen once each, and
    only together, score 1, the maximum), spending the vocabulary on rare words: on
    docs/benchmarks.md's 10 MB corpus, ``min_frequency=5`` cuts tokens per byte from 0.42 to
    0.28.

    Note: Hugging Face's ``WordPieceTrainer`` trains BPE (by pair count) and converts the
    result; this one implements the likelihood criterion itself, so the vocabularies differ.

    >>> r = WordPieceTrainer(vocab_size=14, special_tokens=("[UNK]",)).train_from_counts(
    ...     {"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5})
    >>> r.merges
    [('##g', '##s'), ('p', '##u')]
    """

    vocab_size: int = field(default=30000, metadata={
        "help": "size of the vocabulary to learn, special tokens and alphabet included"})
    min_frequency: int = field(default=0, metadata={
        "help": "never merge a pair seen fewer times than this"})
    special_tokens: tuple[str, ...] = field(
        default=("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"), metadata={
            "help": "special tokens, given ids 0..k-1 in this order"})
    unk_token: str = field(default="[UNK]", metadata={
        "help": "token for a word that cannot be matched (must be a special token)"})
    initial_alphabet: tuple[str, ...] = field(default=(), metadata={
        "help": "characters always in the alphabet (in both forms), seen in the corpus or not"})
    limit_alphabet: int | None = field(default=None, metadata={
        "help": "keep only the most frequent characters (plus the initial alphabet)"})
    continuing_subword_prefix: str = field(default="##", metadata={
        "help": "prefix of symbols that do not start a word"})
    show_progress: bool = field(default=False, metadata={"help": "show a progress bar"})

    def __post_init__(self) -> None:
        check_options(self)
        if self.vocab_size < 1:
            raise InputError(f"vocab_size must be >= 1, got {self.vocab_size}")
        if self.min_frequency < 0:
            raise InputError(f"min_frequency must be >= 0, got {self.min_frequency}")
        if self.limit_alphabet is not None and self.limit_alphabet < 0:
            raise InputError(f"limit_alphabet must be >= 0, got {self.limit_alphabet}")
        if len(set(self.special_tokens)) != len(self.special_tokens) or "" in self.special_tokens:
            raise InputError(f"special_tokens must be distinct and non-empty, got "
                             f"{list(self.special_tokens)}")
        if self.unk_token not in self.special_tokens:
            raise InputError(f"unk_token {self.unk_token!r} must be one of the special_tokens "
                             f"{list(self.special_tokens)}")
        for c in self.initial_alphabet:
            if len(c) != 1:
                raise InputError(f"initial_alphabet: expected single characters, got {c!r}")

    def train_from_counts(self, counts: Mapping[str, int]) -> WordPieceTrainResult:
        """Learn a vocabulary from a mapping word -> count (words are pre-tokens; pairs never
        cross them)."""
        words: list[str] = []
        freqs: list[int] = []
        for word, count in counts.items():
            if not isinstance(word, str):
                raise InputError(f"words must be strings, got {type(word).__name__}: {word!r}")
            if isinstance(count, bool) or not isinstance(count, int) or \
                    not 0 < count <= _MAX_COUNT:
                raise InputError(f"count of {word!r} must be an integer in 1..2**64-1, "
                                 f"got {count!r}")
            if word:
                check_text(word, f"word {word!r}")
                words.append(word)
                freqs.append(count)
        if not words:
            raise InputError("empty corpus: there are no words to train on")
        bar = _progress_bar(None) if self.show_progress else None
        try:
            vocab, merges, alphabet_size, dropped = _core.train_wordpiece(
                words, freqs, self.vocab_size, self.min_frequency, list(self.special_tokens),
                list(self.initial_alphabet),
                -1 if self.limit_alphabet is None else self.limit_alphabet,
                self.continuing_subword_prefix, bar.update if bar else None)
        finally:
            if bar:
                bar.close()
        steps = [WordPieceStep(vocab[a], vocab[b], vocab[c], n, na, nb)
                 for a, b, c, n, na, nb in merges]
        model = WordPiece({t: i for i, t in enumerate(vocab)}, unk_token=self.unk_token,
                          continuing_subword_prefix=self.continuing_subword_prefix)
        return WordPieceTrainResult(model, steps, alphabet_size, dropped)

