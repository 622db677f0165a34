"""The ``tokenmill`` command: train, encode, decode, inspect.

Flags are the option names of the trainer dataclass, and their defaults and help come from it.
Bad input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

from tokenmill import decoders, pre_tokenizers
from tokenmill._io import read_lines
from tokenmill.errors import TokenmillError
from tokenmill.models.bpe import BPE
from tokenmill.tokenizer import Tokenizer
from tokenmill.trainers.bpe import BPETrainer

# Flags that are not a plain "--name VALUE" of the trainer, or that the CLI sets itself.
_SPECIAL_FLAGS = {"special_tokens", "initial_alphabet", "show_progress", "vocab_size",
                  "num_merges", "end_of_word_marker", "end_of_word_suffix", "tie_break"}


def _trainer_flags(p: argparse.ArgumentParser) -> None:
    fields = {f.name: f for f in dataclasses.fields(BPETrainer)}

    def help_of(name: str) -> str:
        f = fields[name]
        default = "" if f.default in (None, ()) else f" (default: {f.default})"
        return f.metadata["help"] + default

    size = p.add_mutually_exclusive_group()
    size.add_argument("--vocab-size", type=int, default=fields["vocab_size"].default,
                      help=help_of("vocab_size"))
    size.add_argument("--num-merges", type=int, help=help_of("num_merges"))
    eow = p.add_mutually_exclusive_group()
    eow.add_argument("--end-of-word-marker", metavar="M", help=help_of("end_of_word_marker"))
    eow.add_argument("--end-of-word-suffix", metavar="S", help=help_of("end_of_word_suffix"))
    p.add_argument("--special-tokens", nargs="+", default=[], metavar="TOKEN",
                   help=help_of("special_tokens"))
    p.add_argument("--initial-alphabet", default="", metavar="CHARS",
                   help=help_of("initial_alphabet") + "; given as one string of characters")
    p.add_argument("--tie-break", choices=["lexicographic", "first_seen"],
                   default=fields["tie_break"].default, help=help_of("tie_break"))
    for name, f in fields.items():
        if name in _SPECIAL_FLAGS:
            continue
        kind = int if "int" in str(f.type) else str
        p.add_argument("--" + name.replace("_", "-"), type=kind, default=f.default,
                       help=help_of(name))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tokenmill", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="learn a BPE tokenizer from text files (one document a line)")
    t.add_argument("files", nargs="*", help="UTF-8 text files; none: the bundled sample corpus")
    t.add_argument("-o", "--output", required=True, help="where to write tokenizer.json")
    level = t.add_mutually_exclusive_group()
    level.add_argument("--byte-level", action="store_true",
                       help="byte-level BPE with the GPT-2 pre-tokenizer (decodes any text)")
    level.add_argument("--char-level", action="store_true",
                       help="character-level BPE, words split on whitespace and punctuation "
                            "(the default)")
    _trainer_flags(t)
    t.add_argument("--trace", action="store_true", help="print every merge as it was learnt")
    t.add_argument("--errors", choices=["strict", "replace"], default="strict",
                   help="on bytes that are not UTF-8: stop with an error, or use U+FFFD")
    t.add_argument("--quiet", action="store_true", help="no progress bar and no summary")

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

    i = sub.add_parser("inspect", help="describe a tokenizer file and print its fingerprint")
    i.add_argument("tokenizer", help="a tokenizer.json file")
    # Evaluation commands (eval, sweep, golden, check-config) live in their own module.
    from tokenmill import cli_eval

    cli_eval.add_parsers(sub)
    return p


def _texts(files: Sequence[str], errors: str) -> Iterator[str]:
    if not files:
        sample = resources.files("tokenmill") / "data" / "sample.txt"
        with resources.as_file(sample) as sample_path:
            yield from read_lines(sample_path)
        return
    for name in files:
        yield from read_lines(name, errors)  # type: ignore[arg-type]


def _train(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    options: dict[str, Any] = {
        name: getattr(args, name) for name in
        ("vocab_size", "num_merges", "min_frequency", "special_tokens", "unk_token",
         "limit_alphabet", "end_of_word_marker", "end_of_word_suffix",
         "continuing_subword_prefix", "max_token_length", "tie_break")}
    options["special_tokens"] = tuple(options["special_tokens"])
    alphabet = list(dict.fromkeys(args.initial_alphabet))
    if args.byte_level:
        alphabet += [c for c in pre_tokenizers.ByteLevel.alphabet() if c not in alphabet]
    trainer = BPETrainer(initial_alphabet=tuple(alphabet),
                         show_progress=not args.quiet and sys.stderr.isatty(), **options)
    tok = Tokenizer(BPE({}, []))
    if args.byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.decoder = decoders.ByteLevel()
    else:
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        end = args.end_of_word_suffix or args.end_of_word_marker
        tok.decoder = decoders.BPEDecoder(suffix=end) if end else None
    result = tok.train_from_iterator(_texts(args.files, args.errors), trainer)
    tok.save(args.output)
    if args.trace:
        print("\n".join(result.trace_lines()))
    if not args.quiet:
        print(f"trained BPE in {time.perf_counter() - started:.2f}s: vocab {tok.get_vocab_size()}, "
              f"{len(result.steps)} merges, alphabet {result.alphabet_size}; wrote {args.output} "
              f"(fingerprint {tok.fingerprint()[:16]})", file=sys.stderr)
    return 0


def _encode(args: argparse.Namespace) -> int:
    tok = Tokenizer.from_file(args.tokenizer)
    enc = tok.encode(args.text, add_special_tokens=not args.no_special_tokens)
    if args.json:
        print(json.dumps({"ids": enc.ids, "tokens": enc.tokens, "offsets": enc.offsets},
                         ensure_ascii=False))
        return 0
    rows = [("#", "id", "token", "offsets", "text")]
    for n, (i, t, (s, e)) in enumerate(zip(enc.ids, enc.tokens, enc.offsets)):
        rows.append((str(n), str(i), repr(t), f"{s}:{e}", repr(args.text[s:e])))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    print(f"{len(enc.ids)} tokens for {len(args.text)} characters")
    return 0


def _decode(args: argparse.Namespace) -> int:
    tok = Tokenizer.from_file(args.tokenizer)
    ids = []
    for position, raw in enumerate(args.ids):
        try:
            ids.append(int(raw))
        except ValueError:
            raise TokenmillError(f"ids[{position}]: expected an integer id, got {raw!r}") from None
    print(tok.decode(ids, skip_special_tokens=not args.keep_special_tokens))
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
        ("model", f"BPE, {model.vocab_size} tokens, {len(model.merges)} merges"),
        ("vocab size", f"{tok.get_vocab_size()} (with added tokens)"),
        ("added tokens", ", ".join(repr(t.content) for t in tok.added_tokens) or "none"),
        ("unk token", repr(model.unk_token) if model.unk_token else "none"),
        ("end of word", repr(model.end_of_word_marker) + " (marker)" if model.end_of_word_marker
         else repr(model.end_of_word_suffix) + " (suffix)" if model.end_of_word_suffix
         else "none"),
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
    from tokenmill import cli_eval

    commands = {"train": _train, "encode": _encode, "decode": _decode, "inspect": _inspect,
                **cli_eval.COMMANDS}
    try:
        return commands[args.command](args)
    except TokenmillError as e:
        print(f"tokenmill: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tokenmill: interrupted", file=sys.stderr)
        return 130
