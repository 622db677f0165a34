"""BPE training options and orchestration; the merge loop itself runs in the C++ core."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NamedTuple

from tokenmill import _core
from tokenmill._args import thread_count
from tokenmill._io import check_text
from tokenmill.errors import InputError
from tokenmill.models.bpe import BPE
from tokenmill.reference.bpe import trace_lines

_MAX_COUNT = 2**64 - 1


class MergeStep(NamedTuple):
    """One round of training: ``left`` + ``right`` -> ``token``, a pair seen ``count`` times."""

    left: str
    right: str
    token: str
    count: int  # type: ignore[assignment]  # the trace's word for it; shadows tuple.count


@dataclass(frozen=True)
class TrainResult:
    """The trained model and the trace of how it was learnt."""

    model: BPE
    steps: list[MergeStep]
    alphabet_size: int

    @property
    def merges(self) -> list[tuple[str, str]]:
        return [(s.left, s.right) for s in self.steps]

    def trace_lines(self) -> list[str]:
        """``Step 0: merge 'l' + 'o' -> 'lo' (count=3)``, one line per merge."""
        return trace_lines(self.steps)


@dataclass(frozen=True, kw_only=True)
class BPETrainer:
    """Options of BPE training. Defaults live here and only here (the CLI reads them).

    >>> r = BPETrainer(num_merges=3, end_of_word_marker="</w>").train_from_counts(
    ...     {"low": 2, "lower": 1})
    >>> r.merges
    [('l', 'o'), ('lo', 'w'), ('low', '</w>')]
    """

    vocab_size: int = field(default=30000, metadata={
        "help": "size of the vocabulary to learn, special tokens and alphabet included"})
    num_merges: int | None = field(default=None, metadata={
        "help": "learn exactly this many merges instead of training to --vocab-size"})
    min_frequency: int = field(default=0, metadata={
        "help": "stop when the most frequent pair is seen fewer times than this"})
    special_tokens: tuple[str, ...] = field(default=(), metadata={
        "help": "special tokens, given ids 0..k-1 in this order"})
    unk_token: str | None = field(default=None, metadata={
        "help": "token for characters outside the vocabulary (must be a special token)"})
    initial_alphabet: tuple[str, ...] = field(default=(), metadata={
        "help": "characters always in the alphabet, seen in the corpus or not"})
    limit_alphabet: int | None = field(default=None, metadata={
        "help": "keep only the most frequent characters, the initial alphabet's first (it "
                "counts them, as Hugging Face's does)"})
    end_of_word_marker: str | None = field(default=None, metadata={
        "help": "a SEPARATE symbol appended to every word, as in the textbooks (e.g. </w>)"})
    end_of_word_suffix: str | None = field(default=None, metadata={
        "help": "a suffix glued to each word's last character, as Hugging Face does"})
    continuing_subword_prefix: str | None = field(default=None, metadata={
        "help": "prefix of symbols that do not start a word (e.g. ##)"})
    max_token_length: int | None = field(default=None, metadata={
        "help": "merge two tokens only if they cover fewer characters than this together "
                "(a prefix or suffix not counted; two single characters always may), as "
                "Hugging Face's trainer does"})
    tie_break: Literal["lexicographic", "first_seen"] = field(default="lexicographic", metadata={
        "help": "among equally frequent pairs, take the smallest pair or the first seen"})
    show_progress: bool = field(default=False, metadata={"help": "show a progress bar"})

    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        check_options(self)
        if self.num_merges is None and self.vocab_size < 1:
            raise InputError(f"vocab_size must be >= 1, got {self.vocab_size}")
        if self.num_merges is not None and self.num_merges < 0:
            raise InputError(f"num_merges must be >= 0, got {self.num_merges}")
        if self.min_frequency < 0:
            raise InputError(f"min_frequency must be >= 0, got {self.min_frequency}")
        if self.end_of_word_marker and self.end_of_word_suffix:
            raise InputError("give end_of_word_marker or end_of_word_suffix, not both")
        if self.tie_break not in ("lexicographic", "first_seen"):
            raise InputError(f"tie_break must be 'lexicographic' or 'first_seen', got "
                             f"{self.tie_break!r}")
        seen: set[str] = set()
        for token in self.special_tokens:
            if not token:
                raise InputError("special_tokens: a special token cannot be empty")
            if token in seen:
                raise InputError(f"special_tokens: {token!r} is given twice")
            seen.add(token)
        if self.unk_token is not None and self.unk_token not in seen:
            raise InputError(f"unk_token {self.unk_token!r} must be one of the special_tokens")
        for c in self.initial_alphabet:
            if len(c) != 1:
                raise InputError(f"initial_alphabet: expected single characters, got {c!r}")
        for name in ("limit_alphabet", "max_token_length"):
            value = getattr(self, name)
            if value is not None and value < (0 if name == "limit_alphabet" else 1):
                raise InputError(f"{name} must be >= {0 if name == 'limit_alphabet' else 1}, "
                                 f"got {value}")
        for name in ("end_of_word_marker", "end_of_word_suffix", "continuing_subword_prefix"):
            if getattr(self, name) == "":
                raise InputError(f"{name} cannot be empty (leave it unset instead)")

    def train_from_counts(self, counts: Mapping[str, int]) -> TrainResult:
        """Learn merges from a mapping word -> count (words are pre-tokens; pairs never
        cross them). Words are taken in the mapping's order, which ``first_seen`` uses."""
        words, freqs = words_and_counts(counts)
        bar = _progress_bar(self.num_merges) if self.show_progress else None
        try:
            vocab, merges, alphabet_size = _train_core(
                words, freqs,
                self.vocab_size, -1 if self.num_merges is None else self.num_merges,
                self.min_frequency, list(self.special_tokens), list(self.initial_alphabet),
                -1 if self.limit_alphabet is None else self.limit_alphabet,
                self.continuing_subword_prefix or "", self.end_of_word_suffix or "",
                self.end_of_word_marker or "",
                -1 if self.max_token_length is None else self.max_token_length,
                self.tie_break == "first_seen", bar.update if bar else None, thread_count())
        finally:
            if bar:
                bar.close()
        steps = [MergeStep(vocab[a], vocab[b], vocab[c], n) for a, b, c, n in merges]
        model = BPE({t: i for i, t in enumerate(vocab)},
                    [(s.left, s.right) for s in steps],
                    unk_token=self.unk_token,
                    continuing_subword_prefix=self.continuing_subword_prefix,
                    end_of_word_suffix=self.end_of_word_suffix,
                    end_of_word_marker=self.end_of_word_marker)
        return TrainResult(model, steps, alphabet_size)


def check_options(options: Any) -> None:
    """What the core cannot take, named: every string option of a trainer, and each string of
    a tuple option, is valid text (the core takes them as UTF-8, and a lone surrogate, as the
    CLI gets for a byte that is not UTF-8, would fail the conversion with a bare TypeError
    naming no option), and every integer option fits the core's 64 bits (2**64 failed the
    binding's conversion the same way). The trainers check the ranges of their own."""
    for f in fields(options):
        value = getattr(options, f.name)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1 << 63:
            raise InputError(f"{f.name} must be below 2**63, got {value}")
        if isinstance(value, str):
            check_text(value, f"{f.name}: {value!r}")
        elif isinstance(value, (tuple, list)):  # the options' tuples all hold strings
            for i, item in enumerate(value):
                check_text(item, f"{f.name}[{i}]" + (f": {item!r}" if isinstance(item, str)
                                                     else ""))


def _train_core(words: list[str], freqs: list[int], *args: Any) -> Any:
    """The core's trainer; a word it cannot take (a lone surrogate) is named here."""
    try:
        return _core.train_bpe(words, freqs, *args)
    except (TypeError, UnicodeError):
        for word in words:
            check_text(word, f"word {word!r}")
        raise


def words_and_counts(counts: Mapping[str, int]) -> tuple[list[str], list[int]]:
    """The non-empty words of ``counts`` and their counts, in order, checked (whether each
    word is valid text is left to the core's conversion: :func:`_train_core` names a bad one).

    The common case (plain str -> int, as counting makes them) is checked in bulk; anything
    else goes word by word, so an error names the word."""
    words = list(counts)
    freqs = list(counts.values())
    if words and set(map(type, words)) == {str} and set(map(type, freqs)) == {int} \
            and 0 < min(freqs) and max(freqs) <= _MAX_COUNT:
        if "" in counts:
            at = words.index("")
            del words[at], freqs[at]
        if words:
            return words, freqs
    return _checked_words_and_counts(counts)


def _checked_words_and_counts(counts: Mapping[str, int]) -> tuple[list[str], list[int]]:
    words: list[str] = []
    freqs: list[int] = []
    for word, count in counts.items():
        if not isinstance(word, str):
            raise InputError(f"words must be strings, got {type(word).__name__}: {word!r}")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 < count <= _MAX_COUNT:
            raise InputError(f"count of {word!r} must be an integer in 1..2**64-1, "
                             f"got {count!r}")
        if word:
            words.append(word)
            freqs.append(count)
    if not words:
        raise InputError("empty corpus: there are no words to train on")
    return words, freqs


class _progress_bar:
    """Merges per second and the vocabulary size, fed from the core's progress callback."""

    def __init__(self, total: int | None) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=total, unit="merge", desc="merging", leave=False)
        self._done = 0

    def update(self, merges: int, vocab: int) -> None:
        self._bar.update(merges - self._done)
        self._done = merges
        self._bar.set_postfix(vocab=vocab, refresh=False)

    def close(self) -> None:
        self._bar.close()
