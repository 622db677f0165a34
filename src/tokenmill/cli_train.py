"""``tokenmill train`` and ``tokenmill count``: read a corpus, count its pre-tokens (here or on a
Dask cluster), learn merges, write the tokenizer or the counts. Registered by cli.py.

Flags are the option names of the trainer dataclasses (one per ``--model``), and their defaults
and help come from them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from tokenmill import bert, decoders, pre_tokenizers
from tokenmill._io import read_lines
from tokenmill.corpus import (
    ReadOptions,
    ReadStats,
    expand_inputs,
    iter_documents,
    refuse_overwriting,
)
from tokenmill.errors import InputError
from tokenmill.formats import counts as count_files
from tokenmill.models.bpe import BPE
from tokenmill.models.unigram import Unigram
from tokenmill.models.wordpiece import WordPiece
from tokenmill.tokenizer import Tokenizer
from tokenmill.trainers.bpe import BPETrainer
from tokenmill.trainers.unigram import UnigramTrainer
from tokenmill.trainers.wordpiece import WordPieceTrainer

# The trainer of each --model, the one place a model is added to the CLI. The flags are the union
# of their options; a flag left out takes the chosen trainer's own default.
TRAINERS: dict[str, type[Any]] = {"bpe": BPETrainer, "wordpiece": WordPieceTrainer,
                                  "unigram": UnigramTrainer}

# Flags that are not a plain "--name VALUE" of a trainer, or that the CLI sets itself.
_SPECIAL_FLAGS = {"special_tokens", "initial_alphabet", "show_progress", "vocab_size",
                  "num_merges", "end_of_word_marker", "end_of_word_suffix", "tie_break"}


def _option_fields() -> dict[str, list[tuple[str, dataclasses.Field[Any]]]]:
    """Each option name -> the (model, field) of every trainer that has it."""
    fields: dict[str, list[tuple[str, dataclasses.Field[Any]]]] = {}
    for model, trainer in TRAINERS.items():
        for f in dataclasses.fields(trainer):
            fields.setdefault(f.name, []).append((model, f))
    return fields


def _trainer_flags(p: argparse.ArgumentParser) -> None:
    fields = _option_fields()

    def help_of(name: str) -> str:
        entries = fields[name]
        only = f" ({', '.join(m for m, _ in entries)} only)" if len(entries) < len(TRAINERS) \
            else ""
        defaults = [(m, f.default) for m, f in entries if f.default not in (None, ())]
        if len({repr(d) for _, d in defaults}) == 1 and len(defaults) == len(entries):
            only += f" (default: {_shown(defaults[0][1])})"
        elif defaults:
            only += " (default: " + "; ".join(f"{_shown(d)} for {m}" for m, d in defaults) + ")"
        return entries[0][1].metadata["help"] + only

    size = p.add_mutually_exclusive_group()
    size.add_argument("--vocab-size", type=int, help=help_of("vocab_size"))
    size.add_argument("--num-merges", type=int, help=help_of("num_merges"))
    eow = p.add_mutually_exclusive_group()
    eow.add_argument("--end-of-word-marker", metavar="M", help=help_of("end_of_word_marker"))
    eow.add_argument("--end-of-word-suffix", metavar="S", help=help_of("end_of_word_suffix"))
    p.add_argument("--special-tokens", nargs="*", metavar="TOKEN",
                   help=help_of("special_tokens"))
    p.add_argument("--initial-alphabet", metavar="CHARS",
                   help=help_of("initial_alphabet") + "; given as one string of characters")
    p.add_argument("--tie-break", choices=["lexicographic", "first_seen"],
                   help=help_of("tie_break"))
    for name, entries in fields.items():
        if name in _SPECIAL_FLAGS:
            continue
        declared = str(entries[0][1].type)
        kind = float if "float" in declared else int if "int" in declared else str
        p.add_argument("--" + name.replace("_", "-"), type=kind, help=help_of(name))


def _shown(default: Any) -> str:
    return " ".join(default) if isinstance(default, tuple) else str(default)


def _trainer(args: argparse.Namespace, **options: Any) -> Any:
    """The trainer ``--model`` names, from the flags given (a flag left out: its default)."""
    own = {f.name for f in dataclasses.fields(TRAINERS[args.model])}
    for name, entries in _option_fields().items():
        if name in own or getattr(args, name, None) in (None, False):
            continue
        raise InputError(f"--{name.replace('_', '-')} is an option of --model "
                         f"{' or '.join(m for m, _ in entries)}, not of --model {args.model}")
    given = {name: getattr(args, name) for name in own - {"special_tokens", "initial_alphabet"}
             if getattr(args, name, None) is not None}
    if args.special_tokens is not None:
        given["special_tokens"] = tuple(args.special_tokens)
    return TRAINERS[args.model](**given, **options)


def read_flags(p: argparse.ArgumentParser) -> None:
    """--text-field, --column, --whole-file and --errors: how documents are taken out of the
    inputs (train, count, encode-corpus, eval and sweep share them), defaults from
    :class:`~tokenmill.corpus.ReadOptions`."""
    plain = ReadOptions()
    p.add_argument("--text-field", default=plain.text_field,
                   help=f"the field of a .jsonl line that holds the document (default: "
                        f"{plain.text_field})")
    p.add_argument("--column", default=plain.column,
                   help=f"the column of a .parquet file that holds the documents (default: "
                        f"{plain.column})")
    p.add_argument("--whole-file", action="store_true",
                   help="a .txt file is one document (default: one document per line)")
    p.add_argument("--errors", choices=["strict", "replace"], default=plain.errors,
                   help="on bytes that are not UTF-8: stop with an error, or use U+FFFD")


def positive_number(text: str) -> float:
    """An argparse type: a finite number above 0 (seconds, megabytes)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to 2**63 - 1."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value < 1 << 63:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return value

    return parse


def engine_flags(p: argparse.ArgumentParser, engine_help: str) -> None:
    """--engine, --scheduler and --timeout (train, count and encode-corpus share them)."""
    p.add_argument("--engine", choices=["local", "dask"], default="local", help=engine_help)
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="the Dask scheduler, e.g. tcp://host:8786 (with --engine dask)")
    p.add_argument("--timeout", type=positive_number, default=30.0,
                   help="seconds to wait for the Dask scheduler and its workers")


def _input_flags(p: argparse.ArgumentParser, *, sample: bool) -> None:
    p.add_argument("--model", choices=list(TRAINERS), default="bpe",
                   help="the model to learn (default: bpe); wordpiece counts with BERT's "
                        "normalizer and pre-tokenizer")
    p.add_argument("--no-lowercase", dest="lowercase", action="store_false",
                   help="(wordpiece) keep the case (default: lowercase, as uncased BERT)")
    p.add_argument("files", nargs="*", help="inputs: .txt (a document per line), .jsonl, "
                   ".parquet, each optionally .gz or .zst; directories, globs, '-' for stdin"
                   + ("; none: the bundled sample corpus" if sample else ""))
    level = p.add_mutually_exclusive_group()
    level.add_argument("--byte-level", action="store_true",
                       help="byte-level BPE with the GPT-2 pre-tokenizer (decodes any text)")
    level.add_argument("--char-level", action="store_true",
                       help="character-level BPE, words split on whitespace and punctuation "
                            "(the default)")
    read_flags(p)
    p.add_argument("--max-distinct", type=int, metavar="N",
                   help="keep the N most frequent pre-tokens (the rarest are dropped after "
                        "counting; how many is reported)")
    engine_flags(p, "count here on native threads, or on a Dask cluster")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    t = sub.add_parser("train", help="learn a tokenizer from a corpus or from count files")
    _input_flags(t, sample=True)
    t.add_argument("--from-counts", nargs="+", metavar="COUNTS",
                   help="train from count files (tokenmill count) instead of a corpus; several "
                        "are merged")
    t.add_argument("-o", "--output", required=True, help="where to write tokenizer.json")
    _trainer_flags(t)
    t.add_argument("--trace", action="store_true", help="print every merge as it was learnt")
    c = sub.add_parser("count", help="count a corpus's pre-tokens into a count file")
    _input_flags(c, sample=False)
    c.add_argument("-o", "--output", required=True, help="where to write the count file")


def _check_flags(args: argparse.Namespace) -> None:
    """Flag combinations that would train a tokenizer that does not do what was asked."""
    for token in args.special_tokens or ():
        if token not in (args.files or ()) and os.path.isfile(token):
            # nargs="*" takes the inputs after it too: the corpus would silently become a
            # special token, and the bundled sample the corpus.
            raise InputError(f"--special-tokens took {token!r}, which is a file: put the "
                             "inputs before --special-tokens (or last, after --)")
    _check_byte_alphabet(args, args.byte_level and args.model == "bpe")
    if args.byte_level and args.model == "bpe":  # (other models refuse --byte-level itself)
        for flag in ("end_of_word_suffix", "end_of_word_marker", "continuing_subword_prefix"):
            if getattr(args, flag, None):
                raise InputError(f"--{flag.replace('_', '-')} is for --char-level: a byte-level "
                                 "tokenizer keeps spaces in its tokens (Ġ) and decodes without "
                                 "one")


def _model_pipelines(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The pipelines (count_files.pipeline_of) that --model and its flags count with: BPE's
    byte-level or character-level one unless a flag picks one, the others' own."""
    levels = [args.byte_level] if args.byte_level or args.char_level or args.model != "bpe" \
        else [True, False]
    return [count_files.pipeline_of(_pipeline(argparse.Namespace(**{**vars(args),
                                                                    "byte_level": level})))
            for level in levels]


def _check_byte_alphabet(args: argparse.Namespace, byte_level: bool) -> None:
    """A byte-level BPE keeps its 256 byte symbols in its alphabet; --limit-alphabet counts
    them (as Hugging Face's limit_alphabet counts the initial alphabet), so a limit below 256
    would leave bytes no token spells, and text that does not decode back."""
    limit = getattr(args, "limit_alphabet", None)
    if byte_level and limit is not None and limit < 256:
        raise InputError(f"--limit-alphabet {limit} is below the 256 byte symbols a byte-level "
                         "tokenizer needs to spell any text; give 256 or more, or leave it out")


def _pipeline(args: argparse.Namespace) -> Tokenizer:
    """An empty tokenizer with the pipeline the flags ask for."""
    if args.model == "wordpiece":
        if args.byte_level:
            raise InputError("--byte-level is for --model bpe; wordpiece splits words as BERT")
        return Tokenizer(WordPiece({}), normalizer=bert.BertNormalizer(lowercase=args.lowercase),
                         pre_tokenizer=bert.BertPreTokenizer(), decoder=bert.WordPieceDecoder())
    if not args.lowercase:
        raise InputError("--no-lowercase is for --model wordpiece")
    if args.model == "unigram":  # SentencePiece's way with spaces
        if args.byte_level:
            raise InputError("--byte-level is for --model bpe; unigram marks spaces with ▁")
        return Tokenizer(Unigram([("<unk>", 0.0)], unk_id=0),
                         pre_tokenizer=pre_tokenizers.Metaspace(), decoder=decoders.Metaspace())
    tok = Tokenizer(BPE({}, []))
    if args.byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.decoder = decoders.ByteLevel()
    else:
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


class _Phases:
    """Wall time per phase, and the process's peak memory, for the closing summary."""

    def __init__(self) -> None:
        self.times: list[tuple[str, float]] = []
        self._t = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.times.append((name, now - self._t))
        self._t = now

    def line(self) -> str:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        parts = ", ".join(f"{name} {seconds:.2f}s" for name, seconds in self.times)
        return f"{parts}; peak memory {peak:.0f} MiB"


def _bar(args: argparse.Namespace, files: list[str]) -> Any:
    if args.quiet or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    total = sum(os.path.getsize(f) for f in files if f != "-")
    return tqdm(total=total or None, unit="B", unit_scale=True, desc="counting", leave=False)


def _sample() -> Iterator[str]:
    sample = resources.files("tokenmill") / "data" / "sample.txt"
    with resources.as_file(sample) as path:
        yield from read_lines(path)


def _count(args: argparse.Namespace, tok: Tokenizer, stats: ReadStats) -> Counter[str]:
    """Pre-token counts of the inputs (or of the bundled sample)."""
    if not args.files:
        return tok.count_words(_sample())
    options = {"text_field": args.text_field, "column": args.column,
               "whole_file": args.whole_file, "errors": args.errors}
    files = expand_inputs(args.files)
    refuse_overwriting([args.output], files)
    bar = _bar(args, files)
    progress: Callable[[int], Any] | None = bar.update if bar else None
    try:
        if args.engine == "dask":
            from tokenmill.distributed import count_on_dask

            if args.scheduler is None:
                raise InputError("--engine dask needs --scheduler ADDRESS (tcp://host:port)")
            return count_on_dask(args.files, tok, scheduler=args.scheduler,
                                 timeout=args.timeout, progress=progress, stats=stats, **options)
        return tok.count_words(iter_documents(files, progress=progress, stats=stats,
                                              **options))
    finally:
        if bar:
            bar.close()


def _limit(args: argparse.Namespace, counts: Counter[str]) -> tuple[Counter[str], int, int]:
    if args.max_distinct is None:
        return counts, 0, 0
    if args.max_distinct < 1:
        raise InputError(f"--max-distinct must be >= 1, got {args.max_distinct}")
    return count_files.limit_distinct(counts, args.max_distinct)


def _report(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(text, file=sys.stderr)


def _writable(output: str) -> None:
    """The output can be written where it is named (its folder exists; it is no folder or
    device): said before the inputs are counted, not after."""
    from tokenmill._io import write_target

    write_target(Path(output))


def _count_command(args: argparse.Namespace) -> int:
    _writable(args.output)
    if not args.files:
        raise InputError("count needs inputs: files, directories, globs or '-' for stdin")
    phases = _Phases()
    tok = _pipeline(args)
    stats = ReadStats()
    counts, dropped_distinct, dropped_total = _limit(args, _count(args, tok, stats))
    phases.done("counting")
    count_files.save_counts(args.output, counts, tok, dropped=(dropped_distinct, dropped_total),
                            meta={"inputs": list(args.files), "documents": stats.documents,
                                  "bytes": stats.bytes_read, "replaced": stats.replaced})
    phases.done("writing")
    _report(args, f"counted {len(counts)} distinct pre-tokens, {sum(counts.values())} in all "
                  f"({stats.summary()}); dropped {dropped_distinct} distinct / {dropped_total} "
                  f"occurrences; wrote {args.output}\n{phases.line()}")
    return 0


def _train_command(args: argparse.Namespace) -> int:
    _check_flags(args)
    _writable(args.output)
    phases = _Phases()
    stats = ReadStats()
    if args.from_counts:
        if args.files:
            raise InputError("give inputs or --from-counts, not both")
        refuse_overwriting([args.output], args.from_counts)
        counts, pipeline, _ = count_files.merge_count_files(args.from_counts)
        tok = count_files.pipeline_tokenizer(pipeline)
        if (args.byte_level or args.char_level) and \
                count_files.pipeline_of(_pipeline(args)) != pipeline:
            raise InputError(f"{args.from_counts[0]}: counted with another pre-tokenizer than "
                             f"{'--byte-level' if args.byte_level else '--char-level'} asks for")
        if pipeline not in _model_pipelines(args):
            # (a unigram trained on whitespace words decoded without its spaces, a BPE on
            # ▁-marked pieces kept the marks, a --no-lowercase WordPiece lowercased)
            raise InputError(f"{args.from_counts[0]}: counted with another normalizer or "
                             f"pre-tokenizer than --model {args.model}"
                             f"{'' if args.lowercase else ' --no-lowercase'} trains with; count "
                             "with the same --model and flags")
        if isinstance(tok.pre_tokenizer, pre_tokenizers.ByteLevel):
            tok.decoder = decoders.ByteLevel()
    else:
        tok = _pipeline(args)
        counts = _count(args, tok, stats)
    counts, dropped_distinct, dropped_total = _limit(args, counts)
    phases.done("counting")
    if args.trace and args.model == "unigram":
        raise InputError("--trace prints merges; --model unigram learns none")
    if args.model == "unigram" and tok.decoder is None:  # trained from a count file
        tok.decoder = decoders.Metaspace()
    byte_level = isinstance(tok.pre_tokenizer, pre_tokenizers.ByteLevel)
    _check_byte_alphabet(args, byte_level)
    alphabet = list(dict.fromkeys(args.initial_alphabet or ""))
    if byte_level:
        alphabet += [c for c in pre_tokenizers.ByteLevel.alphabet() if c not in alphabet]
    end = args.end_of_word_suffix or args.end_of_word_marker
    if end and not byte_level:
        tok.decoder = decoders.BPEDecoder(suffix=end)
    prefix = getattr(args, "continuing_subword_prefix", None)
    if prefix and args.model == "bpe" and not byte_level:
        # (the prefix glues a token to the one before it, as WordPiece's does; without this
        # decoder the tokens were joined by spaces, prefixes and all: "beg ##in ##ning")
        tok.decoder = bert.WordPieceDecoder(prefix=prefix, cleanup=False)
    trainer = _trainer(args, initial_alphabet=tuple(alphabet),
                       show_progress=not args.quiet and sys.stderr.isatty())
    result = tok.train_from_counts(counts, trainer)
    if args.model == "wordpiece":
        tok.decoder = bert.WordPieceDecoder(prefix=trainer.continuing_subword_prefix)
        tok.post_processor = bert.bert_processing(tok.model)
    phases.done("merging")
    tok.save(args.output)
    phases.done("writing")
    if (reason := getattr(tok.model, "hf_compatible", None)) is not None:
        _report(args, f"note: {args.output} loads in tokenmill, not in Hugging Face tokenizers: "
                      f"{reason}")
    if args.trace:
        print("\n".join(result.trace_lines()))
    read = f"; {stats.summary()}" if stats.files else ""
    dropped = f"; --max-distinct dropped {dropped_distinct} distinct pre-tokens " \
              f"({dropped_total} occurrences)" if args.max_distinct else ""
    model = TRAINERS[args.model].__name__.removesuffix("Trainer")
    merges = f"{len(result.steps)} merges, " if hasattr(result, "steps") else ""
    _report(args, f"trained {model}: vocab {tok.get_vocab_size()}, {merges}"
                  f"alphabet {result.alphabet_size}, {len(counts)} distinct pre-tokens{read}"
                  f"{dropped}; wrote {args.output} (fingerprint {tok.fingerprint()[:16]})\n"
                  f"{phases.line()}")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "train": _train_command, "count": _count_command}
