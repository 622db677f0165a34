"""Byte-level BPE training at corpus scale: tokenmill vs the peers (issue 4), side by side in
one run, with the ratios tokenmill / peer printed.

    python benchmarks/bench_train.py --repeats 3 --json /tmp/bench_train.json --markdown
    python benchmarks/bench_train.py --sizes 10:8000,10:32000,100:8000,100:32000

Engines: tokenmill (``tokenmill train --byte-level``, run in-process through its CLI entry
point), Hugging Face ``tokenizers`` (BpeTrainer, ByteLevel pre-tokenizer), ``sentencepiece``
(BPE), ``youtokentome``, ``bpeasy``, ``rustbpe`` and ``gigatoken`` (``train_bpe``), each where it
is installed. All read the same corpus file: one document per line, written once per size in a
temporary directory (bpeasy and rustbpe take a Python iterator, given the lines of that file).
The peers are not dependencies of tokenmill: ``pip install tokenizers sentencepiece youtokentome
bpeasy rustbpe gigatoken``; an engine that is missing, or has no trainer, gets a row saying so.

Every measured run is a fresh subprocess (this script re-run with ``--worker``) that imports
only its engine, so peak memory is that run's own: ``VmHWM`` of /proc/self/status read right
after training, minus ``VmRSS`` just before it (the baseline: interpreter + engine imported).
Wall and CPU time (user + system, all threads) cover the training call only, not writing the
corpus. Engines run in alternating order (forward, then backward: ABBA); reported numbers are
medians over ``--repeats``. An engine whose first run at a size takes longer than
``--slow-seconds`` gets that one run only at that size (said in the table).

Quality: tokens per byte on held-out text (FLORES-200 dev eng_Latn + zho_Hans, and 1 MB of
tiny-shakespeare; Romeo and Juliet is left out of training because tiny-shakespeare quotes it)
for tokenmill and tokenizers trained on the same corpus.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import gzip
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench_bpe import head, utf8_size  # noqa: E402  (the benchmarks folder's helpers)

ENGINES = ("tokenmill", "tokenizers", "sentencepiece", "youtokentome", "bpeasy", "rustbpe",
           "gigatoken")
PACKAGES = {"tokenmill": "tokenmill", "tokenizers": "tokenizers", "sentencepiece": "sentencepiece",
            "youtokentome": "youtokentome", "bpeasy": "bpeasy", "rustbpe": "rustbpe",
            "gigatoken": "gigatoken"}
MB = 1_000_000  # sizes are decimal megabytes of UTF-8 text, newlines not counted
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # the repo's ../shared/data
DEFAULT_SIZES = "10:8000,100:32000"
# GPT-2's pre-tokenizer pattern (tokenizers' ByteLevel(use_regex=True), tiktoken's "gpt2").
GPT2_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
BPEASY_MAX_TOKEN_LENGTH = 128  # bpeasy requires one; the others have no limit by default
SHAKESPEARE_HELDOUT = 1 * MB
HELDOUT_FROM_TRAINING = {"pg1513_shakespeare_romeo_and_juliet.txt"}  # quoted by tiny-shakespeare
RESULT = "RESULT "  # prefix of the worker's result line (engines print to stdout too)
SUFFIX = {"tokenmill": ".json", "tokenizers": ".json", "sentencepiece": "",
          "youtokentome": ".model", "bpeasy": ".tiktoken", "rustbpe": "",
          "gigatoken": ".merges.json"}


# -- input text ------------------------------------------------------------------------------------

def split_lines(text: str) -> list[str]:
    """Non-empty lines, split at every Unicode line boundary, so that no document contains a
    character that some engine's reader would take for a line end (\\r, \\x0b, U+2028, ...)."""
    return [line for line in text.splitlines() if line]


def read_text(path: Path) -> str:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        return f.read()


def source_pool(data: Path) -> list[tuple[str, list[str]]]:
    """Every unique prose and code text of the data set except FLORES (evaluation only) and the
    held-out English (tiny-shakespeare, and Romeo and Juliet, which it quotes): (name, lines)."""
    text, pool = data / "text", []
    english = [p for p in sorted((text / "en" / "gutenberg").glob("*.txt"))
               if p.name not in HELDOUT_FROM_TRAINING]
    pool.append((f"text/en/gutenberg ({len(english)} books)",
                 [line for p in english for line in split_lines(read_text(p))]))
    for rel in ("en/kjv_old_testament.txt", "en/ud_en_ewt_dev.txt", "zh/hongloumeng.txt",
                "zh/xiyouji.txt", "zh/ud_zh_gsdsimp_dev.txt", "zh/gutenberg_zh_hant.txt.gz"):
        pool.append((f"text/{rel}", split_lines(read_text(text / rel))))
    for p in sorted((data / "code").glob("*.jsonl")):
        with open(p, encoding="utf-8") as f:
            lines = [line for row in f for line in split_lines(json.loads(row)["text"])]
        pool.append((f"code/{p.name} (source lines)", lines))
    return pool


def training_corpus(pool: list[tuple[str, list[str]]], mb: float) -> tuple[list[str], list[str]]:
    """(lines, description) of ``mb`` MB drawn from the pool with the pool's own mix: below the
    pool's size, the first same fraction of every source; above it, the whole pool repeated as
    often as it fits, then such a fraction for the rest."""
    unique = sum(utf8_size(lines) for _, lines in pool)
    target = int(mb * MB)
    copies, rest = divmod(target, unique)
    lines: list[str] = []
    for _ in range(copies):
        lines += [line for _, source in pool for line in source]
    parts = []
    for name, source in pool:
        size = utf8_size(source)
        taken = head(source, size * rest // unique)
        lines += taken
        parts.append(f"{name} {size / MB:.2f} MB")
    total = utf8_size(lines)
    if copies:
        how = (f"the whole pool {copies}x, then the first {rest / unique:.1%} of each source "
               f"again: {total / MB - unique / MB:.1f} MB ({(total - unique) / total:.0%}) of "
               "the corpus is REPEATED text")
    else:
        how = f"the first {rest / unique:.1%} of each source (cut at a line)"
    description = [
        f"training corpus {mb:g} MB: {total / MB:.2f} MB of UTF-8, {len(lines):,} lines "
        f"(one document per line, empty lines dropped); {how}",
        f"  pool of unique text, {unique / MB:.2f} MB: " + ", ".join(parts),
    ]
    return lines, description


def heldout_corpus(data: Path) -> tuple[dict[str, list[str]], list[str]]:
    """({part: lines}, description): text never put in a training corpus."""
    text = data / "text"
    parts = {
        "flores eng_Latn": split_lines(read_text(text / "flores200_dev" / "eng_Latn.dev.gz")),
        "flores zho_Hans": split_lines(read_text(text / "flores200_dev" / "zho_Hans.dev.gz")),
        "tinyshakespeare 1 MB": head(split_lines(read_text(text / "en" / "tinyshakespeare.txt")),
                                     SHAKESPEARE_HELDOUT),
    }
    description = ["held-out text: " + ", ".join(
        f"{name} {utf8_size(lines) / MB:.2f} MB ({len(lines):,} lines)"
        for name, lines in parts.items())]
    return parts, description


def write_lines(path: Path, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line)
            f.write("\n")


# -- the engines (each imported only inside the worker that measures it) ---------------------------

def lines_of(path: str) -> Any:
    """The documents of the corpus file, streamed (for engines that take an iterator)."""
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            yield line[:-1] if line.endswith("\n") else line


def prepare(engine: str, spec: dict[str, Any]) -> Any:
    """Import the engine and set it up; returns the training call (timed by the worker), which
    returns a finishing call (not timed) that saves the result and gives the vocabulary size."""
    corpus, vocab, out, threads = spec["corpus"], spec["vocab_size"], spec["out"], spec["threads"]
    if engine == "tokenmill":
        import tokenmill.cli
        import tokenmill.cli_train  # noqa: F401  (imported before the baseline)

        def train() -> Any:
            argv = ["train", corpus, "--byte-level", "--vocab-size", str(vocab), "--quiet",
                    "-o", out]
            if tokenmill.cli.main(argv) != 0:
                raise SystemExit("tokenmill train failed")

            def finish() -> int:
                from tokenmill import Tokenizer
                return Tokenizer.from_file(out).get_vocab_size()
            return finish
        return train
    if engine == "tokenizers":
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())

        def train() -> Any:
            tok.train([corpus], trainer)

            def finish() -> int:
                tok.save(out)
                return tok.get_vocab_size()
            return finish
        return train
    if engine == "sentencepiece":
        import sentencepiece as spm

        def train() -> Any:
            spm.SentencePieceTrainer.train(
                input=corpus, model_prefix=out, model_type="bpe", vocab_size=vocab,
                num_threads=threads, byte_fallback=True, character_coverage=0.9995,
                input_sentence_size=0, max_sentence_length=1 << 16, minloglevel=1)

            def finish() -> int:
                return spm.SentencePieceProcessor(model_file=out + ".model").get_piece_size()
            return finish
        return train
    if engine == "youtokentome":
        import youtokentome as yttm

        def train() -> Any:
            yttm.BPE.train(data=corpus, model=out, vocab_size=vocab, n_threads=threads)

            def finish() -> int:
                return yttm.BPE(out).vocab_size()
            return finish
        return train
    if engine == "bpeasy":
        import bpeasy

        def train() -> Any:
            ranks = bpeasy.train_bpe(lines_of(corpus), GPT2_PATTERN, BPEASY_MAX_TOKEN_LENGTH,
                                     vocab)

            def finish() -> int:
                bpeasy.save_vocab_to_tiktoken(ranks, out)
                return len(ranks)
            return finish
        return train
    if engine == "rustbpe":
        import rustbpe

        tok = rustbpe.Tokenizer()

        def train() -> Any:
            tok.train_from_iterator(lines_of(corpus), vocab, pattern=GPT2_PATTERN)

            def finish() -> int:
                return int(tok.vocab_size)
            return finish
        return train
    if engine == "gigatoken":
        import gigatoken

        source = gigatoken.TextFileSource([corpus], separator=b"\n")

        def train() -> Any:
            learnt, merges = gigatoken.train_bpe(source, vocab, [])

            def finish() -> int:
                Path(out).write_text(json.dumps([[a.hex(), b.hex()] for a, b in merges]))
                return len(learnt)
            return finish
        return train
    raise ValueError(f"unknown engine {engine}")


SETTINGS = {
    "tokenmill": "GPT-2 regex, byte-level; `tokenmill train --byte-level` in-process; "
                 "TOKENMILL_NUM_THREADS; time includes writing tokenizer.json",
    "tokenizers": "GPT-2 regex (ByteLevel, add_prefix_space=False), initial_alphabet = "
                  "ByteLevel.alphabet(), `train([path])`; RAYON_NUM_THREADS",
    "sentencepiece": "BPE on whitespace-split pieces (no GPT-2 regex; '▁' marks a space), "
                     "characters, not bytes, merged, byte_fallback=True, character_coverage="
                     "0.9995, NFKC normalization (its default), input_sentence_size=0 (all), "
                     "num_threads; time includes writing its model",
    "youtokentome": "BPE on whitespace-split words, characters, not bytes, merged (coverage "
                    "1.0, unknown characters become <UNK>), n_threads; time includes writing "
                    "its model",
    "bpeasy": f"GPT-2 regex, byte-level, max_token_length={BPEASY_MAX_TOKEN_LENGTH}, an "
              "iterator over the file's lines (read in Python)",
    "rustbpe": "GPT-2 regex (pattern=), byte-level, train_from_iterator over the file's lines "
               "(read in Python); RAYON_NUM_THREADS",
    "gigatoken": "GPT-2 regex (built in), byte-level, train_bpe(TextFileSource(path, "
                 "separator='\\n')), ties broken as tokenizers does; RAYON_NUM_THREADS",
}


# -- workers: one measurement in a fresh process ---------------------------------------------------

def proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def cpu_seconds() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def worker_train(spec: dict[str, Any]) -> dict[str, Any]:
    train = prepare(spec["engine"], spec)
    gc.collect()
    baseline = proc_status_kib("VmRSS") / 1024
    hwm_before = proc_status_kib("VmHWM") / 1024
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    finish = train()
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    peak = proc_status_kib("VmHWM") / 1024
    vocab = finish()
    return {"wall_s": wall, "cpu_s": cpu, "baseline_mib": baseline,
            "hwm_before_mib": hwm_before, "peak_mib": peak, "delta_mib": peak - baseline,
            "vocab_size": vocab}


def worker_encode(spec: dict[str, Any]) -> dict[str, Any]:
    """Tokens of each held-out part, one line at a time (encode_ordinary / encode().ids)."""
    parts = json.loads(Path(spec["heldout"]).read_text(encoding="utf-8"))
    if spec["engine"] == "tokenmill":
        from tokenmill import Tokenizer as TM

        tm = TM.from_file(spec["tokenizer"])

        def count(line: str) -> int:
            return len(tm.encode_ordinary(line))
    else:
        from tokenizers import Tokenizer as HF

        hf = HF.from_file(spec["tokenizer"])

        def count(line: str) -> int:
            return len(hf.encode(line, add_special_tokens=False).ids)
    return {name: {"tokens": sum(map(count, lines)), "bytes": utf8_size(lines)}
            for name, lines in parts.items()}


WORKERS = {"train": worker_train, "encode": worker_encode}


# -- driver ----------------------------------------------------------------------------------------

def run_worker(spec: dict[str, Any], threads: int, timeout: float | None) -> dict[str, Any]:
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENMILL_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="true" if threads > 1 else "false")
    try:
        proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)],
                              env=env, capture_output=True, text=True, check=False,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s", "timed_out_s": timeout}
    results = [line for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not results:
        tail = ((proc.stderr or proc.stdout).strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}"}
    return json.loads(results[-1][len(RESULT):])


def available(engine: str) -> str | None:
    """None if the engine can train here, else why not."""
    if importlib.util.find_spec(engine) is None:
        return f"not installed (pip install {PACKAGES[engine]})"
    probe = {"rustbpe": "import rustbpe; rustbpe.Tokenizer.train_from_iterator",
             "gigatoken": "import gigatoken; gigatoken.train_bpe",
             "bpeasy": "import bpeasy; bpeasy.train_bpe"}.get(engine)
    if probe:
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            return "installed, but has no BPE trainer: " + proc.stderr.strip().splitlines()[-1]
    return None


def version(engine: str) -> str:
    try:
        return metadata.version(PACKAGES[engine])
    except metadata.PackageNotFoundError:
        return "-"


def parse_sizes(text: str) -> list[tuple[float, int]]:
    sizes = []
    for item in text.split(","):
        mb, _, vocab = item.strip().partition(":")
        sizes.append((float(mb), int(vocab)))
    return sizes


def bench_size(args: argparse.Namespace, work: Path, mb: float, vocab: int,
               engines: list[str]) -> dict[str, Any]:
    tag = f"{mb:g}mb-{vocab}"
    corpus = work / f"train-{tag}.txt"
    runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    notes: dict[str, str] = {}
    timed_out: dict[str, float] = {}
    for r in range(args.repeats):
        for engine in (engines if r % 2 == 0 else engines[::-1]):
            if engine in notes:
                continue
            out = work / f"{engine}-{tag}-r{r}{SUFFIX[engine]}"
            spec = {"task": "train", "engine": engine, "corpus": str(corpus),
                    "vocab_size": vocab, "out": str(out), "threads": args.threads}
            result = run_worker(spec, args.threads, args.timeout)
            result["file"] = str(out)
            if "error" in result:
                notes[engine] = result["error"]
                if "timed_out_s" in result:
                    timed_out[engine] = result["timed_out_s"]
                log(f"train {tag} {engine:13s} run {r}: FAILED {result['error']}")
                continue
            runs[engine].append(result)
            log(f"train {tag} {engine:13s} run {r}: {result['wall_s']:.2f} s wall, "
                f"{result['cpu_s']:.2f} s CPU, peak {result['peak_mib']:.0f} MiB "
                f"(+{result['delta_mib']:.0f}), vocab {result['vocab_size']}")
            if r == 0 and args.repeats > 1 and result["wall_s"] > args.slow_seconds:
                notes[engine] = (f"1 run only: its first took {result['wall_s']:.0f} s "
                                 f"(> --slow-seconds {args.slow_seconds:g})")
    return {"mb": mb, "vocab": vocab, "runs": runs, "notes": notes, "timed_out": timed_out}


def quality(args: argparse.Namespace, work: Path, size: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for engine in ("tokenmill", "tokenizers"):
        runs = size["runs"].get(engine)
        if not runs:
            continue
        spec = {"task": "encode", "engine": engine, "tokenizer": runs[0]["file"],
                "heldout": str(work / "heldout.json")}
        result = run_worker(spec, 1, args.timeout)
        if "error" not in result:
            out[engine] = result
    return out


# -- report ----------------------------------------------------------------------------------------

def med(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def number(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def format_table(header: tuple[str, ...], cells: list[tuple[str, ...]], markdown: bool) -> str:
    cells = [header] + cells
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    sep, edge = (" | ", "| ") if markdown else ("  ", "")
    out = []
    for n, line in enumerate(cells):
        out.append((edge + sep.join(c.ljust(w) for c, w in zip(line, widths, strict=True))
                    + edge[::-1]).rstrip())
        if n == 0:
            out.append((edge + sep.join("-" * w for w in widths) + edge[::-1]).rstrip())
    return "\n".join(out)


def size_rows(size: dict[str, Any], skipped: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    tm = size["runs"].get("tokenmill") or []
    for engine in ENGINES:
        if engine in skipped:
            rows.append({"engine": engine, "note": skipped[engine]})
            continue
        runs = size["runs"].get(engine)
        if runs is None:
            continue
        row: dict[str, Any] = {"engine": engine, "runs": len(runs),
                               "note": size["notes"].get(engine, "")}
        if runs:
            for key in ("wall_s", "cpu_s", "peak_mib", "delta_mib"):
                row[key] = med(runs, key)
                if tm:
                    row[f"tm_over_{key}"] = med(tm, key) / row[key] if row[key] else None
            row["vocab_size"] = runs[0]["vocab_size"]
        rows.append(row)
    return rows


def render(size: dict[str, Any], rows: list[dict[str, Any]], markdown: bool) -> str:
    header = ("engine", "runs", "wall s", "tm/peer", "CPU s", "tm/peer", "peak RSS MiB",
              "peak-base MiB", "tm/peer", "vocab")
    cells: list[tuple[str, ...]] = []
    notes = []
    for row in rows:
        if "wall_s" not in row:
            limit = size.get("timed_out", {}).get(row["engine"])
            tm_wall = next((r["wall_s"] for r in rows if r["engine"] == "tokenmill"
                            and "wall_s" in r), None)
            wall = f">{limit:g}" if limit else "-"
            wall_ratio = f"<{tm_wall / limit:.2f}" if limit and tm_wall else ""
            cells.append((row["engine"], "0", wall, wall_ratio, "-", "", "-", "-", "", "-"))
            notes.append(f"{row['engine']}: {row['note']}")
            continue
        e: str = row["engine"]

        def rt(key: str, e: str = e, row: dict[str, Any] = row) -> str:
            value = row.get(f"tm_over_{key}")
            return "" if e == "tokenmill" or value is None else f"{value:.2f}"
        cells.append((e, str(row["runs"]), number(row["wall_s"]), rt("wall_s"),
                      number(row["cpu_s"]), rt("cpu_s"), number(row["peak_mib"]),
                      number(row["delta_mib"]), rt("delta_mib"), str(row["vocab_size"])))
        if row["note"]:
            notes.append(f"{e}: {row['note']}")
    title = f"vocab {size['vocab']}, {size['mb']:g} MB corpus"
    text = (f"### {title}\n\n" if markdown else f"{title}\n") + format_table(header, cells,
                                                                               markdown)
    if notes:
        text += "\n" + ("\n" if markdown else "") + "\n".join(
            ("- " if markdown else "  ") + n for n in notes)
    return text


def targets(rows: list[dict[str, Any]]) -> list[str]:
    """Where tokenmill stands against issue 4's targets for this size."""
    by = {row["engine"]: row for row in rows if "wall_s" in row}
    tm, hf = by.get("tokenmill"), by.get("tokenizers")
    if not tm:
        return []
    peers = [row for e, row in by.items() if e != "tokenmill"]
    lines = []
    if hf:
        lines.append(f"wall time vs tokenizers {tm['wall_s'] / hf['wall_s']:.2f}x (target <= 0.5); "
                     f"peak-base memory vs tokenizers {tm['delta_mib'] / hf['delta_mib']:.2f}x "
                     f"(target <= 0.5); peak RSS {tm['peak_mib'] / hf['peak_mib']:.2f}x")
    if peers:
        fast = min(peers, key=lambda r: r["wall_s"])
        lean = min(peers, key=lambda r: r["delta_mib"])
        lines.append(f"fastest peer {fast['engine']} {fast['wall_s']:.2f} s: tokenmill "
                     f"{tm['wall_s'] / fast['wall_s']:.2f}x its time (target <= 1); leanest peer "
                     f"{lean['engine']} +{lean['delta_mib']:.0f} MiB: tokenmill "
                     f"{tm['delta_mib'] / lean['delta_mib']:.2f}x its memory (target <= 1)")
    return lines


def quality_lines(q: dict[str, Any]) -> list[str]:
    if len(q) < 2:
        return ["quality: not measured (tokenmill or tokenizers has no trained file)"]
    out = []
    for name in list(q["tokenmill"]) + ["all"]:
        def tpb(engine: str, name: str = name) -> tuple[int, float]:
            parts = q[engine].values() if name == "all" else [q[engine][name]]
            tokens = sum(p["tokens"] for p in parts)
            return tokens, tokens / sum(p["bytes"] for p in parts)
        (tt, tm), (ht, hf) = tpb("tokenmill"), tpb("tokenizers")
        out.append(f"  {name:22s} tokenmill {tm:.4f} ({tt:,} tokens), tokenizers {hf:.4f} "
                   f"({ht:,}): {(tm / hf - 1) * 100:+.2f}%")
    return ["quality, held-out tokens per byte (lower is better; target: tokenmill within 1%):",
            *out]


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
            "platform": platform.platform(), "mem_gib": os.sysconf("SC_PAGE_SIZE")
            * os.sysconf("SC_PHYS_PAGES") / 2**30, "load": os.getloadavg(),
            "tokenmill_commit": commit or "unknown",
            "versions": {e: version(e) for e in ENGINES}}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA,
                   help="the shared data directory (default: the repository's ../shared/data)")
    p.add_argument("--sizes", default=DEFAULT_SIZES,
                   help=f"MB:VOCAB,... corpus sizes and vocabularies (default {DEFAULT_SIZES})")
    p.add_argument("--engines", default=",".join(ENGINES),
                   help="comma-separated subset of " + ",".join(ENGINES))
    p.add_argument("--threads", type=int, default=2, help="threads per engine (default 2)")
    p.add_argument("--repeats", type=int, default=3, help="runs per engine and size (default 3)")
    p.add_argument("--slow-seconds", type=float, default=120,
                   help="an engine whose first run at a size takes longer gets 1 run (default 120)")
    p.add_argument("--timeout", type=float, default=180,
                   help="give up on a run after this many seconds and report it as timed out "
                        "(default 180, which keeps the default invocation near 15 minutes: "
                        "bpeasy needs ~400 s at 100 MB)")
    p.add_argument("--json", type=Path, help="also write every run and the tables here")
    p.add_argument("--workdir", type=Path,
                   help="keep corpora and trained files here (default: a temporary dir)")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        spec = json.loads(args.worker)
        result = WORKERS[spec["task"]](spec)
        sys.stdout.flush()
        print(RESULT + json.dumps(result), flush=True)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        return benchmark(args, work)


def benchmark(args: argparse.Namespace, work: Path) -> int:
    started = time.perf_counter()
    wanted = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(wanted) - set(ENGINES)
    if unknown:
        raise SystemExit(f"unknown engines: {', '.join(sorted(unknown))}")
    skipped = {e: why for e in wanted if (why := available(e))}
    engines = [e for e in ENGINES if e in wanted and e not in skipped]
    sizes = parse_sizes(args.sizes)

    pool = source_pool(args.data)
    held, held_desc = heldout_corpus(args.data)
    (work / "heldout.json").write_text(json.dumps(held), encoding="utf-8")
    pool_lines = {line for _, lines in pool for line in lines}
    held_lines = [line for lines in held.values() for line in lines]
    overlap = [line for line in held_lines if line in pool_lines]
    held_desc.append(f"  {len(overlap):,} held-out lines ({utf8_size(overlap):,} bytes) also occur "
                     "verbatim in the training pool" + (f", e.g. {overlap[:3]}" if overlap else ""))
    del pool_lines

    info = machine_info()
    header = [
        (f"bench_train: byte-level BPE training, {args.threads} threads, medians of "
         f"{args.repeats} runs (each in a fresh process, ABBA order), "
         f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"),
        (f"machine: {info['nproc']} CPUs, {info['cpu']}, {info['mem_gib']:.0f} GiB; "
         f"{info['platform']}; load average at start "
         + " ".join(f"{x:.1f}" for x in info["load"])),
        f"python {info['python']}, tokenmill commit {info['tokenmill_commit']}; "
        + ", ".join(f"{e} {v}" for e, v in info["versions"].items()),
        *held_desc,
        "settings: " + "; ".join(f"{e}: {SETTINGS[e]}" for e in engines),
    ]
    print("\n".join(header), flush=True)

    results = []
    for mb, vocab in sizes:
        lines, desc = training_corpus(pool, mb)
        corpus = work / f"train-{mb:g}mb-{vocab}.txt"
        write_lines(corpus, lines)
        del lines
        gc.collect()
        desc.append(f"  file {corpus.stat().st_size / MB:.2f} MB with newlines")
        log("\n".join(desc))
        size = bench_size(args, work, mb, vocab, engines)
        size["corpus"] = desc
        size["quality"] = quality(args, work, size)
        size["rows"] = size_rows(size, skipped)
        results.append(size)
        corpus.unlink()

    for size in results:
        print()
        print("\n".join(size["corpus"]))
        print(render(size, size["rows"], args.markdown))
        print("\n".join(targets(size["rows"])))
        print("\n".join(quality_lines(size["quality"])))
    print("\ntm/peer = tokenmill / that engine: below 1 tokenmill is faster (wall, CPU) or "
          "leaner (peak minus baseline). peak-base = VmHWM after training minus VmRSS before it.")
    print(f"total benchmark time {time.perf_counter() - started:.0f} s; load average at the end "
          + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    if args.json:
        args.json.write_text(json.dumps({
            "header": header, "machine": info, "args": {k: str(v) for k, v in vars(args).items()},
            "skipped": skipped, "sizes": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
