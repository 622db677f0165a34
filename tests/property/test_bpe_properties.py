"""The fast trainer and encoder against the textbook twins in tokenmill.reference."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import BPE, BPETrainer
from tokenmill.reference import bpe as reference

# Few letters, so pairs repeat and ties are common; one CJK and one astral character.
LETTERS = "abcde语😀"
words = st.text(alphabet=LETTERS, min_size=1, max_size=9)
corpora = st.dictionaries(words, st.integers(1, 6), min_size=1, max_size=12)
conventions = st.sampled_from([
    {"end_of_word_marker": "</w>"},
    {"end_of_word_suffix": "</w>"},
    {"end_of_word_suffix": "</w>", "continuing_subword_prefix": "##"},
    {"continuing_subword_prefix": "##"},
    {},
])


@settings(max_examples=300, deadline=None)
@given(corpora, st.integers(0, 40), st.sampled_from(["lexicographic", "first_seen"]),
       conventions)
def test_trainer_equals_reference(counts, n, tie_break, convention):
    fast = BPETrainer(num_merges=n, tie_break=tie_break, **convention).train_from_counts(counts)
    slow = reference.train(counts, n, tie_break=tie_break, **convention)
    assert [tuple(s) for s in fast.steps] == slow


@settings(max_examples=200, deadline=None)
@given(corpora, st.integers(0, 30), conventions,
       st.lists(st.text(alphabet=LETTERS, min_size=1, max_size=120), min_size=1, max_size=5))
def test_encoder_equals_reference(counts, n, convention, probes):
    result = BPETrainer(num_merges=n, initial_alphabet=tuple(LETTERS),
                        **convention).train_from_counts(counts)
    model = result.model
    for word in list(counts) + probes:  # probes longer than 48 symbols take the heap path
        # Variants never seen in training (say "##a") are not in the vocab; with no unk token
        # the model drops them before merging, as Hugging Face does.
        symbols = [s for s in reference.spell(word, **convention) if s in model.vocab]
        expected = reference.encode(symbols, result.merges,
                                    convention.get("continuing_subword_prefix"))
        assert model.encode_word(word) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("abc")), max_size=12),
       st.text(alphabet="abc", min_size=1, max_size=200))
def test_arbitrary_merge_lists(pairs, word):
    # Merge lists that no trainer would produce (duplicates, odd orders) still apply by rank.
    vocab = {c: i for i, c in enumerate("abc")}
    merges = []
    for left, right in pairs:
        vocab.setdefault(left + right, len(vocab))
        merges.append((left, right))
    model = BPE(vocab, merges)
    assert model.encode_word(word) == reference.encode(list(word), merges)


def test_large_merges_split_between_threads_give_the_reference_merges(monkeypatch):
    # A merge that touches 4096 words or more is applied by two threads (each gathering its
    # own pair changes); 12,000 distinct words over four letters make the first merges that
    # large. The merges must be the reference's, on one thread or two.
    import random

    rnd = random.Random(7)
    counts: dict[str, int] = {}
    while len(counts) < 12_000:
        counts["".join(rnd.choices("abcd", k=rnd.randint(4, 12)))] = rnd.randint(1, 50)
    slow = reference.train(counts, 60)
    assert max(s[3] for s in slow) > 0
    for threads in ("1", "2"):
        monkeypatch.setenv("TOKENMILL_NUM_THREADS", threads)
        fast = BPETrainer(num_merges=60).train_from_counts(counts)
        assert [tuple(s) for s in fast.steps] == slow, threads


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "▁", "ab", "▁a", "▁▁", "ba"]),
                          st.sampled_from(["a", "b", "▁", "b▁", "▁b", "▁▁"])), max_size=14),
       st.booleans(), st.sampled_from([{}, {"unk_token": "?"}, {"unk_token": "?", "fuse_unk": True},
                                       {"byte_fallback": True}]),
       st.text(alphabet="ab▁▁▁cé", max_size=150))
def test_words_cut_at_the_space_mark_merge_as_the_whole_piece(pairs, clean, options, text):
    # A SentencePiece piece ("▁ab▁▁ba") may be cut before each run of "▁" that follows
    # another character when no token holds another character followed by "▁": the same ids
    # and spans as merging it whole, and as the textbook merge (c and é are unknown).
    symbols = ["a", "b", "▁", "?"] + [f"<0x{b:02X}>" for b in range(256)]
    vocab = {c: i for i, c in enumerate(symbols)}
    merges = []
    for left, right in pairs:
        for part in (left, right):
            vocab.setdefault(part, len(vocab))
        if clean and left[-1] != "▁" and right[0] == "▁":
            continue
        vocab.setdefault(left + right, len(vocab))
        merges.append((left, right))
    dirty = any(a != "▁" and b == "▁" for t in vocab for a, b in zip(t, t[1:]))
    cut = BPE(vocab, merges, **options)
    whole = BPE(vocab, merges, **options)
    whole.__dict__["word_mark"] = ""  # (before its core is built)
    assert cut.word_mark == ("" if dirty else "▁")
    assert cut.encode_pieces([text, text[::-1]]) == whole.encode_pieces([text, text[::-1]])
    known = [c for c in text if c in "ab▁"]
    if not options:
        assert cut.encode_word("".join(known)) == reference.encode(known, merges)


def test_no_cut_at_the_space_mark_when_the_unk_token_ends_in_it():
    # An unknown "z" becomes the unk token "▁", which the merge ("▁", "▁") joins to the "▁"
    # after it; cut there, the two would be merged apart (found by review).
    model = BPE({"▁": 0, "a": 1, "▁▁": 2}, [("▁", "▁")], unk_token="▁")
    assert model.word_mark == ""
    assert model.encode_pieces(["z▁▁"]) == [2, 0, 0, 2, 0, 0, 2, 3]
