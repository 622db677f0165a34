"""SentencePiece encoding: tokenmill vs ``sentencepiece`` (Mistral's BPE ``.model`` files and
the ALBERT fixture's Unigram) and Hugging Face ``tokenizers`` (Mistral 7B v0.3's
tokenizer.json: Metaspace, byte fallback), the same documents, one run, the ratios printed.

    python benchmarks/bench_spaced.py --repeats 5

Rows, on one thread:
- ``lines``: one call a document, as a server encodes requests: ``encode_ordinary`` against
  ``SentencePieceProcessor.encode`` (ids), ``encode`` against tokenizers' ``encode`` (whole
  encodings, offsets included);
- ``batch``: all the documents in one call: ``encode_ordinary_batch`` against
  ``encode(list)`` (ids), ``encode_batch`` against tokenizers' ``encode_batch`` (encodings);
- ``one text``: the documents joined by newlines into one input, once.

The texts: about ``--kb`` of English (tinyshakespeare), Chinese (hongloumeng), a line a document,
and code (bench_encode's files, a file a document).

With ``--hostile``, also bench_serve's hostile inputs (a megabyte of ``a``, of random letters,
digits, base64, one CJK character, FASTA-like records) at 100 kB and 1 MB, one text each:
``encode_ordinary`` against the peer's encode, the median of three calls after a first, the
growth from 100 kB to 1 MB and the peer's time over ours at 1 MB.

Every document's ids are compared before timing (mismatches are counted and printed). The
engines alternate (ABBA over the repeats); the figures are medians, in milliseconds.
"""

from __future__ import annotations

import statistics
import sys
import time
from functools import partial
from typing import Any

from bench_bpe import head, read_lines
from bench_decode_stream import medians
from bench_encode import code
from bench_serve import HOSTILE, SIZES, hostile_text
from bench_word_ids import one_thread_args


def steady(fn: Any, text: str, repeats: int = 3) -> float:
    """The median seconds of ``repeats`` calls of fn(text), after a first."""
    fn(text)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def hostile(engines: list[tuple[str, Any, Any, Any]]) -> None:
    """The hostile inputs' table (see the module's doc)."""
    print("\n| tokenizer, peer | input | tokenmill 100 kB | 1 MB | growth | peer 100 kB | 1 MB "
          "| growth | peer / tokenmill at 1 MB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, ours, peer, runs in engines:
        for kind in HOSTILE:
            texts = [hostile_text(kind, size) for size in SIZES]
            mine = [steady(partial(runs["one"][0], ours), t) for t in texts]
            theirs = [steady(partial(runs["one"][1], peer), t) for t in texts]
            print(f"| {name} | {kind} | {mine[0] * 1e3:.1f} | {mine[1] * 1e3:.1f} | "
                  f"{mine[1] / mine[0]:.1f} | {theirs[0] * 1e3:.1f} | {theirs[1] * 1e3:.1f} | "
                  f"{theirs[1] / theirs[0]:.1f} | {theirs[1] / mine[1]:.2f}x |", flush=True)

TEXTS = {"English": "text/en/tinyshakespeare.txt", "Chinese": "text/zh/hongloumeng.txt"}
MODELS = {"Mistral 7B v0.3 .model": "mistral-7b-v0.3/tokenizer.model",
          "Mistral 7B v0.1 .model": "mistral-7b-v0.1/tokenizer.model",
          "ALBERT fixture .model (Unigram)": "albert-spiece-fixture/spiece.model"}
JSON = {"Mistral 7B v0.3 json": "mistral-7b-v0.3/tokenizer.json"}


def main() -> int:
    args = one_thread_args(__doc__, hostile=True)
    from importlib.metadata import version

    import sentencepiece
    import tokenizers

    import tokenmill

    print(f"tokenmill {version('tokenmill')}, sentencepiece {sentencepiece.__version__}, "
          f"tokenizers {tokenizers.__version__}; {args.repeats} repeats, medians in ms, one "
          "thread")
    print("| tokenizer, peer | text | docs | mismatches | lines: tokenmill | peer | ratio "
          "| batch: tokenmill | peer | ratio | one text: tokenmill | peer | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    texts = {name: read_lines(args.data / file) for name, file in TEXTS.items()}
    texts["code"] = code(args.data, args.kb * 1000)[0]
    engines: list[tuple[str, Any, Any, Any]] = []  # (name, ours: doc -> ids, peer's, runs)
    for name, file in MODELS.items():
        path = args.data / "tokenizers" / file
        ours = tokenmill.load(path)
        sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
        engines.append((f"{name}, sentencepiece", ours, sp, {
            "lines": (lambda tok, docs: [tok.encode_ordinary(d) for d in docs],
                      lambda peer, docs: [peer.encode(d) for d in docs]),
            "batch": (lambda tok, docs: tok.encode_ordinary_batch(docs, num_threads=1),
                      lambda peer, docs: peer.encode(docs, num_threads=1)),
            "one": (lambda tok, text: tok.encode_ordinary(text),
                    lambda peer, text: peer.encode(text)),
            "ids": (lambda tok, docs: [tok.encode_ordinary(d) for d in docs],
                    lambda peer, docs: [peer.encode(d) for d in docs])}))
    for name, file in JSON.items():
        path = args.data / "tokenizers" / file
        ours = tokenmill.Tokenizer.from_file(path)
        hf = tokenizers.Tokenizer.from_file(str(path))
        engines.append((f"{name}, tokenizers", ours, hf, {
            "lines": (lambda tok, docs: [tok.encode(d, add_special_tokens=False) for d in docs],
                      lambda peer, docs: [peer.encode(d, add_special_tokens=False)
                                          for d in docs]),
            "batch": (lambda tok, docs: tok.encode_batch(docs, add_special_tokens=False,
                                                         num_threads=1),
                      lambda peer, docs: peer.encode_batch(docs, add_special_tokens=False)),
            "one": (lambda tok, text: tok.encode(text, add_special_tokens=False),
                    lambda peer, text: peer.encode(text, add_special_tokens=False)),
            "ids": (lambda tok, docs: [e.ids for e in tok.encode_batch(
                        docs, add_special_tokens=False)],
                    lambda peer, docs: [e.ids for e in peer.encode_batch(
                        docs, add_special_tokens=False)])}))
    for name, ours, peer, runs in engines:
        for language, lines in texts.items():
            docs = head(lines, args.kb * 1000)
            mine, theirs = runs["ids"][0](ours, docs), runs["ids"][1](peer, docs)
            bad = [k for k, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b]
            for k in bad[:3]:
                print(f"{name} {language}: document {k} differs: {docs[k][:60]!r}",
                      file=sys.stderr)
            row = [name, language, str(len(docs)), str(len(bad))]
            whole = "\n".join(docs)
            for mode, arg in (("lines", docs), ("batch", docs), ("one", whole)):
                a, b = medians(partial(runs[mode][0], ours, arg),
                               partial(runs[mode][1], peer, arg), args.repeats)
                row += [f"{a * 1e3:.1f}", f"{b * 1e3:.1f}", f"{b / a:.2f}x"]
            print("| " + " | ".join(row) + " |", flush=True)
    if args.hostile:
        hostile(engines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
