"""``encode_batch`` with full encodings (ids, offsets, masks), tokenmill vs Hugging Face
``tokenizers``: the same documents, one run, ratios printed.

    python benchmarks/bench_encode_batch.py --repeats 3 --json bench_encode_batch.json

Two tokenizers, each loaded by both libraries from the same file: GPT-2's tokenizer.json
(byte-level BPE, its ByteLevel post-processor) and bert-base-uncased's vocab.txt (the uncased
BERT pipeline, [CLS] ... [SEP] added). Each library's ``encode_batch`` of a whole input, on one
thread and on every core of the machine: the call a Hugging Face user makes, which returns an
Encoding per document. tokenmill's goes through its core on native threads where the
tokenizer allows it (both of these do); tokenizers' parallelizes with Rayon (one thread:
RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false).

As in bench_encode.py, every measurement runs in a fresh subprocess that imports only the engine
it measures, the engines alternate (ABBA over the repeats), the figures are medians over
``--repeats`` runs, and each timed pass follows a warm-up pass over the same documents. The
digests compare every document's ids and offsets between the engines.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_bpe import log, machine_info, serve_worker, verdict
from bench_encode import (
    INPUTS,
    SPEED,
    abba,
    build_inputs,
    digests,
    header_lines,
    input_flags,
    median,
    mismatches,
    output_flags,
    read_docs,
    report,
    speeds,
    utf8_size,
)
from bench_wordpiece import run_worker

FILES = {"gpt2": "tokenizers/gpt2/tokenizer.json", "bert": "tokenizers/bert-base-uncased/vocab.txt"}
ENGINES = ("tokenmill", "tokenizers")


# -- workers: one measurement in a fresh process -----------------------------------------------

def open_batch(spec: dict[str, Any]) -> Any:
    """A function documents -> their Encodings, in ``spec["engine"]``."""
    path, threads = str(Path(spec["data"]) / FILES[spec["tokenizer"]]), spec["threads"]
    if spec["engine"] == "tokenmill":
        import tokenmill

        tm = tokenmill.load(path)
        return lambda docs: tm.encode_batch(docs, num_threads=threads)
    if spec["tokenizer"] == "bert":
        from tokenizers import BertWordPieceTokenizer

        hf = BertWordPieceTokenizer.from_file(path)._tokenizer  # the Tokenizer inside
    else:
        from tokenizers import Tokenizer

        hf = Tokenizer.from_file(path)
    return hf.encode_batch


def worker_encode(spec: dict[str, Any]) -> dict[str, Any]:
    docs = read_docs(spec["docs"])
    t0 = time.perf_counter()
    encode = open_batch(spec)
    encode(["x"])
    load_s = time.perf_counter() - t0
    encode(docs)  # warm-up: tables built, pages touched
    encodings, mb_s, cpu_mb_s = speeds(utf8_size(docs), lambda: encode(docs))
    rows = [[*e.ids, -1, *(x for span in e.offsets for x in span)] for e in encodings] \
        if spec["check"] else []
    return {"load_s": load_s, "mb_s": mb_s, "cpu_mb_s": cpu_mb_s,
            "tokens": sum(len(e.ids) for e in encodings),
            "digests": digests(rows) if spec["check"] else None}


WORKERS = {"encode": worker_encode}


# -- driver --------------------------------------------------------------------------------------

def run_all(args: argparse.Namespace, paths: dict[str, str],
            cores: int) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Every measurement, repeat by repeat; and the documents whose encodings differ, per
    section."""
    runs: dict[str, list[dict[str, Any]]] = {}
    outputs: dict[str, dict[str, list[str]]] = {}
    base = {"data": str(args.data)}
    for r in range(args.repeats):
        for tokenizer in FILES:
            for threads in sorted({1, cores}):
                for name in INPUTS:
                    section = f"{tokenizer}, {threads} thread{'s' if threads > 1 else ''}, {name}"
                    for engine in abba(r, ENGINES):
                        result = run_worker(dict(base, task="encode", engine=engine,
                                                 tokenizer=tokenizer, threads=threads,
                                                 docs=paths[name], check=r == 0),
                                            threads, __file__)
                        if r == 0:
                            outputs.setdefault(section, {})[engine] = result["digests"]
                        del result["digests"]
                        runs.setdefault(f"{section}/{engine}", []).append(result)
                        log(f"[{r}] {section:36s} {engine:10s} {result['mb_s']:6.2f} MB/s")
    return runs, {what: mismatches(*by.values()) for what, by in outputs.items()}


def table_rows(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for key in dict.fromkeys(k.rsplit("/", 1)[0] for k in runs):
        tm, hf = (runs[f"{key}/{e}"] for e in ENGINES)
        ratio = median(tm, "mb_s") / median(hf, "mb_s")
        rows.append({"section": key, "metric": "encode_batch MB/s", "reference": "tokenizers",
                     "tokenmill": median(tm, "mb_s"), "other": median(hf, "mb_s"),
                     "ratio": ratio,
                     "cpu_ratio": median(tm, "cpu_mb_s") / median(hf, "cpu_mb_s"),
                     "better": "higher", "verdict": verdict(ratio, "higher", SPEED)})
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    input_flags(p)
    output_flags(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if serve_worker(args.worker, WORKERS):
        return 0
    started = time.perf_counter()
    info = machine_info()
    with tempfile.TemporaryDirectory(prefix="bench_encode_batch_") as tmp:
        inputs = build_inputs(args, Path(tmp))
        header = header_lines("bench_encode_batch", args, info, inputs,
                              f"tokenizers {info['tokenizers']}",
                              tuple(f"tokenizer {name}: {path}" for name, path in FILES.items()))
        print("\n".join(header), flush=True)
        runs, diffs = run_all(args, {n: i["path"] for n, i in inputs.items()},
                             info["nproc"])
    return report(args, table_rows(runs), diffs, "ids and offsets", started,
                  {"header": header, "machine": info, "inputs": inputs, "runs": runs})


if __name__ == "__main__":
    sys.exit(main())
