"""Counting pre-tokens on Dask (``dask.distributed``), for corpora that want many machines.

The input is cut into shards (a file each, and big plain ``.txt`` files into byte ranges that
end at line ends); each worker rebuilds the tokenizer's pipeline and counts its shards with
``Tokenizer.count_words`` (native threads there too); the client merges the shards' counts in
shard order. Since counting is first-seen ordered and merging keeps that order, the result,
counts and order both, is what a local ``count_words`` over the same inputs gives: training
from it learns the same merges, whatever the number of workers or the order they finish in.

Memory: a worker holds one shard's distinct pre-tokens per task (its input is streamed); the
client holds the merged counts and at most ``2 x`` the workers' threads of shard results that
finished ahead of their turn (no more shards are submitted than that window).

Workers read the files themselves: give paths they can all see (shared storage). Each task
counts on every core of its worker (``TOKENMILL_NUM_THREADS`` sets how many): one thread per
Dask worker process (``--nthreads 1``) is the setting that does not oversubscribe the cores.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, islice
from typing import Any

from tokenmill.corpus import (
    STDIN,
    Errors,
    Progress,
    ReadOptions,
    ReadStats,
    documents_from,
    expand_inputs,
    input_kind,
    read_file,
)
from tokenmill.errors import InputError, TokenmillError
from tokenmill.formats.counts import pipeline_of, pipeline_tokenizer

DEFAULT_SHARD_BYTES = 256 << 20
_TEXTS_PER_SHARD = 1 << 16  # documents per task when the input is a Python iterator


@dataclass(frozen=True)
class Shard:
    """One task's input: a file, or the byte range ``[start, end)`` of a plain text file."""

    path: str
    start: int = 0
    end: int | None = None

    def __str__(self) -> str:
        return self.path if self.end is None else f"{self.path} (bytes {self.start}-{self.end})"


def plan_shards(inputs: Sequence[str | os.PathLike[str]], *, whole_file: bool = False,
                shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[Shard]:
    """The shards of ``inputs``, in input order: a file each; a plain ``.txt`` file bigger than
    ``shard_bytes`` (and not read whole) is cut into byte ranges at line starts, read one after
    another they give exactly its lines."""
    shards = []
    for path in expand_inputs(inputs):
        if path == STDIN:
            raise InputError("standard input cannot be cut into shards (a shard is a file, "
                             "or a byte range of one, that a worker reads); save it to a "
                             "file first")
        fmt, compression = input_kind(path)
        if fmt in (None, "txt") and compression is None and not whole_file \
                and os.path.getsize(path) > shard_bytes:
            shards += [Shard(path, a, b) for a, b in line_ranges(path, shard_bytes)]
        else:
            shards.append(Shard(path))
    return shards


def line_ranges(path: str, shard_bytes: int) -> list[tuple[int, int]]:
    """Byte ranges of about ``shard_bytes`` that cut a plain text file at line starts, so
    that reading the ranges one after another gives exactly the lines of the whole file.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.txt")
    >>> with open(p, "wb") as f:
    ...     _ = f.write(b"aaaa\\nbb\\ncccccc\\nd")
    >>> line_ranges(p, 6)
    [(0, 8), (8, 15), (15, 16)]
    """
    if shard_bytes <= 0:
        raise InputError(f"shard size must be positive, got {shard_bytes}")
    size = os.path.getsize(path)
    cuts = [0]
    with open(path, "rb") as f:
        while cuts[-1] + shard_bytes < size:
            # The first line start at or after the target: just past the next newline that
            # sits at target - 1 or later.
            f.seek(cuts[-1] + shard_bytes - 1)
            position = f.tell()
            while chunk := f.read(1 << 16):
                newline = chunk.find(b"\n")
                if newline >= 0:
                    position += newline + 1
                    break
                position += len(chunk)
            if position >= size:
                break
            cuts.append(position)
    cuts.append(size)
    return [(a, b) for a, b in zip(cuts, cuts[1:])]


def count_on_dask(inputs: Sequence[str | os.PathLike[str]] | Iterable[str] | Iterable[list[str]],
                  tokenizer: Any, *, client: Any = None, scheduler: str | None = None,
                  text_field: str = "text", column: str = "text", whole_file: bool = False,
                  errors: Errors = "strict", shard_bytes: int = DEFAULT_SHARD_BYTES,
                  timeout: float = 30.0, progress: Progress | None = None,
                  stats: ReadStats | None = None) -> Counter[str]:
    """Pre-token counts of ``inputs`` under ``tokenizer``'s pipeline (a ``Tokenizer`` or its
    dict), counted on a Dask cluster, equal in counts and order to a local ``count_words``.

    ``inputs`` is paths (one string, or a list or tuple: files, directories, globs, as
    :func:`tokenmill.corpus.expand_inputs`), or any other iterable of documents or of batches
    of documents (sent to the workers in shards of 65,536 documents). The cluster is
    ``client`` (a ``distributed.Client``), else the scheduler at ``scheduler`` (connected for
    this call), else the default client. A scheduler that cannot be reached, or that has no
    worker, within ``timeout`` seconds is an :class:`InputError`. A task that fails is tried
    once more (``retries=1``); a worker that dies is replaced and its task run again, up to
    Dask's ``distributed.scheduler.allowed-failures``; then the count stops with an error,
    never a partial count. ``progress`` gets the bytes of each shard counted; ``stats`` is
    filled in with what the workers read.
    """
    options = ReadOptions(text_field=text_field, column=column, whole_file=whole_file,
                          errors=errors)
    if isinstance(inputs, str | os.PathLike | list | tuple) \
            and all(isinstance(i, str | os.PathLike) for i in _as_list(inputs)):
        shards: Iterable[Shard | list[str]] = plan_shards(
            _as_list(inputs), whole_file=whole_file, shard_bytes=shard_bytes)
    else:
        documents = documents_from(inputs)  # type: ignore[arg-type]
        shards = iter(lambda: list(islice(documents, _TEXTS_PER_SHARD)), [])
    pipeline = json.dumps(pipeline_of(tokenizer), sort_keys=True, ensure_ascii=False)
    pipeline_tokenizer(json.loads(pipeline))  # a bad pipeline is named here, not on a worker
    with connect(client, scheduler, timeout) as dask_client:
        return _count(dask_client, shards, pipeline, options, progress,
                      ReadStats() if stats is None else stats)


def count_shard(shard: Shard | list[str], pipeline: str,
                options: ReadOptions) -> tuple[Counter[str], ReadStats]:
    """One shard's counts and read stats (what a worker runs; ``pipeline`` is JSON)."""
    tokenizer = _tokenizer(pipeline)
    stats = ReadStats()
    if isinstance(shard, Shard):
        texts: Iterable[str] = chain.from_iterable(read_file(
            shard.path, options, start=shard.start, end=shard.end, stats=stats))
    else:
        texts, stats.documents = shard, len(shard)
    return tokenizer.count_words(texts), stats


@lru_cache(maxsize=4)
def _tokenizer(pipeline: str) -> Any:
    return pipeline_tokenizer(json.loads(pipeline))


def _count_task(shard: Shard | list[str], pipeline: str, options: ReadOptions) -> Any:
    # Bad input fails the same way every time: send it back as a value, so Dask does not
    # retry it, and the client raises it with its own message.
    try:
        return "ok", count_shard(shard, pipeline, options)
    except TokenmillError as e:
        return "error", e


def _as_list(inputs: Any) -> list[Any]:
    return [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)


@contextmanager
def connect(client: Any, scheduler: str | None, timeout: float) -> Iterator[Any]:
    """``client``, else a client of ``scheduler`` (closed on exit), else the default client;
    one with at least one worker within ``timeout`` seconds, or an InputError saying why."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise InputError(f"timeout must be a positive number of seconds, got {timeout!r}")
    try:
        import distributed
    except ImportError:
        raise InputError("the Dask engine needs dask.distributed: pip install "
                         "'tokenmill[dask]'") from None
    owned = client is None and scheduler is not None
    if client is None and scheduler is not None:
        from distributed.comm import get_address_host_port

        try:
            get_address_host_port(scheduler)
        except ValueError as e:
            # (checked before a Client is made: one that fails to start leaves its closing
            # to the collector, which printed a traceback after the error's line)
            if not scheduler.startswith("inproc://"):
                raise InputError(f"{scheduler}: not a Dask scheduler address ({e}); expected "
                                 "tcp://HOST:PORT") from None
        try:
            client = distributed.Client(scheduler, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            raise InputError(f"cannot reach the Dask scheduler at {scheduler} within "
                             f"{timeout:g} s ({type(e).__name__}: {e})") from None
    elif client is None:
        try:
            client = distributed.default_client()
        except ValueError:
            raise InputError("no Dask cluster: give a client or a scheduler address "
                             "(--scheduler tcp://host:port)") from None
    try:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError) as e:
            raise InputError(f"the Dask scheduler at {client.scheduler.address} has no worker "
                             f"after {timeout:g} s ({type(e).__name__})") from None
        yield client
    finally:
        if owned:
            client.close()


def _count(client: Any, shards: Iterable[Shard | list[str]], pipeline: str,
           options: ReadOptions, progress: Progress | None, stats: ReadStats,
           task: Callable[..., Any] = _count_task) -> Counter[str]:
    """Submit shards, at most a window ahead of the merge, and merge results in shard order."""
    from distributed import as_completed

    threads = sum(client.nthreads().values())
    window = max(2, 2 * threads)
    job = uuid.uuid4().hex[:12]
    stream = enumerate(shards)
    submitted: dict[str, tuple[int, Any, Any]] = {}  # key -> (shard number, shard, future)
    running = as_completed(loop=client.loop)  # not the default client: ours may not be

    def submit() -> None:
        item = next(stream, None)
        if item is not None:
            number, shard = item
            future = client.submit(task, shard, pipeline, options, retries=1, pure=False,
                                   key=f"tokenmill-count-{job}-{number}")
            submitted[future.key] = (number, shard, future)
            running.add(future)

    for _ in range(window):
        submit()
    merged: Counter[str] = Counter()
    ready: dict[int, tuple[Counter[str], ReadStats]] = {}
    turn = 0
    try:
        for future in running:
            number, shard, _ = submitted.pop(future.key)
            status, value = task_result(future, shard, "counting")
            future.release()
            if status == "error":
                raise value
            ready[number] = value
            if progress is not None:
                progress(value[1].bytes_read)
            while turn in ready:  # merge in shard order: the order a local count sees
                counts, shard_stats = ready.pop(turn)
                merged.update(counts)
                stats.add(shard_stats)
                turn += 1
            submit()
    finally:
        if submitted:  # stopped by an error: no task keeps running for nothing
            client.cancel([future for _, _, future in submitted.values()])
    return merged


def task_result(future: Any, shard: Any, work: str) -> Any:
    """A task's result, or a TokenmillError saying that ``work`` ("counting", "encoding")
    stopped and which shard failed how."""
    from distributed import KilledWorker

    what = f"shard {shard}" if isinstance(shard, Shard) else "a batch of documents"
    nothing = "nothing was counted" if work == "counting" else \
        "the shards finished are kept for a rerun"
    try:
        return future.result()
    except KilledWorker as e:
        raise TokenmillError(f"{work} stopped: the Dask workers {work} {what} died, as many "
                             "times as the scheduler allows (distributed.scheduler."
                             f"allowed-failures; {e}); {nothing}. Workers may lack memory: use "
                             "smaller shards or more memory") from None
    except TokenmillError:
        raise
    except Exception as e:  # failed twice, or the client lost its scheduler
        raise TokenmillError(f"{work} stopped: {what} failed on the Dask workers, again after "
                             f"a retry ({type(e).__name__}: {e}); {nothing}") from None
