"""Showing an evaluation: terminal tables (rich, when installed), JSON, and one self-contained
HTML page with the plots (matplotlib SVG embedded as data URIs: nothing is fetched to view it).

matplotlib and rich are optional (``pip install 'tokenmill[report]'``) and imported only here,
only when asked for.
"""

from __future__ import annotations

import base64
import html
import io
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TextIO

from tokenmill.errors import TokenmillError
from tokenmill.evaluate import Evaluation, TokenizerInfo, percentile


@dataclass(frozen=True)
class Plot:
    """One figure of the page: an id for its ``<figure>``, a title, a caption, the SVG."""

    id: str
    title: str
    caption: str
    svg: bytes


# -- terminal and JSON -----------------------------------------------------------------------

def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.2f}%"


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def length_rows(ev: Evaluation) -> tuple[list[str], list[list[str]]]:
    """The "tokens per byte" table: its header and rows."""
    head = ["tokenizer", "corpus", "docs", "tok/B mean", "p50", "p95", "p99", "tok/char mean",
            "p50", "p95", "p99", "B/tok", f">{ev.settings['context']}", "parity"]
    rows = [[r.tokenizer, r.corpus, f"{r.documents:,}",
             *(_num(r.tokens_per_byte[k]) for k in ("mean", "p50", "p95", "p99")),
             *(_num(r.tokens_per_char[k]) for k in ("mean", "p50", "p95", "p99")),
             "–" if r.bytes_per_token is None else f"{r.bytes_per_token:.2f}",
             _pct(r.over_context), _num(r.parity)]
            for r in ev.results]
    return head, rows


def _rates(t: TokenizerInfo, unk: float, fallback: float) -> list[str]:
    """The unknown and byte-fallback rates of ``t``'s row, "–" where it has no such token."""
    return [_pct(unk) if t.has_unk else "–", _pct(fallback) if t.has_byte_fallback else "–"]


def coverage_rows(ev: Evaluation) -> tuple[list[str], list[list[str]]]:
    """The "unknowns and vocabulary use" table, with an "all corpora" row per tokenizer."""
    head = ["tokenizer", "corpus", "tokens", "unk", "fallback", "unused",
            f"used <{ev.settings['rare']}x"]
    rows = []
    for t in ev.tokenizers:
        mine = [r for r in ev.results if r.tokenizer == t.name]
        rates = partial(_rates, t)
        rows += [[r.tokenizer, r.corpus, f"{r.tokens:,}", *rates(r.unk_rate,
                                                                 r.byte_fallback_rate),
                  _pct(r.vocab_unused), _pct(r.vocab_rare)] for r in mine]
        tokens = sum(r.tokens for r in mine)
        unk = sum(r.unk_rate * r.tokens for r in mine) / tokens if tokens else 0.0
        fallback = sum(r.byte_fallback_rate * r.tokens for r in mine) / tokens if tokens else 0.0
        rows.append([t.name, "all corpora", f"{tokens:,}", *rates(unk, fallback),
                     _pct(t.vocab_unused), _pct(t.vocab_rare)])
    return head, rows


Table = tuple[str, list[str], list[list[str]]]  # title, header, rows


def _columns(head: list[str], rows: list[list[str]], keep: Sequence[int]) -> tuple[
        list[str], list[list[str]]]:
    return [head[k] for k in keep], [[r[k] for k in keep] for r in rows]


def terminal_tables(ev: Evaluation) -> list[Table]:
    """The evaluation's tables for a terminal: the length table of the page cut in two (14
    columns do not fit in 80 or even 120), the parity column only where there is a parity."""
    head, rows = length_rows(ev)
    tail = [0, 1, 7, 8, 9, 10, 12] + ([13] if ev.settings.get("reference") else [])
    return [("Tokens per byte over documents", *_columns(head, rows, [0, 1, 2, 3, 4, 5, 6, 11])),
            ("Tokens per character over documents, documents over the context, parity",
             *_columns(head, rows, tail)),
            ("Unknown tokens and vocabulary use", *coverage_rows(ev))]


def print_tables(ev: Evaluation, out: TextIO | None = None, extra: Sequence[Table] = (),
                 width: int | None = None) -> None:
    """The evaluation's tables (and ``extra`` ones) on the terminal: rich tables when rich
    is installed, plain columns if not. Notes go to stderr. ``width``: the terminal's (default:
    its own, or 200 when ``out`` is not a terminal); a table wider than that is printed at its
    own width, never with its numbers cut."""
    out = out or sys.stdout
    tables = [*terminal_tables(ev), *extra]
    try:
        from rich import box
        from rich.console import Console
        from rich.measure import Measurement
        from rich.table import Table as RichTable
    except ImportError:
        for title, head, rows in tables:
            print(title, file=out)
            widths = [max(len(r[c]) for r in [head, *rows]) for c in range(len(head))]
            for r in [head, *rows]:
                print("  ".join(c.rjust(w) if k > 1 else c.ljust(w)
                                for k, (c, w) in enumerate(zip(r, widths))).rstrip(), file=out)
            print(file=out)
    else:
        terminal = width or (Console(file=out).width if out.isatty() else 200)
        for title, head, rows in tables:
            table = RichTable(title=title, title_justify="left", box=box.SIMPLE_HEAD)
            for k, h in enumerate(head):
                table.add_column(h, justify="left" if k < 2 else "right", no_wrap=True)
            for k, r in enumerate(rows):
                last = k + 1 == len(rows) or rows[k + 1][0] != r[0]
                table.add_row(*r, end_section=last)  # a rule between tokenizers
            # A table wider than the terminal is printed at its own width: rich would shrink
            # its columns to the terminal and cut "0.207" to "0…".
            wide = Console(file=out, width=10_000)
            natural = Measurement.get(wide, wide.options, table).maximum
            Console(file=out, width=max(terminal, natural)).print(table)
    for note in ev.notes:
        print(f"note: {note}", file=sys.stderr)


def to_json(ev: Evaluation, extra: dict[str, Any] | None = None) -> str:
    """The ``--json`` document."""
    return json.dumps({**ev.to_dict(), **(extra or {})}, ensure_ascii=False, indent=1) + "\n"


# -- plots -----------------------------------------------------------------------------------

def new_figure(width: float, height: float, ncols: int = 1) -> tuple[Any, Any]:
    """(a matplotlib Figure, its axes): the object API only, so no pyplot state or backend is
    touched in the caller's process."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise TokenmillError("the HTML report needs matplotlib: pip install "
                             "'tokenmill[report]'") from None
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def svg_of(fig: Any) -> bytes:
    """The figure as SVG, the same bytes for the same figure (no date, fixed ids)."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "tokenmill", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def colors(n: int) -> list[str]:
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf"]
    return [palette[i % len(palette)] for i in range(n)]


def plot_tokens_per_byte(ev: Evaluation) -> Plot:
    """Box plots of tokens per byte over documents, per corpus and tokenizer."""
    names = [t.name for t in ev.tokenizers]
    corpora = [c["name"] for c in ev.corpora]
    k = len(names)
    fig, ax = new_figure(min(16.0, max(8.0, 0.2 * k * len(corpora) + 2.5)), 5.0)
    for j, (name, color) in enumerate(zip(names, colors(k))):
        stats, p99 = [], []
        for corpus in corpora:
            v = ev.result(name, corpus).per_document
            q = {p: percentile(v, p) for p in (5, 25, 50, 75, 95, 99)}
            stats.append({"med": q[50], "q1": q[25], "q3": q[75], "whislo": q[5],
                          "whishi": q[95], "fliers": [], "label": corpus})
            p99.append(q[99])
        where = [i * (k + 1) + j for i in range(len(corpora))]
        ax.bxp(stats, positions=where, widths=0.8, patch_artist=True, showfliers=False,
               boxprops={"facecolor": color, "alpha": 0.6}, medianprops={"color": "black"})
        ax.plot(where, p99, linestyle="none", marker="v", color=color, markersize=4)
        ax.plot([], [], color=color, linewidth=6, alpha=0.6, label=name)
    ax.set_xticks([i * (k + 1) + (k - 1) / 2 for i in range(len(corpora))], corpora,
                  rotation=60 if len(corpora) > 6 else 0, ha="right" if len(corpora) > 6
                  else "center")
    ax.set_ylabel("tokens per byte (per document)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1), ncol=k, fontsize="small", frameon=False)
    return Plot("plot-tokens-per-byte", "Tokens per byte by corpus",
                "Each box: the documents of one corpus under one tokenizer. Box p25–p75, line "
                "the median, whiskers p5–p95, triangle p99. Lower is cheaper.", svg_of(fig))


def plot_parity(ev: Evaluation) -> Plot | None:
    """Bars of parity against the reference corpus, per corpus and tokenizer."""
    reference = ev.settings.get("reference")
    have = [c["name"] for c in ev.corpora
            if all(r.parity is not None for r in ev.results if r.corpus == c["name"])]
    if reference is None or not have:
        return None
    names = [t.name for t in ev.tokenizers]
    have.sort(key=lambda c: -(ev.result(names[0], c).parity or 0.0))
    k = len(names)
    fig, ax = new_figure(min(16.0, max(8.0, 0.18 * k * len(have) + 2.5)), 4.5)
    width = 0.8 / k
    for j, (name, color) in enumerate(zip(names, colors(k))):
        ax.bar([i + (j - (k - 1) / 2) * width for i in range(len(have))],
               [ev.result(name, c).parity or 0.0 for c in have], width, color=color, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(have)), have, rotation=60 if len(have) > 6 else 0,
                  ha="right" if len(have) > 6 else "center")
    ax.set_ylabel(f"tokens / tokens of {reference}")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return Plot("plot-parity", f"Parity against {reference}",
                f"Tokens for each corpus divided by tokens for the same sentences in {reference}"
                " (1 = as cheap as the reference; 3 = three times the tokens, the context and the "
                "cost).", svg_of(fig))


def _log_thin(n: int, points: int = 400) -> list[int]:
    """About ``points`` indices of 0..n-1, evenly spaced on a log scale."""
    return sorted({min(n - 1, round(n ** (k / points)) - 1) for k in range(points + 1)}) \
        if n else []


def plot_vocab_use(ev: Evaluation) -> Plot:
    """The share of tokens covered by the most used share of vocabulary rows."""
    fig, ax = new_figure(7.5, 4.5)
    for t, color in zip(ev.tokenizers, colors(len(ev.tokenizers))):
        counts = sorted(t.usage, reverse=True)
        total = sum(counts) or 1
        running, cover = 0, []
        for c in counts:
            running += c
            cover.append(running / total)
        idx = _log_thin(len(counts))
        ax.plot([i + 1 for i in idx], [cover[i] for i in idx], color=color,
                label=f"{t.name}: {100 * t.vocab_unused:.1f}% of {len(counts):,} rows unused")
    ax.set_xscale("log")
    ax.set_xlabel("vocabulary rows, most used first")
    ax.set_ylabel("share of all tokens")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small", loc="lower right")
    return Plot("plot-vocab-use", "Vocabulary use",
                "How much of the encoded text the most used rows cover, over all corpora; where "
                "a curve reaches 100% the rest of the vocabulary is never used.", svg_of(fig))


def plot_token_lengths(ev: Evaluation, longest: int = 16) -> Plot:
    """Histograms of token length in bytes: in the vocabulary, and in the encoded text."""
    fig, (left, right) = new_figure(10.0, 4.0, ncols=2)
    bins = list(range(1, longest + 1))
    for t, color in zip(ev.tokenizers, colors(len(ev.tokenizers))):
        rows = [0] * longest
        used = [0] * longest
        for size, n in zip(t.token_bytes, t.usage):
            if size > 0:
                rows[min(size, longest) - 1] += 1
                used[min(size, longest) - 1] += n
        for ax, h in ((left, rows), (right, used)):
            total = sum(h) or 1
            ax.plot(bins, [x / total for x in h], marker="o", markersize=3, color=color,
                    label=t.name)
    for ax, title in ((left, "vocabulary rows"), (right, "tokens in the evaluated text")):
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel(f"token length in bytes ({longest} = {longest} or more)")
        ax.set_xticks(bins[::2] if longest > 10 else bins)
        ax.grid(alpha=0.3)
    left.set_ylabel("share")
    left.legend(fontsize="small")
    return Plot("plot-token-lengths", "Token length",
                "Length of the text a token stands for, over the vocabulary (left) and over the "
                "tokens of all evaluated corpora (right).", svg_of(fig))


def binned(values: Sequence[int], bins: int = 300, log: bool = False
           ) -> tuple[list[float], list[float], list[float], list[float]]:
    """(bin centres, p10, mean, p90) of ``values`` in consecutive bins; with ``log``, the
    values are steps 1..n and the bins grow geometrically (even on a log axis), so the late
    steps, where counts are small and noisy, are averaged over more of their neighbours."""
    n = len(values)
    if log:
        edges = sorted({round(n ** (k / bins)) for k in range(bins + 1)} | {0, n})
    else:
        size = max(1, -(-n // bins))
        edges = [*range(0, n, size), n]
    xs, lo, mid, hi = [], [], [], []
    for start, stop in zip(edges, edges[1:]):
        part = values[start:stop]
        if not part:
            continue
        # step numbers run from 1 on a log axis; the centre is the geometric one there
        xs.append(((start + 1) * stop) ** 0.5 if log else start + (len(part) - 1) / 2)
        lo.append(percentile(part, 10))
        mid.append(sum(part) / len(part))
        hi.append(percentile(part, 90))
    return xs, lo, mid, hi


def log_ticks(ax: Any, values: Sequence[int]) -> None:
    """Major ticks at ``values`` alone (e.g. the swept vocabulary sizes, "8k"), none between:
    a log axis's own minor labels ("3×10³") crowd and hide them."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    ax.xaxis.set_major_locator(FixedLocator(list(values)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([short_count(v) for v in values])


def short_count(n: int) -> str:
    """2000 -> "2k", 32768 -> "32.8k", 1000000 -> "1M", 500 -> "500".

    >>> [short_count(v) for v in (500, 2000, 32768, 1000000)]
    ['500', '2k', '32.8k', '1M']
    """
    for unit, size in (("M", 1_000_000), ("k", 1000)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def plot_merge_counts(ev: Evaluation, marks: Sequence[int] = (),
                      mark_labels: Sequence[str] = ()) -> Plot | None:
    """The count of each merge by step, log scale (mean and p10–p90 of consecutive steps), with
    vertical lines at the steps ``marks`` (labelled ``mark_labels``)."""
    curves = [t for t in ev.tokenizers if t.merge_counts]
    if not curves:
        return None
    fig, ax = new_figure(8.0, 4.5)
    for t, color in zip(ev.tokenizers, colors(len(ev.tokenizers))):
        if not t.merge_counts:
            continue
        xs, lo, mid, hi = binned(t.merge_counts, 120, log=True)
        ax.fill_between(xs, lo, hi, color=color, alpha=0.15, linewidth=0)
        ax.plot(xs, mid, color=color, label=f"{t.name} ({t.merge_counts_from})")
    # Logarithmic from 1 up, linear below: a loaded tokenizer's merges that the evaluated text
    # never applies count 0, which a plain log axis cannot draw (the curve broke into pieces).
    ax.set_yscale("symlog", linthresh=1.0, linscale=0.3)
    ax.set_ylim(bottom=0)
    ax.set_xscale("log")
    last = max(len(t.merge_counts or ()) for t in curves)
    for k, (step, label) in enumerate(zip(marks, mark_labels or [""] * len(marks))):
        ax.axvline(step, color="grey", linewidth=0.8, linestyle=":")
        # a mark near the right edge is labelled on its left, inside the plot; each label a
        # line lower than the one before, as marks close on a log axis would overlap
        right = step > last ** 0.9
        ax.annotate(label, (step, 1), xycoords=("data", "axes fraction"),
                    xytext=(-2 if right else 2, -2 - 9 * k), textcoords="offset points",
                    va="top",
                    ha="right" if right else "left", fontsize="x-small", color="grey")
    ax.set_xlabel("merge step (log scale)")
    ax.set_ylabel("count of the merged pair")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    return Plot("plot-merge-counts", "Merge counts by step",
                "How often each merge's pair occurred, by step (line: the mean over neighbouring "
                "steps; band: their p10–p90). Training counts come from the training itself; "
                "for a tokenizer loaded from a file, each merge is counted as it is applied to "
                "the evaluated text (0, at the foot of the axis: merges that text never "
                "applies). Where the curve flattens near the bottom, more merges buy "
                "little.", svg_of(fig))


def missing_plots(ev: Evaluation, *, merges: bool = True) -> list[str]:
    """Why a plot of :func:`standard_plots` is left out, or a tokenizer left out of one: a
    line each, for the page to say."""
    out = []
    reference = ev.settings.get("reference")
    if reference is None:
        out.append("no parity plot: no reference corpus was given (--reference NAME)")
    elif plot_parity(ev) is None:
        out.append(f"no parity plot: no corpus has the lines of {reference} (see the notes)")
    if merges:
        for t in ev.tokenizers:
            if not t.merge_counts:
                model = f" ({t.model})" if t.model else ""
                out.append(f"{t.name}{model}: not in the merge-count plot, it has no merges")
    return out


def standard_plots(ev: Evaluation, *, merges: bool = True) -> list[Plot]:
    """The plots of ``tokenmill eval``: those that apply to this evaluation."""
    makers: list[Callable[[], Plot | None]] = [
        lambda: plot_tokens_per_byte(ev), lambda: plot_parity(ev), lambda: plot_vocab_use(ev),
        lambda: plot_token_lengths(ev), lambda: plot_merge_counts(ev) if merges else None]
    return [p for make in makers if (p := make()) is not None]


# -- the page --------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; color: #222;
       padding: 0 1em; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1.5em; }
th, td { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: right; }
th:nth-child(-n+2), td:nth-child(-n+2) { text-align: left; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; }
figcaption { color: #555; font-size: 14px; max-width: 60em; }
code { background: #f4f4f4; padding: 0 3px; }
"""

# Marks each plot that loaded (and says so where one did not); a viewer, or a test, reads it.
_SCRIPT = """
window.addEventListener("load", function () {
  var ok = 0;
  document.querySelectorAll("figure img").forEach(function (img) {
    var loaded = img.complete && img.naturalWidth > 0;
    img.setAttribute("data-loaded", loaded ? "true" : "false");
    if (loaded) { ok += 1; } else { img.alt = "this plot failed to load"; }
  });
  document.body.setAttribute("data-plots-loaded", String(ok));
});
"""


def html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table of escaped text."""
    e = html.escape
    return ("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr></thead>"
            "<tbody>" + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>"
                                for r in rows) + "</tbody></table>")


def render_html(ev: Evaluation, plots: Sequence[Plot], *, title: str = "tokenmill evaluation",
                intro: str = "", sections: Sequence[tuple[str, str]] = (),
                missing: Sequence[str] = ()) -> str:
    """The whole page: settings, tokenizers, the two tables, the plots, notes, definitions.
    ``sections`` are extra ``(heading, html)`` parts placed before the plots; ``missing``
    says which plots are left out and why (:func:`missing_plots`)."""
    e = html.escape
    s = ev.settings
    tokenizers = html_table(["tokenizer", "source", "vocab rows", "rows unused", "fingerprint"],
                        [[t.name, t.source, f"{t.vocab_size:,}", _pct(t.vocab_unused),
                          t.fingerprint[:16]] for t in ev.tokenizers])
    corpora = html_table(["corpus", "path", "documents", "bytes", "chars"],
                     [[c["name"], c["path"], f"{c['documents']:,}", f"{c['bytes']:,}",
                       f"{c['chars']:,}"] for c in ev.corpora])
    figures = "".join(
        f'<figure id="{p.id}"><h3>{e(p.title)}</h3><img alt="{e(p.title)}" '
        f'src="data:image/svg+xml;base64,{base64.b64encode(p.svg).decode("ascii")}">'
        f"<figcaption>{e(p.caption)}</figcaption></figure>" for p in plots)
    notes = "".join(f"<li>{e(n)}</li>" for n in ev.notes)
    absent = (f'<ul class="missing">{"".join(f"<li>{e(m)}</li>" for m in missing)}</ul>'
              if missing else "")
    extra = "".join(f"<h2>{e(h)}</h2>{body}" for h, body in sections)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>{e(title)}</h1>
<p>{e(intro)}</p>
<h2>Tokenizers</h2>{tokenizers}
{extra}
<h2>Plots</h2>{absent}{figures}
<h2>Tokens per byte and per character</h2>{html_table(*length_rows(ev))}
<h2>Unknown tokens and vocabulary use</h2>{html_table(*coverage_rows(ev))}
<h2>Corpora</h2>{corpora}
{f"<h2>Notes</h2><ul>{notes}</ul>" if notes else ""}
<h2>Definitions</h2>
<ul>
<li>A document is one line of a corpus (one JSON line's text field for .jsonl, one row for
.parquet, a whole file with <code>--whole-file</code>); empty lines are not documents but keep
parallel corpora aligned.</li>
<li><b>tok/B</b>, <b>tok/char</b>: a document's tokens over its UTF-8 bytes or its characters; mean
and percentiles over documents. Percentiles interpolate linearly between the closest ranks
(numpy's default).</li>
<li><b>B/tok</b>: all bytes of the corpus over all its tokens.</li>
<li><b>&gt;{s['context']}</b>: share of documents of more than {s['context']} tokens.</li>
<li><b>unk</b>, <b>fallback</b>: share of tokens that are the unknown token or a
<code>&lt;0xNN&gt;</code> byte token; – where the tokenizer has none.</li>
<li><b>unused</b>, <b>used &lt;{s['rare']}x</b>: share of vocabulary rows (added tokens
included) never used, or used fewer than {s['rare']} times (never included).</li>
<li><b>parity</b>: tokens of a corpus over tokens of the reference corpus
({e(str(s.get('reference')))}) for the same sentences.</li>
</ul>
<p>Evaluated in {ev.seconds:.2f} s by tokenmill.</p>
<script>{_SCRIPT}</script>
</body></html>
"""
