"""Sharded token files: one token file per shard plus a manifest, equal to encoding the corpus
in one go; resumable (finished shards are kept, changed or damaged ones redone); and the same
files from a real Dask cluster of worker processes."""

from __future__ import annotations

import gzip
import json
import uuid
from importlib import resources

import pytest

import tokenmill
from tokenmill import InputError, TokenmillError
from tokenmill import token_shards as ts
from tokenmill.cli import main
from tokenmill.corpus import iter_documents
from tokenmill.token_shards import MANIFEST, encode_shards, load_manifest

SEP = 50256


@pytest.fixture(scope="module")
def gpt2(shared_data):
    return tokenmill.load("r50k_base", path=shared_data / "tokenizers" / "tiktoken")


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    sample = (resources.files("tokenmill") / "data" / "sample.txt").read_bytes()
    (root / "a.txt").write_bytes(sample[:60000])  # cut into byte ranges below
    (root / "b.txt.gz").write_bytes(gzip.compress(b"one\ntwo <|endoftext|>\n\nthree"))
    (root / "c.jsonl").write_text("".join(json.dumps({"text": t}) + "\n"
                                          for t in ["日本語 😀", "def f(x):\n    return x", ""]))
    return root


def files(root):
    return [str(root / "a.txt"), str(root / "b.txt.gz"), str(root / "c.jsonl")]


def all_ids(manifest_dir):
    manifest, arrays = load_manifest(manifest_dir, verify=True)
    docs = []
    for ids, offsets in arrays:
        docs += [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
    return manifest, docs


def test_shards_equal_one_pass_over_the_corpus(gpt2, corpus, tmp_path, monkeypatch):
    out = tmp_path / "tokens"
    # The fingerprint is made once for the run, not once a shard (a canonical JSON of the
    # whole tokenizer each time), and every shard records it.
    made = []
    fingerprint = type(gpt2).fingerprint
    monkeypatch.setattr(type(gpt2), "fingerprint", lambda self: made.append(1) or
                        fingerprint(self))
    manifest = encode_shards(gpt2, files(corpus), out, separator=SEP, shard_bytes=20000)
    assert len(made) == 1
    monkeypatch.undo()
    assert all(json.loads((out / f"{s['file']}.json").read_text())["fingerprint"] ==
               gpt2.fingerprint() for s in manifest["shards"])
    expected = [gpt2.encode_ordinary(d) + [SEP] for d in iter_documents(files(corpus))]
    loaded, docs = all_ids(out)
    assert loaded == manifest and docs == expected
    assert len(manifest["shards"]) == 5  # a.txt in three byte ranges, then b and c
    assert [s["file"] for s in manifest["shards"]] == [f"shard-{i:05d}.bin" for i in range(5)]
    assert manifest["documents"] == len(expected)
    assert manifest["tokens"] == sum(map(len, expected))
    assert manifest["fingerprint"] == gpt2.fingerprint() and manifest["dtype"] == "uint16"


def test_a_bad_thread_count_is_refused_before_anything_is_written(gpt2, corpus, tmp_path):
    out = tmp_path / "shards"
    with pytest.raises(InputError, match=r"^num_threads must be a positive number of threads"):
        encode_shards(gpt2, [corpus], out, num_threads=-2)
    assert not out.exists()


def test_a_rerun_keeps_finished_shards_and_redoes_changed_ones(gpt2, corpus, tmp_path,
                                                               monkeypatch):
    out = tmp_path / "tokens"
    first = encode_shards(gpt2, files(corpus), out, separator=SEP, shard_bytes=20000)
    encoded = []
    real = ts._encode
    monkeypatch.setattr(ts, "_encode", lambda tok, job: encoded.append(job.output) or
                        real(tok, job))
    assert encode_shards(gpt2, files(corpus), out, separator=SEP, shard_bytes=20000) == first
    assert encoded == []
    # A damaged shard (same size, other bytes) and a changed input are encoded again.
    shard1 = out / "shard-00001.bin"
    data = bytearray(shard1.read_bytes())
    data[0] ^= 1
    shard1.write_bytes(bytes(data))
    (corpus / "c.jsonl").write_text(json.dumps({"text": "changed"}) + "\n")
    second = encode_shards(gpt2, files(corpus), out, separator=SEP, shard_bytes=20000)
    assert sorted(encoded) == [str(out / "shard-00001.bin"), str(out / "shard-00004.bin")]
    assert second["shards"][1] == first["shards"][1]
    assert second["shards"][4] != first["shards"][4]
    # Another separator is another token stream: every shard is redone.
    encoded.clear()
    encode_shards(gpt2, files(corpus), out, separator=None, shard_bytes=20000)
    assert len(encoded) == 5


def test_a_rerun_that_reads_the_inputs_otherwise_encodes_them_again(gpt2, tmp_path):
    # The same files, another JSON field or the whole file as one document: other documents,
    # so no shard of the first run is kept.
    root = tmp_path / "in"
    root.mkdir()
    (root / "a.jsonl").write_text("".join(json.dumps({"text": t, "body": b}) + "\n"
                                          for t, b in [("one", "uno"), ("two", "dos")]))
    (root / "b.txt").write_text("first line\nsecond line\n")
    inputs = [str(root / "a.jsonl"), str(root / "b.txt")]
    out = tmp_path / "tokens"

    def docs_of(**read):
        return [gpt2.encode_ordinary(d) for d in iter_documents(inputs, **read)]

    encode_shards(gpt2, inputs, out)
    assert all_ids(out)[1] == docs_of()
    for read in ({"text_field": "body"}, {"text_field": "body", "whole_file": True},
                 {"text_field": "body", "whole_file": True, "errors": "replace"}):
        manifest = encode_shards(gpt2, inputs, out, **read)
        assert all_ids(out)[1] == docs_of(**read), read
        assert all(s["source"]["read"]["text_field"] == "body" for s in manifest["shards"])
    assert [len(docs) for docs in (docs_of(), docs_of(whole_file=True))] == [4, 3]


def test_standard_input_is_no_shard(gpt2, tmp_path):
    with pytest.raises(InputError, match=r"^standard input cannot be cut into shards .* save "
                                         r"it to a file first$"):
        encode_shards(gpt2, ["-"], tmp_path / "shards")
    assert not (tmp_path / "shards").exists()


def test_a_bad_dask_timeout_is_refused_before_connecting(gpt2, corpus, tmp_path):
    out = tmp_path / "shards"
    for bad in (float("nan"), float("inf"), -1, 0, "30", True):
        with pytest.raises(InputError,
                           match=r"^timeout must be a positive number of seconds, got "):
            encode_shards(gpt2, files(corpus), out, engine="dask",
                          scheduler="tcp://127.0.0.1:1", timeout=bad)
    assert not (out / MANIFEST).exists()


def test_a_failing_shard_keeps_the_finished_ones_and_writes_no_manifest(gpt2, corpus,
                                                                        tmp_path):
    (corpus / "c.jsonl").write_bytes(b'{"text": "ok"}\n{"text": "bad \xff"}\n')
    out = tmp_path / "tokens"
    with pytest.raises(InputError, match="c.jsonl"):
        encode_shards(gpt2, files(corpus), out, shard_bytes=20000)
    assert not (out / MANIFEST).exists()
    assert (out / "shard-00000.bin.json").is_file()
    with pytest.raises(InputError, match=r"manifest.json: no such file \(an unfinished run"):
        load_manifest(out)


def test_cli_sharded_encode_corpus(gpt2, corpus, shared_data, tmp_path, capsys):
    ranks = str(shared_data / "tokenizers" / "tiktoken")
    out = tmp_path / "cli"
    args = ["encode-corpus", *files(corpus), "-t", "r50k_base", "--ranks", ranks,
            "--separator", "<|endoftext|>", "-o", str(out)]
    assert main([*args, "--shards", "--shard-mb", "0.02"]) == 0
    assert "manifest.json" in capsys.readouterr().err
    manifest, docs = all_ids(out)
    assert docs == [gpt2.encode_ordinary(d) + [SEP] for d in iter_documents(files(corpus))]
    assert main([*args, "--engine", "dask"]) == 2
    assert "--engine dask needs --scheduler" in capsys.readouterr().err
    for bad in ("0", "-1", "nan", "inf"):
        with pytest.raises(SystemExit) as stop:
            main([*args, "--shards", "--shard-mb", bad])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert f"argument --shard-mb: expected a positive number, got '{bad}'" in err
        assert "Traceback" not in err and err.count("\n") == 1
    for bad in ("nan", "-1", "0"):
        with pytest.raises(SystemExit) as stop:
            main([*args, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:1",
                  "--timeout", bad])
        assert stop.value.code == 2
        assert f"argument --timeout: expected a positive number, got '{bad}'" in \
            capsys.readouterr().err


dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as c:
            yield c


def test_dask_writes_the_files_a_local_run_writes(gpt2, corpus, tmp_path, client):
    local = encode_shards(gpt2, files(corpus), tmp_path / "local", separator=SEP,
                          shard_bytes=20000)
    remote = encode_shards(gpt2, files(corpus), tmp_path / "dask", separator=SEP,
                           shard_bytes=20000, engine="dask", client=client)
    assert remote == local
    for entry in local["shards"]:
        assert (tmp_path / "dask" / entry["file"]).read_bytes() == \
            (tmp_path / "local" / entry["file"]).read_bytes()


def test_a_shard_that_fails_on_a_worker_is_named(gpt2, corpus, tmp_path, client):
    (corpus / "b.txt.gz").write_bytes(b"not gzip at all")
    with pytest.raises(TokenmillError, match="b.txt.gz"):
        encode_shards(gpt2, files(corpus), tmp_path / "dask", engine="dask", client=client)
    assert not (tmp_path / "dask" / MANIFEST).exists()


def test_dask_takes_an_output_folder_relative_to_the_caller(gpt2, corpus, tmp_path, client,
                                                            monkeypatch):
    # The workers started in another folder; the shards' paths must not be resolved there.
    local = encode_shards(gpt2, files(corpus), tmp_path / "local", separator=SEP,
                          shard_bytes=20000)
    monkeypatch.chdir(tmp_path)
    name = f"relative-{uuid.uuid4().hex}"
    remote = encode_shards(gpt2, files(corpus), name, separator=SEP, shard_bytes=20000,
                           engine="dask", client=client)
    assert remote == local
    for entry in local["shards"]:
        assert (tmp_path / name / entry["file"]).read_bytes() == \
            (tmp_path / "local" / entry["file"]).read_bytes()
