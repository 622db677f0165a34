"""The C++ scanners of the GPT-family patterns split exactly as the `regex` module does, with
the code points that Unicode 16.0 leaves unassigned of no class (as tiktoken and tokenizers
see them): on random text from every Unicode category, and on every line of every corpus in
../shared/data (the pattern strings are tiktoken 0.14.0's, from encodings.json there)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
import regex
import unicodedata2
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import _core
from tokenmill.normalized import NormalizedString
from tokenmill.pre_tokenizers import NATIVE_PATTERNS, WORDS_SCANNER

PATTERNS = sorted(NATIVE_PATTERNS.items())
# Characters that sit on the patterns' edges: contractions (and U+017F, which (?i) folds to
# s), \r \n and other spaces, marks, title case, modifier letters, numbers of all kinds.
TRICKY = ("aAbZ 'sStTdDmMlLvVeErR\u017f\t\n\r\x0b\x0c\x1c\x85\u00a0\u2028\u3000,./!?0123"
          "\u00bd\u0663\u2166\u00e9\u00c9\u0301\u05b9\u4e2d\u01c5\u02b0\u3005\U0001F600\u200d-_()"
          "\u00c0\u00de\u00df\u00ff\u00d7\u00f7\u0100")
tricky_text = st.text(st.sampled_from(TRICKY), max_size=16)
any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


def test_tables_come_from_the_regex_release_we_compare_with():
    # Each regex release may carry a newer Unicode; the build generates the scanners' tables
    # from the release pinned in pyproject.toml, and the comparisons below need that same one.
    assert _core.UNICODE_TABLES_FROM == f"regex {regex.__version__}, Unicode 16.0.0", (
        "the native tables and the installed regex module disagree on the Unicode version; "
        "install the regex release pinned in pyproject.toml")
    assert unicodedata2.unidata_version == "16.0.0"


# A code point Unicode 16.0 leaves unassigned stands in the text regex cuts as U+0378, which
# no Unicode assigns (the same length in characters: pieces map back by their lengths).
UNASSIGNED = "\u0378"


def reference_pieces(pattern: str | regex.Pattern, text: str) -> list[str]:
    compiled = regex.compile(pattern) if isinstance(pattern, str) else pattern
    seen = "".join(UNASSIGNED if unicodedata2.category(c) == "Cn" else c for c in text)
    if seen == text:
        return compiled.findall(text)
    return [text[m.start():m.end()] for m in compiled.finditer(seen)]


def test_code_points_new_in_unicode_17_are_of_no_class():
    # U+0558 (Armenian), U+A7CE (Latin), U+18E00 (Tangut), U+323B0 (CJK extension J): letters
    # to regex, unassigned to tiktoken's and tokenizers' engines.
    for ch in "\u0558\ua7ce\U00018e00\U000323b0":
        assert regex.fullmatch(r"\p{L}", ch)
        for name, scanner in PATTERNS:
            assert native_pieces(scanner, ch + "'s") == [ch + "'", "s"], name


def native_pieces(scanner: int, text: str) -> list[str]:
    ends = _core.pretokenize(scanner, text)
    return [text[i:j] for i, j in zip([0, *ends], ends)]


# Python keeps a str in 1, 2 or 4 bytes per character (by its widest one); the scanners read
# each width directly, and lone surrogates are characters of no class, as regex sees them.
with_surrogates = st.text(st.characters(), max_size=40)


@pytest.mark.parametrize("text", [
    "it's caf\u00e9 2024!\n\n  x",          # one byte per character (Latin-1)
    "\u4e2d\u6587 it's 12345 \u3002\r\n",     # two
    "\U0001F600\u200d\U0001F600 IT'S  ok\t",   # four
    "a\ud800b \udfff\ud83d's",                  # lone surrogates
])
def test_every_str_width(text):
    for pattern, scanner in PATTERNS:
        assert native_pieces(scanner, text) == reference_pieces(pattern, text), (pattern, text)
    assert _core.pretokenize(0, text).typecode == "I"


@settings(max_examples=1500)
@given(with_surrogates)
def test_any_text_with_surrogates(text):
    for pattern, scanner in PATTERNS:
        assert native_pieces(scanner, text) == reference_pieces(pattern, text), pattern


@settings(max_examples=3000)
@given(tricky_text)
def test_tricky_text(text):
    for pattern, scanner in PATTERNS:
        assert native_pieces(scanner, text) == reference_pieces(pattern, text), pattern


@settings(max_examples=1500)
@given(any_text)
def test_any_text(text):
    for pattern, scanner in PATTERNS:
        assert native_pieces(scanner, text) == reference_pieces(pattern, text), pattern


def native_utf8_pieces(scanner: int, text: str) -> list[str]:
    # The byte scanners encoding uses (ASCII runs read 16 bytes at a time where the machine can).
    data = text.encode("utf-8")
    ends = _core.pretokenize(scanner, data)
    return [data[i:j].decode("utf-8") for i, j in zip([0, *ends], ends)]


# Runs longer than one 16-byte step, ending on anything: ASCII letters of both cases, digits,
# spaces, and the non-ASCII letters, marks and numbers that may continue a run.
run_text = st.lists(
    st.one_of(
        st.text(st.sampled_from("abcxyzABCXYZ"), min_size=1, max_size=40),
        st.text(st.sampled_from("0123456789"), min_size=1, max_size=5),
        st.sampled_from(list(TRICKY)),
    ),
    max_size=12,
).map("".join)


@settings(max_examples=3000)
@given(st.one_of(run_text, tricky_text, any_text))
def test_utf8_scanners(text):
    # (And the str scanners on the long runs: a str of one byte a character reads them sixteen
    # at a time too.)
    for pattern, scanner in PATTERNS:
        assert native_utf8_pieces(scanner, text) == reference_pieces(pattern, text), (pattern, text)
        assert native_pieces(scanner, text) == reference_pieces(pattern, text), (pattern, text)
    kept = [p for p in native_utf8_pieces(WORDS_SCANNER, text) if not SPACE.fullmatch(p)]
    assert kept == reference_pieces(WORDS, text)


# Streams of words, mostly each after one space, as English is: the byte scanners take runs of
# " word" pieces 64 bytes at a time from bit masks, and a run may end at any character (a
# non-ASCII letter or mark that continues the last word, an apostrophe of a contraction, a
# lowercase letter before an uppercase one in o200k_base, the block's own end).
# Punctuation after a word is taken with the words when a space and a word follow it.
word_stream = st.lists(
    st.tuples(st.sampled_from([" "] * 6 + list(TRICKY)),
              st.text(st.sampled_from("abcxyzABCXYZs"), min_size=1, max_size=12),
              st.sampled_from(["", "", "", ",", ".", "!?", ").", "/", "--", ",\n", ".'", " ,",
                               "'s", ".\u00e9", ",\x7f"])),
    min_size=8, max_size=40,
).map(lambda words: "".join(sep + word + tail for sep, word, tail in words))


# Code, as the byte scanners' masks meet it: identifiers with a character of punctuation
# between words ("self.name", "snake_case", "f(arg"), which the word alternatives of cl100k_base
# and o200k_base take as a prefix and GPT-2's pattern does not; runs of indentation, which are
# pieces of their own before a word but their last space (or tab, which the word takes in
# cl100k_base and o200k_base, not in GPT-2); and whatever may end such a run.
code_stream = st.lists(
    st.one_of(
        st.text(st.sampled_from("abcxyzABCXYZs"), min_size=1, max_size=10),
        st.sampled_from(list("._()[]{}:;=+-*/<>!\"#$%&@\\^`|~',") + ["->", "()", "):", "==",
                                                                       "\u00e9", "\u4e2d", "9"]),
        st.text(st.sampled_from(" "), min_size=1, max_size=9),
        st.sampled_from(["\n", "\n    ", "\n        ", ":\n    ", "\t", " \n", "\r\n  ", "'s"]),
        # tabs: indentation, alignment, and a tab beside every other kind of character
        st.sampled_from(["\t", "\t\t", "\t\t\t", "\n\t", "\n\t\t", " \t", "\t ", "\t\n"]),
    ),
    min_size=16, max_size=80,
).map("".join)


# Prose as it is printed: curly quotes, dashes and an ellipsis (three bytes each in UTF-8, which
# the byte scanners' masks take as punctuation) before and after words, as a word's prefix
# ("\u201cThe", "\u2019s"), beside ASCII punctuation and newlines; the characters of E2 80 xx
# that are not such punctuation (a line separator is a space, U+2030 is a symbol, U+200B a
# format character) and other E2 characters; runs of newlines before punctuation and a slash
# after them; and the text's end right after any of it.
PROSE = ["\u201c", "\u201d", "\u2018", "\u2019", "\u2013", "\u2014", "\u2026"]
OTHER_E2 = ["\u2028", "\u2029", "\u2030", "\u200b", "\u2022", "\u20ac", "\u2122", "\u2190"]
prose_stream = st.lists(
    st.one_of(
        st.text(st.sampled_from("abcxyzABCXYZs"), min_size=1, max_size=10),
        st.sampled_from(PROSE + OTHER_E2 + [" ", " ", " ", "  ", ",", ".", "?", "!", "'", "'s",
                                            "\n", "\n\n", "\r\n", "/", "(", "\u00e9", "9", "-"]),
    ),
    min_size=1, max_size=60,
).map("".join)


# Numbers among words and code: runs of one to five ASCII digits (cut three at a time by
# cl100k_base and o200k_base), after and before spaces, letters, punctuation and newlines,
# and the numbers beyond ASCII that may go on with them (U+00B2, U+0663, U+2166).
number_stream = st.lists(
    st.one_of(
        st.text(st.sampled_from("0123456789"), min_size=1, max_size=5),
        st.text(st.sampled_from("abcxyzABCXYZ"), min_size=1, max_size=6),
        st.sampled_from([" ", " ", "  ", "   ", ".", ",", ", ", "(", ")", "-", "+", "/", "\n",
                         "\n\n", ":\n", "'", "'s", "\u00b2", "\u0663", "\u2166", "\u00e9", "\t",
                         "\u201c", "x.", "\r\n"]),
    ),
    min_size=1, max_size=60,
).map("".join)


# Words of Latin-1 letters (U+00C0 to U+00FF, which the byte scanners' masks take as letters of
# two bytes, uppercase to U+00DE) among ASCII ones, with what may sit beside them: the two signs
# of that range (U+00D7, U+00F7), a mark that goes on with a word (U+0301), letters just past
# it (U+0100, U+017F) and before it (U+00AA, U+00B5, U+00BA), and an apostrophe.
LATIN = "\u00c0\u00c9\u00d6\u00d8\u00de\u00df\u00e0\u00e9\u00f6\u00f8\u00ff"
latin_stream = st.lists(
    st.tuples(st.sampled_from([" "] * 6 + ["", "\n", "(", "\u201c", "'", ". "]),
              st.text(st.sampled_from("abcxyzABCXYZ" + LATIN * 2), min_size=1, max_size=12),
              st.sampled_from(["", "", "", ",", ".", "'s", "\u00d7", "\u00f7", "\u0301",
                               "\u0100", "\u017f", "\u00aa", "\u00b5", "\u00ba", "9"])),
    min_size=8, max_size=40,
).map(lambda words: "".join(sep + word + tail for sep, word, tail in words))


# Words of letters of two bytes beyond Latin-1 (U+0100 to U+07FF) and of three from U+1000 to
# U+1FFF and U+A000 to U+DFFF, which the byte scanners' masks take as letters by the tables:
# upper- and lowercase ones (Cyrillic, Greek, Armenian, Georgian, the Latin of Turkish and
# Vietnamese, title case U+01C5 and U+1F88), and ones of neither case (Hebrew, Arabic, Hangul,
# Ethiopic, Myanmar, Vai, modifier letters), which o200k_base's words treat otherwise, mixed
# within a word; with what may sit beside them in those ranges: marks (U+0483, U+05B9, U+064B,
# U+103A, U+A66F), punctuation (U+00AB, U+037E, U+0387, U+055A, U+05BE, U+060C, U+10FB,
# U+1361), symbols (U+0384, U+0482, U+1FBD), digits (U+0660), an unassigned code point
# (U+03A2), and an apostrophe.
OTHER_LETTERS = ("\u0410\u044f\u0456\u0491\u0460\u0461\u0391\u03c9\u03ac\u0531\u0561\u0130\u0131"
            "\u015f\u011e\u01c5\u05d0\u05e9\u0627\u0644\u02b0\u0640\u07ca\u00b5"
            "\u10d0\u1c90\u1ea0\u1ea1\u1e9e\u1f00\u1f88\u1d2c\ud55c\u1100\u1200\u1000\ua500"
            "\ua60c")
other_letter_stream = st.lists(
    st.tuples(st.sampled_from([" "] * 6 + ["", "\n", "(", "\u201c", "'", ". ", "\u00ab"]),
              st.text(st.sampled_from("abcAB" + OTHER_LETTERS * 2), min_size=1, max_size=12),
              st.sampled_from(["", "", "", ",", ".", "'s", "\u0483", "\u05b9", "\u064b",
                               "\u037e", "\u0387", "\u055a", "\u05be", "\u060c", "\u0384",
                               "\u0482", "\u0660", "\u03a2", "\u00e9", "\u00d7", "9",
                               "\u103a", "\ua66f", "\u10fb", "\u1361", "\u1fbd", "\u4e2d"])),
    min_size=8, max_size=40,
).map(lambda words: "".join(sep + word + tail for sep, word, tail in words))


@settings(max_examples=9500)
@given(st.one_of(word_stream, code_stream, prose_stream, number_stream, latin_stream,
                 other_letter_stream),
       st.integers(0, 3))
def test_utf8_scanners_on_streams_of_words_code_prose_and_numbers(text, skip):
    text = text[skip:]
    for pattern, scanner in PATTERNS:
        assert native_utf8_pieces(scanner, text) == reference_pieces(pattern, text), (pattern, text)


@pytest.mark.parametrize("text", [
    "in 1865, 12 of 345 (6.7%) and 1234567 x1 2x " * 3,  # digit runs of 1 to 7, in blocks
    "a  12  b 1\n2\n\nx 12\u00b2 3\u0663 4.x",             # spaces and newlines beside digits
    # tabs, as C and Go indent with them, beside words, punctuation, digits, spaces, newlines
    # and quotes, in runs, at a text's end and across a block's edge
    "func f() {\n\tif x {\n\t\treturn 1\n\t}\n\t\t(a\t)\t[b] \t}\n\t1\t 2 \t3\tx\t\n\t\t\n"
    "\tend\t.name\t\u201cq\u201d\t'x' \t\u00e9t\u00e9\tA\tBc\tdEf\t\t",
    "x" * 62 + "\t\ty\t(z" + "\t" * 70 + "w",
    # newlines before indentation that ends at a word, punctuation or a digit (the newline a
    # piece of its own) or at another newline, a quote, an apostrophe, a letter beyond ASCII, a
    # vertical tab or the text's end (the run taken with the newlines)
    "def f(x):\n    y = x\n  \n    return y\n\n  \t\n\t z\n   'q'\n  \u00e9\n  9\n  (a)\n"
    "\t\t\u201cs\u201d\n \x0b x\n\r\n  }\nend\n    ",
    "a" * 60 + "\n    b\n" + " " * 70 + "c\n  ",
    # runs of three-byte characters (read without the general decoder), ending on anything
    "\u4e2d\u6587\u3001\u65e5\u672c\u8a9e\u30c6\u30ad\u30b9\u30c8\u30fc\u3002"
    "\ud55c\uad6d\uc5b4 \u0e44\u0e17\u0e22",
    "\u1e00\u1e01\u1e02x \u1e01\u1e00 \u4e2d\u3005\u3000\u4e2d\u2166\u4e2d'S \u4e2d\u00e9\u4e2d",
    "\u4e2d" * 30 + "\u0301",
    "\u201cThe end,\u201d she said.",                 # a quote as a word's prefix, and after one
    "don\u2019t \u2018x\u2019 \u2014 yes\u2026",        # an apostrophe, a dash, an ellipsis
    "word\n\n\u201cNext\u201d\n/ x.\n/y",            # newlines before a quote; a slash after them
    "a\u2028b \u2030c\u200bd\u201d",                 # E2 80 xx that are not prose punctuation
    "x" * 70 + ".\u201d",                           # the text's end after a block's worth
    "Des scientifiques de l\u2019\u00e9cole de m\u00e9decine ont annonc\u00e9 la "
    "cr\u00e9ation d'un nouvel outil \u00c0 \u00c9COLE \u00e9T\u00c9 \u00dcber Stra\u00dfe "
    "\u00d7 3 \u00f72 \u00e9\u0301t\u00e9 caf\u00e9",  # Latin-1 letters, in blocks
    "a" * 62 + "\u00e9" + "b" * 10,                  # a letter across a block's edge
    "a" * 63 + "\u00e9" + "b" * 10,
    # two-byte letters beyond Latin-1, in blocks: Russian, Ukrainian, Greek, Armenian, Turkish,
    # Hebrew and Arabic words; case changes inside a word; a mark or a sign after a letter
    "\u041c\u043e\u0441\u043a\u0432\u0430 \u2014 \u0441\u0442\u043e\u043b\u0438\u0446\u0430 "
    "\u0420\u043e\u0441\u0441\u0438\u0438. \u041a\u0438\u0457\u0432 \u0491\u0430\u043d\u043e\u043a "
    "\u0391\u03b8\u03ae\u03bd\u03b1 \u0540\u0561\u0575\u0561\u057d\u057f\u0561\u0576 "
    "\u0130stanbul \u015fehir \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 "
    "\u0430\u0411\u0432\u0413 \u0430\u05d0\u0411 \u0430\u0483\u0431 \u0430\u0482 x\u0640y",
    "\u044f" * 31 + " \u0431" + "\u044f" * 20,         # a letter across a block's edge
    "a" + "\u044f" * 31 + "\u0431" * 20,
    "Vi\u1ec7t Nam l\u00e0 m\u1ed9t qu\u1ed1c gia \u0111\u1eb9p "
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8 "
    "\u10e1\u10d0\u10e5\u10d0\u10e0\u10d7\u10d5\u10d4\u10da\u10dd \u12a0\u12f2\u1235 "
    "\u1f08\u03b8\u1f75\u03bd\u03b1\u03b9",
    "a" * 61 + "\u1ea1b c",                           # three-byte letters across the edge
    "a" * 62 + "\u1ea1b c",
    "a" * 63 + "\u1ea1b c",
    " \ud55c" * 30,
    # letters of neither case beside cased ones (o200k_base: a word that starts with one takes
    # the uppercase letters after it)
    " \u05d0A \u05d0\u05d0Ab a\u05d0A A\u05d0a \u05d0a a\u05d0 \u05d0's \u05d0'S "
    "\u0627\u0411\u0431 \u0430\u0627\u0411 \u0411\u0627\u0431\u0627 x\u02b0Y \u05d0\u05d1 "
    "\u05d0B\u05d1c",
])
def test_utf8_scanner_examples(text):
    for pattern, scanner in PATTERNS:
        assert native_utf8_pieces(scanner, text) == reference_pieces(pattern, text), (pattern, text)


WORDS = regex.compile(r"\w+|[^\w\s]+")  # the Whitespace pre-tokenizer's pattern
SPACE = regex.compile(r"\s+")


@settings(max_examples=1500)
@given(st.one_of(any_text, tricky_text, st.text(st.sampled_from(" _a1.\u00e9\u0301\u4e2d\t"))))
def test_words_scanner(text):
    # Scanner 3 returns the whitespace between pieces as pieces of its own, which it drops.
    kept = [p for p in native_pieces(WORDS_SCANNER, text) if not SPACE.fullmatch(p)]
    assert kept == reference_pieces(WORDS, text)


def test_patterns_are_tiktokens(shared_data):
    encodings = json.loads((shared_data / "tokenizers" / "tiktoken" /
                            "encodings.json").read_text("utf-8"))
    assert {encodings[name]["pat_str"] for name in ("r50k_base", "cl100k_base", "o200k_base")} \
        | {encodings["gpt2_original_pat_str"]} == set(NATIVE_PATTERNS)


def corpus_files(shared: Path) -> list[Path]:
    files = sorted((shared / "text").rglob("*.txt")) + sorted((shared / "text").rglob("*.gz"))
    return files + sorted((shared / "code").glob("*.jsonl"))


def source_files(path: Path) -> list[str]:
    """The source files of one of ../shared/data/code's JSON-lines files."""
    return [json.loads(doc)["text"] for doc in path.read_text("utf-8").splitlines()]


def corpus_lines(path: Path) -> list[str]:
    if path.suffix == ".jsonl":
        # a source file's lines, with their line ends, as a tokenizer meets them in code
        return [line for source in source_files(path)
                for line in source.splitlines(keepends=True)]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def test_every_line_of_every_corpus(shared_data):
    files = corpus_files(shared_data)
    assert len(files) >= 50
    mismatches = []
    for path in files:
        lines = corpus_lines(path)
        for pattern, scanner in PATTERNS:
            compiled = regex.compile(pattern)
            for n, line in enumerate(lines):
                expected = compiled.findall(line)
                if native_pieces(scanner, line) != expected:
                    mismatches.append((path.name, n, scanner))
                if native_utf8_pieces(scanner, line) != expected:
                    mismatches.append((path.name, n, scanner, "utf-8"))
    assert mismatches == []


@pytest.mark.parametrize("pattern, scanner", PATTERNS,
                         ids=[f"scanner{s}-{i}" for i, (_, s) in enumerate(PATTERNS)])
def test_whole_files_with_their_newlines(shared_data, pattern, scanner):
    texts = [(shared_data / "text" / name).read_text("utf-8")
             for name in ("en/tinyshakespeare.txt", "zh/ud_zh_gsdsimp_dev.txt")]
    # and source files whole (the line test above cuts them into pieces shorter than the byte
    # scanners' 64-byte blocks, mostly)
    for path in sorted((shared_data / "code").glob("*.jsonl")):
        texts.append("".join(source_files(path)[:200]))
    for text in texts:
        expected = reference_pieces(pattern, text)
        assert native_pieces(scanner, text) == expected
        assert native_utf8_pieces(scanner, text) == expected


@settings(max_examples=300)
@given(st.lists(any_text | tricky_text, max_size=8), st.integers(1, 3))
def test_native_counting_equals_python_counting(texts, threads):
    from collections import Counter

    from tokenmill import BPE, Tokenizer, pre_tokenizers
    from tokenmill.tokenizer import _count_natively

    for pre in (pre_tokenizers.ByteLevel(),
                pre_tokenizers.Sequence([pre_tokenizers.Split(PATTERNS[1][0], "isolated"),
                                         pre_tokenizers.ByteLevel(use_regex=False)]),
                pre_tokenizers.Split(PATTERNS[2][0], "isolated")):
        plan = pre_tokenizers.native_counting(pre)
        assert plan is not None
        expected: Counter[str] = Counter()
        for text in texts:
            expected.update(p.text for p in pre.split(NormalizedString(text)))
        # batches far larger than one thread's share, so the threaded merge is exercised too
        before = os.environ.get("TOKENMILL_NUM_THREADS")
        os.environ["TOKENMILL_NUM_THREADS"] = str(threads)
        try:
            got = _count_natively(texts * 3000 if threads > 1 else texts, *plan)
        finally:
            if before is None:
                del os.environ["TOKENMILL_NUM_THREADS"]
            else:
                os.environ["TOKENMILL_NUM_THREADS"] = before
        if threads > 1:
            expected = Counter({k: v * 3000 for k, v in expected.items()})
        assert list(got.items()) == list(expected.items())  # same counts, first-seen order
        assert Tokenizer(BPE({}, []), pre_tokenizer=pre).count_words(texts) == \
            Counter({k: v // (3000 if threads > 1 else 1) for k, v in expected.items()})
