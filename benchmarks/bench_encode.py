"""Encoding with tiktoken's encodings, tokenmill vs tiktoken (and vs Hugging Face ``tokenizers``
on GPT-2's tokenizer.json, and vs ``gigatoken``, ``rs-bpe`` and ``tokendagger``, fast native
encoders that install here, when they are installed): the same documents, one run, ratios
printed.

    python benchmarks/bench_encode.py --repeats 3 --json bench_encode.json

Like bench_bpe.py, every measurement runs in a fresh subprocess (this script re-run with
``--worker``) that imports only the engine it measures, the two engines alternate (ABBA order over
the repeats) and the numbers reported are medians over ``--repeats`` runs. "Cold" is the first
pass over an input in a fresh process (tokenmill's word cache starts empty), "warm" the second
pass over the same documents in that process. Loading is timed separately, never inside MB/s.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import hashlib
import importlib.util
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from bench_bpe import (
    DEFAULT_DATA,
    MB,
    head,
    log,
    machine_info,
    read_lines,
    serve_worker,
    utf8_size,
    verdict,
)

ENCODINGS = ("cl100k_base", "o200k_base")
PATTERNS = ("gpt2", "cl100k_base", "o200k_base")  # tiktoken's spelling of each split pattern
INPUTS = ("english", "chinese", "code", "multilingual")
CODE_LANGUAGES = ("c", "go", "javascript", "python", "rust")
GPT2_JSON = "tokenizers/gpt2/tokenizer.json"
SPEED, MEMORY = ("faster", "slower"), ("less", "more")


# -- inputs: lists of documents --------------------------------------------------------------------

def paragraphs(path: Path) -> list[str]:
    """The paragraphs of a text file: blocks separated by blank lines."""
    text = path.read_text(encoding="utf-8")
    return [p for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def english(data: Path, budget: int) -> tuple[list[str], str]:
    books = sorted((data / "text" / "en" / "gutenberg").glob("*.txt"))
    docs: list[str] = []
    used = []
    for book in books:
        paras = paragraphs(book)
        taken = head(paras, budget - utf8_size(docs))
        docs += taken
        used.append(book.stem)
        if len(taken) < len(paras):
            break
    return docs, (f"text/en/gutenberg/*.txt in sorted order, {len(used)} book(s) ({used[0]} .. "
                  f"{used[-1]}, the last one cut); a paragraph per document")


def chinese(data: Path, budget: int) -> tuple[list[str], str]:
    """The novels have one paragraph per line (their blank lines were dropped upstream)."""
    zh = data / "text" / "zh"
    docs = head(read_lines(zh / "xiyouji.txt") + read_lines(zh / "hongloumeng.txt"), budget)
    return docs, ("text/zh/xiyouji.txt, then hongloumeng.txt up to the budget; a line (= a "
                  "paragraph, the files have no blank lines) per document")


def code(data: Path, budget: int) -> tuple[list[str], str]:
    docs: list[str] = []
    for language in CODE_LANGUAGES:
        with open(data / "code" / f"{language}.jsonl", encoding="utf-8") as f:
            files = [json.loads(line)["text"] for line in f]
        docs += head(files, budget // len(CODE_LANGUAGES))
    return docs, (f"code/{{{','.join(CODE_LANGUAGES)}}}.jsonl, field text, the first files of "
                  f"each language up to a fifth of the budget; a source file per document")


def multilingual(data: Path, scale: float) -> tuple[list[str], str]:
    files = sorted((data / "text" / "flores200_dev").glob("*.dev.gz"))
    per_file = [read_lines(p) for p in files]
    keep = max(1, round(len(per_file[0]) * min(scale, 1.0)))
    docs = [line for lines in per_file for line in lines[:keep]]
    return docs, (f"text/flores200_dev/*.dev.gz, {len(files)} languages x {keep} lines; a line "
                  f"per document")


def build_inputs(args: argparse.Namespace, work: Path) -> dict[str, dict[str, Any]]:
    """Write each input's documents to a JSON file for the workers; return what each one is."""
    def budget(mb: float) -> int:
        return int(mb * args.scale * MB)

    builders = {"english": lambda: english(args.data, budget(args.english_mb)),
                "chinese": lambda: chinese(args.data, budget(args.chinese_mb)),
                "code": lambda: code(args.data, budget(args.code_mb)),
                "multilingual": lambda: multilingual(args.data, args.scale)}
    inputs = {}
    for name in INPUTS:
        docs, what = builders[name]()
        path = work / f"{name}.json"
        path.write_text(json.dumps(docs), encoding="utf-8")
        inputs[name] = {"path": str(path), "mb": utf8_size(docs) / MB, "docs": len(docs),
                        "what": what}
    return inputs


def sample(docs: list[str], budget: int) -> list[str]:
    """About ``budget`` bytes of documents taken evenly across the list."""
    return docs[::max(1, math.ceil(utf8_size(docs) / budget))]


# -- the engines (imported only inside the worker that measures one) ---------------------------

@dataclass
class Engine:
    one: Callable[[str], Any]  # encode one text (the load measurement's single call)
    many: Callable[[list[str]], Any]  # encode a list of documents
    # The result of ``many`` as one id sequence per document (for the digests and token
    # counts, outside the timing); lists already are.
    rows: Callable[[Any], list[Any]] = list


def tiktoken_encoding(data: Path, name: str, factory: Callable[..., Any] | None = None) -> Any:
    """tiktoken's encoding ``name`` from the ranks file in ``data``, made by ``factory`` (a
    class called as ``tiktoken.Encoding`` is; that one by default)."""
    import tiktoken
    import tiktoken.load

    spec = json.loads((data / "tokenizers" / "tiktoken" / "encodings.json").read_text())[name]
    ranks = tiktoken.load.load_tiktoken_bpe(str(data / spec["file"]))
    return (factory or tiktoken.Encoding)(name=name, pat_str=spec["pat_str"],
                                          mergeable_ranks=ranks,
                                          special_tokens=spec["special_tokens"])


def open_engine(spec: dict[str, Any]) -> Engine:
    """Load ``spec["encoding"]`` (a tiktoken encoding name, or "gpt2" for GPT-2's
    tokenizer.json) in ``spec["engine"]``."""
    data, name, threads = Path(spec["data"]), spec["encoding"], spec.get("threads", 1)
    if spec["engine"] == "tokenmill":
        import tokenmill

        tm = (tokenmill.load(data / GPT2_JSON) if name == "gpt2" else
              tokenmill.load(name, path=data / "tokenizers" / "tiktoken" / f"{name}.tiktoken"))
        if spec.get("call") == "arrays":  # every document's ids in one numpy array
            # (its first call imports numpy: timed with the load, as gigatoken's import is)
            return Engine(lambda text: tm.encode_batch_np([text], num_threads=threads),
                          lambda docs: tm.encode_batch_np(docs, num_threads=threads),
                          lambda r: split_flat(r["ids"], r["offsets"]))
        return Engine(tm.encode_ordinary,
                      lambda docs: tm.encode_ordinary_batch(docs, num_threads=threads))
    if spec["engine"] == "tiktoken":
        tt = tiktoken_encoding(data, name)
        if spec["call"] == "loop":
            return Engine(tt.encode_ordinary, lambda docs: [tt.encode_ordinary(d) for d in docs])
        return Engine(tt.encode_ordinary,
                      lambda docs: tt.encode_ordinary_batch(docs, num_threads=threads))
    if spec["engine"] == "gigatoken":
        import gigatoken

        native = gigatoken.Tokenizer.from_tiktoken(
            data / "tokenizers" / "tiktoken" / f"{name}.tiktoken")
        if spec.get("call") == "arrays":
            # Its own batch call: every document's ids in one awkward Array (flat ids and
            # offsets, as encode_batch_np's), no Python object per token.
            return Engine(lambda text: native.encode_batch([text], parallel=threads > 1),
                          lambda docs: native.encode_batch(docs, parallel=threads > 1),
                          gigatoken_rows)
        gt = native.as_tiktoken()
        return Engine(gt.encode_ordinary, lambda docs: [gt.encode_ordinary(d) for d in docs])
    if spec["engine"] == "tokendagger":
        import tokendagger

        td = tiktoken_encoding(data, name, tokendagger.Encoding)  # takes tiktoken's arguments
        return Engine(td.encode_ordinary, lambda docs: [td.encode_ordinary(d) for d in docs])
    if spec["engine"] == "rs-bpe":
        import rs_bpe

        rb = getattr(rs_bpe.openai, name)()  # its own copy of OpenAI's ranks, shipped inside
        return Engine(rb.encode, lambda docs: [rb.encode(d) for d in docs])
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(str(data / GPT2_JSON))
    return Engine(lambda text: hf.encode(text, add_special_tokens=False).ids,
                  lambda docs: [e.ids for e in hf.encode_batch_fast(docs,
                                                                    add_special_tokens=False)])


def split_flat(ids: Any, offsets: Any) -> list[Any]:
    """One array per document from flat ids and n + 1 offsets."""
    return [ids[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def gigatoken_rows(result: Any) -> list[Any]:
    """One array per document from gigatoken's awkward Array."""
    import awkward as ak
    import numpy as np

    offsets = np.zeros(len(result) + 1, dtype=np.int64)
    np.cumsum(ak.num(result).to_numpy(), out=offsets[1:])
    return split_flat(ak.flatten(result).to_numpy(), offsets)


def digests(seqs: list[Any]) -> list[str]:
    """A short hash of each document's ids (or piece ends), to compare engines' outputs."""
    return [hashlib.blake2b(array("q", map(int, s)).tobytes(), digest_size=8).hexdigest()
            for s in seqs]


def speeds(size: int, run: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, MB/s of wall time, MB/s of this process's CPU time) of one call. Both are kept:
    on a shared machine the CPU-time figure is the less disturbed one for a single thread."""
    w0, c0 = time.perf_counter(), time.process_time()
    result = run()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return result, size / MB / wall, size / MB / max(cpu, 1e-9)


def read_docs(path: str) -> list[str]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


# -- workers: one measurement in a fresh process -----------------------------------------------

def worker_encode(spec: dict[str, Any]) -> dict[str, Any]:
    """Load (and encode "x": tokenmill builds its native model on first use), then encode the
    documents twice: cold, then warm."""
    docs = read_docs(spec["docs"])
    size = utf8_size(docs)
    t0 = time.perf_counter()
    engine = open_engine(spec)
    engine.one("x")  # a single-token word: tokenmill's word cache stays empty
    load_s = time.perf_counter() - t0
    out: dict[str, Any] = {"load_s": load_s}
    for metric in ("cold", "warm"):
        ids = None  # subtle: free the previous pass's results before timing the next
        ids, out[f"{metric}_mb_s"], out[f"{metric}_cpu_mb_s"] = speeds(
            size, lambda: engine.many(docs))
    rows = engine.rows(ids)
    return out | {"tokens": sum(map(len, rows)),
                  "digests": digests(rows) if spec["check"] else None}


def worker_calibrate(spec: dict[str, Any]) -> dict[str, Any]:
    """tiktoken's warm MB/s with a loop of encode_ordinary and with encode_ordinary_batch(
    num_threads=1), best of two alternated passes each, on a sample of every input."""
    engines = {call: open_engine(dict(spec, call=call)) for call in ("loop", "batch")}
    out = {}
    for name, path in spec["inputs"].items():
        docs = sample(read_docs(path), int(spec["sample_mb"] * MB))
        engines["loop"].many(docs)  # warm-up
        best = dict.fromkeys(engines, 0.0)
        for _ in range(2):
            for call, engine in engines.items():
                t0 = time.perf_counter()
                engine.many(docs)
                best[call] = max(best[call], utf8_size(docs) / MB / (time.perf_counter() - t0))
        out[name] = best
    return out


def worker_pretokenize(spec: dict[str, Any]) -> dict[str, Any]:
    """One pass of the split pattern over each input's documents: the core's scanner, or the
    ``regex`` module's findall with the pattern compiled beforehand."""
    data = Path(spec["data"])
    pattern = json.loads((data / "tokenizers" / "tiktoken" / "encodings.json").read_text())[
        spec["pattern"]]["pat_str"]
    if spec["engine"] == "core":
        from tokenmill import _core
        from tokenmill.pre_tokenizers import NATIVE_PATTERNS

        split: Callable[[str], Any] = functools.partial(_core.pretokenize, NATIVE_PATTERNS[pattern])
    else:
        import regex

        split = regex.compile(pattern).findall
    split("warm up: it's 2024!")
    out = {}
    for name, path in spec["inputs"].items():
        docs = read_docs(path)
        pieces, mb_s, cpu_mb_s = speeds(utf8_size(docs), lambda docs=docs: list(map(split, docs)))
        ends = pieces if spec["engine"] == "core" else [ends_of(p) for p in pieces]
        out[name] = {"mb_s": mb_s, "cpu_mb_s": cpu_mb_s,
                     "digests": digests(ends) if spec["check"] else None}
    return out


def ends_of(pieces: list[str]) -> list[int]:
    """Character offsets where each piece ends (what ``_core.pretokenize`` returns)."""
    at, ends = 0, []
    for piece in pieces:
        at += len(piece)
        ends.append(at)
    return ends


def memory_mib(field: str) -> float:
    """A memory figure of this process from /proc/self/status: VmRSS (now) or VmHWM (peak).

    subtle: not ``ru_maxrss``: Linux carries it over fork and exec, so a worker would report
    at least the driver's size at the time it was started."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def worker_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Import, load and encode one short text; peak RSS over the interpreter's own baseline."""
    gc.collect()
    baseline = memory_mib("VmRSS")
    t0 = time.perf_counter()
    __import__(spec["engine"])
    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine = open_engine(spec)
    engine.one("x")
    load_s = time.perf_counter() - t0
    peak = memory_mib("VmHWM")
    return {"import_s": import_s, "load_s": load_s, "baseline_mib": baseline,
            "peak_rss_mib": peak, "rss_delta_mib": peak - baseline}


WORKERS = {"encode": worker_encode, "calibrate": worker_calibrate,
           "pretokenize": worker_pretokenize, "load": worker_load}


# -- driver --------------------------------------------------------------------------------------

def run_worker(spec: dict[str, Any], fail_ok: bool = False,
               script: str = __file__) -> dict[str, Any] | None:
    """Run one measurement in a fresh interpreter (``script --worker SPEC``: this one's workers
    by default). tiktoken reads its ranks file without its disk cache; tokenizers runs serially
    (it only takes part in 1-thread measurements)."""
    # (OPENBLAS_NUM_THREADS: numpy's import starts a BLAS thread that spun on the second core
    # during the measurement in some workers; nothing here uses BLAS.)
    env = dict(os.environ, TIKTOKEN_CACHE_DIR="", RAYON_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, script, "--worker", json.dumps(spec)],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        if fail_ok:
            log(f"worker {spec['task']} {spec.get('engine')} failed: "
                f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
            return None
        raise SystemExit(f"worker {spec} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def abba(r: int, engines: tuple[str, str]) -> tuple[str, str]:
    """tokenmill first in even repeats, the reference first in odd ones."""
    return engines if r % 2 == 0 else engines[::-1]


@dataclass
class Comparison:
    """tokenmill against one reference engine on one encoding, input and thread count."""
    section: str
    encoding: str
    input: str
    reference: dict[str, Any]  # the reference engine's spec fields
    threads: int = 1
    tokenmill_call: str | None = None  # "arrays": tokenmill's encode_batch_np

    def label(self) -> str:
        """The reference as named in the table: "tiktoken (loop)", "tokenizers"."""
        call = self.reference.get("call")
        if call == "arrays":
            return f"{self.reference['engine']} (encode_batch)"
        return self.reference["engine"] + (f" ({call})" if call else "")


def comparisons(calls: dict[str, dict[str, str]], gpt2_ok: bool) -> list[Comparison]:
    out = [Comparison(f"{enc}, {name}", enc, name, {"engine": "tiktoken", "call": calls[enc][name]})
           for enc in ENCODINGS for name in INPUTS]
    if gpt2_ok:
        out += [Comparison(f"gpt2 tokenizer.json, {name}", "gpt2", name, {"engine": "tokenizers"})
                for name in INPUTS]
    # The fast native encoders that install here and read these encodings offline (tokendagger
    # builds where PCRE2's headers are, `apt-get install libpcre2-dev`; tokie and wordchipper
    # fetch their files).
    for peer, module in (("gigatoken", "gigatoken"), ("rs-bpe", "rs_bpe"),
                         ("tokendagger", "tokendagger")):
        if importlib.util.find_spec(module) is not None:
            out += [Comparison(f"{enc}, {name}, vs {peer}", enc, name, {"engine": peer})
                    for enc in ENCODINGS for name in INPUTS]
    # gigatoken's fastest call returns arrays, not lists: measured beside tokenmill's own
    # array call (encode_batch_np), the two doing the same work.
    if importlib.util.find_spec("gigatoken") is not None:
        out += [Comparison(f"{enc}, {name}, arrays vs gigatoken", enc, name,
                           {"engine": "gigatoken", "call": "arrays"}, tokenmill_call="arrays")
                for enc in ENCODINGS for name in INPUTS]
    out += [Comparison(f"{enc}, english, 2 threads", enc, "english",
                       {"engine": "tiktoken", "call": "batch"}, threads=2) for enc in ENCODINGS]
    return out


def choose_calls(args: argparse.Namespace, base: dict[str, Any],
                 paths: dict[str, str]) -> tuple[dict[str, dict[str, str]], dict[str, Any]]:
    """Which tiktoken call is faster on each encoding and input (or the one forced)."""
    if args.tiktoken_call != "auto":
        return {e: dict.fromkeys(INPUTS, args.tiktoken_call) for e in ENCODINGS}, {}
    speeds = {enc: run_worker(dict(base, task="calibrate", engine="tiktoken", encoding=enc,
                                   inputs=paths, sample_mb=args.calibrate_mb))
              for enc in ENCODINGS}
    calls = {enc: {name: max(s, key=s.get) for name, s in per_input.items()}
             for enc, per_input in speeds.items()}
    return calls, speeds


def run_all(args: argparse.Namespace, base: dict[str, Any], comps: list[Comparison],
            paths: dict[str, str]) -> tuple[dict[str, Any], dict[str, dict[str, list[str]]]]:
    """Every measurement, repeat by repeat, so slow drift of a shared machine hits all alike.
    Returns the runs and, from the first repeat, each comparison's per-document digests by
    engine."""
    runs: dict[str, Any] = {"encode": {}, "pretokenize": {}, "load": {}}
    outputs: dict[str, dict[str, list[str]]] = {}
    for r in range(args.repeats):
        for comp in comps:
            for engine in abba(r, ("tokenmill", comp.reference["engine"])):
                spec = dict(base, task="encode", encoding=comp.encoding, docs=paths[comp.input],
                            threads=comp.threads, check=r == 0, engine=engine)
                if engine != "tokenmill":
                    spec.update(comp.reference)
                elif comp.tokenmill_call:
                    spec["call"] = comp.tokenmill_call
                result = run_worker(spec)
                if r == 0:
                    outputs.setdefault(comp.section, {})[engine] = result["digests"]
                del result["digests"]
                runs["encode"].setdefault(f"{comp.section}/{engine}", []).append(result)
                log(f"[{r}] {comp.section:32s} {engine:10s} cold {result['cold_mb_s']:6.2f} "
                    f"warm {result['warm_mb_s']:6.2f} MB/s")
        for pattern in PATTERNS:
            for engine in abba(r, ("core", "regex")):
                result = run_worker(dict(base, task="pretokenize", engine=engine, pattern=pattern,
                                         inputs=paths, check=r == 0))
                for name, v in result.items():
                    if r == 0:
                        outputs.setdefault(f"pre-tokenizer {pattern}, {name}", {})[engine] = \
                            v["digests"]
                    del v["digests"]
                runs["pretokenize"].setdefault(f"{pattern}/{engine}", []).append(result)
                log(f"[{r}] pretokenize {pattern:11s} {engine:5s} " + ", ".join(
                    f"{name} {v['mb_s']:.1f}" for name, v in result.items()) + " MB/s")
        for enc in ENCODINGS:
            for engine in abba(r, ("tokenmill", "tiktoken")):
                result = run_worker(dict(base, task="load", engine=engine, encoding=enc,
                                         call="loop"))
                runs["load"].setdefault(f"{enc}/{engine}", []).append(result)
                log(f"[{r}] load {enc} {engine:9s} {result['load_s']:.3f} s, "
                    f"+{result['rss_delta_mib']:.0f} MiB")
    return runs, outputs


def mismatches(a: list[str], b: list[str]) -> int:
    return sum(x != y for x, y in zip(a, b, strict=True))


# -- report --------------------------------------------------------------------------------------

def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def table_rows(runs: dict[str, Any], comps: list[Comparison]) -> list[dict[str, Any]]:
    rows = []

    def add(section: str, metric: str, ref: str, tm: float, other: float, better: str,
            words: tuple[str, str], cpu_ratio: float | None = None,
            paired: float | None = None) -> None:
        ratio = tm / other
        rows.append({"section": section, "metric": metric, "reference": ref, "tokenmill": tm,
                     "other": other, "ratio": ratio, "cpu_ratio": cpu_ratio, "paired": paired,
                     "better": better, "verdict": verdict(ratio, better, words)})

    for comp in comps:
        tm = runs["encode"][f"{comp.section}/tokenmill"]
        ref = runs["encode"][f"{comp.section}/{comp.reference['engine']}"]
        for metric in ("cold", "warm"):
            cpu, speed = f"{metric}_cpu_mb_s", f"{metric}_mb_s"
            # Each repeat runs the two engines one after the other: the ratio within a repeat
            # is what a machine whose speed drifts between repeats changes least.
            paired = statistics.median(t[speed] / r[speed] for t, r in zip(tm, ref, strict=True))
            add(comp.section, f"{metric} MB/s", comp.label(), median(tm, speed),
                median(ref, speed), "higher", SPEED, median(tm, cpu) / median(ref, cpu), paired)
    for pattern in PATTERNS:
        core, rx = runs["pretokenize"][f"{pattern}/core"], runs["pretokenize"][f"{pattern}/regex"]
        for name in INPUTS:
            tm_cpu, rx_cpu = (statistics.median(run[name]["cpu_mb_s"] for run in r)
                              for r in (core, rx))
            add(f"pre-tokenizer {pattern}", f"{name} MB/s", "regex.findall",
                statistics.median(run[name]["mb_s"] for run in core),
                statistics.median(run[name]["mb_s"] for run in rx), "higher", SPEED,
                tm_cpu / rx_cpu)
    for enc in ENCODINGS:
        tm, tt = runs["load"][f"{enc}/tokenmill"], runs["load"][f"{enc}/tiktoken"]
        section = f"load {enc}"
        add(section, "import s", "tiktoken", median(tm, "import_s"), median(tt, "import_s"),
            "lower", SPEED)
        add(section, "load + 1 encode, s", "tiktoken", median(tm, "load_s"),
            median(tt, "load_s"), "lower", SPEED)
        add(section, "peak RSS - baseline, MiB", "tiktoken", median(tm, "rss_delta_mib"),
            median(tt, "rss_delta_mib"), "lower", MEMORY)
    return rows


def number(x: float) -> str:
    return f"{x:,.0f}" if x >= 1e4 else f"{x:.3g}"


def format_table(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    header = ("section", "metric", "vs", "tokenmill", "other", "tm/other", "reading",
              "CPU tm/other", "paired tm/other")
    cells = [header] + [(r["section"], r["metric"], r["reference"], number(r["tokenmill"]),
                         number(r["other"]), f"{r['ratio']:.2f}", r["verdict"],
                         "" if r["cpu_ratio"] is None else f"{r['cpu_ratio']:.2f}",
                         "" if r.get("paired") is None else f"{r['paired']:.2f}")
                        for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    sep, edge = (" | ", "| ") if markdown else ("  ", "")
    out = []
    for n, line in enumerate(cells):
        out.append((edge + sep.join(c.ljust(w) for c, w in zip(line, widths)) + edge[::-1])
                   .rstrip())
        if n == 0:
            out.append((edge + sep.join("-" * w for w in widths) + edge[::-1]).rstrip())
    out += [""] if markdown else []
    out.append("tm/other = tokenmill / the engine named in 'vs' (the 'other' column): for MB/s "
               "> 1 means tokenmill is faster; for seconds and MiB < 1 means tokenmill is better.\n"
               "CPU tm/other: the same ratio of MB per CPU-second of each process (medians); on a "
               "shared machine it is the steadier figure for one thread; with 2 threads it\n"
               "compares CPU spent, not speed. Paired tm/other: the median, over the repeats, of "
               "the ratio within each repeat (whose two runs follow each other).")
    return "\n".join(out)


def input_flags(p: argparse.ArgumentParser) -> None:
    """The flags that choose the inputs (bench_wordpiece.py takes the same)."""
    p.add_argument("--data", type=Path, default=DEFAULT_DATA,
                   help="the shared data directory (default: the repository's ../shared/data)")
    p.add_argument("--repeats", type=int, default=3, help="runs per measurement (default 3)")
    p.add_argument("--english-mb", type=float, default=4.0, help="default 4")
    p.add_argument("--chinese-mb", type=float, default=3.0, help="default 3")
    p.add_argument("--code-mb", type=float, default=4.0, help="default 4")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply every input's size (FLORES: lines per language) by this, for "
                        "quick runs (default 1)")


def header_lines(script: str, args: argparse.Namespace, info: dict[str, Any],
                 inputs: dict[str, dict[str, Any]], peers: str,
                 before_inputs: tuple[str, ...] = ()) -> list[str]:
    """A run's first lines: what ran when, on what machine, against which versions
    (``peers``), then ``before_inputs`` and one line an input (bench_wordpiece.py and
    bench_encode_batch.py start the same way)."""
    return [
        (f"{script}: medians of {args.repeats} runs (each in a fresh process), "
         f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"),
        f"machine: {info['nproc']} CPUs, {info['cpu']}; {info['platform']}",
        (f"python {info['python']}, tokenmill {info['tokenmill']} ({info['tokenmill_commit']}), "
         f"{peers}"),
        *before_inputs,
        *(f"input {name}: {i['mb']:.2f} MB, {i['docs']:,} documents: {i['what']}"
          for name, i in inputs.items()),
    ]


def report(args: argparse.Namespace, rows: list[dict[str, Any]], diffs: dict[str, int],
           compared: str, started: float, record: dict[str, Any]) -> int:
    """The end of a run: the table, how many documents differ (``compared``: what is compared)
    and the run's time printed; ``record`` with the arguments, the rows and the mismatches
    written to --json. 1 if any document differs (bench_wordpiece.py and
    bench_encode_batch.py end the same way)."""
    print()
    print(format_table(rows, args.markdown))
    bad = {k: n for k, n in diffs.items() if n}
    print(f"mismatching documents ({compared}; must be 0): {sum(diffs.values())} over "
          f"{len(diffs)} comparisons"
          + (": " + ", ".join(f"{k} {n}" for k, n in bad.items()) if bad else ""))
    print(f"total benchmark time {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({
            **record, "args": {k: str(v) for k, v in vars(args).items()}, "rows": rows,
            "mismatches": diffs}, indent=2) + "\n")
    return 1 if bad else 0


def output_flags(p: argparse.ArgumentParser) -> None:
    """--json, --markdown and the driver's --worker (bench_wordpiece.py and
    bench_encode_batch.py take the same)."""
    p.add_argument("--json", type=Path, help="also write every run and the table here")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--worker", help=argparse.SUPPRESS)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    input_flags(p)
    p.add_argument("--tiktoken-call", choices=("auto", "loop", "batch"), default="auto",
                   help="tiktoken's single-thread call: a loop of encode_ordinary, "
                        "encode_ordinary_batch(num_threads=1), or whichever is faster on a "
                        "sample of each input (default auto)")
    p.add_argument("--calibrate-mb", type=float, default=1.0,
                   help="sample size per input for --tiktoken-call auto, MB (default 1)")
    output_flags(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if serve_worker(args.worker, WORKERS):
        return 0
    with tempfile.TemporaryDirectory(prefix="bench_encode_") as tmp:
        return benchmark(args, Path(tmp))


def benchmark(args: argparse.Namespace, work: Path) -> int:
    started = time.perf_counter()
    inputs = build_inputs(args, work)
    paths = {name: i["path"] for name, i in inputs.items()}
    base = {"data": str(args.data)}
    info = dict(machine_info(), tiktoken=metadata.version("tiktoken"))
    header = header_lines("bench_encode", args, info, inputs,
                          f"tiktoken {info['tiktoken']}, tokenizers {info['tokenizers']}")
    print("\n".join(header), flush=True)

    calls, calibration = choose_calls(args, base, paths)
    for enc, per_input in calibration.items():
        header.append(f"tiktoken call, {enc} (warm MB/s on a {args.calibrate_mb:g} MB sample): "
                      + "; ".join(f"{name} loop {s['loop']:.2f} vs batch {s['batch']:.2f} -> "
                                  f"{calls[enc][name]}" for name, s in per_input.items()))
        print(header[-1], flush=True)
    gpt2_ok = run_worker(dict(base, task="load", engine="tokenmill", encoding="gpt2"),
                         fail_ok=True) is not None
    if not gpt2_ok:
        header.append(f"note: tokenmill cannot load {GPT2_JSON} yet; its rows are skipped")
        print(header[-1], flush=True)

    comps = comparisons(calls, gpt2_ok)
    runs, outputs = run_all(args, base, comps, paths)
    diffs = {what: mismatches(*by_engine.values()) for what, by_engine in outputs.items()}
    rows = table_rows(runs, comps)

    return report(args, rows, diffs, "ids, or pre-tokenizer piece ends", started, {
        "header": header, "machine": info, "inputs": inputs, "tiktoken_calls": calls,
        "calibration": calibration, "runs": runs})


if __name__ == "__main__":
    sys.exit(main())
