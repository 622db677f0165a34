"""tokenmill's ids against tiktoken's, document by document, over the inputs the benchmarks
use: bench_encode's English, Chinese, code and multilingual documents, each of bench_serve's
hostile kinds (``--kind-kb`` of it), and runs of 2 to 13 random Han characters (short pieces
of many tokens, which go to the piece cache's long entries and wrap their ring). Each input is
encoded four times (1, 2, 1, 2 threads: first passes and passes over text seen before), on
both encodings. Prints the mismatching documents of each input and their total (must be 0)::

    cd benchmarks && python check_ids.py
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from bench_bpe import DEFAULT_DATA, MB
from bench_encode import ENCODINGS, chinese, code, english, multilingual
from bench_serve import HOSTILE, hostile_text


def han_runs(count: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    runs = ["".join(chr(rnd.randrange(0x4E00, 0x9FFF)) for _ in range(rnd.randrange(2, 14)))
            for _ in range(count)]
    return [" ".join(runs[i:i + 50]) for i in range(0, len(runs), 50)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=4.0, help="of each text input (default 4)")
    parser.add_argument("--kind-kb", type=int, default=256, help="of each hostile kind")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)

    import tiktoken
    import tiktoken.load

    import tokenmill

    size = int(args.mb * MB)
    inputs = {"english": english(args.data, size)[0], "chinese": chinese(args.data, size)[0],
              "code": code(args.data, size)[0], "multilingual": multilingual(args.data, 1.0)[0],
              "han": han_runs(200_000, 7)}
    for kind in HOSTILE:
        inputs[kind] = [hostile_text(kind, args.kind_kb * 1024, 1)]
    encodings = json.loads((args.data / "tokenizers" / "tiktoken" / "encodings.json")
                           .read_text("utf-8"))
    total = 0
    for name in ENCODINGS:
        e = encodings[name]
        ref = tiktoken.Encoding(name=name, pat_str=e["pat_str"],
                                mergeable_ranks=tiktoken.load.load_tiktoken_bpe(
                                    str(args.data / e["file"])),
                                special_tokens=e["special_tokens"])
        ours = tokenmill.load(name, path=args.data / e["file"])
        for label, docs in inputs.items():
            want = ref.encode_ordinary_batch(docs)
            bad = sum(a != b for threads in (1, 2, 1, 2)
                      for a, b in zip(ours.encode_ordinary_batch(docs, num_threads=threads), want))
            total += bad
            print(f"{name} {label}: {len(docs)} documents, {bad} mismatching", flush=True)
        taken, room = ours.native_plan()[0].long_entry_ids()
        print(f"{name}: {taken} long-entry slots taken (the ring holds {room})")
    print(f"mismatching documents in all: {total}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
