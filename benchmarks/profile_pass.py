"""Where one pass of tokenmill over one of bench_encode's inputs spends its time: ``perf
record`` around the pass in several fresh processes, milliseconds a pass for each function.

    python benchmarks/profile_pass.py cl100k_base english --processes 6
    python benchmarks/profile_pass.py o200k_base code --seen --call arrays

Each process loads the encoding, encodes "x" (as bench_encode's workers do), with ``--seen``
encodes the documents once untimed, then has perf count the one pass it measures
(``encode_ordinary_batch``, or ``encode_batch_np`` with ``--call arrays``, on one thread).
A fresh process for each pass, because the piece cache is the process's: passes of fresh
models in one process meet the entries of the models before them, which a first pass of a
process does not. perf samples the CPU clock (no hardware counters needed) at ``--frequency``
Hz and is switched on and off through a FIFO around the pass alone; the pass's results are
freed only after it is off. Function names need a build with symbols (``pip install .
-Cinstall.strip=false``); a stripped build shows addresses. Exit status 2, with a one-line
message, where perf is missing or refuses to run.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_bpe import DEFAULT_DATA, MB, utf8_size
from bench_encode import ENCODINGS
from cold_pass import INPUTS

# "  12.34%  567  [.] symbol" in `perf report --stdio --sort sym -F overhead,sample,sym`
REPORT_LINE = re.compile(r"\s*[\d.]+%\s+(\d+)\s+\[.\]\s+(.*)")


def worker(args: argparse.Namespace) -> None:
    """One measured pass in this process, perf switched on through the FIFO ``--control``."""
    import tokenmill

    docs, _ = INPUTS[args.input](args.data, int(args.mb * MB))
    enc = tokenmill.load(args.encoding, path=args.data / "tokenizers" / "tiktoken")
    enc.encode_ordinary("x")
    batch = enc.encode_ordinary_batch if args.call == "lists" else enc.encode_batch_np
    if args.call == "arrays":
        batch(["x"], num_threads=1)  # (its first call imports numpy)
    if args.seen:
        batch(docs, num_threads=1)
    with open(args.control, "w") as control:
        control.write("enable\n")
        control.flush()
        t0 = time.perf_counter()
        result = batch(docs, num_threads=1)
        seconds = time.perf_counter() - t0
        control.write("disable\n")
        control.flush()
        time.sleep(0.1)  # (perf reads the FIFO on its own time: the pass's results stay until)
    del result
    print(f"{utf8_size(docs) / MB / seconds:.1f}")


def profile_once(args: argparse.Namespace, work: Path) -> tuple[dict[str, int], float]:
    """Samples by function of one pass in a fresh process, and the pass's MB/s. (One BLAS
    thread: numpy's import starts one that spins on another core, and perf counts every
    thread of the process.)"""
    control, data = work / "control", work / "perf.data"
    control.unlink(missing_ok=True)
    os.mkfifo(control)
    command = [sys.executable, __file__, args.encoding, args.input, "--worker",
               "--control", str(control), "--data", str(args.data), "--mb", str(args.mb),
               "--call", args.call, *(["--seen"] if args.seen else [])]
    record = subprocess.run(["perf", "record", "-F", str(args.frequency), "-e", "cpu-clock",
                             "-D", "-1", f"--control=fifo:{control}", "-o", str(data),
                             *command], capture_output=True, text=True, check=False,
                            env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    if record.returncode != 0:
        raise SystemExit(f"profile_pass.py: perf record failed: "
                         f"{(record.stderr.strip().splitlines() or ['?'])[-1]}")
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "sym",
                             "-F", "overhead,sample,sym"], capture_output=True, text=True,
                            check=False)
    samples: dict[str, int] = collections.Counter()
    for line in report.stdout.splitlines():
        m = REPORT_LINE.match(line)
        if m:
            samples[m.group(2).strip()] += int(m.group(1))
    return samples, float(record.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("encoding", choices=ENCODINGS)
    p.add_argument("input", choices=sorted(INPUTS))
    p.add_argument("--processes", type=int, default=6, help="fresh processes (default 6)")
    p.add_argument("--seen", action="store_true", help="profile a pass over text seen before")
    p.add_argument("--call", choices=("lists", "arrays"), default="lists")
    p.add_argument("--mb", type=float, default=4.0, help="MB of the input (default 4)")
    p.add_argument("--frequency", type=int, default=4000, help="samples a second (default 4000)")
    p.add_argument("--top", type=int, default=25, help="functions shown (default 25)")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--control", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    if shutil.which("perf") is None:
        print("profile_pass.py: perf (linux-perf) is not on PATH", file=sys.stderr)
        return 2
    total: dict[str, int] = collections.Counter()
    speeds = []
    try:
        with tempfile.TemporaryDirectory(prefix="profile_pass_") as tmp:
            for _ in range(args.processes):
                samples, mb_s = profile_once(args, Path(tmp))
                total.update(samples)
                speeds.append(mb_s)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    ms = 1e3 / args.frequency / args.processes  # a sample's share of one pass, in ms
    which = "seen before" if args.seen else "first"
    print(f"{args.encoding} {args.input}, {args.call}, pass over text {which}: "
          f"{statistics.median(speeds):.1f} MB/s under perf (median of {args.processes}), "
          f"{sum(total.values()) * ms:.1f} ms of samples a pass")
    print("| function | ms a pass |")
    print("| --- | --- |")
    rows: list[tuple[str, Any]] = sorted(total.items(), key=lambda kv: -kv[1])[:args.top]
    for name, count in rows:
        print(f"| `{name[:100]}` | {count * ms:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
