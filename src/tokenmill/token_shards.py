"""Token files in shards: a corpus encoded one shard at a time (a file, or a byte range of a big
plain text file, as :func:`tokenmill.distributed.plan_shards` cuts it) into one token file per
shard (``shard-00000.bin`` with its ``.idx`` and ``.json``, see :mod:`tokenmill.token_files`),
plus ``manifest.json`` listing them in corpus order. Shards are encoded here or on Dask workers;
the files are the same either way.

Resumable: each shard's ``.json`` records the input it came from (path, byte range, size and
modification time, and the options its documents were read with: JSON field, Parquet column,
whole file, bad UTF-8), the tokenizer's fingerprint and the separator; a rerun keeps a shard whose
record matches and whose two files match their sizes and sha256 sums, and encodes the rest. The
manifest is written last, atomically: a directory without one is unfinished.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tokenmill._args import checked_threads
from tokenmill._io import atomic_write_text
from tokenmill.corpus import Errors, ReadOptions, ReadStats, read_file
from tokenmill.distributed import DEFAULT_SHARD_BYTES, Shard, plan_shards
from tokenmill.errors import FormatError, InputError, TokenmillError
from tokenmill.token_files import TokenFileInfo, encode_corpus, load_token_file

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer

MANIFEST = "manifest.json"
SpecialTokensInText = Literal["match", "error"]  # (Tokenizer.special_tokens_in_text)


@dataclass(frozen=True)
class ShardJob:
    """What one task needs: the shard, its token file, and how to encode it."""

    shard: Shard
    output: str
    separator: int | None
    options: ReadOptions
    num_threads: int | None
    # The tokenizer's, made once for the run: making it is a canonical JSON of the whole
    # tokenizer (half a second for cl100k_base), which every shard paid for again.
    fingerprint: str | None = None


def source_of(shard: Shard, options: ReadOptions) -> dict[str, Any]:
    """The identity of a shard's input and of how its documents are read out of it (the JSON
    field, the Parquet column, a whole file as one document, what bad UTF-8 becomes): a rerun
    reuses the shard only if this is unchanged."""
    st = os.stat(shard.path)
    return {"path": os.path.abspath(shard.path), "start": shard.start, "end": shard.end,
            "size": st.st_size, "mtime_ns": st.st_mtime_ns, "read": asdict(options)}


def encode_shards(tok: Tokenizer, inputs: Sequence[str | os.PathLike[str]],
                  output_dir: str | os.PathLike[str], *, separator: int | None = None,
                  engine: str = "local", client: Any = None, scheduler: str | None = None,
                  text_field: str = "text", column: str = "text", whole_file: bool = False,
                  errors: Errors = "strict", shard_bytes: int = DEFAULT_SHARD_BYTES,
                  num_threads: int | None = None, timeout: float = 30.0,
                  progress: Callable[[TokenFileInfo], Any] | None = None) -> dict[str, Any]:
    """Encode ``inputs`` (files, directories, globs) into a directory of token files, one per
    shard, and its manifest; return the manifest. ``engine="dask"`` encodes the shards on the
    workers of ``client`` (or of the scheduler at ``scheduler``), which must see the inputs and
    ``output_dir`` (shared storage). Shards already written by an earlier run with the same
    input (read the same way), tokenizer and separator are kept. ``progress`` gets each
    shard's info as it is done.
    """
    if engine not in ("local", "dask"):
        raise InputError(f"engine must be 'local' or 'dask', got {engine!r}")
    checked_threads(num_threads)  # (here, not on a worker after the shards are planned)
    out = Path(output_dir)
    if not out.parent.is_dir():
        raise InputError(f"{out}: directory {out.parent} does not exist")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a directory (sharded output is a directory)")
    options = ReadOptions(text_field=text_field, column=column, whole_file=whole_file,
                          errors=errors)
    shards = plan_shards(inputs, whole_file=whole_file, shard_bytes=shard_bytes)
    if not shards:
        raise InputError("no input files to encode")
    created = not out.exists()
    out.mkdir(exist_ok=True)  # (once the inputs are known to make shards)
    try:
        fingerprint = tok.fingerprint()
        # Absolute: a Dask worker resolves a relative path from its own working folder.
        where = out.absolute()
        jobs = [ShardJob(s, str(where / f"shard-{i:05d}.bin"), separator, options, num_threads,
                         fingerprint) for i, s in enumerate(shards)]
        infos: dict[int, TokenFileInfo] = {}
        for i, job in enumerate(jobs):
            kept = _finished(job, fingerprint)
            if kept is not None:
                infos[i] = kept
                if progress is not None:
                    progress(kept)
        pending = [i for i in range(len(jobs)) if i not in infos]
        if engine == "local":
            for i in pending:
                infos[i] = _encode(tok, jobs[i])
                if progress is not None:
                    progress(infos[i])
        elif pending:
            infos.update(_on_dask(tok, fingerprint, {i: jobs[i] for i in pending}, client,
                                  scheduler, timeout, progress))
        manifest = _manifest(fingerprint, [(jobs[i], infos[i]) for i in range(len(jobs))],
                             separator)
        atomic_write_text(str(out / MANIFEST), json.dumps(manifest, indent=2) + "\n")
        return manifest
    except BaseException:
        if created and not any(out.iterdir()):  # (nothing written: the folder goes too)
            out.rmdir()
        raise


def load_manifest(output_dir: str | os.PathLike[str], *,
                  verify: bool = False) -> tuple[dict[str, Any], list[tuple[Any, Any]]]:
    """``(manifest, [(ids, offsets), ...])`` of a sharded token directory, in corpus order; ids
    are read-only ``numpy.memmap`` arrays. ``verify`` checks every file's sha256."""
    out = Path(output_dir)
    try:
        manifest = json.loads((out / MANIFEST).read_text("utf-8"))
        entries = manifest["shards"]
    except FileNotFoundError:
        raise InputError(f"{out / MANIFEST}: no such file (an unfinished run, or not a "
                         "sharded token directory)") from None
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise FormatError(f"{out / MANIFEST}: not a token manifest ({e})") from None
    arrays = []
    for entry in entries:
        ids, offsets, info = load_token_file(out / entry["file"], verify=verify)
        if info.sha256 != entry["sha256"]:
            raise FormatError(f"{out / entry['file']}: not the shard the manifest lists "
                              "(its sha256 differs)")
        arrays.append((ids, offsets))
    return manifest, arrays


def encode_shard(tokenizer_json: str, job: ShardJob,
                 special_tokens_in_text: SpecialTokensInText = "match") -> Any:
    """What a Dask worker runs: rebuild the tokenizer (once per worker) and encode one shard.
    Bad input comes back as a value, so Dask does not retry what fails the same way again."""
    try:
        return "ok", _encode(_tokenizer(tokenizer_json, special_tokens_in_text), job)
    except TokenmillError as e:
        return "error", e


@lru_cache(maxsize=2)
def _tokenizer(tokenizer_json: str,
               special_tokens_in_text: SpecialTokensInText = "match") -> Any:
    """The tokenizer a tokenizer.json and the one setting it has no field for make (a
    tiktoken encoding's "error": part of its fingerprint), once per worker."""
    from tokenmill.tokenizer import _unpickled

    return _unpickled(tokenizer_json, special_tokens_in_text, "tokenizer")


def _encode(tok: Tokenizer, job: ShardJob) -> TokenFileInfo:
    stats = ReadStats()
    batches = read_file(job.shard.path, job.options, start=job.shard.start, end=job.shard.end,
                        stats=stats)
    return encode_corpus(tok, batches, job.output, separator=job.separator,
                         num_threads=job.num_threads, source=source_of(job.shard, job.options),
                         fingerprint=job.fingerprint)


def _finished(job: ShardJob, fingerprint: str) -> TokenFileInfo | None:
    """The shard's info if an earlier run wrote it for this very input (read the same way),
    tokenizer and separator and its files are whole (sizes and sha256 as recorded), else
    None."""
    if not Path(f"{job.output}.json").is_file():
        return None
    try:
        _, _, info = load_token_file(job.output, verify=True)
    except TokenmillError:
        return None  # damaged or foreign: encode it again
    if info.fingerprint != fingerprint or info.separator != job.separator \
            or info.source != source_of(job.shard, job.options):
        return None
    return info


def _on_dask(tok: Tokenizer, fingerprint: str, jobs: dict[int, ShardJob], client: Any,
             scheduler: str | None, timeout: float,
             progress: Callable[[TokenFileInfo], Any] | None) -> dict[int, TokenFileInfo]:
    from distributed import as_completed

    from tokenmill.distributed import connect, task_result

    tokenizer_json = json.dumps(tok.to_dict(), ensure_ascii=False)
    setting = tok.special_tokens_in_text
    rebuilt = _tokenizer(tokenizer_json, setting)
    if rebuilt.fingerprint() != fingerprint:
        raise InputError("this tokenizer does not survive its own tokenizer.json, so the "
                         "workers could not rebuild it; encode with engine='local'")
    done: dict[int, TokenFileInfo] = {}
    with connect(client, scheduler, timeout) as dask_client:
        [shared] = dask_client.scatter([tokenizer_json], broadcast=True, hash=False)
        futures = {dask_client.submit(encode_shard, shared, job, setting, retries=1,
                                      pure=False): i
                   for i, job in jobs.items()}
        try:
            for future in as_completed(list(futures), loop=dask_client.loop):
                i = futures.pop(future)
                status, value = task_result(future, jobs[i].shard, "encoding")
                if status == "error":
                    raise value
                done[i] = value
                if progress is not None:
                    progress(value)
        finally:
            if futures:  # stopped by an error: finished shards stay on disk for a rerun
                dask_client.cancel(list(futures))
    return done


def _manifest(fingerprint: str, shards: list[tuple[ShardJob, TokenFileInfo]],
              separator: int | None) -> dict[str, Any]:
    first = shards[0][1]
    return {
        "format": "tokenmill-token-shards",
        "version": 1,
        "dtype": first.dtype,
        "vocab_size": first.vocab_size,
        "fingerprint": fingerprint,
        "separator": separator,
        "documents": sum(info.documents for _, info in shards),
        "tokens": sum(info.tokens for _, info in shards),
        "shards": [{"file": Path(job.output).name, **{k: v for k, v in asdict(info).items()
                                                       if k in _SHARD_FIELDS}}
                   for job, info in shards],
    }


_SHARD_FIELDS = ("documents", "tokens", "sha256", "index_sha256", "source")
