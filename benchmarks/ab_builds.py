"""Two builds of tokenmill side by side: a first pass and a pass over text seen before, each
round one fresh process of each build (their order alternating), on one of bench_encode's
inputs. Prints the best and the median MB/s of each build and their ratios (B over A).

    python benchmarks/ab_builds.py /tmp/baseenv/bin/python /tmp/devenv/bin/python \\
        o200k_base multilingual --rounds 8

Each interpreter is a virtualenv with one build installed (``pip install .`` of each commit).
Wall time on a shared machine moves by a quarter from run to run; the best of several runs is
the figure least disturbed by a neighbour, the median the one a user is likelier to see, and a
change that moves both the same way is more than noise. In a process: load the encoding,
encode "x", then ``encode_ordinary_batch(docs, num_threads=1)`` once (the first pass) and twice
more (the better of the two: the seen pass). With ``--call arrays``, ``encode_batch_np``
instead (one flat array of ids, what bench_encode sets beside gigatoken).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_bpe import DEFAULT_DATA, MB, utf8_size
from bench_encode import ENCODINGS
from cold_pass import INPUTS


def worker(encoding: str, name: str, mb: float, data: Path, call: str) -> dict[str, float]:
    import tokenmill

    docs, _ = INPUTS[name](data, int(mb * MB))
    enc = tokenmill.load(encoding, path=data / "tokenizers" / "tiktoken")
    enc.encode_ordinary("x")
    batch = enc.encode_ordinary_batch if call == "lists" else enc.encode_batch_np
    if call == "arrays":
        batch(["x"], num_threads=1)  # (its first call imports numpy)
    size = utf8_size(docs) / MB
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        ids = batch(docs, num_threads=1)
        times.append(time.perf_counter() - t0)
        del ids
    return {"first": size / times[0], "seen": size / min(times[1:])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="python of build A")
    parser.add_argument("b", help="python of build B")
    parser.add_argument("encoding", choices=ENCODINGS)
    parser.add_argument("input", choices=sorted(INPUTS))
    parser.add_argument("--mb", type=float, default=4.0,
                        help="text (default 4; multilingual is all of it, 5.7 MB)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--call", choices=("lists", "arrays"), default="lists")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.encoding, args.input, args.mb, args.data, args.call)))
        return 0

    runs: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    for r in range(args.rounds):
        for build in ("a", "b") if r % 2 == 0 else ("b", "a"):
            out = subprocess.run(
                [getattr(args, build), __file__, args.a, args.b, args.encoding, args.input,
                 "--mb", str(args.mb), "--data", str(args.data), "--call", args.call,
                 "--worker"],
                capture_output=True, text=True, check=True)
            runs[build].append(json.loads(out.stdout))
    for metric in ("first", "seen"):
        a = [run[metric] for run in runs["a"]]
        b = [run[metric] for run in runs["b"]]
        print(f"{args.encoding} {args.input} {args.call} {metric:5s} MB/s: "
              f"A best {max(a):6.1f} median {statistics.median(a):6.1f} | "
              f"B best {max(b):6.1f} median {statistics.median(b):6.1f} | "
              f"B/A best {max(b) / max(a):.3f} median "
              f"{statistics.median(b) / statistics.median(a):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
