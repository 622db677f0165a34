"""Batches in bulk: ids straight into numpy arrays, and token counts without the ids.

On the native path the core fills one buffer for the whole batch, so no Python object is made
per token. numpy is imported only here, when asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tokenmill import _core
from tokenmill._args import checked_threads, integer_in, thread_count
from tokenmill._io import check_texts, text_batch
from tokenmill.errors import InputError

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer


def _native(tok: Tokenizer) -> tuple[Any, int] | None:
    native = tok.native_plan()
    if native is None or any(not t.special for t in tok.added_tokens):
        return None
    return native


def encode_np(tok: Tokenizer, texts: Sequence[str], *, padded: bool = False, pad_id: int = 0,
              side: str = "right", num_threads: int | None = None,
              separator: int | None = None) -> dict[str, Any]:
    """Ids of ``texts`` (each as :meth:`Tokenizer.encode_ordinary`) as numpy arrays.

    Ragged (default): ``{"ids": 1-D array, "offsets": n + 1 document offsets}``: the ids of
    text i are ``ids[offsets[i]:offsets[i + 1]]``. With ``padded=True``: ``{"input_ids": [n, L],
    "attention_mask": [n, L]}`` with ``pad_id`` on ``side``. The dtype is uint16 when every id
    of the vocabulary fits, uint32 otherwise. ``separator`` (an id of the vocabulary) ends
    every text's ids, counted in them, as in a token file.
    """
    import numpy as np

    checked_threads(num_threads)
    if side not in ("right", "left"):
        raise InputError(f"side must be 'right' or 'left', got {side!r}")
    if padded:
        pad = integer_in(pad_id, 0, 1 << 32)
        if pad is None:
            raise InputError(f"pad_id must be an id in [0, 2**32) (the arrays are unsigned), "
                             f"got {pad_id!r}")
        pad_id = pad
    vocab_size = tok.get_vocab_size()
    if separator is not None and not (isinstance(separator, int) and 0 <= separator < vocab_size):
        raise InputError(f"separator {separator!r} is not an id of the tokenizer (vocabulary "
                         f"size {vocab_size})")
    texts = text_batch(texts)
    narrow = vocab_size <= 1 << 16 and 0 <= pad_id < 1 << 16
    dtype = np.uint16 if narrow else np.uint32
    native = _native(tok)
    if native is not None:
        try:
            ids, offsets = _core.encode_ids_flat(native[0], native[1], texts,
                                                 thread_count(len(texts), num_threads), narrow,
                                                 separator)
        except (TypeError, UnicodeError):
            check_texts(texts)
            raise
    else:
        # (the core's other pipelines, on native threads, or the Python one text by text)
        lists = tok.encode_ordinary_batch(texts, num_threads=num_threads)
        if separator is not None:
            for x in lists:
                x.append(separator)
        offsets = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in lists], out=offsets[1:])
        ids = np.fromiter((i for x in lists for i in x), dtype=dtype, count=int(offsets[-1]))
    if not padded:
        return {"ids": ids, "offsets": offsets}
    lengths = np.diff(offsets)
    width = int(lengths.max()) if len(lengths) else 0
    input_ids = np.full((len(lengths), width), pad_id, dtype=dtype)
    mask = np.zeros((len(lengths), width), dtype=np.uint8)
    # Each row's ids land at positions computed for all tokens at once (no loop per token).
    row = np.repeat(np.arange(len(lengths)), lengths)
    col = np.arange(len(ids)) - np.repeat(offsets[:-1], lengths)
    if side == "left":
        col = col + np.repeat(width - lengths, lengths)
    input_ids[row, col] = ids
    mask[row, col] = 1
    return {"input_ids": input_ids, "attention_mask": mask}


def count_tokens(tok: Tokenizer, texts: Sequence[str], *,
                 num_threads: int | None = None) -> list[int]:
    """How many tokens :meth:`Tokenizer.encode_ordinary` gives each text, without keeping ids."""
    checked_threads(num_threads)
    texts = text_batch(texts)
    native = _native(tok)
    if native is not None:
        try:
            return _core.count_tokens(native[0], native[1], texts,
                                      thread_count(len(texts), num_threads))
        except (TypeError, UnicodeError):
            check_texts(texts)
            raise
    return [len(x) for x in tok.encode_ordinary_batch(texts, num_threads=num_threads)]
