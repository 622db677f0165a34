"""Unigram LM training: tokenmill vs sentencepiece and Hugging Face ``tokenizers`` (issue 5),
side by side in one run, ratios tokenmill / peer printed.

    python benchmarks/bench_unigram.py --sizes 10:8000,10:32000 --repeats 3 --markdown

Engines: tokenmill (``UnigramTrainer`` behind the Metaspace pre-tokenizer), ``sentencepiece``
(``SentencePieceTrainer``, model_type=unigram) and ``tokenizers`` (``UnigramTrainer``, Metaspace
pre-tokenizer). All three use sentencepiece's schedule defaults (seed 1M substrings, shrinking
0.75, 2 EM sub-iterations, pieces up to 16 characters). To compare like with like, sentencepiece
runs with ``normalization_rule_name=identity`` (no NFKC, as the other two) and tokenmill and
sentencepiece both with ``--character-coverage`` (default sentencepiece's 0.9995: the Chinese
text has thousands of rare characters); ``tokenizers`` has no such option and keeps every
character. sentencepiece's other options are its defaults (it still splits pieces at script and
digit boundaries, which the others do not).

Pipelines: all three drop leading, trailing and repeated spaces before training (sentencepiece's
own rule; tokenmill's SentencePieceNormalizer; a Replace + Strip normalizer for ``tokenizers``),
then cut words before each "▁" (a space).

The corpus and held-out text are bench_train.py's: the data set's prose and code (no FLORES), a
document per line, and FLORES-200 dev eng_Latn + zho_Hans and 1 MB of tiny-shakespeare held out.
Every measured run is a fresh subprocess (this script with ``--worker``): wall and CPU time of
the training call, and its peak memory (``VmHWM`` after training minus ``VmRSS`` before it).
Engines alternate (ABBA) over ``--repeats``; medians are reported. Quality is tokens per byte
of each engine's own tokenizer on the held-out text (lower is better).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_bpe import utf8_size  # noqa: E402  (the benchmarks folder's helpers)
from bench_train import (  # noqa: E402
    DEFAULT_DATA,
    cpu_seconds,
    heldout_corpus,
    lines_of,
    parse_sizes,
    proc_status_kib,
    source_pool,
    training_corpus,
    write_lines,
)

ENGINES = ("tokenmill", "sentencepiece", "tokenizers")
RESULT = "RESULT "


def train(engine: str, corpus: str, vocab: int, out: str, coverage: float) -> Any:
    """A zero-argument training call for ``engine``, everything imported beforehand."""
    if engine == "tokenmill":
        from tokenmill import Tokenizer, Unigram, UnigramTrainer
        from tokenmill.decoders import Metaspace as MetaspaceDecoder
        from tokenmill.formats.sentencepiece import SentencePieceNormalizer
        from tokenmill.pre_tokenizers import Metaspace

        def run() -> None:
            # sentencepiece's pipeline: spaces collapsed and spelled "▁", words cut before each
            tok = Tokenizer(Unigram([("<unk>", 0.0)], unk_id=0),
                            normalizer=SentencePieceNormalizer(),
                            pre_tokenizer=Metaspace(prepend_scheme="never"),
                            decoder=MetaspaceDecoder())
            tok.train_from_iterator(lines_of(corpus), UnigramTrainer(
                vocab_size=vocab, character_coverage=coverage))
            tok.save(out)
        return run
    if engine == "sentencepiece":
        import sentencepiece as spm

        def run() -> None:
            spm.SentencePieceTrainer.train(
                input=corpus, model_prefix=out, model_type="unigram", vocab_size=vocab,
                character_coverage=coverage, normalization_rule_name="identity",
                bos_id=-1, eos_id=-1, minloglevel=2, num_threads=int(
                    os.environ.get("TOKENMILL_NUM_THREADS", "2")))
        return run
    from tokenizers import Regex, models, normalizers, pre_tokenizers, trainers
    from tokenizers import Tokenizer as HF

    def run() -> None:
        tok = HF(models.Unigram())
        # as near to sentencepiece's whitespace rules as its components go
        tok.normalizer = normalizers.Sequence([normalizers.Replace(Regex(" {2,}"), " "),
                                               normalizers.Strip()])
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=vocab, special_tokens=["<unk>"],
                                          unk_token="<unk>", show_progress=False)
        tok.train_from_iterator(lines_of(corpus), trainer)
        tok.save(out)
    return run


def tokens_per_part(engine: str, out: str, parts: dict[str, list[str]]) -> dict[str, Any]:
    if engine == "tokenmill":
        import tokenmill

        tm = tokenmill.Tokenizer.from_file(out)
        count = lambda line: len(tm.encode_ordinary(line))  # noqa: E731
    elif engine == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=out + ".model")
        count = lambda line: len(sp.encode(line))  # noqa: E731
    else:
        from tokenizers import Tokenizer as HF

        hf = HF.from_file(out)
        count = lambda line: len(hf.encode(line, add_special_tokens=False).ids)  # noqa: E731
    return {name: {"tokens": sum(map(count, lines)), "bytes": utf8_size(lines)}
            for name, lines in parts.items()}


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    run = train(spec["engine"], spec["corpus"], spec["vocab"], spec["out"], spec["coverage"])
    gc.collect()
    baseline = proc_status_kib("VmRSS") / 1024
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    run()
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    peak = proc_status_kib("VmHWM") / 1024
    parts = json.loads(Path(spec["heldout"]).read_text(encoding="utf-8"))
    return {"wall_s": wall, "cpu_s": cpu, "delta_mib": peak - baseline,
            "quality": tokens_per_part(spec["engine"], spec["out"], parts)}


def run_worker(spec: dict[str, Any], threads: int) -> dict[str, Any]:
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENMILL_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="true" if threads > 1 else "false")
    proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], env=env,
                          capture_output=True, text=True, check=False)
    results = [line for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not results:
        tail = ((proc.stderr or proc.stdout).strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}"}
    return json.loads(results[-1][len(RESULT):])


def per_byte(quality: dict[str, Any], part: str | None = None) -> float:
    parts = [quality[part]] if part else list(quality.values())
    return sum(p["tokens"] for p in parts) / sum(p["bytes"] for p in parts)


def report(mb: float, vocab: int, runs: dict[str, list[dict[str, Any]]], markdown: bool) -> str:
    ok = {e: [r for r in rs if "error" not in r] for e, rs in runs.items()}
    if not any(ok.values()):
        return f"### {mb:g} MB, vocab {vocab:,}: every engine failed"
    parts = list(next(r for rs in ok.values() for r in rs)["quality"])
    header = ["engine", "wall s", "cpu s", "peak MiB", "tokens/byte", *parts]
    rows = []
    for engine, rs in ok.items():
        if not rs:
            rows.append([engine, runs[engine][0]["error"]] + [""] * (len(header) - 2))
            continue
        q = rs[0]["quality"]  # deterministic: the same in every run
        rows.append([engine, f"{statistics.median(r['wall_s'] for r in rs):.1f}",
                     f"{statistics.median(r['cpu_s'] for r in rs):.1f}",
                     f"{statistics.median(r['delta_mib'] for r in rs):.0f}",
                     f"{per_byte(q):.4f}", *(f"{per_byte(q, p):.4f}" for p in parts)])
    sep = " | " if markdown else "  "
    repeats = max(len(rs) for rs in ok.values())
    lines = [f"### {mb:g} MB, vocab {vocab:,} (medians of {repeats} runs)", ""]
    if markdown:
        lines += ["| " + sep.join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + sep.join(r) + " |" for r in rows]
    else:
        lines += [sep.join(header)] + [sep.join(r) for r in rows]
    ours = ok.get("tokenmill", [])
    for peer in ENGINES[1:]:
        if not ours or not ok.get(peer):
            continue
        ratio = {k: statistics.median(r[k] for r in ours) / statistics.median(r[k] for r in
                 ok[peer]) for k in ("wall_s", "cpu_s", "delta_mib")}
        quality = per_byte(ours[0]["quality"]) / per_byte(ok[peer][0]["quality"]) - 1
        lines.append(f"{'- ' if markdown else ''}tokenmill / {peer}: wall {ratio['wall_s']:.2f}x, "
                     f"cpu {ratio['cpu_s']:.2f}x, peak memory {ratio['delta_mib']:.2f}x, tokens "
                     f"per byte {quality:+.2%}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--sizes", default="10:8000,10:32000",
                   help="MB:VOCAB,... (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--character-coverage", type=float, default=0.9995)
    p.add_argument("--engines", default=",".join(ENGINES),
                   help="comma-separated subset of %(default)s")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(RESULT + json.dumps(worker(json.loads(args.worker))))
        return 0
    pool = source_pool(args.data)
    parts, held_description = heldout_corpus(args.data)
    with tempfile.TemporaryDirectory(prefix="bench_unigram_") as tmp:
        work = Path(tmp)
        heldout = work / "heldout.json"
        heldout.write_text(json.dumps(parts), encoding="utf-8")
        print("\n".join(held_description), file=sys.stderr)
        for mb, vocab in parse_sizes(args.sizes):
            lines, description = training_corpus(pool, mb)
            corpus = work / f"corpus_{mb:g}.txt"
            write_lines(corpus, lines)
            print("\n".join(description), file=sys.stderr)
            engines = tuple(e for e in ENGINES if e in args.engines.split(","))
            runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
            for repeat in range(args.repeats):
                order = engines if repeat % 2 == 0 else engines[::-1]  # ABBA
                for engine in order:
                    spec = {"engine": engine, "corpus": str(corpus), "vocab": vocab,
                            "out": str(work / f"{engine}_{mb:g}_{vocab}"), "heldout": str(heldout),
                            "coverage": args.character_coverage}
                    if engine != "sentencepiece":
                        spec["out"] += ".json"
                    result = run_worker(spec, args.threads)
                    print(f"{mb:g} MB {vocab} {engine}: "
                          f"{result.get('error') or round(result['wall_s'], 1)}", file=sys.stderr)
                    runs[engine].append(result)
            print(report(mb, vocab, runs, args.markdown) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
