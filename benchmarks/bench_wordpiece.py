"""WordPiece (BERT) encoding and training, tokenmill vs Hugging Face ``tokenizers``: the same
documents, one run, ratios printed.

    python benchmarks/bench_wordpiece.py --repeats 3 --json bench_wordpiece.json

Encoding uses bert-base-uncased's vocab.txt in both (``tokenmill.load`` and
``BertWordPieceTokenizer.from_file``), on bench_encode.py's four inputs, with three calls:
``encode`` of each document (full encodings: [CLS]/[SEP], offsets), one thread; the ids of the
whole list with one thread (``encode_ordinary_batch`` vs ``encode_batch_fast``); the same with
two threads. Training learns 30,000 tokens from bench_bpe.py's ~10 MB corpus with each library's
WordPiece trainer: note that ``tokenizers``' WordPieceTrainer trains BPE (by pair count) and
converts the result, while tokenmill's merges by the likelihood criterion, so the two do not
learn the same vocabulary (their tokens per byte on the corpus are printed beside the times).

As in bench_encode.py, every measurement runs in a fresh subprocess that imports only the engine
it measures, the engines alternate (ABBA over the repeats), the figures are medians over
``--repeats`` runs, and each encoding pass follows a warm-up pass over the same documents.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_bpe import log, machine_info, serve_worker, training_corpus, utf8_size, verdict
from bench_encode import (
    INPUTS,
    MEMORY,
    SPEED,
    abba,
    build_inputs,
    digests,
    header_lines,
    input_flags,
    median,
    memory_mib,
    mismatches,
    output_flags,
    read_docs,
    report,
    speeds,
)

VOCAB = "tokenizers/bert-base-uncased/vocab.txt"
CALLS = {"encode": 1, "ids batch": 1, "ids batch, 2 threads": 2}  # call -> threads
ENGINES = ("tokenmill", "tokenizers")


# -- workers: one measurement in a fresh process -----------------------------------------------

def open_encoder(spec: dict[str, Any]) -> Any:
    """A function documents -> their ids, in ``spec["engine"]`` with ``spec["call"]``."""
    path, threads = str(Path(spec["data"]) / VOCAB), CALLS[spec["call"]]
    if spec["engine"] == "tokenmill":
        import tokenmill

        tm = tokenmill.load(path)
        if spec["call"] == "encode":
            return lambda docs: [tm.encode(d).ids for d in docs]
        return lambda docs: tm.encode_ordinary_batch(docs, num_threads=threads)
    from tokenizers import BertWordPieceTokenizer

    hf = BertWordPieceTokenizer.from_file(path)._tokenizer  # the Tokenizer inside
    if spec["call"] == "encode":
        return lambda docs: [hf.encode(d).ids for d in docs]
    return lambda docs: [e.ids for e in hf.encode_batch_fast(docs, add_special_tokens=False)]


def worker_encode(spec: dict[str, Any]) -> dict[str, Any]:
    docs = read_docs(spec["docs"])
    t0 = time.perf_counter()
    encode = open_encoder(spec)
    encode(["x"])
    load_s = time.perf_counter() - t0
    encode(docs)  # warm-up: tables built, pages touched
    ids, mb_s, cpu_mb_s = speeds(utf8_size(docs), lambda: encode(docs))
    return {"load_s": load_s, "mb_s": mb_s, "cpu_mb_s": cpu_mb_s,
            "tokens": sum(map(len, ids)), "digests": digests(ids) if spec["check"] else None}


def worker_train(spec: dict[str, Any]) -> dict[str, Any]:
    """Train on the corpus, then count its tokens with the trained tokenizer."""
    lines = read_docs(spec["docs"])
    baseline = memory_mib("VmRSS")
    t0 = time.perf_counter()
    if spec["engine"] == "tokenmill":
        import tokenmill
        from tokenmill.bert import BertNormalizer, BertPreTokenizer

        tm = tokenmill.Tokenizer(tokenmill.WordPiece({}), normalizer=BertNormalizer(),
                                 pre_tokenizer=BertPreTokenizer())
        tm.train_from_iterator(lines, tokenmill.WordPieceTrainer(vocab_size=spec["vocab_size"]))
        train_s = time.perf_counter() - t0
        vocab = tm.get_vocab_size()
        tokens = sum(map(len, tm.encode_ordinary_batch(lines, num_threads=1)))
    else:
        from tokenizers import BertWordPieceTokenizer

        hf = BertWordPieceTokenizer()
        hf.train_from_iterator(lines, vocab_size=spec["vocab_size"], min_frequency=0,
                               limit_alphabet=10**6, show_progress=False)
        train_s = time.perf_counter() - t0
        vocab = hf.get_vocab_size()
        tokens = sum(len(e.ids) for e in hf.encode_batch(lines, add_special_tokens=False))
    return {"train_s": train_s, "peak_rss_mib": memory_mib("VmHWM") - baseline, "vocab": vocab,
            "tokens_per_byte": tokens / utf8_size(lines)}


WORKERS = {"encode": worker_encode, "train": worker_train}


# -- driver --------------------------------------------------------------------------------------

def run_worker(spec: dict[str, Any], threads: int, script: str = __file__) -> dict[str, Any]:
    """One measurement in a fresh interpreter running ``script``'s workers; ``tokenizers`` gets
    ``threads`` Rayon threads."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="true" if threads > 1 else "false")
    proc = subprocess.run([sys.executable, script, "--worker", json.dumps(spec)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"worker {spec['task']} {spec['engine']} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_all(args: argparse.Namespace, paths: dict[str, str],
            corpus: str) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Every measurement, repeat by repeat; and the documents whose ids differ, per section."""
    runs: dict[str, list[dict[str, Any]]] = {}
    outputs: dict[str, dict[str, list[str]]] = {}
    base = {"data": str(args.data)}
    for r in range(args.repeats):
        for call, threads in CALLS.items():
            for name in INPUTS:
                for engine in abba(r, ENGINES):
                    result = run_worker(dict(base, task="encode", engine=engine, call=call,
                                             docs=paths[name], check=r == 0), threads)
                    if r == 0:
                        outputs.setdefault(f"{call}, {name}", {})[engine] = result["digests"]
                    del result["digests"]
                    runs.setdefault(f"{call}, {name}/{engine}", []).append(result)
                    log(f"[{r}] {call:20s} {name:12s} {engine:10s} {result['mb_s']:6.2f} MB/s")
        if args.train_mb:
            for engine in abba(r, ENGINES):
                result = run_worker(dict(base, task="train", engine=engine, docs=corpus,
                                         vocab_size=args.vocab_size), 1)
                runs.setdefault(f"train/{engine}", []).append(result)
                log(f"[{r}] train {engine:10s} {result['train_s']:.2f} s, "
                    f"+{result['peak_rss_mib']:.0f} MiB")
    return runs, {what: mismatches(*by.values()) for what, by in outputs.items()}


def table_rows(runs: dict[str, list[dict[str, Any]]], train: bool) -> list[dict[str, Any]]:
    rows = []

    def add(section: str, metric: str, tm: float, other: float, better: str,
            words: tuple[str, str], cpu_ratio: float | None = None) -> None:
        ratio = tm / other
        rows.append({"section": section, "metric": metric, "reference": "tokenizers",
                     "tokenmill": tm, "other": other, "ratio": ratio, "cpu_ratio": cpu_ratio,
                     "better": better, "verdict": verdict(ratio, better, words)})

    for call in CALLS:
        for name in INPUTS:
            tm, hf = (runs[f"{call}, {name}/{e}"] for e in ENGINES)
            add(f"{call}, {name}", "MB/s", median(tm, "mb_s"), median(hf, "mb_s"), "higher",
                SPEED, median(tm, "cpu_mb_s") / median(hf, "cpu_mb_s"))
    if train:
        tm, hf = runs["train/tokenmill"], runs["train/tokenizers"]
        add("training (different algorithms)", "seconds", median(tm, "train_s"),
            median(hf, "train_s"), "lower", SPEED)
        add("training (different algorithms)", "peak RSS - baseline, MiB",
            median(tm, "peak_rss_mib"), median(hf, "peak_rss_mib"), "lower", MEMORY)
        add("training (different algorithms)", "tokens per byte of the corpus",
            tm[0]["tokens_per_byte"], hf[0]["tokens_per_byte"], "lower", ("fewer", "more"))
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    input_flags(p)
    p.add_argument("--train-mb", type=float, default=10.0,
                   help="training corpus size, MB; 0 skips training (default 10)")
    p.add_argument("--vocab-size", type=int, default=30000, help="default 30000")
    output_flags(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if serve_worker(args.worker, WORKERS):
        return 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_wordpiece_") as tmp:
        inputs = build_inputs(args, Path(tmp))
        lines, description = training_corpus(args.data, args.train_mb or 0.001)
        corpus = Path(tmp) / "train.json"
        corpus.write_text(json.dumps(lines), encoding="utf-8")
        info = machine_info()
        header = header_lines(
            "bench_wordpiece", args, info, inputs, f"tokenizers {info['tokenizers']}",
            (f"vocabulary: {VOCAB} (30,522 tokens), uncased BERT pipeline in both",)) + \
            (description if args.train_mb else ["training: skipped (--train-mb 0)"])
        print("\n".join(header), flush=True)
        runs, diffs = run_all(args, {n: i["path"] for n, i in inputs.items()}, str(corpus))
    rows = table_rows(runs, bool(args.train_mb))
    return report(args, rows, diffs, "ids", started, {
        "header": header, "machine": info, "inputs": inputs, "runs": runs,
        "median_tokens_per_byte": {e: statistics.median(
            r["tokens_per_byte"] for r in runs.get(f"train/{e}", [{"tokens_per_byte": 0}]))
            for e in ENGINES}})


if __name__ == "__main__":
    sys.exit(main())
