"""Token files for pretraining: ids on disk equal encode_ordinary, readable with numpy.memmap."""

from __future__ import annotations

import dis
import errno
import json
import os
import stat
import sys

import numpy as np
import pytest

import tokenmill
from tokenmill import InputError
from tokenmill.cli import main
from tokenmill.token_files import encode_corpus, load_token_file

DOCS = ["Hello world!", "", "日本語 😀", "def f(x):\n    return x\n", "<|endoftext|> is text here"]


@pytest.fixture(scope="module")
def gpt2(shared_data):
    return tokenmill.load("r50k_base", path=shared_data / "tokenizers" / "tiktoken")


def test_file_equals_encode_ordinary_with_separators(gpt2, tmp_path):
    out = tmp_path / "out.bin"
    info = encode_corpus(gpt2, [DOCS[:2], DOCS[2:]], out, separator=50256)
    ids, offsets, meta = load_token_file(out, verify=True)
    assert meta == info and info.dtype == "uint16" and info.documents == len(DOCS)
    for i, doc in enumerate(DOCS):
        assert ids[offsets[i]:offsets[i + 1]].tolist() == gpt2.encode_ordinary(doc) + [50256]
    assert np.memmap(out, dtype="<u2", mode="r").tolist() == ids.tolist()
    assert meta.fingerprint == gpt2.fingerprint()


def test_written_files_get_the_permissions_the_umask_gives(gpt2, tmp_path):
    # mkstemp's temporary files are 0600; renamed into place as they were, a token file on
    # shared storage could not be read by other users (or Dask workers running as one).
    from tokenmill.formats.counts import save_counts

    old = os.umask(0o022)
    try:
        out = tmp_path / "out.bin"
        encode_corpus(gpt2, [DOCS], out)
        out.write_bytes(b"")  # (overwritten below: the new file's mode, not the old one's)
        out.chmod(0o600)
        encode_corpus(gpt2, [DOCS], out)
        save_counts(tmp_path / "c.tmc", {"a": 1}, {"normalizer": None, "pre_tokenizer": None})
        os.umask(0o027)
        encode_corpus(gpt2, [DOCS], tmp_path / "group.bin")
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"out.bin": 0o644, "out.bin.idx": 0o644, "out.bin.json": 0o644,
                     "c.tmc": 0o644, "group.bin": 0o640, "group.bin.idx": 0o640,
                     "group.bin.json": 0o640}


def test_cli_encode_corpus(gpt2, shared_data, tmp_path, capsys):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("\n".join(json.dumps({"text": d}) for d in DOCS) + "\n", encoding="utf-8")
    out = tmp_path / "c.bin"
    ranks = str(shared_data / "tokenizers" / "tiktoken")
    assert main(["encode-corpus", str(corpus), "-t", "r50k_base", "--ranks", ranks,
                 "--separator", "<|endoftext|>", "-o", str(out)]) == 0
    assert "tokens/s" in capsys.readouterr().err
    ids, offsets, _ = load_token_file(out)
    assert ids[offsets[1]:offsets[2]].tolist() == [50256]  # the empty document
    assert main(["encode-corpus", str(corpus), "-t", "r50k_base", "--ranks", ranks,
                 "--separator", "<|nope|>", "-o", str(tmp_path / "x.bin")]) == 2


def test_cli_refuses_an_output_that_is_an_input(shared_data, tmp_path, capsys):
    corpus = tmp_path / "docs.txt"
    corpus.write_text("Hello world!\n", encoding="utf-8")
    ranks = tmp_path / "r50k_base.tiktoken"  # (a copy: a failing test would write over it)
    ranks.write_bytes((shared_data / "tokenizers" / "tiktoken" / ranks.name).read_bytes())
    os.link(corpus, tmp_path / "out.bin.idx")  # the corpus where out.bin's index would go

    def refused(out):
        assert main(["encode-corpus", str(corpus), "-t", "r50k_base", "--ranks", str(ranks),
                     "-o", str(out)]) == 2
        return capsys.readouterr().err

    assert f"{corpus}: is also an input ({corpus})" in refused(corpus)
    assert f"out.bin.idx: is also an input ({corpus})" in refused(tmp_path / "out.bin")
    assert f"{ranks}: is also an input ({ranks})" in refused(ranks)
    assert corpus.read_text("utf-8") == "Hello world!\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.txt", "out.bin.idx", ranks.name]


def test_a_failed_write_leaves_nothing(gpt2, tmp_path, monkeypatch):
    out = tmp_path / "full.bin"

    def batches():
        yield DOCS
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(InputError, match=r"No space left on device\); nothing was kept"):
        encode_corpus(gpt2, batches(), out)
    assert list(tmp_path.iterdir()) == []


def test_a_bad_thread_count_is_refused_before_the_corpus_is_read(gpt2, tmp_path):
    def batches():
        raise AssertionError("read")
        yield DOCS

    with pytest.raises(InputError, match=r"^num_threads must be a positive number of threads"):
        encode_corpus(gpt2, batches(), tmp_path / "out.bin", num_threads=0)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("which", ["", ".idx", ".json"])
def test_a_pipe_in_the_way_is_refused_before_encoding(gpt2, tmp_path, which):
    out = tmp_path / "out.bin"
    pipe = tmp_path / f"out.bin{which}"
    os.mkfifo(pipe)

    def batches():
        raise AssertionError("nothing is encoded")
        yield DOCS

    with pytest.raises(InputError, match=rf"{pipe}: not a regular file"):
        encode_corpus(gpt2, batches(), out)
    assert [p.name for p in tmp_path.iterdir()] == [pipe.name]
    assert stat.S_ISFIFO(pipe.stat().st_mode)


def test_a_token_file_through_a_link(gpt2, tmp_path):
    (tmp_path / "disk").mkdir()
    link = tmp_path / "out.bin"
    link.symlink_to(tmp_path / "disk" / "real.bin")  # not there yet
    encode_corpus(gpt2, [DOCS], link)
    assert link.is_symlink() and (tmp_path / "disk" / "real.bin").is_file()
    ids, offsets, _ = load_token_file(link, verify=True)
    assert ids[offsets[0]:offsets[1]].tolist() == gpt2.encode_ordinary(DOCS[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "out.bin", "out.bin.idx",
                                                          "out.bin.json"]


def test_unfinished_or_tampered_files_are_refused(gpt2, tmp_path):
    out = tmp_path / "t.bin"
    encode_corpus(gpt2, [DOCS], out)
    data = bytearray(out.read_bytes())
    data[0] ^= 1
    out.write_bytes(bytes(data))
    with pytest.raises(tokenmill.FormatError, match="checksum mismatch"):
        load_token_file(out, verify=True)
    (tmp_path / "t.bin.json").unlink()
    with pytest.raises(InputError, match="unfinished"):
        load_token_file(out)


def _interrupted_everywhere(call, folder):
    """Run ``call()`` again and again, raising KeyboardInterrupt (as Ctrl-C does, and as the
    CLI's SIGTERM handler does) before its 1st, 2nd, ... bytecode instruction in tokenmill's
    code, until a run ends without one; after each run, no temporary file may be left in
    ``folder``. Returns the number of runs interrupted. NOPs are passed over: a signal is never
    handled at one, and CPython leaves the NOP of a ``try:`` line out of the exception table."""
    package = os.path.dirname(tokenmill.__file__)
    nop = dis.opmap["NOP"]
    n = 0
    while True:
        n += 1
        seen = 0

        def local(frame, event, arg, n=n):
            nonlocal seen
            frame.f_trace_opcodes = True
            if event == "opcode" and frame.f_code.co_code[frame.f_lasti] != nop:
                seen += 1
                if seen == n:
                    raise KeyboardInterrupt
            return local

        def hook(frame, event, arg):
            return local if frame.f_code.co_filename.startswith(package) else None

        sys.settrace(hook)
        try:
            call()
        except KeyboardInterrupt:
            left = [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
            assert left == [], f"interrupted before instruction {n}: {left} left"
            continue
        finally:
            sys.settrace(None)
        return n - 1


def test_an_interrupt_anywhere_leaves_no_temporary_file(gpt2, tmp_path):
    # CI once found a .tmp file left by a SIGTERM: it landed after mkstemp had made the file
    # and before its name was recorded for removal. The name is now recorded first.
    from tokenmill._io import atomic_write_text
    from tokenmill.formats.counts import save_counts

    out = tmp_path / "out.bin"
    fingerprint = gpt2.fingerprint()  # (computed once, not traced line by line)
    runs = _interrupted_everywhere(
        lambda: encode_corpus(gpt2, [DOCS], out, fingerprint=fingerprint), tmp_path)
    runs += _interrupted_everywhere(
        lambda: save_counts(tmp_path / "c.tmc", {"a": 1, "b": 2},
                            {"normalizer": None, "pre_tokenizer": None}), tmp_path)
    runs += _interrupted_everywhere(lambda: atomic_write_text(tmp_path / "t.txt", "x"),
                                        tmp_path)
    assert runs > 500  # (the trace saw the writers' code)
    assert load_token_file(out, verify=True)[2].documents == len(DOCS)
