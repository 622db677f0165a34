"""Trainer options against the references, where a review found them apart: BPE's
limit_alphabet with a prefix or suffix, and max_token_length, against tokenizers' BpeTrainer
(inputs without ties, whose order the two libraries break differently, as documented); the
Unigram trainer's script rule against sentencepiece's (marks join letters; "ー" is Han)."""

from __future__ import annotations

import gzip
import json
import unicodedata

import pytest
import tokenizers
from tokenizers import models, trainers

from tokenmill import BPE, BPETrainer, Tokenizer, UnigramTrainer, pre_tokenizers
from tokenmill.models.unigram import Unigram


def trained_both(texts, **options):
    ours = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.Whitespace())
    ours.train_from_iterator(texts, BPETrainer(**options))
    theirs = tokenizers.Tokenizer(models.BPE())
    theirs.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    theirs.train_from_iterator(texts, trainers.BpeTrainer(show_progress=False, **options))
    merges = [tuple(m) for m in json.loads(theirs.to_str())["model"]["merges"]]
    return ours, theirs, merges


def test_limit_alphabet_with_a_prefix_and_a_suffix():
    # A word's first or last character outside the kept alphabet leaves the kept ones where
    # they are: in "qab", "a" is no word's start (it takes the prefix) and "b" its end.
    texts = ["qab qab ab ab ab abq"]
    options = {"vocab_size": 40, "limit_alphabet": 2, "continuing_subword_prefix": "##",
               "end_of_word_suffix": "</w>"}
    ours, theirs, merges = trained_both(texts, **options)
    assert ours.get_vocab().keys() == theirs.get_vocab().keys()
    assert ours.model.merges == merges
    for word in set(" ".join(texts).split()):
        assert ours.encode(word).tokens == theirs.encode(word).tokens, word
    assert ours.encode("qab").tokens == ["##ab</w>"]  # (it was ["##b</w>"]: the "a" lost)


WORDS = ["abcd"] * 4 + ["bcd"] * 2 + ["bc"]  # pair counts 7, then 6, then 4: no ties


@pytest.mark.parametrize("texts, options, expected", [
    (["ab ab ab cd"], {"max_token_length": 2, "end_of_word_suffix": "</w>"},
     [("a", "b</w>"), ("c", "d</w>")]),
    (["abc abc abc"], {"max_token_length": 3}, [("a", "b")]),
    (["abc abc abc"], {"max_token_length": 1}, [("a", "b")]),
    (WORDS, {"max_token_length": 4}, [("b", "c"), ("bc", "d")]),
    (WORDS, {"max_token_length": 5}, [("b", "c"), ("bc", "d"), ("a", "bcd")]),
])
def test_max_token_length_as_tokenizers_counts_it(texts, options, expected):
    # A pair a merge makes is counted only if its tokens cover fewer characters than the
    # limit together (prefix and suffix not counted); two single characters always may merge.
    ours, _, merges = trained_both(texts, vocab_size=60, **options)
    assert merges == expected
    assert ours.model.merges == expected


def test_unigram_pieces_keep_marks_with_their_letters(shared_data):
    flores = shared_data / "text" / "flores200_dev"
    lines = [unicodedata.normalize("NFD", line) for line in gzip.open(
        flores / "vie_Latn.dev.gz", "rt", encoding="utf-8").read().splitlines()[:600]]
    tok = Tokenizer(Unigram([("<unk>", 0.0)], unk_id=0), pre_tokenizer=pre_tokenizers.Metaspace())
    tok.train_from_iterator(lines, UnigramTrainer(vocab_size=1200))
    joined = [p for p in tok.get_vocab() if any(unicodedata.category(c)[0] == "L" for c in p)
              and any(unicodedata.category(c)[0] == "M" for c in p)]
    assert len(joined) > 300  # (none before: a mark was a script of its own, "COMBINING")
    japanese = gzip.open(flores / "jpn_Jpan.dev.gz", "rt", encoding="utf-8").read().splitlines()
    tok = Tokenizer(Unigram([("<unk>", 0.0)], unk_id=0), pre_tokenizer=pre_tokenizers.Metaspace())
    tok.train_from_iterator(japanese[:600], UnigramTrainer(vocab_size=2000))
    assert any("ー" in p and len(p.strip("▁")) > 1 for p in tok.get_vocab())  # ("ター", ...)


def test_unigram_training_is_the_same_on_any_number_of_threads(shared_data, monkeypatch):
    # The E-step's and the pruning's sums are kept a fixed part of the corpus each and added
    # in the parts' order; kept a thread each, the scores' last bits (so the file) differed.
    texts = (shared_data / "text" / "en" / "tinyshakespeare.txt").read_text(
        encoding="utf-8").splitlines()[:8000]
    files = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("TOKENMILL_NUM_THREADS", threads)
        tok = Tokenizer(Unigram([("<unk>", 0.0)], unk_id=0),
                        pre_tokenizer=pre_tokenizers.Metaspace())
        tok.train_from_iterator(texts, UnigramTrainer(vocab_size=1000))
        files.append(json.dumps(tok.to_dict(), sort_keys=True))
    assert files[0] == files[1] == files[2]
