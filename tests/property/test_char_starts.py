"""Byte-level encoding may start a multi-byte character as its own token when its neighbours
cannot interfere (cpp/src/bpe_chars.cc). The tests hold that shortcut to plain byte merging on
models trained to make cross-character merges common: tokens that join a character's bytes to
its neighbours' and to spaces, in every order."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import BPE, BPETrainer, Tokenizer, normalizers, pre_tokenizers
from tokenmill.reference import bpe as reference

# Two- and three-byte characters sharing lead bytes (é è ê; 中 丫 丹), ASCII, spaces.
ALPHABET = "éèê中丫丹ab "
texts = st.text(st.sampled_from(ALPHABET), max_size=40)
corpora = st.lists(st.text(st.sampled_from(ALPHABET), min_size=1, max_size=40), min_size=1,
                   max_size=20)


def byte_level(corpus: list[str], vocab_size: int) -> Tokenizer:
    # GPT-2's split (the core's scanner) keeps runs of these letters together, with a space.
    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=False))
    tok.train_from_iterator(corpus, BPETrainer(
        vocab_size=vocab_size, initial_alphabet=tuple(pre_tokenizers.ByteLevel.alphabet()),
        show_progress=False))
    return tok


def assert_core_equals_plain_merging(tok: Tokenizer, texts: list[str]) -> None:
    """The core's ids and offsets are those of the same model on the Python path (an empty
    normalizer sequence keeps a tokenizer off the core), which merges bytes by rank."""
    python_path = Tokenizer(tok.model, normalizer=normalizers.Sequence([]),
                            pre_tokenizer=tok.pre_tokenizer)
    assert tok.native_plan() is not None and python_path.native_plan() is None
    for text in texts:
        fast, slow = tok.encode(text), python_path.encode(text)
        assert (fast.ids, fast.offsets) == (slow.ids, slow.offsets)


@settings(max_examples=300, deadline=None)
@given(corpora, st.integers(260, 330), st.lists(texts, min_size=1, max_size=5))
def test_byte_level_core_equals_plain_merging(corpus, vocab_size, probes):
    assert_core_equals_plain_merging(byte_level(corpus, vocab_size), corpus + probes)


@settings(max_examples=200, deadline=None)
@given(corpora, st.integers(260, 330), texts)
def test_byte_level_core_equals_the_reference(corpus, vocab_size, text):
    tok = byte_level(corpus, vocab_size)
    model = tok.model
    expected = []
    for piece in tok.pre_tokenizer.split_text(text):  # already spelled byte by byte
        expected += [model.vocab[t] for t in reference.encode(list(piece), model.merges)]
    assert tok.encode(text).ids == expected


@settings(max_examples=15, deadline=None)
@given(corpora, st.integers(270, 330), st.integers(0, 2**32),
       st.sampled_from(["abcé", "a", "aab", "é"]))
def test_long_pieces_merge_as_the_heap_does(corpus, vocab_size, seed, letters):
    # From 32,768 symbols a piece takes the bucket walk (cpp/src/bpe_long.cc), which needs
    # merges that build up; a merge that uses a later-made token sends the same merges back to
    # the heap. 'q' never occurs in the text, so the two models' merges apply alike.
    model = byte_level(corpus, vocab_size).model
    vocab = dict(model.vocab)
    for token in ("q", "qq", "qqq"):
        vocab.setdefault(token, len(vocab))
    build_up = BPE(vocab, [*model.merges, ("q", "q")])
    heap_only = BPE(vocab, [("qq", "q"), *model.merges, ("q", "q")])
    text = "".join(random.Random(seed).choices(letters, k=34001))
    piece = pre_tokenizers.spell_bytes(text.encode("utf-8"))
    assert build_up.encode_word(piece) == heap_only.encode_word(piece)


def test_a_long_run_of_one_letter_merges_leftmost_first():
    merges = [("a", "a"), ("aa", "a")]
    vocab = {"a": 0, "aa": 1, "aaa": 2, "q": 3, "qq": 4, "qqq": 5}
    build_up = BPE(vocab, [*merges, ("q", "q")])
    heap_only = BPE(vocab, [("qq", "q"), *merges, ("q", "q")])
    word = "a" * 40001  # (a, a) leftmost first: 20,000 times "aa", then "aa" + "a" at the end
    assert build_up.encode_word(word) == heap_only.encode_word(word) == ["aa"] * 19999 + ["aaa"]


def backtracking_everywhere(check):
    """Runs check() with every piece cut by backtracking where the vocabulary allows it."""
    from tokenmill import _core

    previous = _core.set_backtrack_bytes(1)
    try:
        check()
    finally:
        _core.set_backtrack_bytes(previous)


@settings(max_examples=150, deadline=None)
@given(corpora, st.integers(260, 330), st.lists(texts, min_size=1, max_size=5))
def test_backtracking_equals_plain_merging(corpus, vocab_size, probes):
    # Trained vocabularies: where one holds a token that its own bytes do not merge back into,
    # the core keeps to merging by rank; either way the ids are plain merging's.
    tok = byte_level(corpus, vocab_size)
    backtracking_everywhere(lambda: assert_core_equals_plain_merging(tok, corpus + probes))


def byte_vocab_model(merges: list[tuple[str, str]]) -> Tokenizer:
    vocab = {c: i for i, c in enumerate(pre_tokenizers.ByteLevel.alphabet())}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    return Tokenizer(BPE(vocab, merges),
                     pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=False))


def test_backtracking_only_where_every_token_merges_back_into_itself():
    # "abc" is made of "ab" + "c", but the bytes a b c merge b + c first and never get back to
    # "abc": cutting by backtracking would give it, so that vocabulary keeps to merging by rank.
    # Without the merge of b + c it is its own.
    inconsistent = byte_vocab_model([("b", "c"), ("a", "b"), ("ab", "c")])
    consistent = byte_vocab_model([("a", "b"), ("b", "c"), ("ab", "c")])
    assert not inconsistent.native_plan()[0].backtracks()
    assert consistent.native_plan()[0].backtracks()
    rnd = random.Random(3)
    texts = ["abc" * 50, "".join(rnd.choices("abc", k=500)), "".join(rnd.choices("abcc", k=999))]

    def check():
        for tok in (inconsistent, consistent):
            assert_core_equals_plain_merging(tok, texts)

    backtracking_everywhere(check)
    assert inconsistent.encode("abc").tokens == ["a", "bc"]
    assert consistent.encode("abc").tokens == ["abc"]
