"""One first pass of tokenmill over one of bench_encode's inputs, in this process: load the
encoding, encode "x", then ``encode_ordinary_batch(docs, num_threads=1)`` over documents the
process has not seen (bench_encode's "cold" measurement, alone). Prints the pass's time and
page faults.

``multilingual`` is bench_encode's input of that name, all of it (5.7 MB, whatever ``--mb``
says). With ``--seen``, the process first encodes the same documents one ``encode_ordinary``
at a time (not the call that ``--toggle-collect`` below counts), so the batch call is a pass
over text seen before, as bench_encode's "warm".

Given one of bench_serve's hostile kinds instead (``a``, ``letters``, ``digits``, ``base64``,
``cjk``, ``records``), the call is a steady one, as bench_serve's: the process first encodes
``"x" * 40000`` (a long piece, which builds the backtracking tables) and the kind's text of
seed 0, then the batch call encodes the text of seed 1 (``--mb`` of it).

Its use is comparing two builds where wall time is too noisy to tell them apart: run it under
callgrind in a virtualenv of each build, counting the batch call only (a build with symbols:
``-Cinstall.strip=false``), with cache and branch simulation if wanted::

    cd benchmarks && valgrind --tool=callgrind --collect-atstart=no \
        '--toggle-collect=*encode_ids_batch*' python cold_pass.py o200k_base code

(Without ``--toggle-collect`` the counts are the whole process's; the load is the same in both
builds, so their difference is still the pass's.)
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

from bench_bpe import DEFAULT_DATA, MB, utf8_size
from bench_encode import ENCODINGS, chinese, code, english, multilingual
from bench_serve import HOSTILE, hostile_text

INPUTS = {"english": english, "chinese": chinese, "code": code,
          "multilingual": lambda data, size: multilingual(data, 1.0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("encoding", choices=ENCODINGS)
    parser.add_argument("input", choices=sorted(INPUTS) + list(HOSTILE))
    parser.add_argument("--mb", type=float, default=4.0, help="text to encode (default 4)")
    parser.add_argument("--seen", action="store_true",
                        help="encode the documents once before the counted call")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)

    import tokenmill

    size = int(args.mb * MB)
    enc = tokenmill.load(args.encoding, path=args.data / "tokenizers" / "tiktoken")
    if args.input in INPUTS:
        docs, _ = INPUTS[args.input](args.data, size)
        enc.encode_ordinary("x")
    else:
        docs = [hostile_text(args.input, size, 1)]
        enc.encode_ordinary("x" * 40_000)
        enc.encode_ordinary(hostile_text(args.input, size, 0))
    if args.seen:
        for doc in docs:
            enc.encode_ordinary(doc)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    ids = enc.encode_ordinary_batch(docs, num_threads=1)
    seconds = time.perf_counter() - t0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    size = utf8_size(docs)
    print(f"{args.encoding} {args.input}: {size / MB:.2f} MB, {sum(map(len, ids))} tokens, "
          f"{seconds * 1e3:.1f} ms ({size / MB / seconds:.1f} MB/s), {faults} page faults")
    return 0


if __name__ == "__main__":
    sys.exit(main())
