"""numpy output, token counting and the streaming decoder, against the per-text APIs."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenmill
from tokenmill import BPE, BPETrainer, Tokenizer, decoders, normalizers, pre_tokenizers

TEXTS = ["Hello world!", "", "日本語のテキスト 😀👍🏽", "def f(x):\n    return x ** 2\n", " a  b "]


@pytest.fixture(scope="module")
def cl100k(shared_data):
    return tokenmill.load("cl100k_base", path=shared_data / "tokenizers" / "tiktoken")


@pytest.fixture(scope="module")
def o200k(shared_data):
    return tokenmill.load("o200k_base", path=shared_data / "tokenizers" / "tiktoken")


@pytest.fixture(scope="module")
def python_path():
    """A trained tokenizer the core does not encode (its pre-tokenizer is not a GPT split)."""
    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.Whitespace())
    tok.train_from_iterator(["one text", "hello world"], BPETrainer(vocab_size=30))
    assert tok.native_plan() is None
    return tok


def test_ragged_and_padded_arrays(cl100k):
    expected = [cl100k.encode_ordinary(t) for t in TEXTS]
    out = cl100k.encode_batch_np(TEXTS)
    assert out["ids"].dtype == np.uint32  # 100k ids do not fit in 16 bits
    offsets = out["offsets"]
    assert [out["ids"][offsets[i]:offsets[i + 1]].tolist() for i in range(len(TEXTS))] == expected
    right = cl100k.encode_batch_np(TEXTS, padded=True, pad_id=7)
    left = cl100k.encode_batch_np(TEXTS, padded=True, pad_id=7, side="left")
    width = max(map(len, expected))
    for i, ids in enumerate(expected):
        pad = [7] * (width - len(ids))
        assert right["input_ids"][i].tolist() == ids + pad
        assert left["input_ids"][i].tolist() == pad + ids
        assert right["attention_mask"][i].tolist() == [1] * len(ids) + [0] * len(pad)
        assert left["attention_mask"][i].tolist() == [0] * len(pad) + [1] * len(ids)


def test_uint16_when_the_vocabulary_fits(shared_data):
    gpt2 = tokenmill.load("r50k_base", path=shared_data / "tokenizers" / "tiktoken")
    out = gpt2.encode_batch_np(TEXTS)
    assert out["ids"].dtype == np.uint16
    assert out["ids"].tolist() == [i for t in TEXTS for i in gpt2.encode_ordinary(t)]


def test_python_path_gives_the_same_arrays():
    tok = Tokenizer(BPE({}, []), normalizer=normalizers.Lowercase(),
                    pre_tokenizer=pre_tokenizers.Whitespace())
    tok.train_from_iterator(["hello world", "Hello there"], BPETrainer(vocab_size=40))
    assert tok.native_plan() is None
    out = tok.encode_batch_np(["Hello world", "there"])
    assert out["ids"].tolist() == tok.encode_ordinary("Hello world") + tok.encode_ordinary("there")
    assert out["offsets"].tolist() == [0, len(tok.encode_ordinary("Hello world")),
                                       len(out["ids"])]
    assert tok.count_tokens(["Hello world", "there"]) == [len(tok.encode_ordinary(t)) for t
                                                          in ["Hello world", "there"]]


@pytest.mark.parametrize("encoding", ["cl100k_base", "r50k_base"])
@pytest.mark.parametrize("threads", [1, 2])
def test_separator_ends_every_text(shared_data, encoding, threads):
    # The core appends it after each text's ids (in every block, on every thread), counted in
    # the text's offsets; the Python path (a tokenizer the core does not run) does the same.
    from tokenmill.batch import encode_np

    tok = tokenmill.load(encoding, path=shared_data / "tokenizers" / "tiktoken")
    sep = tok.token_to_id("<|endoftext|>")
    texts = [TEXTS[i % len(TEXTS)] * (i % 4) for i in range(500)]
    out = encode_np(tok, texts, num_threads=threads, separator=sep)
    offsets = out["offsets"].tolist()
    assert [out["ids"][a:b].tolist() for a, b in zip(offsets, offsets[1:])] == \
        [tok.encode_ordinary(t) + [sep] for t in texts]
    assert out["ids"].dtype == (np.uint16 if encoding == "r50k_base" else np.uint32)
    assert encode_np(tok, [], separator=sep)["ids"].tolist() == []
    for bad in (-1, tok.get_vocab_size(), "1"):
        with pytest.raises(tokenmill.InputError, match="is not an id of the tokenizer"):
            encode_np(tok, texts, separator=bad)


def test_separator_on_the_python_path():
    from tokenmill.batch import encode_np

    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.Whitespace())
    tok.train_from_iterator(["hello world", "hello there"], BPETrainer(vocab_size=30))
    assert tok.native_plan() is None
    out = encode_np(tok, ["hello", "", "there world"], separator=3)
    assert out["ids"].tolist() == tok.encode_ordinary("hello") + [3, 3] + \
        tok.encode_ordinary("there world") + [3]
    assert out["offsets"].tolist()[1:3] == [len(tok.encode_ordinary("hello")) + 1,
                                             len(tok.encode_ordinary("hello")) + 2]


def test_count_tokens(o200k):
    assert o200k.count_tokens(TEXTS * 50) == [len(o200k.encode_ordinary(t)) for t in TEXTS * 50]


@pytest.mark.parametrize("encoding", ["cl100k_base", "r50k_base"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_many_texts_on_threads_join_in_order(shared_data, encoding, threads):
    # Enough texts for many blocks of 64 (on more than one thread each block has its own
    # buffer, copied by the threads into one in input order), texts of every length, the empty
    # one included; r50k_base's ids are narrowed to uint16 in the same copies (on one thread,
    # in runs of the one block).
    tok = tokenmill.load(encoding, path=shared_data / "tokenizers" / "tiktoken")
    texts = [f"{i} " * (i % 23) + TEXTS[i % len(TEXTS)] for i in range(3000)]
    expected = [tok.encode_ordinary(t) for t in texts]
    out = tok.encode_batch_np(texts, num_threads=threads)
    assert out["ids"].dtype == (np.uint16 if encoding == "r50k_base" else np.uint32)
    offsets = out["offsets"].tolist()
    assert offsets[0] == 0 and len(offsets) == len(texts) + 1
    assert [out["ids"][a:b].tolist() for a, b in zip(offsets, offsets[1:])] == expected
    assert tok.count_tokens(texts, num_threads=threads) == list(map(len, expected))
    # a batch of one text (one block, cut into runs for the copies when narrowed)
    one = texts[7] * 50
    assert tok.encode_batch_np([one], num_threads=threads)["ids"].tolist() == \
        tok.encode_ordinary(one)


def test_id_lists_are_left_out_of_the_cycle_collector(cl100k):
    # Lists of ints cannot form cycles; the collector's walks over every id list were a fifth of
    # encoding English a paragraph at a time. Content and use are those of any list.
    import gc

    one = cl100k.encode_ordinary("Hello world")
    many = cl100k.encode_ordinary_batch(["Hello world", "again"] * 40, num_threads=2)
    assert not gc.is_tracked(one) and not any(gc.is_tracked(ids) for ids in many)
    assert one == many[0] == cl100k.encode("Hello world").ids
    one.append(one)  # a cycle made afterwards is the caller's to break; nothing breaks here
    gc.collect()
    assert one[-1] is one
    one.pop()


def test_long_id_lists_are_whole_lists(cl100k):
    # From 1024 ids a list's item array is not zeroed before the core fills it (its size is set
    # once it is): lists on both sides of that size hold the same ids as the numpy path, in
    # order, and grow, shrink, sort and pickle as any list does.
    import gc
    import pickle

    for words in (300, 511, 512, 513, 40_000):  # two ids a word (" w", "12")
        text = "".join(f" w{i % 97}" for i in range(words))
        expected = cl100k.encode_batch_np([text])["ids"].tolist()
        assert len(expected) == 2 * words
        one = cl100k.encode_ordinary(text)
        (batched,) = cl100k.encode_ordinary_batch([text], num_threads=2)
        assert type(one) is list and one == batched == expected
        assert len(one) == len(expected) and one[-1] == expected[-1]
        copy = list(one)
        one.extend(range(5000))  # grows past the array it was given
        assert one[: len(copy)] == copy and len(one) == len(copy) + 5000
        del one[len(copy) :]
        one.insert(0, -1)
        assert one.pop(0) == -1 and one == copy
        one.sort()
        assert one == sorted(copy)
        assert pickle.loads(pickle.dumps(batched)) == expected
        del one, batched
        gc.collect()


def test_ids_are_ints_that_outlive_their_lists(cl100k, o200k):
    # Each id is one int shared by every list that holds it, kept by the core for good. Up to
    # CPython 3.11 its reference count starts too high for any process to count down, and lists
    # take it without counting it up (giving back a reference each when freed); from 3.12 it is
    # counted as usual. Ids 0..256 too: equal to CPython's own small ints, not the same objects.
    # The shared int is never freed under a caller who still holds it, whatever comes and goes.
    import gc
    import pickle
    import sys

    uncounted = sys.version_info < (3, 12)
    text = "Tokenizers keep their ids small: 13 is '.', and ' the' is 279."
    for tok in (cl100k, o200k):
        expected = [int(str(i)) for i in tok.encode(text).ids]  # ints made afresh
        first = tok.encode_ordinary(text)
        held = {i: first[first.index(i)] for i in set(first)}
        assert any(i <= 256 for i in held) and any(i > 256 for i in held)
        counts = {i: sys.getrefcount(x) for i, x in held.items()}
        assert not uncounted or min(counts.values()) > 2**59
        for threads in (1, 2, 1):  # each list freed gives back its reference
            lists = tok.encode_ordinary_batch([text] * 500, num_threads=threads)
            assert all(ids[k] is held[i] for ids in lists for k, i in enumerate(first))
            del lists
            gc.collect()
        for i, x in held.items():  # uncounted: 1,500 references given back, never taken
            assert sys.getrefcount(x) > 2**59 if uncounted else sys.getrefcount(x) == counts[i]
        del first
        junk = [[i * 3 for i in range(300, 2000)] for _ in range(20)]  # reuse freed memory
        again = tok.encode_ordinary(text)
        assert again == expected and all(i is held[i] for i in again)
        for i, x in held.items():
            assert type(x) is int and x == i and hash(x) == hash(int(str(i))) and x + 1 == i + 1
            assert str(x) == str(i) and x.bit_length() == i.bit_length()
        assert pickle.loads(pickle.dumps(again)) == expected
        del junk

@pytest.mark.parametrize("threads", [1, 2])
def test_a_batch_holds_off_the_collector_and_restores_it(cl100k, threads):
    # Each id list allocated counts toward the collector's next run: 20,000 of them set off
    # dozens of runs (a list per 700). The core holds them off while it builds the lists, and
    # leaves the collector as it found it, on or off.
    import gc

    texts = ["Hello world", "again"] * 10_000
    cl100k.encode_ordinary_batch(texts[:100], num_threads=threads)
    assert gc.isenabled()
    before = gc.get_stats()[0]["collections"]
    out = cl100k.encode_ordinary_batch(texts, num_threads=threads)
    assert gc.get_stats()[0]["collections"] - before <= 2 * threads
    assert gc.isenabled() and len(out) == 20_000 and out[1] == cl100k.encode_ordinary("again")
    gc.disable()
    try:
        cl100k.encode_ordinary_batch(texts[:100], num_threads=threads)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("encoding", ["cl100k_base", "r50k_base"])
@pytest.mark.parametrize("threads", [1, 2])
def test_empty_batch(shared_data, encoding, threads):
    tok = tokenmill.load(encoding, path=shared_data / "tokenizers" / "tiktoken")
    out = tok.encode_batch_np([], num_threads=threads)
    assert out["ids"].tolist() == [] and out["offsets"].tolist() == [0]
    assert tok.count_tokens([], num_threads=threads) == []
    out = tok.encode_batch_np(["", ""], num_threads=threads)  # texts, but no ids
    assert out["ids"].tolist() == [] and out["offsets"].tolist() == [0, 0, 0]


@pytest.mark.parametrize("call", ["encode_batch_np", "count_tokens", "encode_ordinary_batch"])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_bad_text_is_named(cl100k, call, threads):
    # On two threads the bad text is met by whichever thread takes its block (the core turns
    # each str into UTF-8 itself, in the thread that encodes it); the Python side names it.
    # (long enough that the surrogate sits in a block the core converts 16 characters at once)
    texts = ["fine", "also fine", "bad " + "x" * 20 + "\ud800" + "y" * 20] + ["more"] * 200
    with pytest.raises(tokenmill.InputError, match=r"texts\[2\] holds a lone surrogate U\+D800"):
        getattr(cl100k, call)(texts, num_threads=threads)
    with pytest.raises(tokenmill.InputError, match=r"texts\[1\]: expected a string, got int"):
        getattr(cl100k, call)(["fine", 7], num_threads=threads)
    # and the next batch is encoded as ever
    assert cl100k.encode_ordinary_batch(["fine"] * 300, num_threads=threads) == \
        [cl100k.encode_ordinary("fine")] * 300


@pytest.mark.parametrize("call", ["encode_batch_np", "count_tokens", "encode_ordinary_batch"])
def test_a_bad_text_is_named_on_the_python_path(python_path, call):
    with pytest.raises(tokenmill.InputError, match=r"^texts\[1\]: expected a string, got NoneType"):
        getattr(python_path, call)(["fine", None])
    with pytest.raises(tokenmill.InputError, match=r"^texts\[2\] holds a lone surrogate U\+D800"):
        getattr(python_path, call)(["fine", "ok", "bad \ud800"])


@pytest.mark.parametrize("call", ["encode_batch_np", "count_tokens", "encode_ordinary_batch",
                                  "encode_batch"])
def test_a_thread_count_that_is_not_positive_is_named(cl100k, python_path, call, monkeypatch):
    texts = ["one text", "and another"]
    for bad in (0, -1, 1.5, "2", True):
        message = (rf"^num_threads must be a positive number of threads .*got "
                   rf"{re.escape(repr(bad))}$")
        for tok, batch in ((cl100k, texts), (cl100k, texts[:1]), (cl100k, []),
                           (python_path, texts)):
            with pytest.raises(tokenmill.InputError, match=message):
                getattr(tok, call)(batch, num_threads=bad)
    if call == "encode_batch":  # (dropout takes the Python path)
        with pytest.raises(tokenmill.InputError, match=r"^num_threads must be"):
            cl100k.encode_batch(texts, dropout=0.1, num_threads=0)
    # any integer type will do (a numpy one too), and so will more threads than texts, or than
    # any machine has
    expected = getattr(cl100k, call)(texts, num_threads=1)
    for good in (np.int64(2), 64, 2 ** 64):
        out = getattr(cl100k, call)(texts, num_threads=good)
        if call == "encode_batch_np":
            assert out["ids"].tolist() == expected["ids"].tolist()
        elif call == "encode_batch":
            assert [e.ids for e in out] == [e.ids for e in expected]
        else:
            assert out == expected
    # the environment's count is checked as the caller's is, for a batch of any size, and
    # given way to by the caller's
    for bad in ("0", "-2", "two", "1.5", "\u00b2", "\u0663"):
        monkeypatch.setenv("TOKENMILL_NUM_THREADS", bad)
        for batch in (texts, texts[:1]):
            with pytest.raises(tokenmill.InputError,
                               match=rf"^TOKENMILL_NUM_THREADS must be a positive number of "
                                     rf"threads, got '{re.escape(bad)}'$"):
                getattr(cl100k, call)(batch)
        getattr(cl100k, call)(texts, num_threads=2)
    monkeypatch.setenv("TOKENMILL_NUM_THREADS", " 2 ")
    getattr(cl100k, call)(texts)
    monkeypatch.setenv("TOKENMILL_NUM_THREADS", "")  # (as if unset)
    getattr(cl100k, call)(texts)


def test_the_environment_thread_count_is_checked_where_training_and_counting_read_it(
        monkeypatch):
    monkeypatch.setenv("TOKENMILL_NUM_THREADS", "none")
    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel())
    with pytest.raises(tokenmill.InputError, match=r"^TOKENMILL_NUM_THREADS must be"):
        tok.train_from_iterator(["hello world"] * 3, BPETrainer(vocab_size=300))
    monkeypatch.setenv("TOKENMILL_NUM_THREADS", "1")
    tok.train_from_iterator(["hello world"] * 3, BPETrainer(vocab_size=300))
    assert tok.encode_ordinary("hello") == [tok.token_to_id("hello")]


@pytest.mark.parametrize("call", ["encode_batch_np", "count_tokens", "encode_ordinary_batch",
                                  "encode_batch"])
def test_one_string_is_not_a_batch(cl100k, python_path, call):
    # (its characters would each be taken for a text)
    for one in ("abc", b"abc"):
        with pytest.raises(tokenmill.InputError,
                           match=rf"expected a batch .*got one {type(one).__name__}; encode a "
                                 rf"single"):
            getattr(cl100k, call)(one)
    # on the tokenizer-in-Python path too
    with pytest.raises(tokenmill.InputError, match=r"expected a batch"):
        getattr(python_path, call)("hello")
    # while any other iterable of strings still is one
    assert cl100k.count_tokens(t for t in ["a b", "c"]) == [2, 1]


def test_a_pad_id_the_arrays_cannot_hold_is_named(cl100k):
    for bad in (-1, -100, 1 << 32, 1.0, True, "0"):
        with pytest.raises(tokenmill.InputError,
                           match=rf"^pad_id must be an id in \[0, 2\*\*32\) .*got "
                                 rf"{re.escape(repr(bad))}$"):
            cl100k.encode_batch_np(["a b", "c"], padded=True, pad_id=bad)
    out = cl100k.encode_batch_np(["a b", "c"], padded=True, pad_id=np.uint32((1 << 32) - 1))
    assert out["input_ids"][1].tolist() == cl100k.encode_ordinary("c") + [(1 << 32) - 1]
    # (pad_id means nothing without padding)
    assert cl100k.encode_batch_np(["a"], pad_id=-1)["ids"].tolist() == cl100k.encode_ordinary("a")


@pytest.mark.parametrize("threads", [1, 2])
def test_a_batch_gives_back_every_reference_to_its_texts(cl100k, threads):
    # The core keeps a list's texts alive with a reference each (the caller's list may change
    # while it works) and reads a tuple's in place: after every call, with ids or with a text
    # it refuses half way, each text's reference count is what it was; and texts that only the
    # caller's list refers to are encoded as any other.
    import sys

    texts = ["".join(["text ", str(i), " \u2019q\u2019" * (i % 3)]) for i in range(300)]
    counts = [sys.getrefcount(t) for t in texts]
    expected = [cl100k.encode_ordinary(t) for t in texts]
    calls = ("encode_ordinary_batch", "encode_batch_np", "count_tokens")
    for make in (list, tuple, lambda x: iter(list(x))):
        for call in calls:
            got = getattr(cl100k, call)(make(texts), num_threads=threads)
            if call == "encode_ordinary_batch":
                assert got == expected
    assert [sys.getrefcount(t) for t in texts] == counts
    bad = texts[:150] + [7] + texts[150:]
    for call in calls:
        with pytest.raises(tokenmill.InputError, match=r"texts\[150\]: expected a string"):
            getattr(cl100k, call)(bad, num_threads=threads)
    del bad
    assert [sys.getrefcount(t) for t in texts] == counts
    # texts referenced by the list alone: the list dropped by its caller after the call
    # (its items then die with the core's references, not before)
    fresh = ["".join(["only here ", str(i)]) for i in range(300)]
    assert cl100k.encode_ordinary_batch(fresh, num_threads=threads) == \
        [cl100k.encode_ordinary("only here " + str(i)) for i in range(300)]
    del fresh
    assert cl100k.encode_ordinary_batch(texts, num_threads=threads) == expected


def released(tok: Tokenizer, ids: list[int]) -> list[str]:
    return list(tok.decode_stream(skip_special_tokens=False).feed(ids))


def test_decode_takes_any_sequence_of_ids(cl100k):
    # Lists and tuples of ints are read in place by the core; anything else that holds ids
    # (numpy arrays, int enums) is converted first; what is no id is named, whatever the
    # container. Long outputs (tokens of more than four bytes, more ids than a reply's) grow
    # the buffer and come back whole.
    import enum

    text = "Decoding, unmistakably: 中文 and emoji 🙂, then\n\tindentation " * 3
    ids = cl100k.encode_ordinary(text)
    first = enum.IntEnum("First", {"ID": ids[0]})
    for seq in (ids, tuple(ids), np.array(ids), np.array(ids, dtype=np.uint32),
                [first.ID, *ids[1:]]):
        assert cl100k.decode(seq) == text
        assert cl100k.decode_bytes(seq) == text.encode("utf-8")
    for bad, shown in ((-1, "-1"), (2**40, str(2**40)), (cl100k.get_vocab_size() + 5, None)):
        shown = shown or str(bad)
        with pytest.raises(tokenmill.InputError, match=rf"ids\[1\]: {shown} is not an id"):
            cl100k.decode([ids[0], bad, *ids[1:]])
    long_words = cl100k.encode_ordinary(" internationalization" * 5000)  # 5 bytes a token+
    assert cl100k.decode(long_words) == " internationalization" * 5000
    many = cl100k.encode_ordinary(text * 400)  # above the count decoded with the GIL held
    assert len(many) > 1 << 14 and cl100k.decode(many) == text * 400
    special = cl100k.token_to_id("<|endoftext|>")
    assert special is not None and cl100k.decode([*ids, special, *ids]) == text + text
    assert cl100k.decode([*ids, special], skip_special_tokens=False) == text + "<|endoftext|>"


def test_decode_reads_its_own_ints_and_others_alike(cl100k, o200k):
    # The ints of encoded ids are the core's kept ones, whose id decode takes from where each
    # sits, not reading it; ints made elsewhere (equal, other objects) are read. Mixed in one
    # list, in both orders, on two models (which share the kept ints), the text is the same;
    # a bad id among kept ones is still named at its position.
    text = "Kept ints, fresh ints: 中文 and 🙂 " * 20
    for tok in (cl100k, o200k):
        ids = tok.encode_ordinary(text)
        fresh = [int(str(i)) for i in ids]
        assert all(a == b and a is not b for a, b in zip(ids, fresh) if b > 256)
        mixed = [a if k % 2 else b for k, (a, b) in enumerate(zip(ids, fresh))]
        other = [b if k % 2 else a for k, (a, b) in enumerate(zip(ids, fresh))]
        for seq in (ids, fresh, mixed, other, tuple(mixed)):
            assert tok.decode(seq) == text
            assert tok.decode_bytes(seq) == text.encode("utf-8")
        with pytest.raises(tokenmill.InputError, match=r"ids\[3\]: -7 is not an id"):
            tok.decode([*ids[:3], -7, *ids[3:]])


def test_numpy_ids_decode_on_every_path(cl100k, shared_data):
    # Ids as numpy integers (encode_batch_np's arrays, a model's output) decode wherever the
    # ids are decoded in Python too: a special id kept (cl100k_base), a tokenizer without the
    # byte-level core (BERT). A bad id is named at its own position, not the first one.
    padded = cl100k.encode_batch_np(["hello", "hello world"], padded=True,
                                    pad_id=100257)["input_ids"][0]
    assert padded.dtype == np.uint32
    assert cl100k.decode(padded, skip_special_tokens=False) == "hello<|endoftext|>"
    assert cl100k.decode(padded) == "hello"
    assert cl100k.decode_bytes(padded) == b"hello<|endoftext|>"
    assert cl100k.decode([np.int64(15339), 100257], skip_special_tokens=False) == \
        "hello<|endoftext|>"
    for bad in (np.array([15339, 100256]), [np.uint32(15339), np.int64(100256)]):
        with pytest.raises(tokenmill.InputError, match=r"^ids\[1\]: .*100256.* is not an id"):
            cl100k.decode(bad)
        with pytest.raises(tokenmill.InputError, match=r"^ids\[1\]: .*100256.* is not an id"):
            cl100k.decode_bytes(bad)
    with pytest.raises(tokenmill.InputError, match=r"^ids\[1\]: 'a' is not an id"):
        cl100k.decode([15339, "a"])
    bert = tokenmill.load(shared_data / "tokenizers" / "bert-base-uncased" / "vocab.txt")
    out = bert.encode_batch_np(["hello world", "numpy ids"])
    assert out["ids"].dtype == np.uint16
    assert bert.decode(out["ids"][:out["offsets"][1]]) == "hello world"
    assert bert.decode_batch([out["ids"][out["offsets"][i]:out["offsets"][i + 1]]
                              for i in range(2)]) == ["hello world", "numpy ids"]
    stream = bert.decode_stream()
    assert "".join(stream.feed(out["ids"][:out["offsets"][1]])) == "hello world"
    with pytest.raises(tokenmill.InputError, match=r"^ids\[2\]: -3 is not an id"):
        bert.decode([np.int64(7592), np.int64(2088), np.int64(-3)])


def test_arrays_of_ids_decode_read_in_place(cl100k, shared_data):
    # A one-dimensional array of integers that exports a buffer (numpy's, array.array) is read
    # by the core in place, whatever its width and sign; any other (big-endian, strided, bool,
    # float, two-dimensional) goes through the conversion item by item. Both paths give the
    # same text and name the same bad id, for the byte-level core and for the decode table.
    import array

    mistral = tokenmill.load(shared_data / "tokenizers" / "mistral-7b-v0.3" / "tokenizer.json")
    text = "Arrays of ids: 中文, emoji 🙂 and\n\tindentation " * 4
    for tok in (cl100k, mistral):
        ids = tok.encode(text, add_special_tokens=False).ids
        expected, raw = tok.decode(ids), tok.decode_bytes(ids)
        narrow = [np.uint32, np.int64, np.int32, np.uint64, ">u4", "<i8"]
        if max(ids) < 1 << 16:
            narrow += [np.uint16, np.int16 if max(ids) < 1 << 15 else np.int32]
        for seq in ([np.array(ids, dtype=t) for t in narrow] +
                    [array.array("I", ids), array.array("q", ids),
                     memoryview(array.array("l", ids)), np.repeat(np.array(ids), 2)[::2]]):
            assert tok.decode(seq) == expected
            assert tok.decode_bytes(seq) == raw
        for bad, shown in ((-1, "-1"), (2**40, str(2**40)), (2**32, str(2**32))):
            for seq in (np.array([ids[0], bad, ids[1]], dtype=np.int64),
                        array.array("q", [ids[0], bad, ids[1]])):
                with pytest.raises(tokenmill.InputError, match=rf"^ids\[1\]: {shown} is not"):
                    tok.decode(seq)
        huge = np.array([ids[0], 2**63 + 5], dtype=np.uint64)
        with pytest.raises(tokenmill.InputError, match=r"^ids\[1\]: .* is not an id"):
            tok.decode(huge)
        with pytest.raises(tokenmill.InputError, match=r"^ids\[0\]: .* is not an id"):
            tok.decode(np.array([1.0, 2.0]))
    assert cl100k.decode(array.array("B", [71, 72])) == cl100k.decode([71, 72]) == "hi"


def test_a_bad_id_does_not_break_the_stream(cl100k):
    # The bad id is named and left out; the ids after it decode as if it had not come.
    stream = cl100k.decode_stream()
    assert stream.step(15339) == "hello"
    for bad in (-1, 100256, 2**40, "x", None, 1.0):
        with pytest.raises(tokenmill.InputError,
                           match=rf"^decode_stream: {re.escape(repr(bad))} is not an id of "
                                 r"this tokenizer \(vocabulary size 100277\)$"):
            stream.step(bad)
    assert stream.step(np.uint32(1917)) == " world"
    ids = cl100k.encode_ordinary(" 😀")
    assert [stream.step(i) for i in ids[:-1]] == [None] * (len(ids) - 1)
    with pytest.raises(tokenmill.InputError):
        stream.step(-5)
    assert stream.step(ids[-1]) == " 😀"


def test_flush_gives_what_the_stream_holds_back(cl100k):
    # At the end of a model's output, a cut character is given as decode gives it, once; then
    # nothing is held. U+FFFD itself (id 5809) is a whole character, released at once.
    stream = cl100k.decode_stream()
    assert stream.flush() is None
    assert [stream.step(i) for i in (64, 5809)] == ["a", "\ufffd"]  # (a whole character)
    assert stream.flush() is None
    assert stream.step(65) == "b"
    emoji = cl100k.encode_ordinary("x😀")
    assert stream.step(emoji[0]) == "x"
    for i in emoji[1:-1]:
        assert stream.step(i) is None
    assert stream.flush() == cl100k.decode(emoji[1:-1]) == "\ufffd"
    assert stream.flush() is None
    text = "streamed, then flushed: 中文 🙂"
    stream = cl100k.decode_stream()
    ids = cl100k.encode_ordinary(text)
    out = "".join(stream.feed(ids))
    assert out + (stream.flush() or "") == text


@settings(max_examples=150, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=40))
def test_stream_releases_whole_characters_that_add_up(cl100k, text):
    ids = cl100k.encode_ordinary(text)
    pieces = released(cl100k, ids)
    assert "".join(pieces) == cl100k.decode(ids)
    assert not any("\ufffd" in p for p in pieces) or "\ufffd" in text


def test_stream_holds_back_a_cut_character(cl100k):
    ids = cl100k.encode_ordinary("😀")
    assert len(ids) > 1  # the emoji is cut across byte-level tokens
    stream = cl100k.decode_stream()
    assert [stream.step(i) for i in ids[:-1]] == [None] * (len(ids) - 1)
    assert stream.step(ids[-1]) == "😀"


def test_stream_with_a_metaspace_decoder(shared_data):
    tok = Tokenizer.from_file(shared_data / "tokenizers" / "mistral-7b-v0.3" / "tokenizer.json")
    text = "Hello  world, 日本 😀 ok"
    ids = tok.encode(text, add_special_tokens=False).ids
    assert "".join(released(tok, ids)) == tok.decode(ids, skip_special_tokens=False)


def test_stream_of_a_suffix_tokenizer():
    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.Whitespace(),
                    decoder=decoders.BPEDecoder(suffix="</w>"))
    tok.train_from_iterator(["low lower lowest"] * 3,
                            BPETrainer(num_merges=5, end_of_word_suffix="</w>"))
    ids = tok.encode("low lower").ids
    assert "".join(released(tok, ids)) == tok.decode(ids)


@pytest.mark.parametrize("n", [1, 2, 3, 17, 65, 1000])
@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_batch_lists_equal_one_by_one_for_any_size_and_threads(o200k, n, threads):
    # With several threads, the workers encode blocks of texts while the calling thread turns
    # finished blocks into lists in order: every size and thread count must give the same lists.
    texts = [TEXTS[i % len(TEXTS)] * (1 + i % 7) for i in range(n)]
    assert o200k.encode_ordinary_batch(texts, num_threads=threads) == \
        [o200k.encode_ordinary(t) for t in texts]


def test_one_tokenizer_shared_by_python_threads(cl100k, o200k):
    # Batches run on a pool of encoding threads kept from call to call; batches from several
    # Python threads at once (the GIL is released while they encode) find it busy and start
    # threads of their own. Every result must be what one thread gives.
    import random
    from concurrent.futures import ThreadPoolExecutor

    rnd = random.Random(5)
    words = ["the", " cat", "日本", "😀", "def", "\n", "  ", "x1", "Ünï"]
    batches = [["".join(rnd.choices(words, k=rnd.randint(0, 60))) for _ in range(300)]
               for _ in range(8)]
    expected = {(name, i): [tok.encode_ordinary(t) for t in batch]
                for name, tok in (("cl100k", cl100k), ("o200k", o200k))
                for i, batch in enumerate(batches)}

    def job(key):
        name, i = key
        tok = cl100k if name == "cl100k" else o200k
        return key, tok.encode_ordinary_batch(batches[i], num_threads=2)

    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):
            for key, got in pool.map(job, list(expected)):
                assert got == expected[key], key


_forked: list[Tokenizer] = []  # the tokenizer a forked child finds (it is not picklable)


def _encode_in_child(texts: list[str]) -> list[list[int]]:
    return _forked[0].encode_ordinary_batch(texts, num_threads=2)


def test_batches_in_a_forked_child(cl100k):
    # A child forked after the pool started has none of its threads: it makes its own.
    import multiprocessing

    texts = ["Hello world!", "日本語のテキスト", "def f(x):\n    return x ** 2\n"] * 50
    expected = cl100k.encode_ordinary_batch(texts, num_threads=2)
    _forked[:] = [cl100k]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as child:
        got = child.apply(_encode_in_child, (texts,))
    assert got == expected


def test_str_subclasses_encode_as_their_text(cl100k):
    # The core reads a str's own code units; a subclass (numpy.str_, a user's) may keep them
    # apart from the object: the ids are those of the plain text, on every path.
    import numpy as np

    class Tagged(str):
        pass

    text = "h\u00e9llo w\u00f6rld \u2019q\u2019 \u65e5\u672c \U0001f600 " * 5 + "tail"
    expected = cl100k.encode_ordinary(text)
    for value in (Tagged(text), np.str_(text)):
        assert cl100k.encode_ordinary(value) == expected
        assert cl100k.encode_ordinary_batch([value, text], num_threads=2) == [expected] * 2
        assert cl100k.count_tokens([value]) == [len(expected)]
        assert cl100k.encode(value).ids == expected


def test_tokens_added_after_a_call_are_found_by_every_call(shared_data):
    # The added tokens less the disallowed special ones were kept by allowed set on the
    # tokenizer and never made again: tokens added after a first encode went unseen.
    tok = tokenmill.load("cl100k_base", path=shared_data / "tokenizers" / "tiktoken")
    tok.encode("warm up")
    tok.encode("x<|endoftext|>", allowed_special={"<|endoftext|>"})
    tok.add_tokens(["zzqx"])
    new = tok.token_to_id("zzqx")
    assert new == 100277
    assert tok.encode("zzqx").ids == [new]
    assert tok.encode("zzqx<|endoftext|>", allowed_special={"<|endoftext|>"}).ids == \
        [new, 100257]
    tok.add_tokens(["qwxyzk"])
    assert tok.encode_ordinary("qwxyzk zzqx") == [100278, 220, new]
    assert tok.count_tokens(["qwxyzk zzqx"]) == [3]
    bert = tokenmill.load(shared_data / "tokenizers" / "bert-base-uncased" / "vocab.txt")
    assert bert.count_tokens(["zzqx"]) == [4]  # z ##z ##q ##x
    bert.add_tokens(["zzqx"])
    assert bert.count_tokens(["zzqx"]) == [1]
    assert bert.encode_batch_np(["a zzqx"])["ids"].tolist() == \
        [bert.token_to_id("a"), bert.token_to_id("zzqx")]
