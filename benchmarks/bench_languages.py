"""Text in each language of FLORES (../shared/data/text/flores200_dev), one language at a time:
tokenmill's ``encode_batch_np`` against gigatoken's ``encode_batch`` (flat arrays, one thread
each), in one process, ratios printed.

    python benchmarks/bench_languages.py --encoding cl100k_base --passes 7

bench_encode.py measures the 26 languages together; this shows which scripts lead and which
trail. For each language, both engines encode its lines once untimed (text seen before, as
bench_encode's warm pass), then ``--passes`` times each, the engines alternating pass by pass;
the median of each is reported. The ids of every line are checked against gigatoken's.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

from bench_bpe import DEFAULT_DATA, MB, read_lines, utf8_size
from bench_encode import ENCODINGS, digests, open_engine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="the shared data directory (default: the repository's ../shared/data)")
    parser.add_argument("--encoding", choices=ENCODINGS, default="cl100k_base")
    parser.add_argument("--passes", type=int, default=7, help="timed passes per engine (default 7)")
    args = parser.parse_args()
    if importlib.util.find_spec("gigatoken") is None:
        print("bench_languages: gigatoken is not installed; nothing to compare with",
              file=sys.stderr)
        return 2
    files = sorted((args.data / "text" / "flores200_dev").glob("*.dev.gz"))
    if not files:
        print(f"bench_languages: no *.dev.gz under {args.data / 'text' / 'flores200_dev'}",
              file=sys.stderr)
        return 2
    engines = {name: open_engine({"engine": name, "call": "arrays", "data": str(args.data),
                                  "encoding": args.encoding})
               for name in ("tokenmill", "gigatoken")}
    print(f"{args.encoding}, one thread, text seen before, medians of {args.passes} passes\n")
    print("| language | MB | tokenmill ms | gigatoken ms | gigatoken / tokenmill time |")
    print("| --- | --- | --- | --- | --- |")
    totals = dict.fromkeys(engines, 0.0)
    mismatched = 0
    for path in files:
        docs = read_lines(path)
        times: dict[str, list[float]] = {name: [] for name in engines}
        rows = {name: engine.rows(engine.many(docs)) for name, engine in engines.items()}
        mismatched += sum(a != b for a, b in zip(digests(rows["tokenmill"]),
                                                 digests(rows["gigatoken"]), strict=True))
        for _ in range(args.passes):
            for name, engine in engines.items():
                t0 = time.perf_counter()
                engine.many(docs)
                times[name].append(time.perf_counter() - t0)
        ms = {name: statistics.median(t) * 1e3 for name, t in times.items()}
        for name in engines:
            totals[name] += ms[name]
        language = path.name.split(".")[0]
        print(f"| {language} | {utf8_size(docs) / MB:.2f} | {ms['tokenmill']:.2f} | "
              f"{ms['gigatoken']:.2f} | {ms['gigatoken'] / ms['tokenmill']:.2f} |")
    print(f"| all {len(files)}, summed | | {totals['tokenmill']:.1f} | {totals['gigatoken']:.1f} | "
          f"{totals['gigatoken'] / totals['tokenmill']:.2f} |")
    print(f"\nmismatching lines (ids; must be 0): {mismatched}")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
