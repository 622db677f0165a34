"""Encoding's other measurements (issue 7), tokenmill vs tiktoken in one run, ratios printed:

- hostile inputs (1 MB of "a", random letters, digits, a base64 blob, one CJK character
  repeated, FASTA-like records of 40 kB pieces) at 100 kB and 1 MB: how time grows with size,
  and tokenmill against tiktoken, for the first encode of a fresh process and in the steady
  state after it (the median of three more texts of the kind; tokenmill's steady growth also
  with both sizes' calls alternating in one process); and, when it is installed,
  against the leader ``gigatoken`` (its tiktoken-style call, lists as ours and tiktoken's);
- decode throughput on the ids of English and Chinese text (MB/s of text produced), both
  engines in one process, and their ratio there;
- batch encoding on every core against tokenmill's own single thread (the call with its result
  held, and the call with the freeing of its lists);
- ``tokenmill encode-corpus`` end to end at two corpus sizes: MB/s and peak memory.

    python benchmarks/bench_serve.py --repeats 3 --json bench_serve.json
    python benchmarks/bench_serve.py --parts hostile --kinds digits base64

Each hostile text is made before the process times its first call.

Every measurement runs in a fresh process (this script with ``--worker``), each engine alone
but for decoding; figures are medians over ``--repeats`` runs, engines alternating. A run
that passes ``--timeout`` seconds is reported as such.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_bpe import DEFAULT_DATA, MB, log, machine_info, serve_worker
from bench_encode import chinese, english, tiktoken_encoding

ENCODINGS = ("cl100k_base", "o200k_base")
HOSTILE = ("a", "letters", "digits", "base64", "cjk", "records")
PARTS = ("hostile", "decode", "threads", "corpus")
SIZES = (100_000, 1_000_000)
STEADY = 3  # encodes after the first, in the same process
# ... and for the smaller size, whose encodes take well under a millisecond for tokenmill:
# a pause of the shared machine moved the median of three by a quarter, and with it the
# growth from 100 kB to 1 MB (13.2 for a megabyte of "a", 8.7 the round before).
STEADY_SMALL = 9
NA = float("nan")  # a row with one figure only


def hostile_text(kind: str, size: int, seed: int = 0) -> str:
    """``size`` bytes of one of the inputs that make naive BPE super-linear (``seed`` picks
    another text of the same kind, where the kind is random)."""
    rnd = random.Random(size if seed == 0 else f"{size}/{seed}")
    if kind == "a":
        return "a" * size
    if kind == "letters":
        return "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=size))
    if kind == "digits":
        return "".join(rnd.choices("0123456789", k=size))
    if kind == "base64":
        return base64.b64encode(rnd.randbytes(size * 3 // 4)).decode("ascii")[:size]
    if kind == "records":  # FASTA-like: many long pieces in one text (each 40 kB of acgt)
        record = ">\n" + "".join(rnd.choices("acgt", k=40_000)) + "\n"
        return (record * (size // len(record) + 1))[:size]
    return "中" * (size // 3)  # three bytes each


def open_encoding(engine: str, data: Path, name: str) -> Any:
    if engine == "tokenmill":
        import tokenmill

        return tokenmill.load(name, path=data / "tokenizers" / "tiktoken")
    if engine == "gigatoken":
        import gigatoken

        return gigatoken.Tokenizer.from_tiktoken(
            data / "tokenizers" / "tiktoken" / f"{name}.tiktoken").as_tiktoken()
    return tiktoken_encoding(data, name)


def hostile_engines() -> tuple[str, ...]:
    """tokenmill, tiktoken, and gigatoken where it is installed."""
    peers = ("gigatoken",) if importlib.util.find_spec("gigatoken") is not None else ()
    return ("tokenmill", "tiktoken", *peers)


# -- workers ---------------------------------------------------------------------------------

def worker_hostile(spec: dict[str, Any]) -> dict[str, Any]:
    """The first encode of a hostile text after a first use of the encoding (``s``), then the
    median of ``STEADY`` (``STEADY_SMALL`` below 1 MB) more encodes of other texts of that kind
    and size (``steady_s``): the first call of a fresh process also pays for the pages its
    allocations touch the first time (a megabyte's output, a UTF-8 copy of the text,
    tokenmill's piece cache), which a process that has run a while does not. For tokenmill
    the first use includes one long piece, which builds the tables that long pieces are cut
    with (once per model); its time is reported apart as ``setup_s``."""
    enc = open_encoding(spec["engine"], Path(spec["data"]), spec["encoding"])
    enc.encode_ordinary("x")
    t0 = time.perf_counter()
    if spec["engine"] == "tokenmill":
        enc.encode_ordinary("x" * 40_000)
    setup = time.perf_counter() - t0
    big_call = spec["size"] >= SIZES[-1]
    paired_growth = spec["engine"] == "tokenmill" and big_call
    # Every text is made before the first timed call. (Made just before its call, a megabyte
    # of random digits left the caches full of the generator's 8 MB list of one-character
    # strings, which that call then wrote back: its growth from 100 kB read 14.6-16.5 where
    # texts made beforehand read 9.8-10.0, and the 100 kB texts, whose lists fit the core's
    # cache, paid nothing of the kind.)
    texts = {(size, seed): hostile_text(spec["kind"], size, seed)
             for size, seeds in ((spec["size"], 1 + (STEADY if big_call else STEADY_SMALL)),
                                 (SIZES[0], 1 + STEADY_SMALL if paired_growth else 0),
                                 (SIZES[-1], 1 + 2 * STEADY if paired_growth else 0))
             for seed in range(seeds)}

    def timed(size: int, seed: int) -> tuple[float, int]:
        """Seconds to encode the kind's text of ``size`` and ``seed`` (made beforehand), and
        its token count."""
        text = texts[size, seed]
        t0 = time.perf_counter()
        ids = enc.encode_ordinary(text)
        return time.perf_counter() - t0, len(ids)

    runs = [timed(spec["size"], seed)
            for seed in range(1 + (STEADY if big_call else STEADY_SMALL))]
    times, tokens = [t for t, _ in runs], runs[-1][1]
    paired = NA
    if paired_growth:
        # The steady growth from 100 kB to 1 MB again, the two sizes' calls alternating in
        # this process: the steady medians above come from two processes, run a minute or
        # more apart, and the shared machine's speed moves by more than a quarter between
        # such runs (a bar of 12 read 16 from them on one CJK character).
        small, big = [], []
        for k in range(STEADY_SMALL):
            small.append(timed(SIZES[0], 1 + k)[0])
            if k < STEADY:
                big.append(timed(SIZES[-1], 1 + STEADY + k)[0])
        paired = statistics.median(big) / statistics.median(small)
    return {"s": times[0], "steady_s": statistics.median(times[1:]), "tokens": tokens,
            "setup_s": setup, "paired_growth": paired}


def worker_decode(spec: dict[str, Any]) -> dict[str, Any]:
    """Decode every document's ids (each engine's own, encoded beforehand, not timed) with each
    of ``spec["engines"]`` in one process, passes alternating (ABBA, twice); each engine's
    faster pass. Paired so: a shared machine's speed moved twofold from one process to the
    next, for both engines alike, and two engines measured in separate processes compared
    those moves rather than the decoders."""
    docs = json.loads(Path(spec["docs"]).read_text(encoding="utf-8"))
    size = sum(len(d.encode("utf-8")) for d in docs)
    engines = spec["engines"]
    encs = {e: open_encoding(e, Path(spec["data"]), spec["encoding"]) for e in engines}
    ids = {e: [enc.encode_ordinary(d) for d in docs] for e, enc in encs.items()}
    best = dict.fromkeys(engines, float("inf"))
    for engine in [*engines, *engines[::-1]] * 2:
        t0 = time.perf_counter()
        out = [encs[engine].decode(x) for x in ids[engine]]
        best[engine] = min(best[engine], time.perf_counter() - t0)
        assert out == docs, f"{engine}: decode did not give the text back"
        del out
    return {"mb_s": {e: size / MB / t for e, t in best.items()}}


def worker_threads(spec: dict[str, Any]) -> dict[str, Any]:
    enc = open_encoding("tokenmill", Path(spec["data"]), spec["encoding"])
    docs = json.loads(Path(spec["docs"]).read_text(encoding="utf-8"))
    enc.encode_ordinary("x")
    size = sum(len(d.encode("utf-8")) for d in docs)
    t0 = time.perf_counter()
    ids = enc.encode_ordinary_batch(docs, num_threads=spec["threads"])
    t1 = time.perf_counter()
    # The call, its result held; then the freeing of its lists apart (on the caller's thread,
    # whenever the caller lets them go: with 8 MB of English, about a tenth of the call's time
    # on two threads, which timing the call with it would count as part of the encoding).
    del ids
    t2 = time.perf_counter()
    return {"mb_s": size / MB / (t1 - t0), "mb_s_freed": size / MB / (t2 - t0)}


WORKERS = {"hostile": worker_hostile, "decode": worker_decode, "threads": worker_threads}


# -- driver ----------------------------------------------------------------------------------

def run_worker(spec: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """One measurement in a fresh interpreter; None if it ran out of time."""
    env = dict(os.environ, TIKTOKEN_CACHE_DIR="")
    try:
        proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], env=env,
                              capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        raise SystemExit(f"worker {spec} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def medians_of(args: argparse.Namespace, spec: dict[str, Any], keys: tuple[str, ...],
               engines: tuple[str, ...] = ("tokenmill", "tiktoken"),
               ) -> dict[str, dict[str, float | None]]:
    """The median of each of ``keys`` per engine over the repeats (engines alternating); None
    if any run timed out."""
    runs: dict[str, dict[str, list[float | None]]] = {e: {k: [] for k in keys} for e in engines}
    for r in range(args.repeats):
        for engine in engines if r % 2 == 0 else engines[::-1]:
            result = run_worker({**spec, "engine": engine}, args.timeout)
            for k in keys:
                runs[engine][k].append(None if result is None else result[k])
    return {e: {k: None if None in v else statistics.median(v) for k, v in by_key.items()}
            for e, by_key in runs.items()}


def medians(args: argparse.Namespace, spec: dict[str, Any], key: str,
            engines: tuple[str, ...] = ("tokenmill", "tiktoken")) -> dict[str, float | None]:
    """medians_of for one key."""
    return {e: m[key] for e, m in medians_of(args, spec, (key,), engines).items()}


def decode_medians(args: argparse.Namespace,
                   spec: dict[str, Any]) -> tuple[dict[str, float], float]:
    """Each engine's median decode MB/s over the repeats (a fresh process each, holding both
    engines, which goes first alternating), and the median of the two's ratio in a process."""
    engines = ("tokenmill", "tiktoken")
    runs: dict[str, list[float]] = {e: [] for e in engines}
    ratios = []
    for r in range(args.repeats):
        order = list(engines if r % 2 == 0 else engines[::-1])
        result = run_worker({**spec, "engines": order}, args.timeout)
        if result is None:
            raise SystemExit(f"decode run timed out: {spec}")
        for e in engines:
            runs[e].append(result["mb_s"][e])
        ratios.append(result["mb_s"]["tokenmill"] / result["mb_s"]["tiktoken"])
    return {e: statistics.median(v) for e, v in runs.items()}, statistics.median(ratios)


def thread_medians(args: argparse.Namespace, spec: dict[str, Any],
                   cores: int) -> dict[str, tuple[float, float]]:
    """Median MB/s of one batch call on 1 thread and on ``cores`` threads, the two alternating
    (ABBA) over ``--threads-repeats`` runs each, every run in a fresh process: of the call
    ("mb_s") and of the call and the freeing of its result ("mb_s_freed"), each as (1 thread,
    cores)."""
    runs: dict[str, dict[int, list[float]]] = {k: {1: [], cores: []}
                                               for k in ("mb_s", "mb_s_freed")}
    for r in range(args.threads_repeats):
        for threads in (1, cores) if r % 2 == 0 else (cores, 1):
            result = run_worker({**spec, "engine": "tokenmill", "threads": threads}, args.timeout)
            if result is None:
                raise SystemExit(f"threads run timed out: {spec}")
            for key, by_threads in runs.items():
                by_threads[threads].append(result[key])
    return {key: (statistics.median(v[1]), statistics.median(v[cores]))
            for key, v in runs.items()}


def encode_corpus_run(args: argparse.Namespace, corpus: Path, out: Path) -> dict[str, float]:
    """``tokenmill encode-corpus`` in a child process that reports its own peak RSS."""
    code = ("import atexit, sys; from tokenmill.cli import main\n"
            "def peak():\n"
            "    for line in open('/proc/self/status'):\n"
            "        if line.startswith('VmHWM:'): print('PEAK', int(line.split()[1]) / 1024)\n"
            "atexit.register(peak)\n"
            "sys.exit(main(sys.argv[1:]))")
    ranks = str(args.data / "tokenizers" / "tiktoken")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, "encode-corpus", str(corpus), "-t",
                           "cl100k_base", "--ranks", ranks, "--separator", "<|endoftext|>",
                           "-o", str(out), "--quiet"], capture_output=True, text=True,
                          check=True)
    seconds = time.perf_counter() - t0
    peak = float(proc.stdout.split("PEAK")[-1])
    return {"s": seconds, "mb_s": corpus.stat().st_size / MB / seconds, "peak_mib": peak}


def benchmark(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    base = {"data": str(args.data)}
    rows: list[tuple[str, str, float | None, float | None]] = []
    engines = hostile_engines()
    for name in ENCODINGS if "hostile" in args.parts else ():
        for kind in args.kinds:
            t = {size: medians_of(args, {**base, "task": "hostile", "encoding": name,
                                         "kind": kind, "size": size},
                                  ("s", "steady_s", "tokens", "paired_growth"), engines)
                 for size in SIZES}
            for size in SIZES:
                counts = {e: t[size][e]["tokens"] for e in engines
                          if t[size][e]["tokens"] is not None}  # (None: timed out)
                if len(set(counts.values())) > 1:
                    raise SystemExit(f"{name} {kind} {size}: token counts differ: {counts}")
            for key, when in (("steady_s", "steady"), ("s", "first call")):
                for engine in engines:
                    small, big = t[SIZES[0]][engine][key], t[SIZES[1]][engine][key]
                    log(f"{name} {kind:8} {engine:9} {when}: 100 kB {small} s, 1 MB {big} s")
                tm, tt = t[SIZES[1]]["tokenmill"][key], t[SIZES[1]]["tiktoken"][key]
                section = f"{name}, {kind}, {when}"
                rows.append((section, "1 MB / 100 kB time, tokenmill (<= 12)",
                             tm, t[SIZES[0]]["tokenmill"][key]))
                if key == "steady_s":
                    rows.append((section, "1 MB / 100 kB time, tokenmill, in one process "
                                 "(<= 12)", t[SIZES[1]]["tokenmill"]["paired_growth"], NA))
                rows.append((section, "1 MB / 100 kB time, tiktoken",
                             tt, t[SIZES[0]]["tiktoken"][key]))
                rows.append((section, "1 MB: tiktoken s / tokenmill s (>= 10)", tt, tm))
                if "gigatoken" in engines:
                    rows.append((section, "1 MB: gigatoken s / tokenmill s (> 1: we lead)",
                                 t[SIZES[1]]["gigatoken"][key], tm))
        setup = medians(args, {**base, "task": "hostile", "encoding": name, "kind": "a",
                               "size": 1000}, "setup_s", engines=("tokenmill",))["tokenmill"]
        log(f"{name} long-piece tables, built once per model: {setup} s")
        rows.append((f"{name}, first long piece", "s to build the long-piece tables (once)",
                     setup, NA))
    docs = {"english": english(args.data, int(args.decode_mb * MB))[0],
            "chinese": chinese(args.data, int(args.decode_mb * MB))[0]}
    for lang, texts in docs.items() if "decode" in args.parts else ():
        path = work / f"{lang}.json"
        path.write_text(json.dumps(texts), encoding="utf-8")
        for name in ENCODINGS:
            m, paired = decode_medians(args, {**base, "task": "decode", "encoding": name,
                                              "docs": str(path)})
            log(f"decode {name} {lang}: {m}, paired {paired}")
            rows.append((f"decode {name}, {lang}", "MB/s: tokenmill / tiktoken (>= 1)",
                         m["tokenmill"], m["tiktoken"]))
            rows.append((f"decode {name}, {lang}",
                         "paired: tokenmill / tiktoken in one process (>= 1)", paired, NA))
    cores = len(os.sched_getaffinity(0))
    threads_docs = work / "threads.json"
    threads_docs.write_text(json.dumps(english(args.data, int(args.threads_mb * MB))[0]),
                            encoding="utf-8")
    for name in ENCODINGS if "threads" in args.parts else ():
        spec = {**base, "task": "threads", "encoding": name, "docs": str(threads_docs)}
        medians_by = thread_medians(args, spec, cores)
        one, many = medians_by["mb_s"]
        one_freed, many_freed = medians_by["mb_s_freed"]
        log(f"threads {name}: 1 -> {one} MB/s, {cores} -> {many} MB/s; with the lists freed: "
            f"{one_freed}, {many_freed}")
        section = f"batch {name}, english {args.threads_mb:g} MB"
        rows.append((section, f"MB/s: {cores} threads / 1 (>= 1.7)", many, one))
        rows.append((section, f"MB/s, the lists freed too: {cores} threads / 1", many_freed,
                     one_freed))
    lines = [line for t in docs["english"] for line in t.split("\n")]
    for mb in args.corpus_mb if "corpus" in args.parts else ():
        corpus = work / f"corpus{mb}.txt"
        with open(corpus, "w", encoding="utf-8") as f:
            written = 0
            while written < mb * MB:
                block = "\n".join(lines) + "\n"
                f.write(block)
                written += len(block.encode("utf-8"))
        result = encode_corpus_run(args, corpus, work / f"corpus{mb}.bin")
        log(f"encode-corpus {mb} MB: {result}")
        rows.append((f"encode-corpus, {mb} MB", "MB/s", result["mb_s"], NA))
        rows.append((f"encode-corpus, {mb} MB", "peak RSS, MiB", result["peak_mib"], NA))
        corpus.unlink()
    return {"rows": rows, "machine": machine_info(), "args": {
        k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}


def format_rows(rows: list[tuple[str, str, float | None, float | None]]) -> str:
    """A Markdown table; a run that timed out shows as "timeout"."""
    def cell(x: float | None) -> str:
        return "timeout" if x is None else "" if x is NA else f"{x:.3g}"

    out = ["| measurement | metric | a | b | a / b |", "| --- | --- | --- | --- | --- |"]
    for section, metric, a, b in rows:
        ratio = "" if a is None or b is None or b is NA else f"{a / b:.2f}"
        out.append(f"| {section} | {metric} | {cell(a)} | {cell(b)} | {ratio} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    p.add_argument("--decode-mb", type=float, default=2.0, help="text per language to decode")
    p.add_argument("--threads-mb", type=float, default=8.0,
                   help="English text for the batch on 1 thread and on every core (a call on "
                        "2 MB lasted 30-50 ms: too short to time on a shared machine)")
    p.add_argument("--threads-repeats", type=int, default=5,
                   help="runs each of 1 thread and of every core, alternating")
    p.add_argument("--corpus-mb", type=int, nargs="+", default=[25, 100],
                   help="encode-corpus sizes, MB (default 25 100)")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                   help="what to measure (default: all of it)")
    p.add_argument("--kinds", nargs="+", choices=HOSTILE, default=list(HOSTILE),
                   help="the hostile inputs to measure (default: all)")
    p.add_argument("--json", type=Path)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if serve_worker(args.worker, WORKERS):
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        result = benchmark(args, Path(tmp))
    print(format_rows(result["rows"]))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
