"""Vocabulary sweeps: BPE tokenizers at several vocabulary sizes from one corpus, evaluated on
held-out corpora, to see how tokens per byte, the tails and vocabulary use move with V.

BPE is greedy: the first merges of a training to 32,000 rows are exactly the merges of a
training to 8,000 rows (the same text, options and tie rule). So the sweep trains once, to the
largest size, and cuts that model at each smaller size; the tests hold this equal to training
each size on its own.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Any

from tokenmill import decoders, pre_tokenizers
from tokenmill.errors import InputError
from tokenmill.evaluate import Evaluation, summarize
from tokenmill.models.bpe import BPE
from tokenmill.report import (
    Plot,
    colors,
    html_table,
    log_ticks,
    new_figure,
    plot_merge_counts,
    svg_of,
)
from tokenmill.tokenizer import Tokenizer
from tokenmill.trainers.bpe import BPETrainer, MergeStep

_SIZE = re.compile(r"(\d+)(k|ki|m|mi)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1000, "ki": 1024, "m": 1_000_000, "mi": 1 << 20}


def parse_sizes(text: str) -> list[int]:
    """``"2k,8k,32Ki"`` -> ``[2000, 8000, 32768]`` (k = 1000, Ki = 1024), sorted, each once.

    >>> parse_sizes("32k, 2k,8000,1Ki")
    [1024, 2000, 8000, 32000]
    """
    sizes = set()
    for part in text.split(","):
        m = _SIZE.fullmatch(part.strip())
        if not m:
            raise InputError(f"--vocab-sizes: {part.strip()!r} is not a size (write 2000, 2k "
                             "or 2Ki, comma-separated)")
        sizes.add(int(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
    return sorted(sizes)


def base_tokenizer(byte_level: bool) -> tuple[Tokenizer, tuple[str, ...]]:
    """An untrained tokenizer as ``tokenmill train`` makes it, and its initial alphabet."""
    tok = Tokenizer(BPE({}, []))
    if byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.decoder = decoders.ByteLevel()
        return tok, tuple(pre_tokenizers.ByteLevel.alphabet())
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok, ()


def cut(tok: Tokenizer, size: int) -> Tokenizer:
    """``tok`` (as trained) with only its first ``size`` rows and the merges that make them."""
    model = tok.model
    vocab = {t: i for t, i in model.vocab.items() if i < size}
    merges = [m for m in model.merges if model.vocab[model.merged_token(*m)] < size]
    small = BPE(vocab, merges, unk_token=model.unk_token,
                continuing_subword_prefix=model.continuing_subword_prefix,
                end_of_word_suffix=model.end_of_word_suffix,
                end_of_word_marker=model.end_of_word_marker)
    return Tokenizer(small, normalizer=tok.normalizer, pre_tokenizer=tok.pre_tokenizer,
                     post_processor=tok.post_processor, decoder=tok.decoder,
                     added_tokens=[t for t in tok.added_tokens if t.id < size])


def train_sizes(texts: Iterable[str], sizes: Sequence[int], *, byte_level: bool = True,
                special_tokens: Sequence[str] = (), min_frequency: int = 0,
                ) -> tuple[dict[int, Tokenizer], list[MergeStep], list[str]]:
    """One tokenizer per size (trained once, to the largest, then cut), the merge steps of that
    training, and notes (sizes the corpus could not fill)."""
    if not sizes:
        raise InputError("--vocab-sizes: give at least one size")
    tok, alphabet = base_tokenizer(byte_level)
    trainer = BPETrainer(vocab_size=max(sizes), special_tokens=tuple(special_tokens),
                         initial_alphabet=alphabet, min_frequency=min_frequency)
    result = tok.train_from_iterator(texts, trainer)
    trained = tok.get_vocab_size()
    base = trained - len(result.steps)
    if min(sizes) <= base:
        raise InputError(f"--vocab-sizes: {min(sizes)} leaves no room for merges: the alphabet "
                         f"and special tokens take {base} rows")
    notes = []
    if max(sizes) > trained:
        notes.append(f"training stopped at {trained} rows (no pair left to merge): sizes above "
                     "that are the same tokenizer")
    return {v: cut(tok, v) for v in sizes}, result.steps, notes


def summary(ev: Evaluation, sizes: dict[str, int]) -> list[dict[str, Any]]:
    """Per size, over all held-out documents pooled: tokens per byte (mean, p50, p95, p99),
    rows unused and rarely used, and the mean parity."""
    out = []
    for t in ev.tokenizers:
        mine = [r for r in ev.results if r.tokenizer == t.name]
        pooled = [x for r in mine for x in r.per_document]
        # (the reference's own parity is 1 by definition: it would pull the mean to 1)
        reference = ev.settings.get("reference")
        parities = [r.parity for r in mine if r.parity is not None and r.corpus != reference]
        out.append({"tokenizer": t.name, "vocab_size": sizes[t.name],
                    "tokens_per_byte": summarize(pooled),
                    "bytes_per_token": sum(r.bytes for r in mine) / tokens
                    if (tokens := sum(r.tokens for r in mine)) else None,
                    "vocab_unused": t.vocab_unused, "vocab_rare": t.vocab_rare,
                    "mean_parity": sum(parities) / len(parities) if parities else None})
    return out


def summary_table(rows: list[dict[str, Any]], rare: int) -> tuple[list[str], list[list[str]]]:
    head = ["tokenizer", "V", "tok/B mean", "p50", "p95", "p99", "B/tok", "unused",
            f"used <{rare}x", "mean parity"]
    body = [[r["tokenizer"], f"{r['vocab_size']:,}",
             *(f"{r['tokens_per_byte'][k]:.3f}" for k in ("mean", "p50", "p95", "p99")),
             "–" if r["bytes_per_token"] is None else f"{r['bytes_per_token']:.2f}",
             f"{100 * r['vocab_unused']:.2f}%",
             f"{100 * r['vocab_rare']:.2f}%",
             "–" if r["mean_parity"] is None else f"{r['mean_parity']:.3f}"] for r in rows]
    return head, body


def sweep_plots(ev: Evaluation, sizes: dict[str, int], steps: list[MergeStep],
                rows: list[dict[str, Any]], marks: Sequence[int] = ()) -> list[Plot]:
    """Tokens per byte by corpus against V; the pooled tails and vocabulary use against V; the
    merge counts of the training with each size marked."""
    xs = [sizes[t.name] for t in ev.tokenizers]
    corpora = [c["name"] for c in ev.corpora]
    fig, (left, right) = new_figure(12.0, 5.0, ncols=2)
    for k, (corpus, color) in enumerate(zip(corpora, colors(len(corpora)))):
        per = [ev.result(t.name, corpus) for t in ev.tokenizers]
        style = ("-", "--", "-.", ":")[k // 10 % 4]  # the palette has 10 colours
        left.plot(xs, [r.tokens_per_byte["mean"] for r in per], style, marker="o",
                  markersize=3, color=color, label=corpus)
        right.plot(xs, [r.tokens_per_byte["p99"] for r in per], style, marker="o",
                   markersize=3, color=color)
    for ax, what in ((left, "mean"), (right, "p99")):
        ax.set_xscale("log")
        log_ticks(ax, xs)
        ax.set_xlabel("vocabulary size V")
        ax.set_ylabel(f"tokens per byte ({what} over documents)")
        ax.grid(alpha=0.3, which="both")
    fig.legend(loc="outside right upper", fontsize="x-small",
               ncol=2 if len(corpora) > 13 else 1)
    by_corpus = Plot("plot-sweep-by-corpus", "Tokens per byte against V, by corpus",
                     "Mean (left) and p99 (right) over the documents of each held-out corpus.",
                     svg_of(fig))
    fig, (left, right) = new_figure(11.0, 4.2, ncols=2)
    for key, style in (("mean", "-"), ("p50", "--"), ("p95", "-."), ("p99", ":")):
        left.plot(xs, [r["tokens_per_byte"][key] for r in rows], style, marker="o", label=key)
    right.plot(xs, [r["vocab_unused"] for r in rows], marker="o", label="rows never used")
    right.plot(xs, [r["vocab_rare"] for r in rows], marker="o",
               label=f"rows used <{ev.settings['rare']}x")
    left.set_ylabel("tokens per byte, all held-out documents")
    right.set_ylabel("share of vocabulary rows")
    for ax in (left, right):
        ax.set_xscale("log")
        log_ticks(ax, xs)
        ax.set_xlabel("vocabulary size V")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize="small")
    tails = Plot("plot-sweep-tails", "Tails and vocabulary use against V",
                 "Left: tokens per byte over all held-out documents, mean and percentiles. "
                 "Right: the share of rows the held-out text never uses, or rarely.", svg_of(fig))
    largest = dataclasses.replace(ev.tokenizers[-1], merge_counts=[s.count for s in steps])
    merges = plot_merge_counts(Evaluation(ev.settings, [largest], ev.corpora, []), marks,
                               [f"V={v:,}" for v in xs])
    return [by_corpus, tails, *([merges] if merges else [])]


def summary_html(rows: list[dict[str, Any]], rare: int) -> str:
    return html_table(*summary_table(rows, rare))

