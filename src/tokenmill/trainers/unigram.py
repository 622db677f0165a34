"""Unigram LM training options and orchestration (Kudo 2018, https://arxiv.org/abs/1804.10959).

The schedule is sentencepiece's: seed pieces (every character and the most frequent repeated
substrings, from a suffix array, each within one script), then rounds of EM
(``n_sub_iterations`` E- and M-steps) each followed by pruning the pieces whose removal costs
the corpus least likelihood, keeping a ``shrinking_factor`` share, until the vocabulary is
within 10% of ``vocab_size``; then the best-scoring pieces are kept. The M-step is
sentencepiece's Bayesian one (digamma of the expected count minus digamma of the total), not
plain maximum likelihood: it pulls rare pieces down, which is what makes the pruning drop them
first. The lattice, expectations and losses run in the core.
"""

from __future__ import annotations

import math
import sys
import unicodedata
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from tokenmill import _core
from tokenmill._args import thread_count
from tokenmill._io import check_text
from tokenmill.errors import InputError
from tokenmill.models.unigram import UNKNOWN, Unigram
from tokenmill.trainers.bpe import check_options, words_and_counts

# Script classes of seed pieces: a piece keeps to one (after its "▁"), as sentencepiece's
# split_by_unicode_script and split_by_number do; the kana and the prolonged sound mark "ー"
# count as Han, as there, and a combining mark goes with the letters it follows (the seed's
# scan, unigram_trainer.cc, lets MARK_CLASS join any script).
_HAN = ("CJK", "HIRAGANA", "KATAKANA", "IDEOGRAPHIC", "KATAKANA-HIRAGANA")
MARK_CLASS = 2
_SCRIPTS: dict[str, int] = {}


def _script_class(c: str) -> int:
    """Letters: their script, from the first word of the character's name (the second, after
    HALFWIDTH or FULLWIDTH); combining marks: MARK_CLASS; digits and numbers: one class;
    everything else (punctuation, symbols, spaces): one class."""
    category = unicodedata.category(c)
    if category[0] == "N":
        return 1
    if category[0] == "M":
        return MARK_CLASS
    if category[0] != "L":
        return 0
    words = unicodedata.name(c, "UNKNOWN").split(" ")
    word = words[1] if words[0] in ("HALFWIDTH", "FULLWIDTH") and len(words) > 1 else words[0]
    return _SCRIPTS.setdefault("CJK" if word in _HAN else word, len(_SCRIPTS) + MARK_CLASS + 1)


# sentencepiece's constants: pieces expected fewer times are dropped in the M-step; pruning
# stops once the vocabulary is this much larger than asked, and the best are then kept.
_EXPECTED_MINIMUM = 0.5
_SLACK = 1.1


@dataclass(frozen=True)
class UnigramTrainResult:
    """The trained model and the corpus log likelihood (sum of count * log Z) per EM step."""

    model: Unigram
    log_likelihoods: list[float]
    alphabet_size: int


@dataclass(frozen=True, kw_only=True)
class UnigramTrainer:
    """Options of Unigram training. Defaults live here and only here (the CLI reads them).

    >>> r = UnigramTrainer(vocab_size=12, special_tokens=("<unk>",)).train_from_counts(
    ...     {"▁low": 5, "▁lower": 2, "▁lowest": 2})
    >>> r.model.encode_word("▁lowest")
    ['▁lowe', 's', 't']
    """

    vocab_size: int = field(default=8000, metadata={
        "help": "size of the vocabulary to learn, special tokens and alphabet included"})
    special_tokens: tuple[str, ...] = field(default=(), metadata={
        "help": "special tokens, given ids 0..k-1 in this order"})
    unk_token: str = field(default="<unk>", metadata={
        "help": "piece for characters outside the vocabulary (id after the special tokens "
                "unless it is one of them)"})
    shrinking_factor: float = field(default=0.75, metadata={
        "help": "share of the pieces each pruning round keeps"})
    max_piece_length: int = field(default=16, metadata={
        "help": "longest piece, in characters"})
    n_sub_iterations: int = field(default=2, metadata={
        "help": "EM steps between two pruning rounds"})
    seed_size: int = field(default=1_000_000, metadata={
        "help": "substrings in the seed vocabulary (besides the characters)"})
    initial_alphabet: tuple[str, ...] = field(default=(), metadata={
        "help": "characters always in the vocabulary, seen in the corpus or not"})
    character_coverage: float = field(default=1.0, metadata={
        "help": "share of the corpus' characters the alphabet covers (the rarest others are "
                "left to unk)"})
    show_progress: bool = field(default=False, metadata={
        "help": "report each round's vocabulary size and likelihood on stderr"})

    def __post_init__(self) -> None:
        check_options(self)
        if self.vocab_size < 1:
            raise InputError(f"vocab_size must be >= 1, got {self.vocab_size}")
        if not 0.0 < self.shrinking_factor < 1.0:
            raise InputError(f"shrinking_factor must be in (0, 1), got {self.shrinking_factor}")
        if not 0.0 < self.character_coverage <= 1.0:
            raise InputError(f"character_coverage must be in (0, 1], got "
                             f"{self.character_coverage}")
        for name in ("max_piece_length", "n_sub_iterations", "seed_size"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.unk_token:
            raise InputError("unk_token cannot be empty")
        if len(set(self.special_tokens)) != len(self.special_tokens) or "" in self.special_tokens:
            raise InputError("special_tokens must be distinct and non-empty")
        for c in self.initial_alphabet:
            if len(c) != 1:
                raise InputError(f"initial_alphabet: expected single characters, got {c!r}")

    def train_from_counts(self, counts: Mapping[str, int]) -> UnigramTrainResult:
        """Learn pieces and scores from a mapping word -> count (pieces never cross words)."""
        words, freqs = words_and_counts(counts)
        for word in words:  # the core's calls below take them as UTF-8
            check_text(word, f"word {word!r}")
        threads = thread_count()
        alphabet = self._alphabet(words, freqs)
        meta = list(self.special_tokens)
        if self.unk_token not in meta:
            meta.append(self.unk_token)
        room = self.vocab_size - len(meta)
        if room < len(alphabet):
            raise InputError(f"vocab_size {self.vocab_size} is smaller than the alphabet: "
                             f"{len(alphabet)} characters and {len(meta)} special tokens need "
                             f"{len(alphabet) + len(meta)} (lower character_coverage, or raise "
                             "vocab_size)")
        chars = sorted(alphabet)
        seeds, seed_freqs = _core.unigram_seed(words, freqs, self.max_piece_length,
                                               self.seed_size, [ord(c) for c in chars],
                                               [_script_class(c) for c in chars])
        pieces, scores = [], []
        for piece, freq in zip(seeds, seed_freqs):
            if all(c in alphabet for c in piece) and piece not in meta:
                pieces.append(piece)
                scores.append(freq)
        seeded = set(pieces)
        pieces += [c for c in chars if c not in seeded and c not in meta]
        scores += [1.0] * (len(pieces) - len(scores))
        log_total = math.log(sum(scores))
        scores = [math.log(s) - log_total for s in scores]
        history: list[float] = []
        desired = int(room * _SLACK)
        while True:
            for _ in range(self.n_sub_iterations):
                pieces, scores = self._em_step(pieces, scores, words, freqs, threads, history)
            if len(pieces) <= desired:
                break
            pieces, scores = self._prune(pieces, scores, words, freqs, threads,
                                         max(desired, int(len(pieces) * self.shrinking_factor)))
        # The best pieces, every character among them.
        singles = [i for i, p in enumerate(pieces) if len(p) == 1]
        rest = sorted((i for i, p in enumerate(pieces) if len(p) > 1), key=lambda i: -scores[i])
        kept = sorted(singles + rest[:max(0, room - len(singles))],
                      key=lambda i: (-scores[i], i))
        vocab = [(t, 0.0) for t in meta] + [(pieces[i], scores[i]) for i in kept]
        model = Unigram(vocab, unk_id=meta.index(self.unk_token))
        return UnigramTrainResult(model, history, len(alphabet))

    def _alphabet(self, words: list[str], freqs: list[int]) -> set[str]:
        chars: Counter[str] = Counter()
        for word, count in zip(words, freqs):
            for c in word:
                chars[c] += count
        total = sum(chars.values())
        kept, covered = set(self.initial_alphabet), 0
        for c, n in sorted(chars.items(), key=lambda item: (-item[1], item[0])):
            if covered >= self.character_coverage * total:
                break
            kept.add(c)
            covered += n
        return kept

    def _model(self, pieces: list[str], scores: list[float]) -> _core.UnigramModel:
        # The unk piece goes last, for characters outside the alphabet.
        kinds = bytes([1] * len(pieces) + [UNKNOWN])
        return _core.UnigramModel(pieces + [self.unk_token], scores + [0.0], kinds,
                                  len(pieces), False, False)

    def _em_step(self, pieces: list[str], scores: list[float], words: list[str],
                 freqs: list[int], threads: int,
                 history: list[float]) -> tuple[list[str], list[float]]:
        expected, log_z = _core.unigram_e_step(self._model(pieces, scores), words, freqs, threads)
        history.append(log_z)
        keep = [1 if len(p) == 1 else 0 for p in pieces]
        new = _core.unigram_m_step(expected[:len(pieces)], keep, _EXPECTED_MINIMUM)
        kept = [i for i, s in enumerate(new) if not math.isnan(s)]
        if self.show_progress:
            print(f"EM: {len(pieces)} -> {len(kept)} pieces, log likelihood {log_z:.6g}",
                  file=sys.stderr)
        return [pieces[i] for i in kept], [new[i] for i in kept]

    def _prune(self, pieces: list[str], scores: list[float], words: list[str], freqs: list[int],
               threads: int, target: int) -> tuple[list[str], list[float]]:
        losses = _core.unigram_prune_losses(self._model(pieces, scores), words, freqs, threads)
        losses = losses[:len(pieces)]
        must = [i for i, loss in enumerate(losses) if loss == math.inf]
        candidates = sorted((i for i, loss in enumerate(losses) if -math.inf < loss < math.inf),
                            key=lambda i: (-losses[i], i))
        kept = sorted(must + candidates[:max(0, target - len(must))])
        if self.show_progress:
            print(f"prune: {len(pieces)} -> {len(kept)} pieces", file=sys.stderr)
        return [pieces[i] for i in kept], [scores[i] for i in kept]
