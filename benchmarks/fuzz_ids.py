"""tokenmill's ids against the reference libraries' on random text, for as long as asked: each
round makes 200 texts from runs of many kinds of characters (ASCII letters and digits, the
contractions, spaces, tabs, CR/LF and the other line breaks, punctuation, accented and
combining letters, titlecase and modifier letters, CJK, Cyrillic, Arabic, Hebrew, Devanagari,
Thai, numerals of other scripts, emoji with joiners and skin tones, characters beyond the BMP,
controls, a BOM) and sometimes a run of one random character, then compares:

- cl100k_base and o200k_base: ``encode_ordinary_batch`` and ``encode_ordinary`` of each text
  with tiktoken's ``encode_ordinary``, and ``decode`` of tiktoken's ids with tiktoken's;
- GPT-2's tokenizer.json: ``encode_batch``'s ids and offsets with ``tokenizers``' ``encode``.

Prints the first mismatches and the count (0 expected); exits 1 if there was one::

    cd benchmarks && python fuzz_ids.py --seconds 300 --seed 2

(Lone surrogates are left out: tokenmill refuses them with an error naming the position, where
tiktoken replaces them.)
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from bench_bpe import DEFAULT_DATA
from bench_encode import ENCODINGS, GPT2_JSON, tiktoken_encoding

KINDS = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  ", "\n",
    "\r\n", "\t", "\r", "\u00a0", "\u2003", "\u3000", "\u200b", "\x0b\x0c\x85\u2028",
    "'sS'tT'reRE've'mM'llLL'dD", "\u2019", ".,;:!?-_()[]{}<>/\\|@#$%^&*+=~`\"",
    "éèêëàâäôöûüçñÉÀÇßøåæœ", "\u0301\u0300\u0308\u0327\u20dd\u0489", "ǅǈǋǲ", "ʰʲˠˤ",
    "中文字符汉语日本語の漢字ひらがなカタカナ한국어", "Привет мир ЁЖЩ", "مرحبا بالعالم", "שלום",
    "नमस्ते दुनिया ्ं", "สวัสดี", "٠١٢٣٤٥٦٧٨٩", "①②③ⅠⅡⅢ½¾",
    "😀👍🏽👨\u200d👩\u200d👧🇫🇷", "\U00010348\U0001D400\U0001F600", "ΑΒΓαβγ", "ﬁﬂ", "\ufeff",
    "\u0000\u0001\u001f", "\U000e0001",
)


def random_text(rnd: random.Random) -> str:
    """Up to 60 runs, each drawn from one kind: a slice of it or characters picked from it."""
    out = []
    for _ in range(rnd.randrange(1, 60)):
        kind = rnd.choice(KINDS)
        k = rnd.choice((1, 1, 1, 2, 3, 5, 8, 20))
        if rnd.random() < 0.5:
            out.append("".join(rnd.choice(kind) for _ in range(k)))
        else:
            at = rnd.randrange(len(kind))
            out.append(kind[at:at + k])
    if rnd.random() < 0.1:
        out.append(chr(rnd.randrange(0x20, 0x30000)) * rnd.randrange(1, 50))
    return "".join(c for c in "".join(out) if not 0xD800 <= ord(c) < 0xE000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)

    from tokenizers import Tokenizer

    import tokenmill

    tiktoken_dir = args.data / "tokenizers" / "tiktoken"
    ours = {name: tokenmill.load(name, path=tiktoken_dir) for name in ENCODINGS}
    theirs = {name: tiktoken_encoding(args.data, name) for name in ENCODINGS}
    gpt2 = tokenmill.load(args.data / GPT2_JSON)
    hf = Tokenizer.from_file(str(args.data / GPT2_JSON))
    rnd = random.Random(args.seed)
    texts_done = mismatches = 0

    def report(what: str, text: str) -> None:
        nonlocal mismatches
        mismatches += 1
        if mismatches <= 20:
            print(f"mismatch ({what}): {text!r:.300}", flush=True)

    stop = time.monotonic() + args.seconds
    while time.monotonic() < stop:
        batch = [random_text(rnd) for _ in range(200)]
        for name in ENCODINGS:
            for text, got in zip(batch, ours[name].encode_ordinary_batch(batch), strict=True):
                want = theirs[name].encode_ordinary(text)
                if got != want or ours[name].encode_ordinary(text) != want:
                    report(f"{name} ids", text)
                if ours[name].decode(want) != theirs[name].decode(want):
                    report(f"{name} decode", text)
        for text, enc in zip(batch, gpt2.encode_batch(batch), strict=True):
            ref = hf.encode(text)
            if enc.ids != ref.ids or enc.offsets != ref.offsets:
                report("gpt2 ids/offsets", text)
        texts_done += len(batch)
    print(f"seed {args.seed}: {texts_done} texts, {mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
