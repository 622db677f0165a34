"""Byte-level BPE, tokenmill vs Hugging Face ``tokenizers``: training and encoding on the same
text, in one run, with the ratios printed.

    python benchmarks/bench_bpe.py --repeats 3 --json bench_bpe.json

Every measurement runs in a fresh subprocess (this script re-run with ``--worker``), so each
peak RSS is that run's own and a "cold" pass really is the first one in its process. Each worker
imports only the engine it measures. Reported numbers are medians over ``--repeats`` runs, the
two engines alternating (ABBA order, so neither always runs first).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import gzip
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from importlib import metadata
from pathlib import Path
from typing import Any

ENGINES = ("tokenmill", "tokenizers")
MB = 1_000_000  # sizes are in decimal megabytes of UTF-8 text, newlines not counted
EN_SHARE = 0.8  # of the training corpus: English Gutenberg first, Chinese fills the rest
ZH_HELDOUT_BYTES = 1 * MB
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # the repo's ../shared/data


# -- input text ------------------------------------------------------------------------------------

def read_lines(path: Path) -> list[str]:
    """Non-empty lines of a UTF-8 file (gzip if it ends in .gz). Lines are documents."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line for line in f.read().split("\n") if line]


def utf8_size(lines: list[str]) -> int:
    return sum(len(line.encode("utf-8")) for line in lines)


def head(lines: list[str], budget: int) -> list[str]:
    """The longest prefix of ``lines`` with at most ``budget`` bytes of UTF-8."""
    size = 0
    for n, line in enumerate(lines):
        size += len(line.encode("utf-8"))
        if size > budget:
            return lines[:n]
    return lines


def training_corpus(data: Path, mb: float) -> tuple[list[str], list[str]]:
    """(lines, description): English Gutenberg books in sorted order up to EN_SHARE of ``mb``,
    then 红楼梦 up to ``mb`` in total."""
    total = int(mb * MB)
    english: list[str] = []
    books = sorted((data / "text" / "en" / "gutenberg").glob("*.txt"))
    used = []
    for book in books:
        lines = read_lines(book)
        taken = head(lines, int(total * EN_SHARE) - utf8_size(english))
        english += taken
        used.append(book.name)
        if len(taken) < len(lines):
            break
    chinese = head(read_lines(data / "text" / "zh" / "hongloumeng.txt"), total - utf8_size(english))
    description = [
        (f"training: {utf8_size(english + chinese) / MB:.2f} MB, {len(english) + len(chinese):,} "
         f"lines (one document per line, empty lines dropped, cut at line boundaries)"),
        (f"  English {utf8_size(english) / MB:.2f} MB: text/en/gutenberg/*.txt in sorted order, "
         f"{len(used)} of {len(books)} books ({used[0]} .. {used[-1]}, the last one cut)"),
        f"  Chinese {utf8_size(chinese) / MB:.2f} MB: the first lines of text/zh/hongloumeng.txt",
    ]
    return english + chinese, description


def heldout_corpus(data: Path) -> tuple[list[str], list[str]]:
    """(lines, description): text kept out of training, for encoding."""
    text = data / "text"
    shakespeare = read_lines(text / "en" / "tinyshakespeare.txt")
    xiyouji = head(read_lines(text / "zh" / "xiyouji.txt"), ZH_HELDOUT_BYTES)
    flores_files = sorted((text / "flores200_dev").glob("*.dev.gz"))
    flores = [line for p in flores_files for line in read_lines(p)]
    lines = shakespeare + xiyouji + flores
    description = [
        f"held-out encode set: {utf8_size(lines) / MB:.2f} MB, {len(lines):,} non-empty lines",
        (f"  text/en/tinyshakespeare.txt {utf8_size(shakespeare) / MB:.2f} MB"
         f" + text/zh/xiyouji.txt first {utf8_size(xiyouji) / MB:.2f} MB"
         f" + text/flores200_dev/*.dev.gz ({len(flores_files)} languages)"
         f" {utf8_size(flores) / MB:.2f} MB"),
    ]
    return lines, description


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines), encoding="utf-8")


# -- the two engines (imported only inside the worker that measures one) ---------------------------

def new_trainable(engine: str, vocab_size: int) -> tuple[Any, Any]:
    """An untrained byte-level BPE tokenizer and its trainer."""
    if engine == "tokenmill":
        from tokenmill import BPE, BPETrainer, Tokenizer, decoders, pre_tokenizers

        tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=False),
                        decoder=decoders.ByteLevel())
        trainer = BPETrainer(vocab_size=vocab_size,
                             initial_alphabet=tuple(pre_tokenizers.ByteLevel.alphabet()))
        return tok, trainer
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return tok, trainer


def load_tokenizer(engine: str, path: str) -> Any:
    if engine == "tokenmill":
        from tokenmill import Tokenizer
    else:
        from tokenizers import Tokenizer
    return Tokenizer.from_file(path)


# -- workers: one measurement in a fresh process ---------------------------------------------------

def current_rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker_train(spec: dict[str, Any]) -> dict[str, Any]:
    """Time the training call only; peak RSS is read right after it, before saving."""
    lines = Path(spec["corpus"]).read_text(encoding="utf-8").split("\n")
    tok, trainer = new_trainable(spec["engine"], spec["vocab_size"])
    gc.collect()
    rss_before = current_rss_mib()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    tok.train_from_iterator(lines, trainer)
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tok.save(spec["out"])
    return {"wall_s": wall, "cpu_s": cpu, "rss_before_mib": rss_before,
            "peak_before_mib": peak_before, "peak_rss_mib": peak,
            "rss_delta_mib": peak - rss_before, "vocab_size": tok.get_vocab_size()}


def worker_encode(spec: dict[str, Any]) -> dict[str, Any]:
    """Load a tokenizer.json, then ``encode_batch`` the held-out lines twice: cold, then warm."""
    lines = Path(spec["heldout"]).read_text(encoding="utf-8").split("\n")
    size = utf8_size(lines)
    t0 = time.perf_counter()
    tok = load_tokenizer(spec["engine"], spec["tokenizer"])
    load_s = time.perf_counter() - t0
    speeds = []
    for _ in range(2):
        encodings = None  # subtle: free the previous pass's results before timing the next
        t0 = time.perf_counter()
        encodings = tok.encode_batch(lines)
        speeds.append(size / MB / (time.perf_counter() - t0))
    ids = [e.ids for e in encodings]
    if spec.get("ids_out"):
        Path(spec["ids_out"] + ".len").write_bytes(array("i", map(len, ids)).tobytes())
        Path(spec["ids_out"]).write_bytes(array("i", [i for x in ids for i in x]).tobytes())
    return {"load_s": load_s, "cold_mb_s": speeds[0], "warm_mb_s": speeds[1],
            "tokens": sum(map(len, ids))}


WORKERS = {"train": worker_train, "encode": worker_encode}


# -- driver ----------------------------------------------------------------------------------------

def run_worker(spec: dict[str, Any], threads: int) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter. tokenizers parallelizes with rayon:
    one thread means its serial code path (TOKENIZERS_PARALLELISM=false); tokenmill's native
    counting and batch encoding take TOKENMILL_NUM_THREADS."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENMILL_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="true" if threads > 1 else "false")
    proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"worker {spec} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def abba(repeats: int) -> list[tuple[int, str]]:
    """(repeat, engine) in alternating order: tm, hf, hf, tm, tm, hf, ..."""
    order = []
    for r in range(repeats):
        order += [(r, e) for e in (ENGINES if r % 2 == 0 else ENGINES[::-1])]
    return order


def bench_training(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    for threads in (1, 2):
        for r, engine in abba(args.repeats):
            out = work / f"{engine}-t{threads}-r{r}.json"
            spec = {"task": "train", "engine": engine, "corpus": str(work / "train.txt"),
                    "vocab_size": args.vocab_size, "out": str(out)}
            result = run_worker(spec, threads)
            result["file"] = str(out)
            runs.setdefault(f"{engine}/t{threads}", []).append(result)
            log(f"train {engine:10s} threads={threads} run {r}: {result['wall_s']:.2f} s, "
                f"peak {result['peak_rss_mib']:.0f} MiB")
    return runs


def bench_encoding(args: argparse.Namespace, work: Path, files: dict[str, str]) -> dict[str, Any]:
    """Each engine on each trained file; the first run of each keeps its ids for comparison."""
    runs: dict[str, Any] = {}
    for trained_by, path in files.items():
        for r, engine in abba(args.repeats):
            key = f"{engine}@{trained_by}"
            spec = {"task": "encode", "engine": engine, "tokenizer": path,
                    "heldout": str(work / "heldout.txt"),
                    "ids_out": str(work / f"ids-{engine}-{trained_by}") if r == 0 else None}
            result = run_worker(spec, threads=1)
            runs.setdefault(key, []).append(result)
            log(f"encode {key:22s} run {r}: cold {result['cold_mb_s']:.2f} MB/s, "
                f"warm {result['warm_mb_s']:.2f} MB/s")
    return runs


def read_ids(prefix: Path) -> list[list[int]]:
    lengths, flat = array("i"), array("i")
    lengths.frombytes(Path(f"{prefix}.len").read_bytes())
    flat.frombytes(prefix.read_bytes())
    out, at = [], 0
    for n in lengths:
        out.append(flat[at:at + n].tolist())
        at += n
    return out


def mismatches(work: Path, trained_by: str) -> int:
    """Held-out lines whose ids differ between the engines on the same tokenizer file."""
    a, b = (read_ids(work / f"ids-{e}-{trained_by}") for e in ENGINES)
    return sum(x != y for x, y in zip(a, b, strict=True))


def read_merges(path: str) -> list[tuple[str, ...]]:
    """The merges of a tokenizer.json, written as pairs or (older files) as "a b" strings."""
    merges = json.loads(Path(path).read_text(encoding="utf-8"))["model"]["merges"]
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


def merge_agreement(files: dict[str, str]) -> str:
    """How far the two trained merge lists agree (ties between equally frequent pairs can be
    broken differently, so they need not be equal)."""
    tm, hf = (read_merges(files[e]) for e in ENGINES)
    same = next((n for n, (a, b) in enumerate(zip(tm, hf)) if a != b), min(len(tm), len(hf)))
    return (f"merges: tokenmill {len(tm)}, tokenizers {len(hf)}; the first {same} are "
            f"identical, {len(set(tm) & set(hf))} in common")


def same_bytes(paths: list[str]) -> bool:
    return len({Path(p).read_bytes() for p in paths}) == 1


# -- report ----------------------------------------------------------------------------------------

def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def verdict(ratio: float, better: str, words: tuple[str, str]) -> str:
    """'tokenmill 3.10x slower' from ratio = tokenmill / tokenizers."""
    factor = max(ratio, 1 / ratio)
    if factor < 1.005:
        return "about equal"
    good = ratio < 1 if better == "lower" else ratio > 1
    return f"tokenmill {factor:.2f}x {words[0] if good else words[1]}"


SPEED, MEMORY, TOKENS = ("faster", "slower"), ("less", "more"), ("fewer", "more")
OWN = "encode, own trained file"


def table_rows(train: dict[str, Any], encode: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []

    def add(section: str, metric: str, tm: float, hf: float, better: str,
            words: tuple[str, str]) -> None:
        ratio = tm / hf
        rows.append({"section": section, "metric": metric, "tokenmill": tm, "tokenizers": hf,
                     "ratio": ratio, "better": better, "verdict": verdict(ratio, better, words)})

    for threads in (1, 2):
        section = f"train, {threads} thread{'s' if threads > 1 else ''}"
        tm, hf = train[f"tokenmill/t{threads}"], train[f"tokenizers/t{threads}"]
        add(section, "wall time, s", median(tm, "wall_s"), median(hf, "wall_s"), "lower", SPEED)
        add(section, "CPU time, s", median(tm, "cpu_s"), median(hf, "cpu_s"), "lower", SPEED)
        add(section, "peak RSS, MiB", median(tm, "peak_rss_mib"), median(hf, "peak_rss_mib"),
            "lower", MEMORY)
        add(section, "RSS delta, MiB", median(tm, "rss_delta_mib"),
            median(hf, "rss_delta_mib"), "lower", MEMORY)
    sections = {OWN: ("tokenmill@tokenmill", "tokenizers@tokenizers"),
                "encode, tokenmill's file": ("tokenmill@tokenmill", "tokenizers@tokenmill"),
                "encode, tokenizers' file": ("tokenmill@tokenizers", "tokenizers@tokenizers")}
    for section, (tm_key, hf_key) in sections.items():
        tm, hf = encode[tm_key], encode[hf_key]
        add(section, "cold MB/s", median(tm, "cold_mb_s"), median(hf, "cold_mb_s"),
            "higher", SPEED)
        add(section, "warm MB/s", median(tm, "warm_mb_s"), median(hf, "warm_mb_s"),
            "higher", SPEED)
        add(section, "load s", median(tm, "load_s"), median(hf, "load_s"), "lower", SPEED)
        if section == OWN:
            add(section, "held-out tokens", tm[0]["tokens"], hf[0]["tokens"], "lower", TOKENS)
    return rows


def number(x: float) -> str:
    return f"{x:,.0f}" if x >= 1e4 else f"{x:.3g}"


def format_table(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    """Plain columns, or a Markdown table (for docs/benchmarks.md)."""
    header = ("section", "metric", "tokenmill", "tokenizers", "tm/hf", "reading")
    cells = [header] + [(r["section"], r["metric"], number(r["tokenmill"]),
                         number(r["tokenizers"]), f"{r['ratio']:.2f}", r["verdict"])
                        for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    sep, edge = (" | ", "| ") if markdown else ("  ", "")
    out = []
    for n, line in enumerate(cells):
        out.append((edge + sep.join(c.ljust(w) for c, w in zip(line, widths, strict=True))
                    + edge[::-1]).rstrip())
        if n == 0:
            out.append((edge + sep.join("-" * w for w in widths) + edge[::-1]).rstrip())
    out += [""] if markdown else []
    out.append("tm/hf = tokenmill / tokenizers: for time and memory < 1 means tokenmill is "
               "better; for MB/s > 1 does.")
    return "\n".join(out)


def machine_info() -> dict[str, Any]:
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent, check=False).stdout.strip()
    return {"nproc": len(os.sched_getaffinity(0)), "cpu": cpu, "python": platform.python_version(),
            "platform": platform.platform(), "tokenmill": metadata.version("tokenmill"),
            "tokenmill_commit": commit or "unknown", "tokenizers": metadata.version("tokenizers")}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA,
                   help="the shared data directory (default: the repository's ../shared/data)")
    p.add_argument("--mb", type=float, default=10, help="training corpus size, MB (default 10)")
    p.add_argument("--vocab-size", type=int, default=8000, help="default 8000")
    p.add_argument("--repeats", type=int, default=3, help="runs per measurement (default 3)")
    p.add_argument("--json", type=Path, help="also write every run and the table here")
    p.add_argument("--workdir", type=Path,
                   help="keep corpora, trained files and ids here (default: a temporary dir)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def serve_worker(spec_json: str | None, workers: dict[str, Any]) -> bool:
    """In a worker process (``--worker SPEC``): run the task SPEC names and print its result
    as JSON on the last line of stdout; False in the driver, which has no SPEC."""
    if not spec_json:
        return False
    spec = json.loads(spec_json)
    print(json.dumps(workers[spec["task"]](spec)))
    return True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if serve_worker(args.worker, WORKERS):
        return 0
    with tempfile.TemporaryDirectory(prefix="bench_bpe_") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        return benchmark(args, work)


def benchmark(args: argparse.Namespace, work: Path) -> int:
    started = time.perf_counter()
    train_lines, train_desc = training_corpus(args.data, args.mb)
    held_lines, held_desc = heldout_corpus(args.data)
    seen = set(train_lines)
    overlap = [line for line in held_lines if line in seen]
    held_desc.append(f"  {len(overlap):,} held-out lines ({utf8_size(overlap) / MB:.3f} MB) "
                     "also occur verbatim in the training corpus")
    write_lines(work / "train.txt", train_lines)
    write_lines(work / "heldout.txt", held_lines)
    del train_lines, held_lines, seen

    info = machine_info()
    header = [
        (f"bench_bpe: byte-level BPE, vocab {args.vocab_size}, medians of {args.repeats} runs "
         f"(each in a fresh process), {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"),
        f"machine: {info['nproc']} CPUs, {info['cpu']}; {info['platform']}",
        (f"python {info['python']}, tokenmill {info['tokenmill']} ({info['tokenmill_commit']}), "
         f"tokenizers {info['tokenizers']}"),
        *train_desc, *held_desc,
        ("training: 1 and 2 threads (tokenizers: RAYON_NUM_THREADS; tokenmill: "
         "TOKENMILL_NUM_THREADS, used by its pre-token counting; the merge loop is one thread); "
         "wall and CPU time of the train_from_iterator call only"),
        ("encoding: encode_batch of all held-out lines, 1 thread; cold = first pass in a fresh "
         "process, warm = second pass"),
    ]
    print("\n".join(header), flush=True)

    train = bench_training(args, work)
    files = {e: train[f"{e}/t1"][0]["file"] for e in ENGINES}
    encode = bench_encoding(args, work, files)
    diffs = {trained_by: mismatches(work, trained_by) for trained_by in files}
    deterministic = {e: same_bytes([run["file"] for t in (1, 2) for run in train[f"{e}/t{t}"]])
                     for e in ENGINES}
    rows = table_rows(train, encode)

    print()
    print(format_table(rows, args.markdown))
    print("vocab sizes: " + ", ".join(f"{e} {train[f'{e}/t1'][0]['vocab_size']}"
                                       for e in ENGINES))
    print(merge_agreement(files))
    print("trained files identical across runs and thread counts: "
          + ", ".join(f"{e} {'yes' if ok else 'NO'}" for e, ok in deterministic.items()))
    print("ids mismatches, same file (held-out lines that differ, must be 0): "
          + ", ".join(f"file trained by {trained_by} {n}" for trained_by, n in diffs.items()))
    print(f"total benchmark time {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({
            "header": header, "machine": info, "args": {k: str(v) for k, v in vars(args).items()},
            "rows": rows, "mismatches": diffs, "deterministic": deterministic,
            "train_runs": train, "encode_runs": encode}, indent=2) + "\n")
    return 1 if any(diffs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
