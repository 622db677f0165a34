"""Reading a corpus: every input kind, streamed, and every way an input can be bad."""

import gzip
import io
import json
import os
import re
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from tokenmill import InputError
from tokenmill._io import read_lines
from tokenmill.corpus import (
    ReadOptions,
    ReadStats,
    documents_from,
    expand_inputs,
    iter_batches,
    iter_documents,
    read_file,
)
from tokenmill.distributed import line_ranges

TEXT = "the first line\nsecond, with ünïcode\r\n\nlast without a newline"
LINES = ["the first line", "second, with ünïcode", "", "last without a newline"]


def write(path, data: bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    elif path.name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return str(path)


def parquet_bytes(table: pa.Table, row_group_size: int = 2) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


@pytest.mark.parametrize("name", ["c.txt", "c.txt.gz", "c.txt.zst", "c.TXT", "c.data"])
def test_text_files_give_a_document_a_line(tmp_path, name):
    path = write(tmp_path / name, TEXT.encode())
    assert list(iter_documents([path])) == LINES
    plain = write(tmp_path / "plain.txt", TEXT.encode())
    assert LINES == list(read_lines(plain))  # the same lines as the existing reader


def test_zst_with_several_frames_reads_them_all(tmp_path):
    frame = zstandard.ZstdCompressor().compress(b"a b\n")
    path = tmp_path / "multi.txt.zst"
    path.write_bytes(frame * 3)
    assert list(iter_documents([str(path)])) == ["a b"] * 3


def test_whole_file_mode(tmp_path):
    a = write(tmp_path / "a.txt", TEXT.encode())
    b = write(tmp_path / "b.txt.gz", b"one\ntwo\n")
    assert list(iter_documents([a, b], whole_file=True)) == [TEXT, "one\ntwo\n"]


@pytest.mark.parametrize("name", ["d.jsonl", "d.jsonl.gz", "d.ndjson.zst"])
def test_jsonl_takes_the_text_field(tmp_path, name):
    rows = [{"text": "hello world", "id": 1}, {"text": "é\nnewline inside"}, {"body": "x",
                                                                             "text": ""}]
    data = "\n".join(json.dumps(r) for r in rows) + "\n\n  \n"  # blank lines are skipped
    path = write(tmp_path / name, data.encode())
    assert list(iter_documents([path])) == ["hello world", "é\nnewline inside", ""]


def test_jsonl_other_field(tmp_path):
    path = write(tmp_path / "d.jsonl", b'{"body": "a"}\n{"body": "b"}\n')
    assert list(iter_documents([path], text_field="body")) == ["a", "b"]


@pytest.mark.parametrize("name", ["t.parquet", "t.parquet.zst", "t.parquet.gz"])
def test_parquet_reads_the_column_in_batches(tmp_path, name):
    table = pa.table({"text": ["a b", None, "c", "d e", "f"], "n": [1, 2, 3, 4, 5]})
    path = write(tmp_path / name, parquet_bytes(table))
    stats = ReadStats()
    assert list(iter_documents([path], stats=stats)) == ["a b", "c", "d e", "f"]
    assert stats.nulls == 1 and stats.documents == 4
    assert stats.bytes_read == os.path.getsize(path)


def test_parquet_other_column_and_large_strings(tmp_path):
    table = pa.table({"body": pa.array(["x", "y"], type=pa.large_string())})
    path = write(tmp_path / "t.parquet", parquet_bytes(table))
    assert list(iter_documents([path], column="body")) == ["x", "y"]


def test_stdin_binary_and_text(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TEXT.encode())))
    assert list(iter_documents(["-"])) == LINES
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TEXT.encode())))
    assert list(iter_documents(["-"], whole_file=True)) == [TEXT]
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\nb\n"))
    assert list(iter_documents(["-"])) == ["a", "b"]


def test_directory_is_walked_in_sorted_order_keeping_known_kinds(tmp_path):
    root = tmp_path / "corpus"
    write(root / "b.txt", b"b\n")
    write(root / "a" / "z.jsonl", b'{"text": "az"}\n')
    write(root / "a" / "y.txt.gz", b"ay\n")
    write(root / "c.md", b"not read\n")
    write(root / ".hidden.txt", b"not read\n")
    write(root / ".git" / "x.txt", b"not read\n")
    assert [os.path.relpath(p, root) for p in expand_inputs([str(root)])] == \
        [os.path.join("a", "y.txt.gz"), os.path.join("a", "z.jsonl"), "b.txt"]
    assert list(iter_documents([str(root)])) == ["ay", "az", "b"]


def test_globs_are_sorted_and_recursive(tmp_path):
    for name in ["s2.txt", "s10.txt", "s1.txt", "sub/s3.txt"]:
        write(tmp_path / name, name.encode())
    assert [os.path.relpath(p, tmp_path) for p in expand_inputs([str(tmp_path / "s*.txt")])] \
        == ["s1.txt", "s10.txt", "s2.txt"]
    found = expand_inputs([str(tmp_path / "**" / "*.txt")])
    assert os.path.join(str(tmp_path), "sub", "s3.txt") in found and len(found) == 4


def test_iter_batches_and_progress(tmp_path):
    path = write(tmp_path / "n.txt.gz", "".join(f"doc {i}\n" for i in range(10)).encode())
    seen = []
    batches = list(iter_batches([path], batch_size=4, progress=seen.append))
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sum(seen) == os.path.getsize(path)


def test_documents_from_strings_and_batches():
    assert list(documents_from(iter(["a", ["b", "c"], ("d",), []]))) == ["a", "b", "c", "d"]
    with pytest.raises(InputError, match="single string"):
        list(documents_from("abc"))
    with pytest.raises(InputError, match="item 1: expected a string or a list"):
        list(documents_from(["a", 3]))
    with pytest.raises(InputError, match="batch 0, item 1: expected a string, got bytes"):
        list(documents_from([["a", b"b"]]))


# -- bad input ------------------------------------------------------------------------------

def test_not_utf8_names_the_byte_offset_also_past_the_first_block(tmp_path):
    data = b"a" * 10 + b"\n" + b"ok\n" * 600_000 + b"bad \xff here\n"
    path = write(tmp_path / "big.txt", data)
    offset = data.index(b"\xff")
    with pytest.raises(InputError) as e:
        list(iter_documents([path]))
    assert str(e.value).startswith(f"{path}: not UTF-8 at byte offset {offset} (byte 0xff)")
    gz = write(tmp_path / "big.txt.gz", data)
    with pytest.raises(InputError, match=f"offset {offset} of the decompressed"):
        list(iter_documents([gz]))


def test_replace_goes_on_and_counts_what_it_replaced(tmp_path):
    # Three bad sequences (a lone continuation byte, a truncated 3-byte sequence, 0xff) and a
    # U+FFFD that was in the text: only the three are counted.
    a = write(tmp_path / "a.txt", b"x\x80y\n\xe2\x82 z\n\xef\xbf\xbd real\n\xff")
    b = write(tmp_path / "b.jsonl.zst", b'{"text": "fine"}\n{"text": "f\xffne"}\n')
    stats = ReadStats()
    docs = list(iter_documents([a, b], errors="replace", stats=stats))
    assert docs == ["x\ufffdy", "\ufffd z", "\ufffd real", "\ufffd", "fine", "f\ufffdne"]
    assert stats.replaced == {a: 3, b: 1} and stats.replaced_total == 4
    assert stats.documents == 6 and stats.files == 2
    assert "4 byte sequences that were not UTF-8" in stats.summary()


@pytest.mark.parametrize("line, message", [
    ('{"text": "a"', "not JSON (Expecting ',' delimiter at column 13)"),
    ('{"body": "a", "id": 2}', "no field 'text' (fields: 'body', 'id')"),
    ('{"text": 12}', "field 'text' is a number, expected a string"),
    ('{"text": null}', "field 'text' is null, expected a string"),
    ('["text"]', "expected a JSON object, got an array"),
    ('{"text": "\\udc80"}', "field 'text' holds a lone surrogate \\udc80"),
])
def test_bad_jsonl_lines_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path / "bad.jsonl", ('{"text": "ok"}\n\n' + line + "\n").encode())
    with pytest.raises(InputError, match="^" + re.escape(f"{path}:3: {message}")):
        list(iter_documents([path]))


def test_lone_surrogate_in_jsonl_is_replaced_and_counted(tmp_path):
    path = write(tmp_path / "s.jsonl", b'{"text": "a\\ud800b"}\n')
    stats = ReadStats()
    assert list(iter_documents([path], errors="replace", stats=stats)) == ["a\ufffdb"]
    assert stats.replaced == {path: 1}


def test_missing_parquet_column_lists_the_columns(tmp_path):
    path = write(tmp_path / "t.parquet", parquet_bytes(pa.table({"body": ["a"], "n": [1]})))
    with pytest.raises(InputError, match=r"t.parquet: no column 'text'; the columns are: "
                                         r"body, n \(choose one with column / --column\)"):
        list(iter_documents([path]))
    with pytest.raises(InputError, match="column 'n' holds int64, expected strings"):
        list(iter_documents([path], column="n"))


def test_missing_paths_and_empty_matches(tmp_path):
    with pytest.raises(InputError, match="nope.txt: no such file or directory"):
        expand_inputs([str(tmp_path / "nope.txt")])
    with pytest.raises(InputError, match=r"\*.jsonl: the pattern matches no files to read"):
        expand_inputs([str(tmp_path / "*.jsonl")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty: a directory with no files to read"):
        expand_inputs([str(tmp_path / "empty")])
    with pytest.raises(InputError, match="nope.txt: no such file or directory"):
        list(iter_documents([str(tmp_path / "nope.txt")]))


@pytest.mark.parametrize("name", ["t.txt.gz", "t.txt.zst"])
def test_truncated_or_corrupt_compressed_files_are_errors(tmp_path, name):
    path = write(tmp_path / name, b"some text that goes on\n" * 2000)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    with pytest.raises(InputError, match=f"{name}: cannot be read, corrupted or truncated"):
        list(iter_documents([path]))
    open(path, "wb").write(b"\x00garbage" * 10)
    with pytest.raises(InputError, match=f"{name}: cannot be read"):
        list(iter_documents([path]))


def test_not_a_parquet_file(tmp_path):
    path = write(tmp_path / "t.parquet", b"plain text, not parquet\n")
    with pytest.raises(InputError, match="t.parquet: not a Parquet file"):
        list(iter_documents([path]))


def test_bad_errors_option():
    with pytest.raises(InputError, match="errors must be 'strict' or 'replace'"):
        ReadOptions(errors="ignore")  # type: ignore[arg-type]


# -- byte ranges ----------------------------------------------------------------------------

@given(lines=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
                      max_size=30),
       crlf=st.booleans(), final_newline=st.booleans(), size=st.integers(1, 40))
def test_byte_ranges_read_in_order_give_exactly_the_lines(tmp_path_factory, lines, crlf,
                                                          final_newline, size):
    lines = [line.replace("\n", " ").replace("\r", " ") for line in lines]
    data = ("\r\n" if crlf else "\n").join(lines) + ("\n" if final_newline and lines else "")
    path = str(tmp_path_factory.mktemp("r") / "r.txt")
    open(path, "wb").write(data.encode())
    ranges = line_ranges(path, size)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data.encode())
    assert all(a < b and b == c for (a, b), (c, _) in zip(ranges, ranges[1:]))
    pieces = [doc for a, b in ranges for batch in read_file(path, start=a, end=b)
              for doc in batch]
    assert pieces == list(iter_documents([path]))


def test_byte_range_errors_give_the_offset_in_the_file(tmp_path):
    data = b"good line\n" * 10 + b"bad \xfe\n"
    path = write(tmp_path / "r.txt", data)
    (start, end), = [r for r in line_ranges(path, 30) if r[0] <= 104 < r[1]]
    offset = data.index(b"\xfe")
    with pytest.raises(InputError, match=f"byte offset {offset} "):
        list(read_file(path, start=start, end=end))
