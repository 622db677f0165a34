"""Count files: round trip, checksum, truncation, merging in shard order, --max-distinct."""

import os
from collections import Counter

import pytest

from tokenmill import BPE, BPETrainer, FormatError, InputError, Tokenizer, pre_tokenizers
from tokenmill.formats.counts import (
    MAGIC,
    limit_distinct,
    load_counts,
    merge_count_files,
    merge_counts,
    pipeline_of,
    pipeline_tokenizer,
    save_counts,
)

BYTE_LEVEL = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel())
WHITESPACE = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.Whitespace())
DOCS = ["the cat sat on the mat", "a dog, the dog; 🐕 dogs!", "", "ünïcode and\ttabs\n",
        "the end"]


def saved(tmp_path, counts=None, tokenizer=BYTE_LEVEL, name="c.tmc", **kw):
    path = str(tmp_path / name)
    save_counts(path, BYTE_LEVEL.count_words(DOCS) if counts is None else counts, tokenizer,
                **kw)
    return path


def test_round_trip_keeps_counts_order_pipeline_and_info(tmp_path):
    counts = Counter({"b": 2, "": 1, "a\x00\n": 3, "🐕": 2**40, "é" * 300: 1})
    path = saved(tmp_path, counts, dropped=(7, 11), meta={"inputs": ["x.txt"]})
    loaded, pipeline, info = load_counts(path)
    assert loaded == counts and list(loaded) == list(counts)
    assert pipeline == pipeline_of(BYTE_LEVEL) == {
        "normalizer": None, "pre_tokenizer": BYTE_LEVEL.pre_tokenizer.to_dict()}
    assert (info.distinct, info.total, info.dropped_distinct, info.dropped_total) == \
        (5, 2**40 + 7, 7, 11)
    assert info.meta == {"inputs": ["x.txt"]} and info.path == path
    assert open(path, "rb").read(8) == MAGIC
    assert os.listdir(tmp_path) == ["c.tmc"]  # no temporary file left


def test_empty_counts_round_trip(tmp_path):
    loaded, _, info = load_counts(saved(tmp_path, Counter()))
    assert loaded == Counter() and info.total == 0


def test_a_failed_save_leaves_the_old_file_and_no_partial_one(tmp_path):
    path = saved(tmp_path, Counter({"a": 1}))
    with pytest.raises(InputError, match="the count of 'b' is -1"):
        save_counts(path, Counter({"a": 1, "b": -1}), BYTE_LEVEL)
    with pytest.raises(InputError, match="lone surrogate"):
        save_counts(path, Counter({"\ud800": 1}), BYTE_LEVEL)
    assert load_counts(path)[0] == Counter({"a": 1})
    assert os.listdir(tmp_path) == ["c.tmc"]
    with pytest.raises(InputError, match="does not exist"):
        save_counts(str(tmp_path / "no" / "c.tmc"), Counter(), BYTE_LEVEL)
    pipe = tmp_path / "fifo.tmc"
    os.mkfifo(pipe)
    with pytest.raises(InputError, match=rf"{pipe}: not a regular file"):
        save_counts(pipe, Counter({"a": 1}), BYTE_LEVEL)
    assert sorted(os.listdir(tmp_path)) == ["c.tmc", "fifo.tmc"]


@pytest.mark.parametrize("where", [0.3, 0.6, 0.95, -1])
def test_a_flipped_byte_is_a_checksum_error(tmp_path, where):
    path = saved(tmp_path)
    data = bytearray(open(path, "rb").read())
    # Past the fixed prefix (magic, version, header length): into header, pieces, counts, sum.
    i = int(len(data) * where) if where > 0 else len(data) - 1
    data[i] ^= 0x01
    open(path, "wb").write(bytes(data))
    with pytest.raises(FormatError, match=f"^{path}: checksum mismatch: the file is corrupted"):
        load_counts(path)


@pytest.mark.parametrize("keep", [0, 5, 19, 60, -33, -1])
def test_a_truncated_file_is_a_clear_error(tmp_path, keep):
    path = saved(tmp_path)
    data = open(path, "rb").read()
    open(path, "wb").write(data[:keep] if keep >= 0 else data[:keep])
    with pytest.raises(FormatError, match=f"^{path}: truncated"):
        load_counts(path)


def test_foreign_and_future_files(tmp_path):
    path = tmp_path / "x.tmc"
    path.write_bytes(b'{"not": "a count file"}' * 4)
    with pytest.raises(FormatError, match="not a tokenmill count file"):
        load_counts(str(path))
    good = open(saved(tmp_path), "rb").read()
    path.write_bytes(good[:8] + (9).to_bytes(4, "little") + good[12:])
    with pytest.raises(FormatError, match="count file version 9; this tokenmill reads version 1"):
        load_counts(str(path))
    with pytest.raises(InputError, match="no such file"):
        load_counts(str(tmp_path / "missing.tmc"))


def test_merge_in_shard_order_equals_counting_the_concatenation():
    shards = [DOCS[:2], DOCS[2:4], DOCS[4:]]
    parts = [BYTE_LEVEL.count_words(s) for s in shards]
    whole = BYTE_LEVEL.count_words(DOCS)
    merged = merge_counts(parts)
    assert merged == whole and list(merged) == list(whole)
    again = merge_counts([BYTE_LEVEL.count_words(s) for s in shards])
    assert list(again.items()) == list(merged.items())  # deterministic for a shard order
    reversed_ = merge_counts(parts[::-1])
    assert reversed_ == whole  # the counts do not depend on the order, the order does


def test_merge_order_by_hand():
    merged = merge_counts([Counter({"x": 1, "y": 2}), Counter({"z": 5, "x": 1}),
                           Counter({"w": 1, "y": 1})])
    assert list(merged.items()) == [("x", 2), ("y", 3), ("z", 5), ("w", 1)]


def test_merge_count_files(tmp_path):
    shards = [DOCS[:2], DOCS[2:]]
    paths = [saved(tmp_path, BYTE_LEVEL.count_words(s), name=f"s{i}.tmc", dropped=(1, 2))
             for i, s in enumerate(shards)]
    merged, pipeline, info = merge_count_files(paths)
    whole = BYTE_LEVEL.count_words(DOCS)
    assert list(merged.items()) == list(whole.items())
    assert pipeline == pipeline_of(BYTE_LEVEL)
    assert (info.distinct, info.total, info.dropped_distinct, info.dropped_total) == \
        (len(whole), sum(whole.values()), 2, 4)


def test_merging_different_pipelines_names_both_files(tmp_path):
    a = saved(tmp_path, name="a.tmc")
    b = saved(tmp_path, WHITESPACE.count_words(DOCS), WHITESPACE, name="b.tmc")
    with pytest.raises(InputError, match=f"{b} was counted with a different pipeline than {a} "
                                         r"\(their pre_tokenizer differ\)"):
        merge_count_files([a, b])


def test_limit_distinct_exact_values():
    counts = Counter({"e": 1, "a": 5, "d": 2, "b": 5, "c": 2, "f": 2, "g": 9})
    kept, distinct, total = limit_distinct(counts, 4)
    # g 9, a 5, b 5, then one of the three 2s: d, the first seen. Kept in first-seen order.
    assert list(kept.items()) == [("a", 5), ("d", 2), ("b", 5), ("g", 9)]
    assert (distinct, total) == (3, 1 + 2 + 2)
    assert limit_distinct(counts, 7) == (counts, 0, 0)
    assert limit_distinct(counts, 100)[1:] == (0, 0)
    assert limit_distinct(counts, 0) == (Counter(), 7, 26)
    with pytest.raises(InputError, match="non-negative integer"):
        limit_distinct(counts, -1)


def test_training_from_a_count_file_equals_training_from_text(tmp_path):
    corpus = [f"{w} {w}s {w}ing the {w}er" for w in ("low", "new", "wid", "high", "sho")] * 3
    trainer = BPETrainer(vocab_size=300,
                         initial_alphabet=tuple(pre_tokenizers.ByteLevel.alphabet()))
    local = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel())
    expected = local.train_from_iterator(corpus, trainer)
    path = saved(tmp_path, BYTE_LEVEL.count_words(corpus))
    counts, pipeline, _ = load_counts(path)
    tok = pipeline_tokenizer(pipeline)
    assert tok.count_words(corpus) == counts
    assert tok.train_from_counts(counts, trainer).merges == expected.merges
    assert tok.get_vocab() == local.get_vocab()
