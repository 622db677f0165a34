"""What a piece costs the first time it is met, and after: tokenmill vs tiktoken, one run,
ratios printed.

    python benchmarks/bench_new_pieces.py --repeats 5

A first pass over English (bench_encode's "cold") meets each of its distinct pieces once for
the first time and every other piece again: tokenmill's piece cache answers those, tiktoken
merges every piece every time. How far ahead the first pass can be is then set by what the
new pieces cost. This measures it on the pieces alone: the distinct pieces of an input that are
a space and ASCII letters (" the", " unfathomable": most of English's, and of code's words),
in two sets, those that are one token and those that are more (tiktoken's ids say which), each
set's pieces joined into one text (which the pattern cuts back into exactly those pieces).

A worker (a fresh process per engine and repeat, the engines alternating) loads the encoding,
encodes "x", then encodes the text twice with ``encode_ordinary``: "first", every piece new
to the process, and "again". Nanoseconds a piece, medians over ``--repeats``; ids are checked
against tiktoken's. The input's own counts (pieces, distinct pieces, how many of those are
more than one token) are printed with them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import regex
from bench_bpe import MB, machine_info, serve_worker
from bench_encode import (
    ENCODINGS,
    code,
    digests,
    english,
    open_engine,
    tiktoken_encoding,
)
from bench_unseen import alternating_runs, finish, run_flags

INPUTS = {"english": english, "code": code}
ENGINES = {"tokenmill": {"engine": "tokenmill"}, "tiktoken": {"engine": "tiktoken", "call": "loop"}}
PASSES = ("first", "again")


def worker_pieces(spec: dict[str, Any]) -> dict[str, Any]:
    """Load, then encode the joined pieces twice; nanoseconds a piece of each pass."""
    text = Path(spec["text"]).read_text(encoding="utf-8")
    engine = open_engine(spec)
    engine.one("x")
    out: dict[str, Any] = {}
    for name in PASSES:
        ids = None  # subtle: free the previous pass's result before timing the next
        t0 = time.perf_counter()
        ids = engine.one(text)
        out[f"{name}_ns"] = (time.perf_counter() - t0) * 1e9 / spec["pieces"]
    return out | {"digest": digests([ids])[0]}


WORKERS = {"pieces": worker_pieces}


def piece_sets(name: str, data: Path, mb: float, encoding: str) -> dict[str, Any]:
    """The input's counts and its distinct space-and-letters pieces, split by token count."""
    spec = json.loads((data / "tokenizers" / "tiktoken" / "encodings.json").read_text())
    pattern = regex.compile(spec[encoding]["pat_str"])
    reference = tiktoken_encoding(data, encoding)
    docs, _ = INPUTS[name](data, int(mb * MB))
    total, distinct = 0, set()
    for doc in docs:
        for m in pattern.finditer(doc):
            total += 1
            distinct.add(m.group())
    tokens = {p: len(reference.encode_ordinary(p)) for p in distinct}
    several = sum(n > 1 for n in tokens.values())
    words: dict[str, list[str]] = {"one token": [], "more tokens": []}
    for p in sorted(distinct):
        if len(p) > 1 and p[0] == " " and p[1:].isascii() and p[1:].isalpha():
            words["one token" if tokens[p] == 1 else "more tokens"].append(p)
    for kind, pieces in words.items():
        text = "".join(pieces)
        if [m.group() for m in pattern.finditer(text)] != pieces:
            raise SystemExit(f"{encoding} cuts the joined {kind} pieces of {name} otherwise")
    return {"pieces": total, "distinct": len(distinct), "several": several, "words": words}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    run_flags(p, INPUTS, 5, "MB of each input (default 4)")
    args = p.parse_args(argv)
    if serve_worker(args.worker, WORKERS):
        return 0
    needed = args.data / "tokenizers" / "tiktoken" / "encodings.json"
    if not needed.is_file():
        print(f"bench_new_pieces: {needed} is missing (the shared data; --data)", file=sys.stderr)
        return 2
    engines = list(ENGINES)
    results: dict[str, Any] = {"machine": machine_info(), "rows": []}
    print(f"pieces met first and again, medians of {args.repeats}, nanoseconds a piece")
    print("| encoding | input | pieces | tokenmill first | again | tiktoken | "
          "tiktoken / tokenmill first | again |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    counts = []
    with tempfile.TemporaryDirectory(prefix="bench_new_pieces_") as tmp:
        for name in args.inputs:
            for enc in ENCODINGS:
                sets = piece_sets(name, args.data, args.mb, enc)
                counts.append((enc, name, sets["pieces"], sets["distinct"], sets["several"]))
                for kind, pieces in sets["words"].items():
                    path = Path(tmp) / f"{name}.{enc}.{kind.replace(' ', '_')}.txt"
                    path.write_text("".join(pieces), encoding="utf-8")
                    spec = {"task": "pieces", "data": str(args.data), "encoding": enc,
                            "text": str(path), "pieces": len(pieces)}
                    runs = alternating_runs(engines, args.repeats,
                                            lambda e, spec=spec: spec | ENGINES[e], __file__)
                    if any(run["digest"] != runs["tiktoken"][0]["digest"]
                           for e in engines for run in runs[e]):
                        raise SystemExit(f"tokenmill gave other ids than tiktoken: {enc} {name}")
                    med = {e: {m: statistics.median(run[f"{m}_ns"] for run in runs[e])
                               for m in PASSES} for e in engines}
                    tm, tk = med["tokenmill"], statistics.median(
                        x for run in runs["tiktoken"] for x in (run["first_ns"], run["again_ns"]))
                    row = {"encoding": enc, "input": name, "kind": kind, "count": len(pieces),
                           "tokenmill_first_ns": tm["first"], "tokenmill_again_ns": tm["again"],
                           "tiktoken_ns": tk}
                    results["rows"].append(row)
                    print(f"| {enc} | {name}, {kind} | {len(pieces):,} | {tm['first']:.0f} | "
                          f"{tm['again']:.0f} | {tk:.0f} | {tk / tm['first']:.2f}x | "
                          f"{tk / tm['again']:.2f}x |", flush=True)
    print("\n| encoding | input | pieces | distinct | distinct, more than one token |")
    print("| --- | --- | --- | --- | --- |")
    for enc, name, total, distinct, several in counts:
        print(f"| {enc} | {name} | {total:,} | {distinct:,} | {several:,} |")
    return finish(results, "counts", ("encoding", "input", "pieces", "distinct", "several"),
                  counts, args.json)


if __name__ == "__main__":
    sys.exit(main())
