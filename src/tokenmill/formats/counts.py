"""Count files (``.tmc``): pre-token counts with the pipeline they were counted with, so that a
long job can be split into shards, resumed, produced by any engine and trained from later.

Layout, version 1 (integers little-endian)::

    offset        size  field
    0             8     magic b"TMCOUNTS"
    8             4     version, uint32 (1)
    12            8     H, the header's length, uint64
    20            H     header: a UTF-8 JSON object with sorted keys
                          "pipeline": {"normalizer": ..., "pre_tokenizer": ...} (tokenizer.json
                                      schema; the pieces were counted with exactly these)
                          "distinct": n, the number of entries; "total": the sum of the counts
                          "piece_bytes": B, the length of the pieces' bytes below
                          "dropped_distinct", "dropped_total": pre-tokens (distinct, and their
                                      occurrences) that a --max-distinct bound left out
                          "meta": an object free for the producer (inputs, read stats, engine)
    20+H          4n    each piece's length in UTF-8 bytes, uint32
    20+H+4n       B     the pieces, UTF-8, one after another
    20+H+4n+B     8n    each piece's count, uint64, in the same order
    end-32        32    sha256 of every byte before it, checked on load

Entries are in first-seen order (the order ``Tokenizer.count_words`` gives), so a first-seen
tie-break trains the same from a count file as from the text. Files are written atomically.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "counts.tmc")
>>> save_counts(path, Counter({"low": 5, "er": 2}), {"normalizer": None, "pre_tokenizer": None})
>>> counts, pipeline, info = load_counts(path)
>>> counts, info.total
(Counter({'low': 5, 'er': 2}), 7)
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenmill._io import is_utf8_text, temp_beside, unlink_all, write_target
from tokenmill.errors import FormatError, InputError

MAGIC = b"TMCOUNTS"
VERSION = 1
_PREFIX = 20      # magic, version, header length
_CHECKSUM = 32
_CHUNK = 1 << 16  # entries encoded at a time while writing
_PIPELINE_KEYS = ("normalizer", "pre_tokenizer")
_U32 = "I" if array("I").itemsize == 4 else "L"  # 4 bytes everywhere we know of


@dataclass(frozen=True)
class CountInfo:
    """What a count file says about its counts besides the entries."""

    path: str
    distinct: int
    total: int
    dropped_distinct: int = 0
    dropped_total: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


def pipeline_of(tokenizer: Any) -> dict[str, Any]:
    """The part of a tokenizer (a ``Tokenizer`` or its ``to_dict()``) that decides the pieces
    counted: its normalizer and pre-tokenizer, as ``tokenizer.json`` dicts."""
    data = tokenizer.to_dict() if hasattr(tokenizer, "to_dict") else tokenizer
    if not isinstance(data, Mapping):
        raise InputError(f"expected a Tokenizer or its dict, got {type(tokenizer).__name__}")
    return {key: data.get(key) for key in _PIPELINE_KEYS}


def pipeline_tokenizer(pipeline: Mapping[str, Any]) -> Any:
    """A ``Tokenizer`` with an empty BPE model and this pipeline: the one to count with on a
    worker, or to train from a count file (then set its decoder)."""
    from tokenmill.tokenizer import Tokenizer

    data = {"model": {"type": "BPE", "vocab": {}, "merges": []}, **pipeline_of(pipeline)}
    return Tokenizer.from_dict(data, "pipeline")


def save_counts(path: str | os.PathLike[str], counts: Mapping[str, int], pipeline: Any, *,
                dropped: tuple[int, int] = (0, 0), meta: Mapping[str, Any] | None = None
                ) -> None:
    """Write ``counts`` (in their order) to a count file, atomically: a temporary file in the
    same directory, flushed to disk, then renamed over ``path``. ``pipeline`` is a
    ``Tokenizer``, its dict or :func:`pipeline_of`'s; ``dropped`` is ``(distinct, total)``
    from :func:`limit_distinct`."""
    path = Path(path)
    target = write_target(path)
    keys = list(counts)
    try:
        values = array("Q", counts.values())
    except (OverflowError, TypeError):
        bad = next(k for k in keys if not isinstance(counts[k], int)
                   or not 0 <= counts[k] < 1 << 64)
        raise InputError(f"{path}: the count of {bad!r} is {counts[bad]!r}, expected an "
                         "integer from 0 to 2**64 - 1") from None
    lengths = array(_U32)
    for start in range(0, len(keys), _CHUNK):
        lengths.extend(map(len, _encode(keys[start:start + _CHUNK], path)))
    total = sum(values)
    header = json.dumps({
        "pipeline": pipeline_of(pipeline), "distinct": len(keys), "total": total,
        "piece_bytes": sum(lengths), "dropped_distinct": dropped[0], "dropped_total": dropped[1],
        "meta": dict(meta or {})}, ensure_ascii=False, sort_keys=True).encode("utf-8")
    made: list[Path] = []
    try:
        with os.fdopen(temp_beside(target, made), "wb") as f:
            digest = hashlib.sha256()

            def write(data: bytes) -> None:
                digest.update(data)
                f.write(data)

            write(MAGIC + VERSION.to_bytes(4, "little") + len(header).to_bytes(8, "little"))
            write(header)
            write(_little(lengths))
            for start in range(0, len(keys), _CHUNK):
                write(b"".join(_encode(keys[start:start + _CHUNK], path)))
            for start in range(0, len(keys), _CHUNK):
                write(_little(values[start:start + _CHUNK]))
            f.write(digest.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(made[0], target)
    finally:
        unlink_all(made)


def load_counts(path: str | os.PathLike[str]) -> tuple[Counter[str], dict[str, Any], CountInfo]:
    """``(counts, pipeline, info)`` of a count file, its checksum verified first: a corrupted,
    truncated or foreign file is a :class:`FormatError` naming the file and what is wrong.
    Memory: the file's bytes and the counts built from them."""
    name = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
    if not data.startswith(MAGIC) and not MAGIC.startswith(data):
        raise FormatError(f"{name}: not a tokenmill count file (it does not start with "
                          f"{MAGIC.decode()})")
    if len(data) < _PREFIX + _CHECKSUM:
        raise FormatError(f"{name}: truncated: {len(data)} bytes, shorter than any count file")
    version = int.from_bytes(data[8:12], "little")
    if version != VERSION:
        raise FormatError(f"{name}: count file version {version}; this tokenmill reads "
                          f"version {VERSION}")
    size = int.from_bytes(data[12:20], "little")
    header = _header(data, size)
    expected = None if header is None else _PREFIX + size + 12 * header["distinct"] \
        + header["piece_bytes"] + _CHECKSUM
    if hashlib.sha256(memoryview(data)[:-_CHECKSUM]).digest() != data[-_CHECKSUM:]:
        least = _PREFIX + size + _CHECKSUM if expected is None else expected
        if len(data) < least:
            raise FormatError(f"{name}: truncated: {len(data)} bytes where its header says "
                              f"{'' if expected is not None else 'at least '}{least} (and the "
                              "checksum does not match)")
        raise FormatError(f"{name}: checksum mismatch: the file is corrupted (the sha256 of "
                          "its content is not the one stored at its end)")
    if header is None or expected != len(data):
        raise FormatError(f"{name}: the header does not describe this file (a writer bug?)")
    n, piece_bytes = header["distinct"], header["piece_bytes"]
    at = _PREFIX + size
    lengths = _native(array(_U32, data[at:at + 4 * n]))
    at += 4 * n
    blob = data[at:at + piece_bytes]
    values = _native(array("Q", data[at + piece_bytes:at + piece_bytes + 8 * n]))
    if sum(lengths) != piece_bytes:
        raise FormatError(f"{name}: piece lengths add up to {sum(lengths)}, the header says "
                          f"{piece_bytes}")
    pieces = []
    position = 0
    try:
        for length in lengths:
            pieces.append(blob[position:position + length].decode("utf-8"))
            position += length
    except UnicodeDecodeError:
        raise FormatError(f"{name}: entry {len(pieces)} is not UTF-8") from None
    counts = Counter(dict(zip(pieces, values)))
    if len(counts) != n:
        raise FormatError(f"{name}: {n - len(counts)} pieces appear twice")
    if sum(values) != header["total"]:
        raise FormatError(f"{name}: counts add up to {sum(values)}, the header says "
                          f"{header['total']}")
    info = CountInfo(name, n, header["total"], header["dropped_distinct"],
                     header["dropped_total"], header["meta"])
    return counts, header["pipeline"], info


def _header(data: bytes, size: int) -> dict[str, Any] | None:
    """The header if it reads as one (before the checksum is known: only to explain sizes)."""
    try:
        header = json.loads(data[_PREFIX:_PREFIX + size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    numbers = ("distinct", "total", "piece_bytes", "dropped_distinct", "dropped_total")
    if not isinstance(header, dict) or any(type(header.get(k)) is not int or header[k] < 0
                                           for k in numbers) \
            or not isinstance(header.get("pipeline"), dict) \
            or not isinstance(header.get("meta"), dict):
        return None
    return header


def merge_counts(counters: Iterable[Mapping[str, int]]) -> Counter[str]:
    """The sum of ``counters``, in the first one's order, then the new keys of each later one
    in its order: the first-seen order of their inputs read one after another, so the result
    is the same for the same order of shards.

    >>> merged = merge_counts([Counter({"b": 1, "a": 2}), Counter({"c": 1, "a": 1})])
    >>> merged, list(merged)
    (Counter({'a': 3, 'b': 1, 'c': 1}), ['b', 'a', 'c'])
    """
    merged: Counter[str] = Counter()
    for counts in counters:
        merged.update(counts)  # keys already present keep their place; new ones go last
    return merged


def merge_count_files(paths: Sequence[str | os.PathLike[str]]
                      ) -> tuple[Counter[str], dict[str, Any], CountInfo]:
    """Load and merge count files in the order given (one in memory at a time besides the
    sum); files counted with different pipelines cannot be merged. The info's ``dropped_*``
    add up each file's (an upper bound once merged: a piece dropped in one shard may be kept
    in another)."""
    if not paths:
        raise InputError("no count files to merge")
    merged, first_pipeline, first = load_counts(paths[0])
    dropped_distinct, dropped_total = first.dropped_distinct, first.dropped_total
    for path in paths[1:]:
        counts, pipeline, info = load_counts(path)
        if _canonical(pipeline) != _canonical(first_pipeline):
            differ = [k for k in _PIPELINE_KEYS if _canonical(pipeline.get(k))
                      != _canonical(first_pipeline.get(k))]
            raise InputError(f"{info.path} was counted with a different pipeline than "
                             f"{first.path} (their {' and '.join(differ) or 'pipelines'} "
                             "differ); count both with the same tokenizer")
        merged.update(counts)
        dropped_distinct += info.dropped_distinct
        dropped_total += info.dropped_total
        del counts
    names = [os.fspath(p) for p in paths]
    info = CountInfo(", ".join(names), len(merged), sum(merged.values()), dropped_distinct,
                     dropped_total, {"merged_from": names})
    return merged, first_pipeline, info


def limit_distinct(counts: Mapping[str, int], n: int) -> tuple[Counter[str], int, int]:
    """Keep the ``n`` most frequent pieces (ties: the first seen), in their first-seen order;
    returns ``(kept, dropped_distinct, dropped_total)``.

    The effect on training: it is training on the corpus without the rarest pre-tokens. Merges
    that only those pieces would have earned are not learnt, and pair counts lose their
    occurrences, so the last merges may differ from an unbounded run; the result is still
    deterministic. What the bound holds down is the memory of the counts, the count file and
    the merge loop (which grows with the distinct pieces); counting itself is exact, so its
    memory stays that of the distinct pieces of the input (or of one shard on Dask).

    >>> limit_distinct(Counter({"a": 1, "b": 3, "c": 1, "d": 2}), 3)
    (Counter({'b': 3, 'd': 2, 'a': 1}), 1, 1)
    """
    if not isinstance(n, int) or n < 0:
        raise InputError(f"max distinct must be a non-negative integer, got {n!r}")
    if len(counts) <= n:
        return Counter(counts), 0, 0
    keys = list(counts)
    values = [counts[k] for k in keys]
    # sorted() is stable, with reverse=True too: equal counts keep first-seen order. (It beat
    # heapq.nlargest 4x on a million pieces.)
    ranked = sorted(range(len(keys)), key=values.__getitem__, reverse=True)
    keep = sorted(ranked[:n])
    kept = Counter({keys[i]: values[i] for i in keep})
    return kept, len(keys) - len(kept), sum(values) - sum(kept.values())


def _encode(keys: list[str], path: Path) -> list[bytes]:
    try:
        return [k.encode("utf-8") for k in keys]
    except UnicodeEncodeError:
        bad = next(k for k in keys if not is_utf8_text(k))
        raise InputError(f"{path}: the piece {bad!r} is not valid Unicode (a lone "
                         "surrogate)") from None
    except AttributeError:
        bad = next(k for k in keys if not isinstance(k, str))
        raise InputError(f"{path}: pieces must be strings, got {type(bad).__name__}") from None


def _little(values: array) -> bytes:  # type: ignore[type-arg]
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _native(values: array) -> array:  # type: ignore[type-arg]
    if sys.byteorder == "big":
        values.byteswap()
    return values


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
