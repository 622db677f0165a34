"""Counting on a real Dask cluster of worker processes: the same counts, in the same order, and
the same merges as a local run; and the ways a cluster fails."""

import gzip
import io
import json
import os
import time
from collections import Counter
from importlib import resources

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from tokenmill import BPE, BPETrainer, InputError, Tokenizer, TokenmillError, pre_tokenizers
from tokenmill import distributed as tm_dask
from tokenmill.corpus import ReadOptions, ReadStats, iter_documents
from tokenmill.distributed import count_on_dask, count_shard, plan_shards
from tokenmill.formats.counts import pipeline_of

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

WORDS = ["alice", "rabbit", "queen", "tea", "hatter", "cat", "garden", "door", "key", "été",
         "drink", "me", "curious", "🐇", "  ", "!", "x1", "'s"]


def sentence(i: int) -> str:
    return " ".join(WORDS[(i * k + k * k) % len(WORDS)] for k in range(1, 3 + i % 9))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    # The bundled sample (Alice, 144 kB) with some CRLF line ends: cut into byte-range shards.
    sample = (resources.files("tokenmill") / "data" / "sample.txt").read_bytes()
    (root / "a_big.txt").write_bytes(sample.replace(b"\n\n", b"\r\n\n"))
    (root / "b.txt.gz").write_bytes(gzip.compress("\n".join(map(sentence, range(400))).encode()))
    rows = "".join(json.dumps({"text": sentence(i + 7), "id": i}) + "\n" for i in range(300))
    (root / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(rows.encode()))
    sink = io.BytesIO()
    pq.write_table(pa.table({"text": [sentence(i * 3) for i in range(500)]}), sink,
                   row_group_size=128)
    (root / "d.parquet").write_bytes(sink.getvalue())
    (root / "sub").mkdir()
    (root / "sub" / "e.txt").write_text("\n".join(map(sentence, range(50, 90))))
    return root


@pytest.fixture(scope="module")
def client():
    # One retry after a worker dies, then KilledWorker: keeps the death test short.
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=":0") as cluster:
            with distributed.Client(cluster) as c:
                yield c


def byte_level() -> Tokenizer:
    return Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel())


def test_counts_and_order_equal_a_local_count(client, corpus):
    tok = byte_level()
    shards = plan_shards([str(corpus)], shard_bytes=16_000)
    assert len([s for s in shards if s.path.endswith("a_big.txt")]) >= 9
    assert len(shards) >= 13
    stats, seen = ReadStats(), []
    counts = count_on_dask([str(corpus)], tok, client=client, shard_bytes=16_000, stats=stats,
                           progress=seen.append)
    local_stats = ReadStats()
    local = tok.count_words(iter_documents([str(corpus)], stats=local_stats))
    assert counts == local
    assert list(counts) == list(local)
    assert stats == local_stats and sum(seen) == stats.bytes_read
    # Another shard size (other tasks, other finishing order): still the same, order too.
    again = count_on_dask([str(corpus)], tok.to_dict(), client=client, shard_bytes=50_000)
    assert list(again.items()) == list(local.items())


def test_training_from_dask_counts_gives_the_merges_of_a_local_run(client, corpus):
    alphabet = tuple(pre_tokenizers.ByteLevel.alphabet())
    inputs = [str(corpus / "a_big.txt"), str(corpus / "c.jsonl.zst"), str(corpus / "d.parquet")]
    local = byte_level()
    expected = local.train_from_iterator(iter_documents(inputs),
                                         BPETrainer(vocab_size=400, initial_alphabet=alphabet))
    tok = byte_level()
    counts = count_on_dask(inputs, tok, client=client, shard_bytes=20_000)
    result = tok.train_from_counts(counts, BPETrainer(vocab_size=400, initial_alphabet=alphabet))
    assert len(expected.merges) > 100
    assert result.merges == expected.merges
    assert tok.get_vocab() == local.get_vocab()


def test_a_python_iterator_of_documents_and_batches(client):
    tok = byte_level()
    texts = [sentence(i) for i in range(2000)]
    batches = iter([texts[i:i + 300] for i in range(0, len(texts), 300)])
    for source in (iter(texts), batches):
        counts = count_on_dask(source, tok, client=client)
        assert list(counts.items()) == list(tok.count_words(texts).items())


def test_connecting_by_scheduler_address(client, corpus):
    tok = byte_level()
    inputs = [str(corpus / "b.txt.gz")]
    counts = count_on_dask(inputs, tok, scheduler=client.scheduler.address, timeout=10)
    assert list(counts.items()) == list(tok.count_words(iter_documents(inputs)).items())


def test_a_scheduler_without_workers_is_a_clear_error_within_the_timeout():
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as empty:
        started = time.monotonic()
        # (3 s: the same timeout covers connecting, which must not run out first on a slow
        # machine; connecting took 2-15 ms here)
        with pytest.raises(InputError, match="has no worker after 3 s"):
            count_on_dask([__file__], byte_level(), scheduler=empty.scheduler_address,
                          timeout=3)
        assert time.monotonic() - started < 12


def test_results_are_merged_in_shard_order_whatever_order_they_finish_in(client):
    tok = byte_level()
    shards = [["late first shard zzz"], ["b b a"], ["a c"], ["d a late"]]
    pipeline = json.dumps(pipeline_of(tok), sort_keys=True)

    def slow_first(shard, pipeline, options):
        if shard == ["late first shard zzz"]:
            time.sleep(0.5)
        return "ok", count_shard(shard, pipeline, options)

    counts = tm_dask._count(client, iter(shards), pipeline, ReadOptions(), None, ReadStats(),
                            task=slow_first)
    assert list(counts.items()) == list(tok.count_words(s for b in shards for s in b).items())


def test_bad_input_on_a_worker_is_the_same_clear_error(client, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n" * 10 + b"\xc3(\n")
    with pytest.raises(InputError, match=f"{bad}: not UTF-8 at byte offset 50 "):
        count_on_dask([str(bad)], byte_level(), client=client)
    stats = ReadStats()
    counts = count_on_dask([str(bad)], byte_level(), client=client, errors="replace",
                           stats=stats)
    assert counts == byte_level().count_words(["fine"] * 10 + ["\ufffd("])
    assert stats.replaced == {str(bad): 1}


def test_stdin_cannot_go_to_workers(client):
    with pytest.raises(InputError, match=r"^standard input cannot be cut into shards \(a shard "
                                         r"is a file, or a byte range of one, that a worker"):
        count_on_dask(["-"], byte_level(), client=client)


def test_unreachable_scheduler_is_a_quick_clear_error():
    started = time.monotonic()
    with pytest.raises(InputError, match=r"cannot reach the Dask scheduler at "
                                         r"tcp://127\.0\.0\.1:1 within 1\.5 s"):
        count_on_dask([__file__], byte_level(), scheduler="tcp://127.0.0.1:1", timeout=1.5)
    assert time.monotonic() - started < 10


def test_a_failing_task_is_retried_then_a_clear_error(client):
    def fails(shard, pipeline, options):
        raise MemoryError("out of memory on the worker")

    with pytest.raises(TokenmillError, match="failed on the Dask workers, again after a retry "
                                             r"\(MemoryError: out of memory"):
        tm_dask._count(client, iter([["a"]]), "{}", ReadOptions(), None, ReadStats(),
                       task=fails)


def test_a_worker_that_dies_is_a_clear_error_never_a_partial_count(client):
    # Runs last in this module: it kills workers (the nannies start new ones).
    def dies(shard, pipeline, options):
        if shard == ["die"]:
            os._exit(1)
        return "ok", (Counter(shard), ReadStats())

    with pytest.raises(TokenmillError, match="the Dask workers counting a batch of documents "
                                             "died, as many times as the scheduler allows"):
        tm_dask._count(client, iter([["a"], ["die"], ["b"]]), "{}", ReadOptions(), None,
                       ReadStats(), task=dies)
    client.wait_for_workers(2, timeout=30)
