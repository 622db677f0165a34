"""Decoding the tokenizers that are not byte-level: the streaming decoder, one id at a time,
tokenmill vs Hugging Face ``tokenizers``' ``DecodeStream``, and ``decode`` of all the ids at once
vs ``tokenizers`` (Mistral's and MiniLM's tokenizer.json) and ``sentencepiece`` (Mistral's
tokenizer.model), on 1 MB of each text: the same ids, one run, the ratios printed; and decode of
the ids as a numpy array (a model's output), which the peers take as a list (``tolist`` timed
with them). (bench_serve.py has the byte-level ones against tiktoken.)

    python benchmarks/bench_decode_stream.py --repeats 5

What a server streaming a model's output does: each id, as it arrives, goes to the stream, which
returns the text it completes (or None). The ids are ``tokenizers``' own encoding of English
(tinyshakespeare) and Chinese (hongloumeng) text, about ``--ids`` of each, under GPT-2's
(byte-level), Mistral 7B v0.3's (Metaspace with byte fallback) and all-MiniLM-L6-v2's (BERT
WordPiece) tokenizer.json. Both streams' pieces must join to the same text as decoding the ids
at once (checked before timing); so must both decodes. The engines alternate within a run (ABBA
over the repeats); the figures are medians, in microseconds an id for streams and milliseconds
for the decodes at once.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench_bpe import DEFAULT_DATA, head, read_lines
from bench_encode import abba

FILES = {"GPT-2": "gpt2/tokenizer.json", "Mistral 7B v0.3": "mistral-7b-v0.3/tokenizer.json",
         "MiniLM (BERT)": "all-MiniLM-L6-v2/tokenizer.json"}
TEXTS = {"English": "en/tinyshakespeare.txt", "Chinese": "zh/hongloumeng.txt"}


def ids_of(hf: Any, lines: list[str], count: int) -> list[int]:
    """About ``count`` ids of the lines (whole lines, a newline between them)."""
    ids: list[int] = []
    for line in lines:
        ids += hf.encode(line + "\n", add_special_tokens=False).ids
        if len(ids) >= count:
            break
    return ids


def stream_tokenmill(tok: Any, ids: list[int]) -> str:
    stream = tok.decode_stream()
    pieces = [stream.step(i) for i in ids]
    return "".join(p for p in pieces if p) + (stream.flush() or "")


def stream_tokenizers(tok: Any, ids: list[int]) -> str:
    from tokenizers.decoders import DecodeStream

    stream = DecodeStream(skip_special_tokens=True)
    pieces = [stream.step(tok, i) for i in ids]
    return "".join(p for p in pieces if p)


def listed(peer: Callable[[list[int]], object], array: Any) -> object:
    """The peer's decode of an array's ids, made a list first (its decode takes lists)."""
    return peer(array.tolist())


def medians(ours: Callable[[], object], peer: Callable[[], object],
            repeats: int) -> tuple[float, float]:
    """Median seconds of each call, run in turns (ABBA: ours first in even repeats)."""
    runs = {"tokenmill": ours, "peer": peer}
    times: dict[str, list[float]] = {"tokenmill": [], "peer": []}
    for r in range(repeats):
        for engine in abba(r, ("tokenmill", "peer")):
            start = time.perf_counter()
            runs[engine]()
            times[engine].append(time.perf_counter() - start)
    return statistics.median(times["tokenmill"]), statistics.median(times["peer"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ids", type=int, default=20_000)
    args = parser.parse_args()
    from importlib.metadata import version

    import numpy
    import tokenizers

    import tokenmill

    print(f"tokenmill {version('tokenmill')}, tokenizers {tokenizers.__version__}; "
          f"{args.repeats} repeats, medians, microseconds an id")
    print("| tokenizer | text | ids | tokenmill | tokenizers | tokenizers / tokenmill |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, path in FILES.items():
        file = args.data / "tokenizers" / path
        ours, theirs = tokenmill.load(file), tokenizers.Tokenizer.from_file(str(file))
        for text, source in TEXTS.items():
            ids = ids_of(theirs, read_lines(args.data / "text" / source), args.ids)
            whole = theirs.decode(ids)
            if stream_tokenmill(ours, ids) != whole or stream_tokenizers(theirs, ids) != whole:
                print(f"{name}, {text}: a stream's text differs from decode", file=sys.stderr)
                return 1
            a, b = (t / len(ids) * 1e6 for t in medians(
                partial(stream_tokenmill, ours, ids), partial(stream_tokenizers, theirs, ids),
                args.repeats))
            print(f"| {name} | {text} | {len(ids):,} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
    print("\ndecode of the ids at once, milliseconds")
    print("| tokenizer | text | ids | tokenmill | peer | peer / tokenmill |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, path, peer in decode_cases(args.data):
        ours = tokenmill.load(args.data / "tokenizers" / path)
        ours.truncation = ours.padding = None  # (MiniLM's file cuts at 128 and pads)
        for text, source in TEXTS.items():
            lines = head(read_lines(args.data / "text" / source), 1_000_000)  # (1 MB)
            ids = ours.encode("\n".join(lines), add_special_tokens=False).ids
            if ours.decode(ids) != peer(ids):
                print(f"{name}, {text}: decode's text differs from the peer's", file=sys.stderr)
                return 1
            a, b = (t * 1e3 for t in medians(partial(ours.decode, ids), partial(peer, ids),
                                             args.repeats))
            print(f"| {name} | {text} | {len(ids):,} | {a:.1f} | {b:.1f} | {b / a:.2f}x |")
            # A model's output as a numpy array: ours decodes it as it is, the peer's takes a
            # list (tolist, timed with it).
            array = numpy.array(ids, dtype=numpy.uint32)
            if ours.decode(array) != peer(array.tolist()):
                print(f"{name}, {text}: decode's text of an array differs", file=sys.stderr)
                return 1
            a, b = (t * 1e3 for t in medians(partial(ours.decode, array),
                                             partial(listed, peer, array), args.repeats))
            print(f"| {name}, a uint32 array | {text} | {len(ids):,} | {a:.1f} | {b:.1f} | "
                  f"{b / a:.2f}x |")
    return 0


def decode_cases(data: Path) -> list[tuple[str, str, Any]]:
    """(row name, tokenizer file, the peer's decode of a list of ids) for decode at once."""
    import sentencepiece
    import tokenizers

    root = data / "tokenizers"
    json_file = "mistral-7b-v0.3/tokenizer.json"
    hf = tokenizers.Tokenizer.from_file(str(root / json_file))
    model_file = "mistral-7b-v0.3/tokenizer.model"
    sp = sentencepiece.SentencePieceProcessor(model_file=str(root / model_file))
    bert_file = "all-MiniLM-L6-v2/tokenizer.json"
    bert = tokenizers.Tokenizer.from_file(str(root / bert_file))
    return [("Mistral 7B v0.3 json vs tokenizers", json_file, hf.decode),
            ("Mistral 7B v0.3 .model vs sentencepiece", model_file, sp.decode),
            ("MiniLM (BERT) json vs tokenizers", bert_file, bert.decode)]


if __name__ == "__main__":
    sys.exit(main())
