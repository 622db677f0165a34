"""The ``tokenmill`` command: train, count, encode, decode, inspect, and the evaluation
commands (cli_train.py and cli_eval.py add theirs).

Bad input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from tokenmill.distributed import DEFAULT_SHARD_BYTES
from tokenmill.errors import TokenmillError
from tokenmill.loading import load
from tokenmill.tokenizer import Tokenizer


class _Parser(argparse.ArgumentParser):
    """A parser whose usage errors are one line, as every other error of the command is (the
    usage of train alone is 20 lines); --help still shows it all."""

    def error(self, message: str) -> Any:  # argparse's own: print, then exit 2
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tokenmill", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    # Training and counting live in their own module, as do the evaluation commands.
    from tokenmill import cli_eval, cli_train

    cli_train.add_parsers(sub)
    e = sub.add_parser("encode", help="show the tokens, ids and offsets of a text")
    e.add_argument("-t", "--tokenizer", required=True, help="a tokenizer.json file")
    e.add_argument("text", help="the text to encode")
    e.add_argument("--json", action="store_true", help="print JSON for machines")
    e.add_argument("--no-special-tokens", action="store_true",
                   help="do not add the post-processor's special tokens")

    d = sub.add_parser("decode", help="turn ids back into text")
    d.add_argument("-t", "--tokenizer", required=True, help="a tokenizer.json file")
    d.add_argument("ids", nargs="+", help="token ids")
    d.add_argument("--keep-special-tokens", action="store_true",
                   help="keep special tokens in the text")

    c = sub.add_parser("encode-corpus", help="encode a corpus into a token file for pretraining "
                       "(flat ids readable with numpy.memmap, a document index, a description)")
    c.add_argument("files", nargs="+", help="inputs, as for train: .txt/.jsonl/.parquet "
                   "(optionally .gz/.zst), directories, globs, '-' for stdin")
    c.add_argument("-t", "--tokenizer", required=True,
                   help="a tokenizer.json, a GPT-2 folder, or a tiktoken preset with --ranks")
    c.add_argument("--ranks", help="the .tiktoken file (or its folder) of a preset tokenizer")
    c.add_argument("-o", "--output", required=True, help="the token file to write (e.g. out.bin)")
    c.add_argument("--separator", metavar="TOKEN",
                   help="a token (e.g. '<|endoftext|>') to put after every document")
    cli_train.read_flags(c)
    c.add_argument("--shards", action="store_true",
                   help="write OUTPUT as a directory: a token file per shard (an input file, or "
                   "--shard-mb of a big text file) and manifest.json; a rerun keeps the shards "
                   "already written")
    c.add_argument("--shard-mb", type=cli_train.positive_number,
                   default=DEFAULT_SHARD_BYTES / 2**20,
                   help="cut plain text files bigger than this into shards (with --shards)")
    cli_train.engine_flags(c, "where the shards are encoded (dask implies --shards)")
    c.add_argument("--quiet", action="store_true", help="no progress bar and no summary")

    i = sub.add_parser("inspect", help="describe a tokenizer file and print its fingerprint")
    i.add_argument("tokenizer", help="a tokenizer.json file")
    cli_eval.add_parsers(sub)
    return p


def _width(cell: str) -> int:
    """Columns a cell takes on a terminal: two for a wide (CJK) character, none for a
    mark that joins the one before (combining accents, Thai vowels, variation selectors)."""
    import unicodedata

    return sum(0 if unicodedata.category(c) in ("Mn", "Me") else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in cell)


def _encode(args: argparse.Namespace) -> int:
    tok = load(args.tokenizer)  # a tokenizer.json, or any other file load() reads
    enc = tok.encode(args.text, add_special_tokens=not args.no_special_tokens)
    if args.json:
        print(json.dumps({"ids": enc.ids, "tokens": enc.tokens, "offsets": enc.offsets},
                         ensure_ascii=False))
        return 0
    rows = [("#", "id", "token", "offsets", "text")]
    for n, (i, t, (s, e)) in enumerate(zip(enc.ids, enc.tokens, enc.offsets)):
        rows.append((str(n), str(i), repr(t), f"{s}:{e}", repr(args.text[s:e])))
    widths = [max(_width(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell + " " * (w - _width(cell)) for cell, w in zip(r, widths)).rstrip())
    print(f"{len(enc.ids)} tokens for {len(args.text)} characters")
    return 0


def _decode(args: argparse.Namespace) -> int:
    tok = load(args.tokenizer)
    ids = []
    for position, raw in enumerate(args.ids):
        try:
            ids.append(int(raw))
        except ValueError:
            raise TokenmillError(f"ids[{position}]: expected an integer id, got {raw!r}") from None
    print(tok.decode(ids, skip_special_tokens=not args.keep_special_tokens))
    return 0


def _encode_corpus(args: argparse.Namespace) -> int:
    from tokenmill.corpus import ReadStats, expand_inputs, iter_batches, refuse_overwriting
    from tokenmill.token_files import encode_corpus, rate

    files = args.files
    if not (args.shards or args.engine == "dask"):  # (sharded output is a directory)
        files = expand_inputs(args.files)  # (walked once: the reading below takes this list)
        refuse_overwriting([args.output, f"{args.output}.idx", f"{args.output}.json"],
                           [*files, args.tokenizer, *([args.ranks] if args.ranks else [])])
    tok = load(args.tokenizer, path=args.ranks)
    separator = None
    if args.separator is not None:
        separator = tok.token_to_id(args.separator)
        if separator is None:
            raise TokenmillError(f"--separator {args.separator!r} is not a token of "
                                 f"{args.tokenizer}")
    stats = ReadStats()
    started = time.perf_counter()
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(unit="doc", desc="encoding", leave=False)

    def progress(documents: int, tokens: int) -> None:
        if bar is not None:
            bar.update(documents - bar.n)
            bar.set_postfix_str(rate(started, documents, tokens, stats.bytes_read))

    if args.shards or args.engine == "dask":
        return _encode_shards(args, tok, separator, bar, started)
    batches = iter_batches(files, text_field=args.text_field, column=args.column,
                           whole_file=args.whole_file, errors=args.errors, stats=stats)
    try:
        info = encode_corpus(tok, batches, args.output, separator=separator, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if not args.quiet:
        print(f"wrote {args.output} ({info.dtype}) with {args.output}.idx and .json: "
              f"{rate(started, info.documents, info.tokens, stats.bytes_read)}", file=sys.stderr)
    return 0


def _encode_shards(args: argparse.Namespace, tok: Tokenizer, separator: int | None, bar: Any,
                   started: float) -> int:
    from tokenmill.token_shards import encode_shards

    if args.engine == "dask" and args.scheduler is None:
        raise TokenmillError("--engine dask needs --scheduler ADDRESS (tcp://host:port)")
    totals = [0, 0, 0]  # shards, documents, tokens

    def progress(info: Any) -> None:
        totals[0] += 1
        totals[1] += info.documents
        totals[2] += info.tokens
        if bar is not None:
            bar.update(info.documents)
            bar.set_postfix_str(f"{totals[0]} shards, {totals[2]:,} tokens")

    try:
        manifest = encode_shards(
            tok, args.files, args.output, separator=separator, engine=args.engine,
            scheduler=args.scheduler, text_field=args.text_field, column=args.column,
            whole_file=args.whole_file, errors=args.errors,
            shard_bytes=max(1, int(args.shard_mb * 2**20)), timeout=args.timeout,
            progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if not args.quiet:
        seconds = max(time.perf_counter() - started, 1e-9)
        print(f"wrote {len(manifest['shards'])} shards and {args.output}/manifest.json "
              f"({manifest['dtype']}): {manifest['documents']} documents, "
              f"{manifest['tokens']} tokens, {manifest['tokens'] / seconds:,.0f} tokens/s",
              file=sys.stderr)
    return 0


def _inspect(args: argparse.Namespace) -> int:
    tok = Tokenizer.from_file(args.tokenizer)
    model = tok.model

    def name(component: Any) -> str:
        return "none" if component is None else json.dumps(component.to_dict(),
                                                           ensure_ascii=False)[:120]

    reason = model.hf_compatible
    lines = [
        ("file", args.tokenizer),
        ("model", f"BPE, {model.vocab_size} tokens, {len(model.merges)} merges"
         if hasattr(model, "merges") else f"{model.type_name}, {model.vocab_size} tokens"),
        ("vocab size", f"{tok.get_vocab_size()} (with added tokens)"),
        ("added tokens", ", ".join(repr(t.content) for t in tok.added_tokens) or "none"),
        ("unk token", repr(model.unk_token) if model.unk_token else "none"),
        ("end of word", repr(model.end_of_word_marker) + " (marker)"
         if getattr(model, "end_of_word_marker", None)
         else repr(model.end_of_word_suffix) + " (suffix)"
         if getattr(model, "end_of_word_suffix", None) else "none"),
        ("normalizer", name(tok.normalizer)),
        ("pre-tokenizer", name(tok.pre_tokenizer)),
        ("post-processor", name(tok.post_processor)),
        ("decoder", name(tok.decoder)),
        ("Hugging Face", "compatible" if reason is None else f"not compatible: {reason}"),
        ("fingerprint", tok.fingerprint()),
    ]
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        print(f"{k.ljust(width)}  {v}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from tokenmill import cli_eval, cli_train

    commands = {"encode": _encode, "decode": _decode, "inspect": _inspect,
                "encode-corpus": _encode_corpus,
                **cli_train.COMMANDS, **cli_eval.COMMANDS}
    # SIGTERM (a job scheduler's stop, `timeout`) unwinds as Ctrl-C does, so that the
    # temporary files of an output being written are removed on the way out.
    installed = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM)
    if installed:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return commands[args.command](args)
    except _Terminated:
        print("tokenmill: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except TokenmillError as e:
        print(f"tokenmill: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a file the commands read or write that the system refused
        where = f"{e.filename}: " if e.filename is not None else ""
        print(f"tokenmill: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tokenmill: interrupted", file=sys.stderr)
        return 130
    finally:
        if installed:  # (None: a handler not set from Python; the default stands in for it)
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


class _Terminated(BaseException):
    """SIGTERM, raised where the command is (a BaseException, as KeyboardInterrupt is: cleanup
    that catches Exception lets it through)."""


def _terminated(signum: int, frame: Any) -> None:
    raise _Terminated()
