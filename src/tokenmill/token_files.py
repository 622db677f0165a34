"""Token files for pretraining: a corpus encoded into one flat array of ids on disk.

``NAME`` holds the ids, little-endian uint16 (when the vocabulary fits) or uint32, nothing else,
so ``numpy.memmap(NAME, dtype)`` reads it (but for a corpus without a token, whose empty file
numpy cannot map: ``load_token_file`` gives an empty array for it). ``NAME.idx`` holds n + 1
uint64 offsets: document i is ``ids[idx[i]:idx[i + 1]]`` (a separator id, if asked for, ends
each document and is counted in it). ``NAME.json`` says what they are: dtype, vocabulary size,
the tokenizer's fingerprint, counts, the separator and the sha256 of both files. The three are
written under temporary names and renamed into place, the description last: a ``NAME.json``
means a finished file, and a failed run (a full disk, bad input) leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill._args import checked_threads
from tokenmill._io import atomic_write_text, temp_beside, unlink_all, write_target
from tokenmill.errors import FormatError, InputError

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer


@dataclass(frozen=True)
class TokenFileInfo:
    """What a token file holds (the content of its ``.json``)."""

    dtype: str
    vocab_size: int
    fingerprint: str
    documents: int
    tokens: int
    separator: int | None
    sha256: str
    index_sha256: str
    format: str = "tokenmill-token-file"
    version: int = 1
    source: dict[str, Any] | None = None  # the input it was encoded from (sharded runs)


def encode_corpus(tok: Tokenizer, batches: Iterable[list[str]], output: str | os.PathLike[str],
                  *, separator: int | None = None, num_threads: int | None = None,
                  progress: Callable[[int, int], Any] | None = None,
                  source: dict[str, Any] | None = None,
                  fingerprint: str | None = None) -> TokenFileInfo:
    """Encode documents (in batches, as :func:`tokenmill.corpus.iter_batches` gives them) with
    :meth:`Tokenizer.encode_ordinary` semantics (a special token's text stays plain text) on
    native threads, appending ``separator`` after each document if given, and write the token
    file ``output``. ``progress(documents, tokens)`` is called after each batch. Memory is one
    batch, whatever the corpus size. ``source`` is recorded in the description as given, and
    ``fingerprint`` too if given (``tok.fingerprint()``, made once by a caller that writes many
    files with one tokenizer), else it is made here."""
    import numpy as np

    from tokenmill.batch import encode_np
    checked_threads(num_threads)  # (before the corpus is read)
    output = Path(output)
    ids_target, idx_target = write_target(output), write_target(Path(f"{output}.idx"))
    write_target(Path(f"{output}.json"))  # (written last, by atomic_write_text)
    vocab_size = tok.get_vocab_size()
    if separator is not None and not 0 <= separator < vocab_size:
        raise InputError(f"separator id {separator} is not an id of the tokenizer (vocabulary "
                         f"size {vocab_size})")
    narrow = vocab_size <= 1 << 16
    dtype = np.dtype("<u2" if narrow else "<u4")
    temps: list[Path] = []  # (emptied by the finally below, whatever happens)
    ids_hash, idx_hash = hashlib.sha256(), hashlib.sha256()
    documents = tokens = 0
    try:
        ids_file = os.fdopen(temp_beside(ids_target, temps), "wb")
        idx_file = os.fdopen(temp_beside(idx_target, temps), "wb")
        ids_tmp, idx_tmp = temps
        with ids_file, idx_file:
            first = np.zeros(1, dtype="<u8").tobytes()
            idx_file.write(first)
            idx_hash.update(first)
            for batch in batches:
                # (the separators put in by the core, counted in each document's ids)
                out = encode_np(tok, batch, num_threads=num_threads, separator=separator)
                ids, offsets = out["ids"].astype(dtype, copy=False), out["offsets"]
                chunk = ids.tobytes()
                ids_file.write(chunk)
                ids_hash.update(chunk)
                ends = (offsets[1:] + tokens).astype("<u8").tobytes()
                idx_file.write(ends)
                idx_hash.update(ends)
                documents += len(batch)
                tokens += int(offsets[-1])
                if progress:
                    progress(documents, tokens)
            for f in (ids_file, idx_file):
                f.flush()
                os.fsync(f.fileno())
        info = TokenFileInfo(dtype=dtype.name, vocab_size=vocab_size,
                             fingerprint=fingerprint or tok.fingerprint(),
                             documents=documents, tokens=tokens,
                             separator=separator, sha256=ids_hash.hexdigest(),
                             index_sha256=idx_hash.hexdigest(), source=source)
        os.replace(ids_tmp, ids_target)
        os.replace(idx_tmp, idx_target)
        atomic_write_text(f"{output}.json", json.dumps(asdict(info), indent=2) + "\n")
        return info
    except OSError as e:
        raise InputError(f"{output}: could not write the token file ({e.strerror or e}); "
                         "nothing was kept") from None
    finally:
        unlink_all(temps)


def load_token_file(path: str | os.PathLike[str], *, verify: bool = False) -> tuple[Any, Any,
                                                                                  TokenFileInfo]:
    """``(ids, offsets, info)`` of a token file: ids as a read-only ``numpy.memmap``. Without
    its ``.json`` a file is unfinished and is refused; ``verify`` checks both sha256 sums."""
    import numpy as np

    path = Path(path)
    try:
        meta = json.loads(Path(f"{path}.json").read_text("utf-8"))
        info = TokenFileInfo(**meta)
    except FileNotFoundError:
        raise InputError(f"{path}.json: no such file (an unfinished or foreign token "
                         "file)") from None
    except (json.JSONDecodeError, TypeError) as e:
        raise FormatError(f"{path}.json: not a token file description ({e})") from None
    for name, digest in ((path, info.sha256), (Path(f"{path}.idx"), info.index_sha256)):
        if not name.is_file():
            raise InputError(f"{name}: no such file")
        if verify:
            h = hashlib.sha256()
            with open(name, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            if h.hexdigest() != digest:
                raise FormatError(f"{name}: checksum mismatch: the file is not the one "
                                  f"{path}.json describes")
    ids = np.memmap(path, dtype=np.dtype(info.dtype).newbyteorder("<"), mode="r") \
        if info.tokens else np.zeros(0, dtype=info.dtype)
    offsets = np.fromfile(f"{path}.idx", dtype="<u8")
    if len(offsets) != info.documents + 1 or len(ids) != info.tokens:
        raise FormatError(f"{path}: holds {len(ids)} ids and {len(offsets) - 1} documents; "
                          f"its .json says {info.tokens} and {info.documents}")
    return ids, offsets, info


def rate(started: float, documents: int, tokens: int, bytes_read: int) -> str:
    """``MB/s`` and ``tokens/s`` since ``started``, for the progress bar and the summary."""
    seconds = max(time.perf_counter() - started, 1e-9)
    return (f"{documents} documents, {tokens} tokens, {bytes_read / 1e6 / seconds:.1f} MB/s, "
            f"{tokens / seconds:,.0f} tokens/s")
