"""The evaluation commands of ``tokenmill``: registered into the main parser by cli.py.

``eval`` (metrics per tokenizer and corpus; table, JSON, HTML), ``sweep`` (BPE at several
vocabulary sizes, evaluated on held-out corpora), ``golden freeze|check`` and ``check-config``.
Heavy modules (the metrics, matplotlib, rich) are imported when a command runs, not before.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmill.errors import InputError

if TYPE_CHECKING:
    from tokenmill.corpus import ReadOptions
    from tokenmill.evaluate import Corpus
    from tokenmill.tokenizer import Tokenizer

TOKENIZER_HELP = (
    "a tokenizer: a tokenizer.json file, a folder with tokenizer.json or vocab.json + "
    "merges.txt, or a tiktoken preset (gpt2, r50k_base, p50k_base, cl100k_base, o200k_base) "
    "as PRESET=RANKS_FILE (e.g. cl100k_base=data/cl100k_base.tiktoken), or as PRESET alone with "
    "--tiktoken-dir; NAME=PATH names a file's tokenizer in the output (default: the file or "
    "folder name)")


def load_tokenizer(spec: str, tiktoken_dir: str | None = None) -> tuple[str, str, Tokenizer]:
    """(display name, source, tokenizer) of a TOKENIZER argument (see ``TOKENIZER_HELP``)."""
    from tokenmill.formats.tiktoken import PRESETS
    from tokenmill.loading import load

    name, sep, path = spec.partition("=")
    if sep and name in PRESETS:
        return name, spec, load(name, path=path)
    if spec in PRESETS and not Path(spec).exists():  # a folder named "gpt2" is a folder
        if tiktoken_dir is None:
            raise InputError(f"tiktoken preset {spec!r} needs its ranks file: write "
                             f"{spec}=PATH/{PRESETS[spec].file}, or give --tiktoken-dir DIR")
        return spec, spec, load(spec, path=tiktoken_dir)
    from tokenmill.evaluate import split_named

    label, path = split_named(spec)
    tok = load(f"./{path}" if path in PRESETS else path)  # ./gpt2: the folder, not the preset
    return label or default_name(path), path, tok


# Files that every model folder names the same way: such a file is named after its folder.
GENERIC_NAMES = ("tokenizer.json", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model",
                 "vocab.txt", "vocab.json")


def default_name(path: str) -> str:
    """A tokenizer's name in the output: its folder's for a folder or a file of a generic name
    (``mistral-7b-v0.1/tokenizer.model`` -> ``mistral-7b-v0.1``), else the file name up to its
    first dot."""
    p = Path(path).absolute()  # not resolve(): a model folder's file may link into a cache
    if p.is_dir():
        return p.name or path
    if p.name in GENERIC_NAMES and p.parent.name:
        return p.parent.name
    return p.name.split(".")[0] or path


def _tokenizers(specs: list[str], tiktoken_dir: str | None) -> tuple[dict[str, Tokenizer],
                                                                      dict[str, str]]:
    toks: dict[str, Tokenizer] = {}
    sources: dict[str, str] = {}
    for spec in specs:
        name, source, tok = load_tokenizer(spec, tiktoken_dir)
        if name in toks:
            raise InputError(f"two tokenizers are named {name!r}; name them NAME=PATH")
        toks[name], sources[name] = tok, source
    return toks, sources


def _read_options(args: argparse.Namespace) -> ReadOptions:
    from tokenmill.corpus import ReadOptions

    return ReadOptions(text_field=args.text_field, column=args.column,
                       whole_file=args.whole_file, errors=args.errors)


def _corpora(args: argparse.Namespace) -> list[Corpus]:
    from tokenmill.evaluate import corpora_in, read_corpus

    options = _read_options(args)
    out = [read_corpus(spec, options, args.max_documents) for spec in args.corpus]
    for folder in args.corpora:
        out += corpora_in(folder, options, args.max_documents)
    if not out:
        raise InputError("no corpus: give --corpus NAME=PATH or --corpora DIR")
    return out


def _write(path: str, text: str) -> None:
    from tokenmill._io import atomic_write_text

    if path == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(path, text)


def _check_outputs(outputs: list[str | None], inputs: list[str | None]) -> None:
    """Before anything is read or computed: each output file (not stdout) can be written where
    it is named (its folder exists; it is no folder or device), no two outputs are the same
    file, and none is one of the inputs (a tokenizer, a corpus, a strings file; a NAME=PATH
    argument's PATH)."""
    from tokenmill._io import write_target
    from tokenmill.corpus import refuse_overwriting

    files = [out for out in outputs if out and out != "-"]
    targets = [write_target(Path(out)).resolve() for out in files]
    for i, target in enumerate(targets):
        if target in targets[:i]:
            raise InputError(f"{files[i]}: named as two outputs; each needs its own file")
    named = [spec for spec in inputs if spec]
    refuse_overwriting(files, [*named, *(spec.partition("=")[2] for spec in named)])


def _count(n: int, noun: str) -> str:
    """``1 corpus``, ``2 corpora``, ``3 tokenizers``."""
    plural = noun[:-2] + "ora" if noun.endswith("corpus") else noun + "s"
    return f"{n} {noun if n == 1 else plural}"


def _eval(args: argparse.Namespace) -> int:
    from tokenmill import report
    from tokenmill.evaluate import evaluate

    started = time.perf_counter()
    _check_outputs([args.json, args.html],
                   [*args.tokenizers, args.tiktoken_dir, *args.corpus, *args.corpora])
    toks, sources = _tokenizers(args.tokenizers, args.tiktoken_dir)
    corpora = _corpora(args)
    ev = evaluate(toks, corpora, context=args.context, rare=args.rare, reference=args.reference,
                  sources=sources, details=bool(args.json or args.html))
    if args.json:
        _write(args.json, report.to_json(ev))
    if args.json != "-":
        report.print_tables(ev)
    if args.html:
        page = report.render_html(
            ev, report.standard_plots(ev), missing=report.missing_plots(ev),
            intro=f"{_count(len(toks), 'tokenizer')} on {_count(len(corpora), 'corpus')}, "
                  f"{sum(c['documents'] for c in ev.corpora):,} documents.")
        _write(args.html, page)
    print(f"evaluated {_count(len(toks), 'tokenizer')} on {_count(len(corpora), 'corpus')} "
          f"({sum(c['documents'] for c in ev.corpora):,} documents, "
          f"{sum(c['bytes'] for c in ev.corpora) / 1e6:.2f} MB) in "
          f"{time.perf_counter() - started:.2f} s" +
          (f"; wrote {args.html}" if args.html else ""), file=sys.stderr)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from tokenmill import report, sweep
    from tokenmill.evaluate import evaluate, read_documents

    started = time.perf_counter()
    sizes = sweep.parse_sizes(args.vocab_sizes)
    if args.save_dir and not Path(args.save_dir).is_dir():
        raise InputError(f"--save-dir {args.save_dir}: no such folder")
    saved = [str(Path(args.save_dir) / f"tokenizer-{v}.json") for v in sizes] \
        if args.save_dir else []
    _check_outputs([args.json, args.html, *saved], [*args.train, *args.corpus, *args.corpora])
    corpora = _corpora(args)

    def texts() -> Any:
        for path in args.train:
            yield from read_documents(path, _read_options(args))

    toks, steps, notes = sweep.train_sizes(texts(), sizes, byte_level=not args.char_level,
                                           special_tokens=args.special_tokens,
                                           min_frequency=args.min_frequency)
    named = {f"V={v}": tok for v, tok in toks.items()}
    size_of = {f"V={v}": v for v in toks}
    merges = {f"V={v}": len(tok.model.merges) for v, tok in toks.items()}
    counts = {name: [s.count for s in steps[:n]] for name, n in merges.items()}
    ev = evaluate(named, corpora, context=args.context, rare=args.rare,
                  reference=args.reference, merge_counts=counts,
                  sources={n: "trained on " + ", ".join(args.train) for n in named})
    ev.notes += notes
    rows = sweep.summary(ev, size_of)
    if args.save_dir:  # (once the evaluation, which may refuse its options, is done)
        for v, tok in toks.items():
            tok.save(Path(args.save_dir) / f"tokenizer-{v}.json")
    if args.json:
        _write(args.json, report.to_json(ev, {"sweep": {
            "train": args.train, "vocab_sizes": sizes, "summary": rows,
            "merge_counts": [s.count for s in steps]}}))
    if args.json != "-":
        report.print_tables(ev, extra=[("Sweep: all held-out documents pooled",
                                        *sweep.summary_table(rows, args.rare))])
    if args.html:
        plots = sweep.sweep_plots(ev, size_of, steps, rows, list(merges.values())) + \
            report.standard_plots(ev, merges=False)
        page = report.render_html(
            ev, plots, title="tokenmill vocabulary sweep",
            intro=f"BPE trained on {', '.join(args.train)} to V = "
                  f"{', '.join(f'{v:,}' for v in sizes)}; evaluated on "
                  f"{_count(len(corpora), 'held-out corpus')}.",
            sections=[("Sweep", sweep.summary_html(rows, args.rare))],
            missing=report.missing_plots(ev, merges=False))
        _write(args.html, page)
    print(f"swept {len(sizes)} vocabulary sizes in {time.perf_counter() - started:.2f} s" +
          (f"; wrote {args.html}" if args.html else ""), file=sys.stderr)
    return 0


def _golden(args: argparse.Namespace) -> int:
    from tokenmill import golden

    if args.golden_command == "freeze":
        _check_outputs([args.output], [args.tokenizer, args.tiktoken_dir, *args.strings])
    name, source, tok = load_tokenizer(args.tokenizer, args.tiktoken_dir)
    if args.golden_command == "freeze":
        strings = [] if args.no_builtin else list(golden.BUILTIN)
        for path in args.strings:
            # (the strings of several files named apart: user/a.txt/1, user/b.txt/1)
            prefix = "user" if len(args.strings) == 1 else f"user/{Path(path).name}"
            strings += golden.read_strings(path, prefix)
        if not strings:
            raise InputError(f"{args.strings[-1]}: no strings in it (and --no-builtin leaves out "
                             "the built-in ones)" if args.strings else
                             "no strings to freeze: --no-builtin needs --strings FILE")
        n = golden.freeze(tok, args.output, source=source, strings=strings)
        print(f"froze {n} strings of {name} (fingerprint {tok.fingerprint()[:16]}...) to "
              f"{args.output}", file=sys.stderr)
        return 0
    ok, lines = golden.check(tok, args.goldens, max_diffs=args.max_diffs,
                             ignore_fingerprint=args.ignore_fingerprint, source=source)
    print("\n".join(lines), file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def _check_config(args: argparse.Namespace) -> int:
    from tokenmill import golden

    _, source, tok = load_tokenizer(args.tokenizer, args.tiktoken_dir)
    given = {k: getattr(args, f"{k}_token") for k in golden.CONFIG_TOKENS}
    path = source if Path(source).exists() else None
    ok, lines = golden.check_config(tok, args.config, tokenizer_path=path, tokens=given)
    print("\n".join(lines))
    return 0 if ok else 1


# name -> handler(args) -> exit code; filled as the commands are added.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "eval": _eval, "sweep": _sweep, "golden": _golden, "check-config": _check_config}


def _eval_options(p: argparse.ArgumentParser) -> None:
    from tokenmill.cli_train import at_least, read_flags

    p.add_argument("--corpus", action="append", default=[], metavar="NAME=PATH",
                   help="a corpus to evaluate on (repeatable), read as train reads text: a "
                        "text file (one document a line), .jsonl (a \"text\" field a line) or "
                        ".parquet, each optionally .gz or .zst, or a folder of such files; NAME "
                        "defaults to the file name up to its first dot")
    p.add_argument("--corpora", action="append", default=[], metavar="DIR",
                   help="a folder whose every file is one corpus, named after the file "
                        "(e.g. the FLORES dev files: eng_Latn, zho_Hans, ...)")
    p.add_argument("--reference", metavar="NAME",
                   help="the corpus parity is measured against (e.g. eng_Latn): tokens of each "
                        "corpus / tokens of the reference, on parallel corpora")
    p.add_argument("--context", type=at_least(1), default=2048, metavar="N",
                   help="context budget in tokens: report the share of documents longer than "
                        "this (default: 2048)")
    p.add_argument("--rare", type=at_least(1), default=10, metavar="K",
                   help="report the share of vocabulary rows used fewer than K times "
                        "(default: 10)")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="write the metrics as JSON to FILE, or to stdout instead of the table")
    p.add_argument("--html", metavar="FILE",
                   help="write a self-contained HTML report with plots (needs matplotlib)")
    p.add_argument("--max-documents", type=at_least(1), metavar="N",
                   help="read at most the first N documents of each corpus")
    read_flags(p)


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the evaluation subcommands to the main parser's subparsers."""
    from tokenmill.cli_train import at_least

    e = sub.add_parser("eval", help="tokens per byte, tails, unknowns, vocabulary use and parity "
                                    "of tokenizers on corpora",
                       description="Metrics per tokenizer and corpus, over documents. "
                                   "Percentiles interpolate linearly (numpy's default).")
    e.add_argument("tokenizers", nargs="+", metavar="TOKENIZER", help=TOKENIZER_HELP)
    e.add_argument("--tiktoken-dir", metavar="DIR",
                   help="the folder of the *.tiktoken ranks files, for presets given by name")
    _eval_options(e)

    s = sub.add_parser("sweep", help="train BPE at several vocabulary sizes and evaluate each on "
                                     "held-out corpora",
                       description="Trains once to the largest size and cuts the model at each "
                                   "smaller one (BPE's first merges do not depend on the "
                                   "target size).")
    s.add_argument("train", nargs="+", metavar="TRAIN",
                   help="training text: files or folders, as --corpus reads them")
    s.add_argument("--vocab-sizes", required=True, metavar="SIZES",
                   help="comma-separated sizes, e.g. 2k,8k,32k (k = 1000, Ki = 1024)")
    s.add_argument("--char-level", action="store_true",
                   help="character-level BPE on whitespace/punctuation words (default: "
                        "byte-level BPE with the GPT-2 pre-tokenizer, as train --byte-level)")
    s.add_argument("--special-tokens", nargs="+", default=[], metavar="TOKEN",
                   help="special tokens, given the first ids")
    s.add_argument("--min-frequency", type=at_least(0), default=0,
                   help="stop when the most frequent pair is seen fewer times than this")
    s.add_argument("--save-dir", metavar="DIR",
                   help="also save each tokenizer as DIR/tokenizer-V.json")
    _eval_options(s)

    g = sub.add_parser("golden", help="freeze golden strings of a tokenizer, or check them")
    gsub = g.add_subparsers(dest="golden_command", required=True)
    f = gsub.add_parser("freeze", help="encode the built-in hard strings (and yours) and store "
                                       "tokens, ids, offsets, decode output and the fingerprint")
    f.add_argument("tokenizer", metavar="TOKENIZER", help=TOKENIZER_HELP)
    f.add_argument("-o", "--output", required=True, help="the golden file to write (JSON lines)")
    f.add_argument("--strings", action="append", default=[], metavar="FILE",
                   help="more strings: a text file (one a line), a .json list or a .jsonl file")
    f.add_argument("--no-builtin", action="store_true", help="only the --strings given")
    c = gsub.add_parser("check", help="re-encode a golden file's strings; exit 1 on any drift")
    c.add_argument("tokenizer", metavar="TOKENIZER", help=TOKENIZER_HELP)
    c.add_argument("goldens", help="a file written by 'tokenmill golden freeze'")
    c.add_argument("--max-diffs", type=at_least(0), default=5, metavar="N",
                   help="show the first N drifted strings (default: 5)")
    c.add_argument("--ignore-fingerprint", action="store_true",
                   help="pass when every string encodes as frozen, even if the fingerprint "
                        "differs")
    for p in (f, c):
        p.add_argument("--tiktoken-dir", metavar="DIR", help="folder of the *.tiktoken files")

    k = sub.add_parser("check-config", help="compare a tokenizer's vocabulary size and special "
                                            "token ids with a model's config.json")
    k.add_argument("tokenizer", metavar="TOKENIZER", help=TOKENIZER_HELP)
    k.add_argument("config", help="the model's config.json (vocab_size, bos/eos/pad/unk_token_id)")
    k.add_argument("--tiktoken-dir", metavar="DIR", help="folder of the *.tiktoken files")
    for kind in ("bos", "eos", "pad", "unk"):
        k.add_argument(f"--{kind}-token", metavar="TOKEN",
                       help=f"the tokenizer's {kind} token (default: from tokenizer_config.json "
                            "beside the file, else found by its usual names)")
