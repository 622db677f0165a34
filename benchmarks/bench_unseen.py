"""Encoding text a process has not seen, after it has encoded other text of the same kind:
tokenmill vs tiktoken and gigatoken, one run, ratios printed.

    python benchmarks/bench_unseen.py --repeats 3

bench_encode.py's "cold" pass is the first one of a fresh process: it also pays for what a
process does once (the first writes into the piece cache's pages, the first int object of
each id). A server or a pretraining job meets new documents long after its first one; this
measures that case. Each input's documents are dealt into two halves of about ``--mb`` MB
each, every other document to each: a worker (a fresh process per engine and repeat, the
engines in ABBA order) loads the encoding, encodes the first half untimed, then times the
second half ("unseen": none of its documents met before) and the second half again ("seen").
Medians over ``--repeats``; ids are checked against tiktoken's. tokenmill is measured twice:
``encode_ordinary_batch`` (a list per document, as tiktoken's loop gives) against tiktoken,
``encode_batch_np`` (flat arrays) against gigatoken's ``encode_batch``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_bpe import DEFAULT_DATA, MB, log, machine_info, serve_worker, utf8_size
from bench_encode import (
    ENCODINGS,
    chinese,
    code,
    digests,
    english,
    open_engine,
    read_docs,
    run_worker,
)

INPUTS = {"english": english, "code": code, "chinese": chinese}
# (name, engine spec fields): the rows of each table, and what each is compared with.
ENGINES = {
    "tokenmill": {"engine": "tokenmill"},
    "tokenmill (arrays)": {"engine": "tokenmill", "call": "arrays"},
    "tiktoken": {"engine": "tiktoken", "call": "loop"},
    "gigatoken (arrays)": {"engine": "gigatoken", "call": "arrays"},
}
PAIRS = (("tokenmill", "tiktoken"), ("tokenmill (arrays)", "gigatoken (arrays)"))
METRICS = ("unseen", "seen")


def worker_unseen(spec: dict[str, Any]) -> dict[str, Any]:
    """Load, encode the warm-up documents untimed, then the measured ones twice."""
    warm, docs = read_docs(spec["warm"]), read_docs(spec["docs"])
    size = utf8_size(docs) / MB
    engine = open_engine(spec)
    engine.one("x")
    engine.many(warm)
    out: dict[str, Any] = {}
    for metric in METRICS:
        ids = None  # subtle: free the previous pass's results before timing the next
        t0 = time.perf_counter()
        ids = engine.many(docs)
        out[f"{metric}_mb_s"] = size / (time.perf_counter() - t0)
    return out | {"digests": digests(engine.rows(ids))}


WORKERS = {"unseen": worker_unseen}


def halves(name: str, data: Path, mb: float, work: Path) -> dict[str, str]:
    """The input's first ``2 * mb`` MB of documents dealt into two halves, every other
    document to each (so both hold the same mix: code's five languages, English's books),
    each half written to a file."""
    docs, _ = INPUTS[name](data, int(2 * mb * MB))
    paths = {}
    for part, chunk in (("warm", docs[0::2]), ("docs", docs[1::2])):
        path = work / f"{name}.{part}.json"
        path.write_text(json.dumps(chunk), encoding="utf-8")
        paths[part] = str(path)
    return paths


def run_flags(p: argparse.ArgumentParser, inputs: dict[str, Any], repeats: int,
              mb_help: str) -> None:
    """The flags of a benchmark that runs its engines in workers over some of ``inputs``."""
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--repeats", type=int, default=repeats)
    p.add_argument("--mb", type=float, default=4.0, help=mb_help)
    p.add_argument("--inputs", nargs="+", default=list(inputs), choices=list(inputs))
    p.add_argument("--json", type=Path, help="write the medians here too")
    p.add_argument("--worker", help=argparse.SUPPRESS)


def alternating_runs(engines: list[str], repeats: int,
                     spec_of: Callable[[str], dict[str, Any]],
                     script: str) -> dict[str, list[dict[str, Any]]]:
    """Each engine's worker results (``spec_of(engine)``, a fresh process each) over
    ``repeats`` rounds, the engines' order reversed every other round."""
    runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    for r in range(repeats):
        for e in engines if r % 2 == 0 else engines[::-1]:
            result = run_worker(spec_of(e), script=script)
            assert result is not None
            runs[e].append(result)
    return runs


def finish(results: dict[str, Any], key: str, fields: tuple[str, ...], rows: list[Any],
           path: Path | None) -> int:
    """``rows`` (tuples of ``fields``) as dicts under ``results[key]``, the results written to
    ``path`` if given; the benchmark's exit status."""
    results[key] = [dict(zip(fields, row, strict=True)) for row in rows]
    if path:
        path.write_text(json.dumps(results, indent=1), encoding="utf-8")
    log("done")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    run_flags(p, INPUTS, 3, "MB in each half of an input")
    args = p.parse_args(argv)
    if serve_worker(args.worker, WORKERS):
        return 0
    engines = [e for e, spec in ENGINES.items()
               if spec["engine"] != "gigatoken" or importlib.util.find_spec("gigatoken")]
    results: dict[str, Any] = {"machine": machine_info(), "rows": []}
    print(f"unseen text after {args.mb:g} MB of other text, medians of {args.repeats}")
    print("| encoding | input | engine | unseen MB/s | seen MB/s |")
    print("| --- | --- | --- | --- | --- |")
    ratios = []
    with tempfile.TemporaryDirectory(prefix="bench_unseen_") as tmp:
        for name in args.inputs:
            paths = halves(name, args.data, args.mb, Path(tmp))
            for enc in ENCODINGS:
                runs = alternating_runs(
                    engines, args.repeats,
                    lambda e, enc=enc, paths=paths: {"task": "unseen", "data": str(args.data),
                                                     "encoding": enc, **paths, **ENGINES[e]},
                    __file__)
                reference = runs["tiktoken"][0]["digests"]
                med = {}
                for e in engines:
                    if any(run["digests"] != reference for run in runs[e]):
                        raise SystemExit(f"{e} gave other ids than tiktoken on {enc} {name}")
                    med[e] = {m: statistics.median(run[f"{m}_mb_s"] for run in runs[e])
                              for m in METRICS}
                    print(f"| {enc} | {name} | {e} | {med[e]['unseen']:.1f} | "
                          f"{med[e]['seen']:.1f} |", flush=True)
                    results["rows"].append({"encoding": enc, "input": name, "engine": e, **med[e]})
                for ours, theirs in PAIRS:
                    if theirs in med:
                        ratios.append((enc, name, ours, theirs,
                                       *(med[ours][m] / med[theirs][m] for m in METRICS)))
    print("\n| encoding | input | ratio | unseen | seen |")
    print("| --- | --- | --- | --- | --- |")
    for enc, name, ours, theirs, unseen, seen in ratios:
        print(f"| {enc} | {name} | {ours} / {theirs} | {unseen:.2f}x | {seen:.2f}x |")
    return finish(results, "ratios", ("encoding", "input", "ours", "theirs", "unseen", "seen"),
                  ratios, args.json)


if __name__ == "__main__":
    sys.exit(main())
