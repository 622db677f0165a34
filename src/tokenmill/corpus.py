"""Reading a corpus, streamed: files, directories and globs of ``.txt`` (a document a line, or a
whole file a document), ``.jsonl`` (a string field) and ``.parquet`` (a string column), each
optionally ``.gz`` or ``.zst``; standard input (``"-"``); or any iterator of strings or of
batches of strings.

Nothing holds the corpus: text files are read in blocks of 1 MiB cut at line ends, Parquet
files a record batch at a time, so memory is one block or batch (one file in whole-file mode).
Bad input stops with one line naming the file and the byte offset or line; with
``errors="replace"`` bytes that are not UTF-8 become U+FFFD and :class:`ReadStats` counts them.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> with open(os.path.join(d, "a.txt"), "w") as f:
...     _ = f.write("one doc\\nanother doc\\n")
>>> stats = ReadStats()
>>> list(iter_documents([d], stats=stats)), stats.documents, stats.bytes_read
(['one doc', 'another doc'], 2, 20)
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import re
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import Any, BinaryIO, Literal

from tokenmill.errors import InputError

Errors = Literal["strict", "replace"]
Progress = Callable[[int], object]

FORMATS = {".txt": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
COMPRESSIONS = {".gz": "gz", ".zst": "zst"}
STDIN = "-"
_BLOCK = 1 << 20
_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_TYPES = {dict: "an object", list: "an array", int: "a number", float: "a number",
               bool: "a boolean", type(None): "null"}


@dataclass(frozen=True)
class ReadOptions:
    """How documents are taken out of the inputs (the CLI flags of the same names)."""

    text_field: str = "text"     # the field of each .jsonl line that holds the document
    column: str = "text"         # the Parquet column that holds the documents
    whole_file: bool = False     # .txt and stdin: the whole input is one document, not a line
    errors: Errors = "strict"    # bytes that are not UTF-8: stop, or U+FFFD and count them

    def __post_init__(self) -> None:
        if self.errors not in ("strict", "replace"):
            raise InputError(f"errors must be 'strict' or 'replace', got {self.errors!r}")


@dataclass
class ReadStats:
    """What reading saw. ``bytes_read`` counts bytes as stored (compressed for .gz/.zst), so
    it reaches the total of the inputs' sizes; ``replaced`` maps each input to the number of
    byte sequences that were not UTF-8 and became U+FFFD; ``nulls`` counts Parquet nulls,
    which are skipped."""

    bytes_read: int = 0
    documents: int = 0
    files: int = 0
    nulls: int = 0
    replaced: dict[str, int] = field(default_factory=dict)

    @property
    def replaced_total(self) -> int:
        return sum(self.replaced.values())

    def add(self, other: ReadStats) -> None:
        """Add another reader's stats to these (shards counted apart)."""
        self.bytes_read += other.bytes_read
        self.documents += other.documents
        self.files += other.files
        self.nulls += other.nulls
        for name, n in other.replaced.items():
            self.replaced[name] = self.replaced.get(name, 0) + n

    def summary(self) -> str:
        text = f"{self.documents} documents, {self.bytes_read} bytes from {self.files} inputs"
        if self.replaced_total:
            text += (f"; {self.replaced_total} byte sequences that were not UTF-8 replaced by "
                     f"U+FFFD in {len(self.replaced)} inputs")
        return text


def input_kind(path: str) -> tuple[str | None, str | None]:
    """``(format, compression)`` of a file by its name; format is None for an unknown name.

    >>> input_kind("data/part-1.jsonl.zst"), input_kind("notes.md")
    (('jsonl', 'zst'), (None, None))
    """
    stem, ext = os.path.splitext(path.lower())
    compression = COMPRESSIONS.get(ext)
    if compression is not None:
        stem, ext = os.path.splitext(stem)
    return FORMATS.get(ext), compression


def expand_inputs(inputs: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The files to read, in a deterministic order: files as given (a name of unknown kind is
    read as text), directories walked recursively in sorted path order keeping the files of a
    known kind (hidden files and folders skipped), globs (``**`` too) sorted, ``"-"`` for
    standard input. A path that does not exist, or matches nothing to read, is an error."""
    if isinstance(inputs, str | os.PathLike):
        inputs = [inputs]
    files: list[str] = []
    for item in inputs:
        name = os.fspath(item)
        if name == STDIN or os.path.isfile(name):
            files.append(name)
        elif os.path.isdir(name):
            files += _known(_walk(name), f"{name}: a directory with no files to read")
        elif any(c in name for c in "*?["):
            found: list[str] = []
            for match in sorted(glob.glob(name, recursive=True)):
                found += _walk(match) if os.path.isdir(match) else [match]
            files += _known(found, f"{name}: the pattern matches no files to read")
        else:
            raise InputError(f"{name}: no such file or directory")
    return files


def refuse_overwriting(outputs: Sequence[str | os.PathLike[str]],
                       inputs: Sequence[str | os.PathLike[str]]) -> None:
    """Refuse, before anything is read, an output that is the same file as one of the inputs
    (``-o`` given the corpus by mistake): renaming what was written from it into its place
    would lose it."""
    written = {}
    for out in outputs:
        try:
            st = os.stat(out)
        except OSError:
            continue  # not there yet
        written[(st.st_dev, st.st_ino)] = out
    for given in inputs if written else ():
        # A folder given as an input (a model's folder, a ranks folder) is read for some of
        # its files: an output that is any file in it is refused.
        for path in _walk(os.fspath(given)) if os.path.isdir(given) else [given]:
            try:
                st = os.stat(path)
            except OSError:
                continue  # ("-", or a name that is not a file: the reader says what it is)
            same = written.get((st.st_dev, st.st_ino))
            if same is not None:
                shown = os.fspath(given) if path == given else f"{path}, in {os.fspath(given)}"
                raise InputError(f"{same}: is also an input ({shown}); writing the output would "
                                 "replace it")


def _walk(root: str) -> list[str]:
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if not d.startswith(".")]
        found += [os.path.join(directory, n) for n in names if not n.startswith(".")]
    return sorted(found, key=lambda p: Path(p).relative_to(root).parts)


def _known(paths: list[str], message: str) -> list[str]:
    kept = [p for p in paths if input_kind(p)[0] is not None and os.path.isfile(p)]
    if not kept:
        kinds = ", ".join(FORMATS)
        raise InputError(f"{message} (known kinds: {kinds}, each optionally .gz or .zst)")
    return kept


def documents_from(obj: Iterable[str] | Iterable[Sequence[str]]) -> Iterator[str]:
    """The documents of an iterator of strings or of batches (lists) of strings, one by one.

    >>> list(documents_from(["a", ["b", "c"], ("d",)]))
    ['a', 'b', 'c', 'd']
    """
    if isinstance(obj, str | bytes):
        raise InputError("expected an iterable of strings or of lists of strings, got a single "
                         "string (it would be read character by character); pass [text]")
    for i, item in enumerate(obj):
        if isinstance(item, str):
            yield item
        elif isinstance(item, Sequence) and not isinstance(item, bytes):
            for j, text in enumerate(item):
                if not isinstance(text, str):
                    raise InputError(f"batch {i}, item {j}: expected a string, got "
                                     f"{type(text).__name__}")
            yield from item
        else:
            raise InputError(f"item {i}: expected a string or a list of strings, got "
                             f"{type(item).__name__}")


def iter_documents(inputs: Sequence[str | os.PathLike[str]], *, text_field: str = "text",
                   column: str = "text", whole_file: bool = False, errors: Errors = "strict",
                   progress: Progress | None = None,
                   stats: ReadStats | None = None) -> Iterator[str]:
    """The documents of ``inputs`` (see :func:`expand_inputs`), streamed, in input order.

    ``progress`` is called with each number of bytes just read (an increment, as
    ``tqdm.update`` takes; compressed bytes for .gz/.zst, so a bar's total is the files' size).
    ``stats``, if given, is filled in as reading goes.
    """
    return chain.from_iterable(iter_batches(
        inputs, batch_size=0, text_field=text_field, column=column, whole_file=whole_file,
        errors=errors, progress=progress, stats=stats))


def iter_batches(inputs: Sequence[str | os.PathLike[str]], *, batch_size: int = 8192,
                 text_field: str = "text", column: str = "text", whole_file: bool = False,
                 errors: Errors = "strict", progress: Progress | None = None,
                 stats: ReadStats | None = None) -> Iterator[list[str]]:
    """:func:`iter_documents` in lists of ``batch_size`` documents (the last may be shorter;
    ``batch_size=0``: batches as read, about 1 MiB of text or one Parquet record batch)."""
    options = ReadOptions(text_field=text_field, column=column, whole_file=whole_file,
                          errors=errors)
    stats = ReadStats() if stats is None else stats
    batches = chain.from_iterable(read_file(path, options, stats=stats, progress=progress)
                                  for path in expand_inputs(inputs))
    if batch_size <= 0:
        yield from (batch for batch in batches if batch)
        return
    documents = chain.from_iterable(batches)
    while batch := list(islice(documents, batch_size)):
        yield batch


def read_file(path: str, options: ReadOptions = ReadOptions(), *, start: int = 0,
              end: int | None = None, stats: ReadStats | None = None,
              progress: Progress | None = None) -> Iterator[list[str]]:
    """The documents of one input in batches as read; ``start``/``end`` bound a byte range of a
    plain ``.txt`` file (both at line starts: see ``tokenmill.distributed.line_ranges``)."""
    stats = ReadStats() if stats is None else stats
    name = "<stdin>" if path == STDIN else path
    fmt, compression = ("txt", None) if path == STDIN else input_kind(path)
    if (start or end is not None) and (fmt not in (None, "txt") or compression or path == STDIN):
        raise InputError(f"{name}: byte ranges are for plain text files only")

    def on_read(n: int) -> None:
        stats.bytes_read += n
        if progress is not None:
            progress(n)

    stats.files += start == 0  # a file read in byte ranges counts once
    for batch in _read(path, name, fmt or "txt", compression, options, stats, on_read, start,
                       end):
        stats.documents += len(batch)
        yield batch


def _read(path: str, name: str, fmt: str, compression: str | None, options: ReadOptions,
          stats: ReadStats, on_read: Progress, start: int, end: int | None,
          ) -> Iterator[list[str]]:
    with ExitStack() as stack:
        if path == STDIN:
            stream = getattr(sys.stdin, "buffer", None)
            if stream is None:  # a text stream (a test's StringIO): lines as it splits them
                lines = (line.rstrip("\r\n") for line in sys.stdin)
                if options.whole_file:
                    yield ["\n".join(lines)]
                while batch := list(islice(lines, 8192)):
                    yield batch
                return
            blocks = _blocks(_Counted(stream, on_read), name)
        elif fmt == "parquet":
            yield from _parquet(_parquet_path(path, compression, on_read, stack), name,
                                options.column, stats, on_read if not compression else None)
            return
        else:
            stream = _open(path, compression, on_read, start, stack)
            blocks = _blocks(stream, name, None if end is None else end - start)
        where = " of the decompressed data" if compression else ""
        if options.whole_file and fmt == "txt":
            yield [_decode(b"".join(blocks), name, options.errors, stats, start, where)]
        elif fmt == "jsonl":
            yield from _jsonl(_lines(blocks, name, options.errors, stats, start, where), name,
                              options.text_field, options.errors, stats)
        else:
            yield from _lines(blocks, name, options.errors, stats, start, where)


class _Counted:
    """A binary stream that reports how many bytes each read took from it."""

    def __init__(self, raw: BinaryIO, on_read: Progress) -> None:
        self._raw, self._on_read = raw, on_read

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self._on_read(len(data))
        return data

    def readable(self) -> bool:
        return True


def _open(path: str, compression: str | None, on_read: Progress, start: int,
          stack: ExitStack) -> Any:
    try:
        raw = stack.enter_context(open(path, "rb"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot open ({e.strerror or e})") from None
    if start:
        raw.seek(start)
    counted = _Counted(raw, on_read)
    if compression == "gz":
        return gzip.GzipFile(fileobj=counted, mode="rb")  # type: ignore[call-overload]
    if compression == "zst":
        return _Zstd(counted)
    return counted


class _Zstd:
    """A zstd stream, frame after frame (pzstd and ``cat`` make several), that is an error if
    it ends inside a frame: zstandard's own ``stream_reader`` ends quietly at a truncation."""

    def __init__(self, source: _Counted) -> None:
        import zstandard

        self._source = source
        self._context = zstandard.ZstdDecompressor(max_window_size=1 << 31)
        self._frame = self._context.decompressobj()
        self._inside = False  # bytes of the current frame were fed, and its end not seen

    def read(self, n: int = -1) -> bytes:
        while chunk := self._source.read(1 << 16):
            out = []
            while chunk:
                if self._frame.eof:
                    self._frame = self._context.decompressobj()
                out.append(self._frame.decompress(chunk))
                self._inside = not self._frame.eof
                chunk = self._frame.unused_data if self._frame.eof else b""
            if any(out):
                return b"".join(out)
        if self._inside:
            raise EOFError("the zstd data ends inside a frame: the file is truncated")
        return b""


def _blocks(stream: Any, name: str, limit: int | None = None) -> Iterator[bytes]:
    errors: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error)
    if "zstandard" in sys.modules:
        errors += (sys.modules["zstandard"].ZstdError,)
    while limit is None or limit > 0:
        try:
            block = stream.read(_BLOCK if limit is None else min(_BLOCK, limit))
        except errors as e:
            raise InputError(f"{name}: cannot be read, corrupted or truncated ({e})") from None
        if not block:
            return
        if limit is not None:
            limit -= len(block)
        yield block


def _decode(data: bytes, name: str, errors: Errors, stats: ReadStats, offset: int,
            where: str = "") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if errors == "strict":
            raise InputError(
                f"{name}: not UTF-8 at byte offset {offset + e.start}{where} (byte "
                f"0x{data[e.start]:02x}); use errors='replace' (--errors replace) to go on "
                "with U+FFFD in its place") from None
    text = data.decode("utf-8", "replace")
    # U+FFFD that were in the input are the bytes EF BF BD, which always decode as such (EF is
    # no continuation byte): what remains was put there by the decoder, one per bad sequence.
    replaced = text.count("\ufffd") - data.count(b"\xef\xbf\xbd")
    stats.replaced[name] = stats.replaced.get(name, 0) + replaced
    return text


def _lines(blocks: Iterable[bytes], name: str, errors: Errors, stats: ReadStats, offset: int,
           where: str) -> Iterator[list[str]]:
    """Lines without their ends (``\\n``, and ``\\r`` before it), a list per block; the same
    lines as :func:`tokenmill._io.read_lines`, decoded a block at a time for speed."""
    pending: list[bytes] = []
    for block in blocks:
        cut = block.rfind(b"\n") + 1
        if not cut:
            pending.append(block)
            continue
        data = b"".join([*pending, block[:cut]]) if pending else block[:cut]
        pending = [block[cut:]] if cut < len(block) else []
        text = _decode(data, name, errors, stats, offset, where)
        offset += len(data)
        lines = text.split("\n")
        lines.pop()
        yield [line.rstrip("\r") for line in lines] if "\r" in text else lines
    if pending:
        yield [_decode(b"".join(pending), name, errors, stats, offset, where).rstrip("\r")]


def _jsonl(batches: Iterable[list[str]], name: str, text_field: str, errors: Errors,
           stats: ReadStats) -> Iterator[list[str]]:
    number = 0
    for lines in batches:
        texts = []
        for line in lines:
            number += 1
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{name}:{number}: not JSON ({e.msg} at column {e.colno})") \
                    from None
            if not isinstance(record, dict):
                raise InputError(f"{name}:{number}: expected a JSON object, got "
                                 f"{_JSON_TYPES.get(type(record), type(record).__name__)}")
            text = record.get(text_field)
            if not isinstance(text, str):
                if text_field not in record:
                    fields = ", ".join(map(repr, record)) or "none"
                    raise InputError(f"{name}:{number}: no field {text_field!r} (fields: "
                                     f"{fields}); choose one with text_field (--text-field)")
                raise InputError(f"{name}:{number}: field {text_field!r} is "
                                 f"{_JSON_TYPES.get(type(text), type(text).__name__)}, "
                                 "expected a string")
            if "\\u" in line and (bad := _SURROGATE.search(text)):  # JSON can escape them
                if errors == "strict":
                    raise InputError(f"{name}:{number}: field {text_field!r} holds a lone "
                                     f"surrogate \\u{ord(bad.group()):04x}, not valid Unicode")
                text, n = _SURROGATE.subn("\ufffd", text)
                stats.replaced[name] = stats.replaced.get(name, 0) + n
            texts.append(text)
        yield texts


def _parquet_path(path: str, compression: str | None, on_read: Progress,
                  stack: ExitStack) -> str:
    """A compressed Parquet file is decompressed, streamed, into a temporary file (Parquet
    needs random access); the file goes when reading ends. Set TMPDIR for a roomy disk."""
    if compression is None:
        return path
    source = _open(path, compression, on_read, 0, stack)
    target = stack.enter_context(tempfile.NamedTemporaryFile(suffix=".parquet"))
    for block in _blocks(source, path):
        target.write(block)
    target.flush()
    return target.name


def _parquet(path: str, name: str, column: str, stats: ReadStats,
             on_read: Progress | None) -> Iterator[list[str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{name}: not a Parquet file ({e})") from None
    with pf:
        schema = pf.schema_arrow
        if column not in schema.names:
            raise InputError(f"{name}: no column {column!r}; the columns are: "
                             f"{', '.join(schema.names)} (choose one with column / --column)")
        kind = schema.field(column).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or str(kind) == "string_view"):
            raise InputError(f"{name}: column {column!r} holds {kind}, expected strings")
        reported = 0
        for group in range(pf.num_row_groups):
            try:
                for batch in pf.iter_batches(batch_size=8192, row_groups=[group],
                                             columns=[column]):
                    values = batch.column(0).to_pylist()
                    texts = [v for v in values if v is not None]
                    stats.nulls += len(values) - len(texts)
                    yield texts
            except (pa.ArrowException, OSError) as e:
                raise InputError(f"{name}: row group {group} cannot be read ({e})") from None
            if on_read is not None:  # progress: the stored size of the column's chunk
                meta = pf.metadata.row_group(group)
                size = sum(meta.column(i).total_compressed_size for i in range(meta.num_columns)
                           if meta.column(i).path_in_schema.split(".")[0] == column)
                on_read(size)
                reported += size
        if on_read is not None:
            on_read(max(0, os.path.getsize(path) - reported))

