"""Truncation and templates: a BERT file as it is shipped, all-MiniLM-L6-v2's tokenizer.json
with its own truncation (128) and padding (to 128); and Mistral 7B v0.3's tokenizer.json cut
into windows of 32 tokens that overlap by 8 (a chunker's setting, set on both engines). One
input and pairs of inputs (a sentence-pair classifier's or a cross-encoder's), ``encode`` a line
at a time and ``encode_batch``, tokenmill vs Hugging Face ``tokenizers`` on one thread, the same
lines, one run, the ratios printed.

    python benchmarks/bench_pairs.py --repeats 5

The texts are about ``--kb`` of English (tinyshakespeare), a line a document; pairs are
neighbouring lines, and one input in ten is the paragraph of twelve lines, which the
truncation cuts into windows. Every encoding's ids, type ids, attention mask and windows are
compared before timing. The engines alternate (ABBA over the repeats); the figures are medians,
in milliseconds.
"""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

from bench_bpe import head, read_lines
from bench_decode_stream import medians
from bench_word_ids import cells, one_thread_args

MINILM = "all-MiniLM-L6-v2/tokenizer.json"
MISTRAL = "mistral-7b-v0.3/tokenizer.json"
WINDOWS = (32, 8)  # Mistral's max_length and stride


def fields(e: Any) -> tuple:
    return (e.ids, e.type_ids, e.attention_mask, [(o.ids, o.type_ids) for o in e.overflowing])


def same(ours: Any, theirs: Any, batch: list, one_at_a_time: Any) -> bool:
    """Whether both engines' batches, and our encodes one at a time, agree. (A function of
    its own: the encodings it makes are gone before the timing, where the collector's runs
    would walk them.)"""
    mine = [fields(e) for e in ours.encode_batch(batch, num_threads=1)]
    return mine == [fields(e) for e in theirs.encode_batch(batch)] == \
        [fields(e) for e in one_at_a_time(ours)]


def main() -> int:
    args = one_thread_args(__doc__)
    from importlib.metadata import version

    import tokenizers

    import tokenmill

    lines = head(read_lines(args.data / "text" / "en" / "tinyshakespeare.txt"), args.kb * 1000)
    texts = [" ".join(lines[k:k + 12]) if k % 10 == 9 else line for k, line in enumerate(lines)]
    inputs = {"one input": texts, "pairs": list(zip(texts[::2], texts[1::2]))}
    print(f"tokenmill {version('tokenmill')}, tokenizers {tokenizers.__version__}; "
          f"{args.repeats} repeats, medians in ms")
    print("| tokenizer | inputs | count | encode, a line a call: tokenmill | tokenizers | ratio "
          "| encode_batch: tokenmill | tokenizers | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, file in (("MiniLM as shipped", MINILM),
                       (f"Mistral v0.3, windows of {WINDOWS[0]}", MISTRAL)):
        path = args.data / "tokenizers" / file
        ours = tokenmill.Tokenizer.from_file(path)
        theirs = tokenizers.Tokenizer.from_file(str(path))
        if file == MISTRAL:
            ours.truncation = tokenmill.Truncation(max_length=WINDOWS[0], stride=WINDOWS[1])
            theirs.enable_truncation(max_length=WINDOWS[0], stride=WINDOWS[1])
        for label, batch in inputs.items():
            def one_at_a_time(tok: Any, batch: list = batch) -> list:
                return [tok.encode(*(x if isinstance(x, tuple) else (x,))) for x in batch]

            if not same(ours, theirs, batch, one_at_a_time):
                print(f"{name}, {label}: the encodings differ", file=sys.stderr)
                return 1
            loop = medians(partial(one_at_a_time, ours), partial(one_at_a_time, theirs),
                           args.repeats)
            whole = medians(partial(ours.encode_batch, batch, num_threads=1),
                            partial(theirs.encode_batch, batch), args.repeats)
            print(f"| {name} | {label} | {len(batch)} | {cells(loop)} | {cells(whole)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
