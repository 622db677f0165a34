"""Word ids: ``encode_batch`` and then every encoding's ``word_ids`` and ``sequence_ids`` (what
a token-classification or question-answering pipeline reads), tokenmill vs Hugging Face
``tokenizers``, on one thread, the same paragraphs, one run, the ratios printed.

    python benchmarks/bench_word_ids.py --repeats 5

tokenizers makes word ids while it encodes; tokenmill makes them when first asked for (so
``encode_batch`` alone, the first rows, pays nothing for them). The files are GPT-2's (byte-level
BPE, whose core gives the pieces), all-MiniLM-L6-v2's (BERT's pipeline in the core) and Mistral
7B v0.3's (Metaspace and byte fallback, SentencePiece's pipeline in the core, where a line
without added tokens is one word); the texts about ``--kb`` of English
(tinyshakespeare) and Chinese (hongloumeng), a line a document. Every encoding's ids, word ids and
sequence ids are compared before timing. The engines alternate (ABBA over the repeats); the
figures are medians, in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any

from bench_bpe import DEFAULT_DATA, head, read_lines
from bench_decode_stream import FILES, TEXTS, medians


def read_words(tok: Any, docs: list[str], **options: Any) -> int:
    """Encodes ``docs`` and reads every encoding's word ids and sequence ids (as a pipeline
    would)."""
    return sum(len(e.word_ids) + len(e.sequence_ids) for e in tok.encode_batch(docs, **options))


def one_thread_args(doc: str, hostile: bool = False) -> argparse.Namespace:
    """--data, --repeats and --kb (and --hostile if asked for), read; and tokenizers held to
    one thread (its pool reads the environment when it starts, so before it is imported)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kb", type=int, default=300, help="text per language, kB")
    if hostile:
        parser.add_argument("--hostile", action="store_true",
                            help="also the hostile inputs at 100 kB and 1 MB")
    args = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    return args


def main() -> int:
    args = one_thread_args(__doc__)
    from importlib.metadata import version

    import tokenizers

    import tokenmill

    print(f"tokenmill {version('tokenmill')}, tokenizers {tokenizers.__version__}; "
          f"{args.repeats} repeats, medians in ms")
    print("| tokenizer | text | docs | encode_batch: tokenmill | tokenizers | ratio "
          "| with word and sequence ids: tokenmill | tokenizers | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, file in FILES.items():
        path = args.data / "tokenizers" / file
        ours = tokenmill.Tokenizer.from_file(path)
        ours.truncation = ours.padding = None
        theirs = tokenizers.Tokenizer.from_file(str(path))
        theirs.no_truncation()
        theirs.no_padding()
        for language, text_file in TEXTS.items():
            docs = head(read_lines(args.data / "text" / text_file), args.kb * 1000)
            mine, other = ours.encode_batch(docs, num_threads=1), theirs.encode_batch(docs)
            for k, (a, b) in enumerate(zip(mine, other, strict=True)):
                if (a.ids, a.word_ids, a.sequence_ids) != (b.ids, b.word_ids, b.sequence_ids):
                    print(f"{name} {language}: document {k} differs", file=sys.stderr)
                    return 1
            plain = medians(partial(ours.encode_batch, docs, num_threads=1),
                            partial(theirs.encode_batch, docs), args.repeats)
            words = medians(partial(read_words, ours, docs, num_threads=1),
                            partial(read_words, theirs, docs), args.repeats)
            print(f"| {name} | {language} | {len(docs)} | {cells(plain)} | {cells(words)} |")
    return 0


def cells(times: tuple[float, float]) -> str:
    """Table cells of a (tokenmill, peer) pair of medians: milliseconds each, then the peer's
    over ours."""
    return f"{times[0] * 1e3:.1f} | {times[1] * 1e3:.1f} | {times[1] / times[0]:.2f}x"


if __name__ == "__main__":
    sys.exit(main())
