"""Evaluation: what a tokenizer costs each corpus, over documents.

A corpus is a list of documents (one a line; see :func:`read_corpus`). Per tokenizer and corpus:

- ``tokens_per_byte`` / ``tokens_per_char``: each non-empty document's token count divided by its
  UTF-8 bytes / characters; the mean of those ratios and their p50, p95 and p99;
- ``bytes_per_token``: the corpus's bytes over its tokens (a ratio of totals, not of documents;
  None when the corpus gives no token);
- ``unk_rate`` / ``byte_fallback_rate``: the share of tokens that are the unknown token / a
  ``<0xNN>`` byte-fallback token;
- ``over_context``: the share of documents of more than ``context`` tokens;
- ``vocab_unused`` / ``vocab_rare``: the share of vocabulary rows (added tokens included) used
  never / fewer than ``rare`` times (never-used rows included) in the corpus;
- ``parity``: the corpus's tokens over the reference corpus's tokens, on parallel corpora (line
  ``i`` of each is the same sentence; both must have as many lines).

Percentiles are "linear" (numpy's default; Hyndman & Fan's type 7): see :func:`percentile`.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from itertools import chain
from pathlib import Path
from typing import Any

from tokenmill.corpus import ReadOptions, input_kind, iter_documents
from tokenmill.errors import InputError
from tokenmill.tokenizer import Tokenizer

PERCENTILES = (50, 95, 99)
_BYTE_FALLBACK = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values``, interpolated linearly between the two
    nearest ranks: with ``v`` sorted and ``h = (n - 1) * q / 100``, ``v[floor(h)] + (h - floor(h))
    * (v[floor(h) + 1] - v[floor(h)])`` (numpy's default method).

    >>> percentile([1, 2, 3, 4], 50), percentile([10, 20, 30, 40, 50], 95)
    (2.5, 48.0)
    """
    if not values:
        raise InputError("percentile of no values")
    if not 0 <= q <= 100:
        raise InputError(f"percentile q must be in 0..100, got {q}")
    v = sorted(values)
    h = (len(v) - 1) * q / 100
    lo = int(h)
    if lo + 1 >= len(v):
        return float(v[-1])
    return v[lo] + (h - lo) * (v[lo + 1] - v[lo])


def summarize(values: Sequence[float]) -> dict[str, float]:
    """``{"mean", "p50", "p95", "p99"}`` of ``values``."""
    out = {"mean": sum(values) / len(values)}
    out.update({f"p{q}": percentile(values, q) for q in PERCENTILES})
    return out


# -- corpora ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Corpus:
    """Named documents; empty lines are kept so parallel corpora stay aligned line by line."""

    name: str
    path: str
    documents: list[str]


def split_named(spec: str) -> tuple[str | None, str]:
    """``"NAME=PATH"`` -> ``("NAME", "PATH")``; a plain path -> ``(None, PATH)``."""
    name, sep, path = spec.partition("=")
    if sep and name and os.sep not in name and not Path(spec).exists():
        return name, path
    return None, spec


def corpus_name(path: str | os.PathLike[str]) -> str:
    """A corpus's default name: its file name up to the first dot (``eng_Latn.dev.gz`` ->
    ``eng_Latn``)."""
    return Path(path).name.split(".")[0] or Path(path).name


def corpus_files(folder: str | os.PathLike[str]) -> list[str]:
    """The files of ``folder`` (not of its subfolders) that hold documents, in name order: those
    of a kind :mod:`tokenmill.corpus` reads, and compressed files of no known kind, read as text
    (FLORES ships ``eng_Latn.dev.gz``)."""
    p = Path(folder)
    files = [str(f) for f in sorted(p.iterdir())
             if f.is_file() and not f.name.startswith(".") and any(input_kind(f.name))]
    if not files:
        raise InputError(f"{p}: no files of documents in this folder (.txt, .jsonl, .parquet, "
                         "each optionally .gz or .zst)")
    return files


PLAIN = ReadOptions()  # lines of text, "text" fields and columns, strict UTF-8


def read_documents(path: str | os.PathLike[str],
                   options: ReadOptions = PLAIN) -> Iterator[str]:
    """The documents of a file or folder, streamed, as ``tokenmill train`` reads them
    (:func:`tokenmill.corpus.iter_documents`: a text file has one per line, or is one with
    ``whole_file``; a ``.jsonl`` file one ``text_field`` per line, a ``.parquet`` file one
    ``column`` value per row; ``.gz``/``.zst`` are decompressed); a folder's files are those of
    :func:`corpus_files`."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or folder")
    return iter_documents(corpus_files(p) if p.is_dir() else [str(p)],
                          text_field=options.text_field, column=options.column,
                          whole_file=options.whole_file, errors=options.errors)


def read_corpus(spec: str, options: ReadOptions = PLAIN,
                max_documents: int | None = None) -> Corpus:
    """A corpus from ``NAME=PATH`` or ``PATH`` (named after the file); it must hold text."""
    name, path = split_named(spec)
    docs: list[str] = []
    for doc in read_documents(path, options):
        if max_documents is not None and len(docs) >= max_documents:
            break
        docs.append(doc)
    if not any(docs):
        raise InputError(f"{path}: empty corpus (no document with any text in it)")
    return Corpus(name or corpus_name(path), path, docs)


def corpora_in(folder: str | os.PathLike[str], options: ReadOptions = PLAIN,
               max_documents: int | None = None) -> list[Corpus]:
    """One corpus per file of ``folder`` (``--corpora DIR``), each named after its file."""
    if not Path(folder).is_dir():
        raise InputError(f"{folder}: not a folder (--corpora takes a folder with one file per "
                         "corpus)")
    return [read_corpus(f, options, max_documents) for f in corpus_files(folder)]


# -- metrics ---------------------------------------------------------------------------------

@dataclass
class Result:
    """One tokenizer on one corpus (the JSON fields; see the module's docstring)."""

    tokenizer: str
    corpus: str
    documents: int
    tokens: int
    bytes: int
    chars: int
    tokens_per_byte: dict[str, float]
    tokens_per_char: dict[str, float]
    bytes_per_token: float | None  # None: no token at all (the text was all dropped)
    unk_rate: float
    byte_fallback_rate: float
    over_context: float
    vocab_unused: float
    vocab_rare: float
    parity: float | None = None
    per_document: list[float] = field(default_factory=list, repr=False)  # tokens per byte


@dataclass
class TokenizerInfo:
    name: str
    source: str
    fingerprint: str
    vocab_size: int
    # Over all corpora together: rows used never / fewer than `rare` times, tokens by id,
    # byte length by id, and merge counts by step with where they come from.
    vocab_unused: float = 0.0
    vocab_rare: float = 0.0
    usage: list[int] = field(default_factory=list, repr=False)
    token_bytes: list[int] = field(default_factory=list, repr=False)
    merge_counts: list[int] | None = field(default=None, repr=False)
    merge_counts_from: str = ""
    model: str = ""  # the model's type: BPE, WordPiece, Unigram
    # Whether it has an unknown token, and byte-fallback tokens: where not, its rates of them
    # are 0 by construction, which the tables show as "–" rather than as a measured 0.00%.
    has_unk: bool = True
    has_byte_fallback: bool = True


@dataclass
class Evaluation:
    settings: dict[str, Any]
    tokenizers: list[TokenizerInfo]
    corpora: list[dict[str, Any]]
    results: list[Result]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def result(self, tokenizer: str, corpus: str) -> Result:
        return next(r for r in self.results if r.tokenizer == tokenizer and r.corpus == corpus)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``--json`` (no per-document or per-id arrays)."""
        hidden = {"per_document", "usage", "token_bytes", "merge_counts"}

        def plain(item: Any) -> dict[str, Any]:
            return {f.name: getattr(item, f.name) for f in fields(item) if f.name not in hidden}

        return {
            "tokenmill_eval": 1,
            "settings": self.settings,
            "tokenizers": [plain(t) for t in self.tokenizers],
            "corpora": self.corpora,
            "results": [plain(r) for r in self.results],
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
        }


def special_ids(tok: Tokenizer) -> tuple[set[int], set[int]]:
    """(the unknown token's id, if any; the ids of ``<0xNN>`` byte-fallback tokens, if the
    model falls back to bytes)."""
    model = tok.model
    unk_token = getattr(model, "unk_token", None)
    unk = {i for i in [tok.token_to_id(unk_token)] if i is not None} if unk_token else set()
    fallback: set[int] = set()
    if getattr(model, "byte_fallback", False):
        fallback = {i for t, i in tok.get_vocab().items() if _BYTE_FALLBACK.fullmatch(t)}
    return unk, fallback


def token_bytes(tok: Tokenizer) -> list[int]:
    """The length in bytes of the text each id stands for (under a byte-level decoder, a token's
    characters are bytes; ``<0xNN>`` of a byte-fallback model is one byte; ``▁`` is a space; a
    continuing-subword prefix is dropped)."""
    from tokenmill.decoders import ByteLevel
    from tokenmill.pre_tokenizers import unicode_to_bytes

    spelled = unicode_to_bytes() if isinstance(tok.decoder, ByteLevel) else {}
    fallback = getattr(tok.model, "byte_fallback", False)
    prefix = getattr(tok.model, "continuing_subword_prefix", None) or ""
    sizes = [0] * tok.get_vocab_size()
    for token, i in tok.get_vocab().items():
        if fallback and _BYTE_FALLBACK.fullmatch(token):
            sizes[i] = 1
        elif spelled and all(c in spelled for c in token):
            sizes[i] = len(token)  # byte-level: one character per byte
        else:
            if prefix and token.startswith(prefix):
                token = token[len(prefix):]
            sizes[i] = len(token.replace("\u2581", " ").encode("utf-8"))
    return sizes


def merge_uses(tok: Tokenizer, usage: Sequence[int]) -> list[int] | None:
    """How often each merge (by rank) was applied to produce the tokens counted in ``usage``
    (occurrences by id): a token's count goes to the merge that made it, and down to both of
    its parts, in reverse rank order. On a model's training corpus this is the count each merge
    had when it was learnt, except for pairs that overlap themselves (a run "aaa" holds two
    pairs "aa" for the trainer, and one merge). None for a model without merges."""
    model = tok.model
    merges = getattr(model, "merges", None)
    if not merges:
        return None
    vocab = model.vocab
    applied = list(usage) + [0] * max(0, len(vocab) - len(usage))
    made = [vocab[model.merged_token(left, right)] for left, right in merges]
    first: dict[int, int] = {}
    for rank, token_id in enumerate(made):
        first.setdefault(token_id, rank)
    counts = [0] * len(merges)
    for rank in range(len(merges) - 1, -1, -1):
        token_id = made[rank]
        if first[token_id] != rank:
            continue  # a later merge making the same token: the first one is taken to make it
        count = counts[rank] = applied[token_id]
        left, right = merges[rank]
        applied[vocab[left]] += count
        applied[vocab[right]] += count
    return counts


def _vocab_use(counter: Mapping[int, int], rows: int, rare: int) -> tuple[float, float]:
    if rows == 0:  # (a tokenizer without a vocabulary: no row goes unused)
        return 0.0, 0.0
    used = sum(1 for i, n in counter.items() if 0 <= i < rows and n > 0)
    common = sum(1 for i, n in counter.items() if 0 <= i < rows and n >= rare)
    return (rows - used) / rows, (rows - common) / rows


def evaluate(tokenizers: Mapping[str, Tokenizer], corpora: Sequence[Corpus], *,
             context: int = 2048, rare: int = 10, reference: str | None = None,
             sources: Mapping[str, str] | None = None,
             merge_counts: Mapping[str, list[int]] | None = None,
             details: bool = True) -> Evaluation:
    """Every metric of every tokenizer on every corpus.

    ``merge_counts`` gives the training counts of tokenizers trained in this run (sweep); other
    BPE tokenizers get the counts of merges applied on these corpora (:func:`merge_uses`).
    ``details=False`` leaves out the fingerprints, token lengths and merge counts that only
    the JSON and the report show (a second or more on a 200k-row vocabulary).

    >>> from tokenmill import BPE
    >>> tok = Tokenizer(BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    >>> r = evaluate({"t": tok}, [Corpus("c", "-", ["abab", "ab"])]).results[0]
    >>> r.tokens, r.tokens_per_byte["mean"], r.bytes_per_token, r.vocab_unused
    (3, 0.5, 2.0, 0.6666666666666666)
    """
    started = time.perf_counter()
    if context < 1:
        raise InputError(f"--context must be >= 1, got {context}")
    if rare < 1:
        raise InputError(f"--rare must be >= 1, got {rare}")
    names = [c.name for c in corpora]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise InputError(f"two corpora are named {twice!r}; name them NAME=PATH")
    if not corpora:
        raise InputError("no corpus to evaluate on: give --corpus NAME=PATH or --corpora DIR")
    if reference is not None and reference not in names:
        raise InputError(f"--reference {reference!r} is not a corpus name; the corpora are "
                         f"{', '.join(names)}")
    evaluation = Evaluation(
        settings={"context": context, "rare": rare, "reference": reference,
                  "percentiles": "linear interpolation between closest ranks (numpy default)"},
        tokenizers=[], corpora=[], results=[])
    sizes = {}
    for c in corpora:
        docs = [d for d in c.documents if d]
        nbytes = [len(d.encode("utf-8")) for d in docs]
        sizes[c.name] = (docs, nbytes, [len(d) for d in docs])
        evaluation.corpora.append({"name": c.name, "path": c.path, "lines": len(c.documents),
                                   "documents": len(docs), "bytes": sum(nbytes),
                                   "chars": sum(len(d) for d in docs)})
    for tok_name, tok in tokenizers.items():
        rows = tok.get_vocab_size()
        unk, fallback = special_ids(tok)
        total: Counter[int] = Counter()
        # One batch for all corpora: the core's threads stay busy across corpus boundaries.
        encoded = tok.encode_ordinary_batch([d for c in corpora for d in sizes[c.name][0]])
        start = 0
        for c in corpora:
            docs, nbytes, nchars = sizes[c.name]
            batch = encoded[start:start + len(docs)]
            start += len(docs)
            counter = Counter(chain.from_iterable(batch))
            lengths = [len(ids) for ids in batch]
            tokens = sum(lengths)
            unused, rarely = _vocab_use(counter, rows, rare)
            evaluation.results.append(Result(
                tok_name, c.name, len(docs), tokens, sum(nbytes), sum(nchars),
                tokens_per_byte=summarize(tpb := [n / b for n, b in zip(lengths, nbytes)]),
                tokens_per_char=summarize([n / k for n, k in zip(lengths, nchars)]),
                bytes_per_token=sum(nbytes) / tokens if tokens else None,
                unk_rate=sum(counter[i] for i in unk) / tokens if tokens else 0.0,
                byte_fallback_rate=sum(counter[i] for i in fallback) / tokens if tokens else 0.0,
                over_context=sum(1 for n in lengths if n > context) / len(lengths),
                vocab_unused=unused, vocab_rare=rarely, per_document=tpb))
            total.update(counter)
        usage = [0] * rows
        for i, n in total.items():
            if 0 <= i < rows:
                usage[i] = n
        info = TokenizerInfo(tok_name, (sources or {}).get(tok_name, tok_name), "", rows,
                             *_vocab_use(total, rows, rare), usage=usage,
                             model=type(tok.model).__name__, has_unk=bool(unk),
                             has_byte_fallback=bool(fallback))
        if details:
            info.fingerprint = tok.fingerprint()
            info.token_bytes = token_bytes(tok)
            if merge_counts and tok_name in merge_counts:
                info.merge_counts, info.merge_counts_from = merge_counts[tok_name], "training"
            else:
                info.merge_counts = merge_uses(tok, usage)
                info.merge_counts_from = "applied on the evaluation corpora"
        evaluation.tokenizers.append(info)
    if reference is not None:
        _parity(evaluation, corpora, reference)
    evaluation.seconds = time.perf_counter() - started
    return evaluation


def _parity(evaluation: Evaluation, corpora: Sequence[Corpus], reference: str) -> None:
    lines = {c.name: len(c.documents) for c in corpora}
    for c in corpora:
        if lines[c.name] != lines[reference]:
            evaluation.notes.append(
                f"no parity for {c.name}: {lines[c.name]} lines against {lines[reference]} in "
                f"the reference {reference} (parity needs parallel corpora, line i the same "
                "sentence)")
    for r in evaluation.results:
        if lines[r.corpus] == lines[reference]:
            ref = evaluation.result(r.tokenizer, reference).tokens
            r.parity = r.tokens / ref if ref else None
