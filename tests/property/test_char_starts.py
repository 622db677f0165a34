"""Byte-level encoding may start a multi-byte character as its own token when its neighbours
cannot interfere (cpp/src/bpe_chars.cc). The tests hold that shortcut to plain byte merging on
models trained to make cross-character merges common: tokens that join a character's bytes to
its neighbours' and to spaces, in every order. Long pieces, merged by the bucket walk or cut by
backtracking, are held to the heap and to the textbook's merging too."""

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


def heap_everywhere(check):
    """Runs check() with every word merged by the scan or the heap, never the bucket walk."""
    from tokenmill import _core

    previous = _core.set_bucket_symbols(2**62)
    try:
        return check()
    finally:
        _core.set_bucket_symbols(previous)


@settings(max_examples=15, deadline=None)
@given(corpora, st.integers(270, 330), st.integers(0, 2**32),
       st.sampled_from(["abcé", "a", "aab", "é"]))
def test_long_pieces_merge_as_the_heap_does(corpus, vocab_size, seed, letters):
    # From 32,768 symbols a piece takes the bucket walk (cpp/src/bpe_long.cc), whether the
    # merges build up or not: the second model's first merge uses a later-made token. 'q'
    # never occurs in the text, so the two merge alike; both equal the heap's merging.
    model = byte_level(corpus, vocab_size).model
    vocab = dict(model.vocab)
    for token in ("q", "qq", "qqq"):
        vocab.setdefault(token, len(vocab))
    build_up = BPE(vocab, [*model.merges, ("q", "q")])
    not_build_up = BPE(vocab, [("qq", "q"), *model.merges, ("q", "q")])
    text = "".join(random.Random(seed).choices(letters, k=34001))
    piece = pre_tokenizers.spell_bytes(text.encode("utf-8"))
    walked = build_up.encode_word(piece)
    assert not_build_up.encode_word(piece) == walked
    assert heap_everywhere(lambda: build_up.encode_word(piece)) == walked


def test_a_long_run_of_one_letter_merges_leftmost_first():
    merges = [("a", "a"), ("aa", "a")]
    vocab = {"a": 0, "aa": 1, "aaa": 2, "q": 3, "qq": 4, "qqq": 5}
    build_up = BPE(vocab, [*merges, ("q", "q")])
    not_build_up = BPE(vocab, [("qq", "q"), *merges, ("q", "q")])
    word = "a" * 40001  # (a, a) leftmost first: 20,000 times "aa", then "aa" + "a" at the end
    expected = ["aa"] * 19999 + ["aaa"]
    assert build_up.encode_word(word) == not_build_up.encode_word(word) == expected
    assert heap_everywhere(lambda: build_up.encode_word(word)) == expected


def sentencepiece_style(tokens: list[str], order: list[int]) -> list[tuple[str, str]]:
    """Merges as a SentencePiece BPE model implies them: a token may be made from any two of
    its parts that are tokens, every such pair ranked where the token ranks (``order``)."""
    vocab = set(tokens)
    merges = []
    for k in order:
        token = tokens[k]
        merges += [(token[:i], token[i:]) for i in range(1, len(token))
                   if token[:i] in vocab and token[i:] in vocab]
    return merges


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("abcd", min_size=2, max_size=5), min_size=1, max_size=30, unique=True),
       st.randoms(use_true_random=False))
def test_bucket_walk_merges_as_the_reference_does(made, rnd):
    # Merges that do not build up ("a" + "bc" ranked above the merge that makes "bc"): a merge
    # in the walk can make a pair of its own rank or lower, which must come next, as the
    # textbook's lowest-rank-leftmost rule takes it. Words are runs of tokens, so the pairs
    # that matter meet.
    tokens = ["a", "b", "c", "d", *(t for t in made if len(t) > 1)]
    words = ["".join(rnd.choices(tokens, k=rnd.randint(0, 15))) for _ in range(4)]
    order = list(range(len(tokens)))
    rnd.shuffle(order)
    merges = sentencepiece_style(tokens, order)
    vocab = {t: i for i, t in enumerate(tokens)}
    model = BPE(vocab, merges)
    from tokenmill import _core

    previous = _core.set_bucket_symbols(2)
    try:
        walked = [model.encode_word(w) for w in words]
    finally:
        _core.set_bucket_symbols(previous)
    for word, got in zip(words, walked, strict=True):
        expected = reference.encode(list(word), merges)
        assert got == expected, word
        # (a fresh model: the first one keeps the words it merged in its word cache)
        assert heap_everywhere(lambda w=word: BPE(vocab, merges).encode_word(w)) == expected


def backtracking_everywhere(check):
    """Runs check() with every piece cut by backtracking where the vocabulary allows it."""
    from tokenmill import _core

    previous = _core.set_backtrack_bytes(1)
    try:
        check()
    finally:
        _core.set_backtrack_bytes(previous)


def test_a_pair_made_in_the_walk_below_its_rank_comes_next():
    # (b, c) ranks below (bc, b): merging the first "bc" makes (bc, b), which the heap takes
    # at once, before the second (b, c). Deferred to the bucket's end, "bc bc" would come out.
    from tokenmill import _core

    vocab = {"b": 0, "c": 1, "bc": 2, "bcb": 3}
    merges = [("bc", "b"), ("b", "c")]
    previous = _core.set_bucket_symbols(2)
    try:
        walked = BPE(vocab, merges).encode_word("bcbc")
    finally:
        _core.set_bucket_symbols(previous)
    assert walked == reference.encode(list("bcbc"), merges) == ["bcb", "c"]
    assert BPE(vocab, merges).encode_word("bcbc" * 20000) == ["bcb", "c"] * 20000


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
