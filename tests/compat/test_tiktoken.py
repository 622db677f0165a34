"""OpenAI's encodings, id for id: tokenmill against tiktoken (a test dependency, loading the
ranks files of ../shared/data, nothing downloaded) on the goldens and on every line of every
corpus there. Zero mismatches is the bar."""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import re
import string

import pytest
import tiktoken
import tiktoken.load
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenmill
from tokenmill import InputError, _core

NAMES = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]


@pytest.fixture(scope="module")
def encodings(shared_data):
    return json.loads((shared_data / "tokenizers" / "tiktoken" / "encodings.json")
                      .read_text("utf-8"))


@pytest.fixture(scope="module")
def pairs(shared_data, encodings):
    out = {}
    for name in NAMES:
        e = encodings[name]
        ref = tiktoken.Encoding(name=name, pat_str=e["pat_str"],
                                mergeable_ranks=tiktoken.load.load_tiktoken_bpe(
                                    str(shared_data / e["file"])),
                                special_tokens=e["special_tokens"])
        out[name] = (tokenmill.load(name, path=shared_data / e["file"]), ref)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_goldens(shared_data, pairs, name):
    tok, ref = pairs[name]
    rows = [json.loads(line) for line in
            gzip.open(shared_data / "goldens" / f"tiktoken_{name}.jsonl.gz", "rt")]
    assert len(rows) == 295
    for row in rows:
        assert tok.encode_ordinary(row["text"]) == row["ids"], row["text"][:60]
        assert tok.encode(row["text"], disallowed_special=()).ids == row["ids"]
        assert tok.decode_bytes(row["ids"]) == ref.decode_bytes(row["ids"])
        assert tok.decode(row["ids"]) == ref.decode(row["ids"])


def test_every_line_of_every_corpus(corpus_lines, pairs, assert_same_ids):
    lines = corpus_lines
    assert len(lines) > 500_000
    for name in NAMES:
        tok, ref = pairs[name]
        assert_same_ids(name, tok.encode_ordinary_batch(lines),
                        ref.encode_ordinary_batch(lines, num_threads=2))


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_base"])
def test_long_pieces_are_cut_by_backtracking_as_tiktoken_cuts_them(shared_data, encodings, pairs,
                                                                   corpus_lines, name,
                                                                   assert_same_ids):
    # From 32,768 bytes a piece is cut by backtracking (cpp/src/bpe_backtrack.cc): the hostile
    # inputs of issue 7 at 40 kB; then, with the threshold at one byte, every piece of a sample
    # of the corpora and of random text over few letters (a fresh model each time, so no piece
    # comes from the cache of another path).
    from tokenmill import _core

    ref = pairs[name][1]
    rnd = random.Random(name)
    hostile = ["a" * 40_000, "".join(rnd.choices(string.ascii_lowercase, k=40_000)),
               "".join(rnd.choices(string.digits, k=40_000)),
               base64.b64encode(rnd.randbytes(30_000)).decode("ascii"), "中" * 14_000,
               "\n" * 40_000, "ab" * 20_000, "é" * 20_000,
               "".join(rnd.choices("acgt", k=40_000))]  # pairs come back: the table of answers
    small = ["".join(rnd.choices(letters, k=rnd.randint(1, 3000)))
             for letters in ("ab", "abc", "acgt", "aA0", "xyz .", "的一是", "éèà", "=-", " \n")
             for _ in range(40)]
    previous = _core.set_backtrack_bytes(32_768)
    try:
        tok = tokenmill.load(name, path=shared_data / encodings[name]["file"])
        assert tok.native_plan()[0].backtracks()
        assert_same_ids(name, tok.encode_ordinary_batch(hostile),
                        ref.encode_ordinary_batch(hostile))
        _core.set_backtrack_bytes(1)
        tok = tokenmill.load(name, path=shared_data / encodings[name]["file"])
        texts = small + corpus_lines[::40]
        assert_same_ids(name, tok.encode_ordinary_batch(texts), ref.encode_ordinary_batch(texts))
    finally:
        _core.set_backtrack_bytes(previous)


@pytest.mark.parametrize("capacity", [0, None])
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_long_pieces_among_short_ones_with_and_without_the_caches(shared_data, encodings, pairs,
                                                                 monkeypatch, name, capacity):
    # Encoding hands the scanner's pieces to the model a batch at a time, and the model cuts a
    # piece of 32 kB or more by backtracking where it meets it in the batch: between short
    # pieces, at a batch's first and last place, two in a row, and with the caches off (the
    # model then takes each piece by itself).
    import tokenmill.formats.tiktoken as tiktoken_format

    if capacity is not None:
        monkeypatch.setattr(tiktoken_format, "CACHE_CAPACITY", capacity)
    tok = tokenmill.load(name, path=shared_data / encodings[name]["file"])
    ref = pairs[name][1]
    rnd = random.Random(f"{name}/{capacity}")
    long_pieces = ["".join(rnd.choices("acgt", k=33_000)), "中" * 11_000,
                   "".join(rnd.choices(string.ascii_letters, k=40_000))]
    words = "the cat, sat on 12345 mats; don't\n\tstop ".split(" ")
    texts = []
    for _text in range(12):
        parts = [rnd.choice(words) for _ in range(rnd.randint(0, 70))]
        for _ in range(rnd.randint(1, 3)):
            parts.insert(rnd.randint(0, len(parts)), rnd.choice(long_pieces))
        texts.append(" ".join(parts))
    texts += [long_pieces[0] + " " + long_pieces[1], "x " * 63 + long_pieces[2]]
    got = tok.encode_ordinary_batch(texts)
    assert got == ref.encode_ordinary_batch(texts)
    assert [tok.encode_ordinary(t) for t in texts[:3]] == got[:3]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_long_pieces_met_again(shared_data, encodings, pairs, name):
    # A thread keeps the ids of the last four long pieces it cut in the text it encodes (up to
    # 128 KiB each), found again by their bytes: a piece of the same length that differs only
    # in its last byte or its first, one that is a prefix of another, eight pieces in turn (each
    # way written over while others are read), from lists and from encodings with offsets, and
    # texts encoded on two threads.
    from tokenmill import _core

    ref = pairs[name][1]
    rnd = random.Random(name)
    base = "".join(rnd.choices("acgt", k=33_000))
    pieces = [base, base[:-1] + ("a" if base[-1] != "a" else "c"),
              ("g" if base[0] != "g" else "t") + base[1:], base[:-1], base + "acg"]
    pieces += ["".join(rnd.choices(letters, k=rnd.randint(32_800, 36_000)))
               for letters in ("ab", "ACGT", "xyz")]
    texts = [">\n" + "\n>\n".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 6))) + "\n"
             for _ in range(30)]
    texts.append("\n".join(pieces + pieces[::-1]))
    previous = _core.set_backtrack_bytes(32_768)
    try:
        tok = tokenmill.load(name, path=shared_data / encodings[name]["file"])
        want = ref.encode_ordinary_batch(texts)
        assert [tok.encode_ordinary(t) for t in texts] == want
        assert tok.encode_ordinary_batch(texts, num_threads=2) == want
        # Offsets: as a model that cuts every long piece by merging gives them.
        got = [tok.encode(t) for t in texts[-3:]]
        _core.set_backtrack_bytes(1 << 30)
        merged = tokenmill.load(name, path=shared_data / encodings[name]["file"])
        for encoding, text in zip(got, texts[-3:], strict=True):
            again = merged.encode(text)
            assert encoding.ids == again.ids
            assert encoding.offsets == again.offsets
    finally:
        _core.set_backtrack_bytes(previous)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_backtracking_alone_cuts_every_piece_as_tiktoken(shared_data, encodings, pairs,
                                                        corpus_lines, name):
    # The encoders fall back to merging when backtracking gives up, so the test above would
    # pass with a search that gave up on every piece; here the search itself must find each
    # piece's ids (its tables' shortcuts included: the filter of three- and four-byte
    # prefixes, the tokens' first eight bytes kept beside their records).
    import regex

    tok = tokenmill.load(name, path=shared_data / encodings[name]["file"])
    model = tok.native_plan()[0]
    ref = pairs[name][1]
    rnd = random.Random(f"{name}/alone")
    pieces = {p for line in corpus_lines[::25]
              for p in regex.findall(encodings[name]["pat_str"], line)}
    for letters in (string.ascii_lowercase, "acgt", string.ascii_letters + string.digits + "+/",
                    string.printable, "的一是在不了有和人这", "éèàü", "\x00\x7f\xff"):
        pieces |= {"".join(rnd.choices(letters, k=rnd.randint(1, 64))) for _ in range(300)}
    pieces |= {"".join(rnd.choices(string.ascii_lowercase, k=5000)),
               "".join(rnd.choices("acgt", k=5000))}
    # (tiktoken merges one piece without its regex in a method it keeps private)
    single = getattr(ref, "encode_single_piece", None) or ref._encode_single_piece
    assert model.backtrack_ids(b"") == []
    for piece in sorted(pieces):
        data = piece.encode("utf-8", "surrogatepass")
        assert model.backtrack_ids(data) == single(data), piece[:80]


MOTIF_CHARACTERS = "ab1 =-\n\u00e9\u4e2d\u6587\u306e\U0001f600"


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_backtracking_on_text_that_repeats(shared_data, encodings, pairs, name):
    # The search takes the last longest match again where the same sixteen bytes come back
    # (one character repeated, a short motif): never where the match depended on more than
    # those bytes, or on where the piece ends. Motifs of one to five characters (bytes of one
    # to four), repeated, with something else before, between and after.
    tok = tokenmill.load(name, path=shared_data / encodings[name]["file"])
    model = tok.native_plan()[0]
    ref = pairs[name][1]
    single = getattr(ref, "encode_single_piece", None) or ref._encode_single_piece
    motif = st.text(alphabet=MOTIF_CHARACTERS, min_size=1, max_size=5)
    part = st.tuples(motif, st.integers(1, 300)).map(lambda m: m[0] * m[1])
    other = st.text(alphabet=MOTIF_CHARACTERS + "xyz", max_size=12)

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(st.lists(st.tuples(part, other), min_size=1, max_size=4), other)
    def check(parts, tail):
        data = ("".join(a + b for a, b in parts) + tail).encode("utf-8")
        assert model.backtrack_ids(data) == single(data)

    check()


def uncached_and_cached(path, name, monkeypatch, capacity=None):
    """Encoding ``name`` of the ranks file at ``path`` without caches, and with a model of its
    own (entries start empty) and a word cache of ``capacity`` words (None: the default)."""
    from tokenmill.formats import tiktoken as tiktoken_format

    monkeypatch.setattr(tiktoken_format, "CACHE_CAPACITY", 0)
    uncached = tokenmill.load(name, path=path)
    monkeypatch.undo()
    if capacity is not None:
        monkeypatch.setattr(tiktoken_format, "CACHE_CAPACITY", capacity)
    return uncached, tokenmill.load(name, path=path)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("capacity", [None, 16])
def test_pieces_the_piece_cache_cannot_hold(shared_data, encodings, pairs, monkeypatch, name,
                                            capacity):
    # A piece of up to 32 bytes and 5-8 tokens has its ids (18 bits each) in its piece-cache
    # entry; one of more (a long identifier, a clause of rare Chinese characters) has them in
    # the model's array of long entries, and its entry says where; any piece of 33-1024 bytes
    # (runs of indentation, comment rulers, clauses of Chinese) is kept in the word cache,
    # looked for there before it is merged; pieces over 1024 bytes are merged each time. Each
    # is met again and again here: with the default cache, and with one so small (16 words)
    # that most long pieces find it full, are not kept, and are merged each time. Offsets (the
    # word cache and the long entries keep a byte-level model's ids only, the spans following
    # from the tokens' lengths) are those of a tokenizer without caches.
    uncached, tok = uncached_and_cached(shared_data / encodings[name]["file"], name,
                                        monkeypatch, capacity)
    ref = pairs[name][1]
    rnd = random.Random(name)
    words = ["Brotli", "Decoder", "Error", "Code", "Assertion", "Tester", "Conforming", "Object",
             "Qx", "zz", "Unaligned", "Read", "\u00e9t\u00e9", "\u4e2d\u6587"]
    pieces = [" " + "".join(rnd.choices(words, k=rnd.randint(3, 9))) for _ in range(300)]
    pieces += [" " * k for k in (*range(30, 45), 255, 256, 257, 300, 1024, 1025)]
    pieces += ["=" * k for k in range(5, 80, 7)] + [" /*" + "-" * k for k in (40, 253, 254, 300)]
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 300)]
    pieces += ["\u3002" + "".join(rnd.choices(han, k=rnd.randint(1, 60))) for _ in range(150)]
    pieces += ["\u3002" + "\u6587" * k for k in (340, 341, 342, 400)]  # 1023-1203 bytes
    texts = ["".join(rnd.choices(pieces, k=20)) + "\n" for _ in range(200)]
    expected = ref.encode_ordinary_batch(texts)
    offsets = [uncached.encode(t, disallowed_special=()).offsets for t in texts[:50]]
    for _ in range(2):
        assert [tok.encode_ordinary(t) for t in texts] == expected
        assert tok.encode_ordinary_batch(texts, num_threads=2) == expected
        encodings_ = [tok.encode(t, disallowed_special=()) for t in texts[:50]]
        assert [e.ids for e in encodings_] == expected[:50]
        assert [e.offsets for e in encodings_] == offsets


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("capacity", [None, 16])
def test_pieces_of_full_sets(shared_data, encodings, pairs, monkeypatch, name, capacity):
    # A piece whose set in the piece cache (two ways) holds two other pieces of the model takes
    # the second way, and the piece there moves to the model's spare entries, where a lookup
    # that finds its set full looks next (on the ids path, the moves are written after each
    # batch of pieces). 60,000 distinct words in the 65,536 sets fill a few thousand sets and
    # move as many entries, many of them to a spare entry another took (4,096 of them). Ids
    # (lists, arrays, two threads) and offsets, met again, are tiktoken's and those of a
    # tokenizer without caches; with a word cache of 16 words too (the marked pieces).
    uncached, tok = uncached_and_cached(shared_data / encodings[name]["file"], name,
                                        monkeypatch, capacity)
    ref = pairs[name][1]
    rnd = random.Random(f"{name}/{capacity}")
    letters = string.ascii_lowercase + "\u00e9\u00e8"
    words = {" " + "".join(rnd.choices(letters, k=rnd.randint(3, 9))) for _ in range(60_000)}
    ordered = sorted(words)
    rnd.shuffle(ordered)
    texts = ["".join(ordered[i:i + 50]) for i in range(0, len(ordered), 50)]
    expected = ref.encode_ordinary_batch(texts, num_threads=2)
    assert tok.encode_ordinary_batch(texts, num_threads=1) == expected  # entries written
    assert tok.encode_ordinary_batch(texts, num_threads=1) == expected  # and read
    assert tok.encode_ordinary_batch(texts, num_threads=2) == expected
    arrays = tok.encode_batch_np(texts, num_threads=1)
    assert arrays["ids"].tolist() == [i for ids in expected for i in ids]
    for t, ids in zip(texts[:100], expected[:100]):
        e = tok.encode(t, disallowed_special=())
        assert e.ids == ids
        assert e.offsets == uncached.encode(t, disallowed_special=()).offsets


@pytest.mark.parametrize("name", NAMES)
def test_ascii_pieces_merged_for_ids_then_read_for_offsets(shared_data, encodings, pairs,
                                                           monkeypatch, name):
    # A short ASCII piece the piece cache does not hold is merged, on the ids path, on arrays
    # of its bytes (merge_ascii), and its entry written from them: up to four tokens with their
    # ends, five to eight packed, more in the array of long entries. Random base64, hex and
    # words meet all three; the entries then serve encode's offsets, which must be those of a
    # tokenizer without caches.
    from tokenmill.formats import tiktoken as tiktoken_format

    path = shared_data / encodings[name]["file"]
    monkeypatch.setattr(tiktoken_format, "CACHE_CAPACITY", 0)
    uncached = tokenmill.load(name, path=path)
    monkeypatch.undo()
    tok = tokenmill.load(name, path=path)  # its own model: entries start empty
    ref = pairs[name][1]
    alphabets = [string.ascii_letters + string.digits + "+/", "0123456789abcdef",
                 string.ascii_letters + " ", string.printable]

    @settings(max_examples=150, deadline=None)
    @given(st.sampled_from(alphabets).flatmap(
        lambda a: st.lists(st.text(alphabet=a, max_size=60), min_size=1, max_size=4)))
    def check(texts):
        expected = [ref.encode_ordinary(t) for t in texts]
        assert [tok.encode_ordinary(t) for t in texts] == expected  # entries written here
        for t, ids in zip(texts, expected):
            e = tok.encode(t, disallowed_special=())  # and read here
            assert e.ids == ids
            assert e.offsets == uncached.encode(t, disallowed_special=()).offsets

    check()


def test_long_entries_when_their_ring_wraps(shared_data, encodings, pairs, monkeypatch):
    # Short pieces of more than eight tokens keep their ids in a ring of 2^20 ids of the
    # model's; once it wraps, the oldest ids are written over, and a piece whose ids are gone
    # is merged and kept again in its own way of the cache. 60,000 pieces of a comma and nine
    # random CJK characters (30 bytes, 16 or more tokens each in cl100k_base: 1.3M ids in all)
    # wrap it; ids and offsets stay those of tiktoken and of a tokenizer without caches, on one
    # thread and two, for pieces in the ring, pieces whose ids were written over, and ASCII
    # pieces of more than eight tokens.
    from tokenmill.formats import tiktoken as tiktoken_format

    name = "cl100k_base"
    path = shared_data / encodings[name]["file"]
    monkeypatch.setattr(tiktoken_format, "CACHE_CAPACITY", 0)
    uncached = tokenmill.load(name, path=path)
    monkeypatch.undo()
    tok = tokenmill.load(name, path=path)  # its own model, so its own empty ring
    model = tok.native_plan()[0]
    ref = pairs[name][1]
    rnd = random.Random(3)
    han = [chr(c) for c in range(0x4E00, 0xA000)]
    pieces = ["\uff0c" + "".join(rnd.choices(han, k=9)) for _ in range(60_000)]
    texts = ["".join(pieces[i:i + 50]) for i in range(0, len(pieces), 50)]
    expected = ref.encode_ordinary_batch(texts)
    room = 1 << 20
    assert model.long_entry_ids() == (0, room)
    assert sum(map(len, expected)) > room + 200_000  # more than the ring holds

    def taken_by(batch, threads=1):
        before = model.long_entry_ids()[0]
        assert tok.encode_ordinary_batch([texts[i] for i in batch], num_threads=threads) == \
            [expected[i] for i in batch]
        return model.long_entry_ids()[0] - before

    def ids_of(batch):
        return sum(len(expected[i]) for i in batch)

    half = range(len(texts) // 2)
    assert 0.95 * ids_of(half) < taken_by(half) <= ids_of(half)  # (each piece has its 16+)
    # Read from the ring (but for pieces that lost their place in the cache to others)
    assert taken_by(half, threads=2) < 0.1 * ids_of(half)
    rest = range(len(texts) // 2, len(texts))
    assert taken_by(rest, threads=2) > 0.95 * ids_of(rest)  # wraps: the first ids are gone
    assert model.long_entry_ids()[0] > room

    # The first texts' ids were written over: merged and kept again, through the offsets'
    # path for some and the ids' path for the others, then read.
    first = range(20)
    for i in first[:10]:
        e = tok.encode(texts[i], disallowed_special=())
        assert e.ids == expected[i]
        assert e.offsets == uncached.encode(texts[i], disallowed_special=()).offsets
    assert taken_by(first[10:]) > 0.95 * ids_of(first[10:])
    assert taken_by(first, threads=2) < 0.1 * ids_of(first)
    for i in first:
        assert tok.encode(texts[i], disallowed_special=()).offsets == \
            uncached.encode(texts[i], disallowed_special=()).offsets
    # The last texts' ids are still in the ring.
    last = range(len(texts) - 100, len(texts))
    assert taken_by(last) < 0.1 * ids_of(last)

    ascii_texts = [" " + "".join(rnd.choices(string.ascii_letters + string.digits, k=31))
                   for _ in range(2_000)]
    ascii_expected = ref.encode_ordinary_batch(ascii_texts)
    assert max(map(len, ascii_expected)) > 8
    for threads in (1, 2, 1):
        assert tok.encode_ordinary_batch(texts, num_threads=threads) == expected
        assert tok.encode_ordinary_batch(ascii_texts, num_threads=threads) == ascii_expected
    for t, ids in zip(ascii_texts[:50], ascii_expected[:50]):
        e = tok.encode(t, disallowed_special=())
        assert e.ids == ids
        assert e.offsets == uncached.encode(t, disallowed_special=()).offsets


# CPython keeps a str as 1, 2 or 4 bytes a character, as its widest character needs (an ASCII
# str's bytes are UTF-8 already); the core turns the others into UTF-8 itself, 16 characters at
# a time while they are ASCII (cpp/src/text.cc). Texts of each width: ASCII runs of any length
# (so blocks start and end everywhere) around characters up to that width, and one character
# that needs it, so every text has the width it is named for.
WIDE = {
    "latin1": (0x80, 0xFF),
    "ucs2": (0x100, 0xFFFF),
    "ucs4": (0x10000, 0x10FFFF),
}
ASCII_RUN = st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=40)


# Characters unassigned in the Unicode of Python's unicodedata (which hypothesis draws by) are
# left out of the drawn texts; test_every_code_point_beside_letters_digits_and_quotes below
# takes every code point, those assigned after Python's Unicode 14 among them.
NOT_DRAWN = ("Cs", "Cn")


def texts_of_width(width: str) -> st.SearchStrategy[str]:
    low, high = WIDE[width]
    up_to = st.characters(min_codepoint=0x80, max_codepoint=high, exclude_categories=NOT_DRAWN)
    widest = st.characters(min_codepoint=low, max_codepoint=high, exclude_categories=NOT_DRAWN)
    runs = st.lists(st.tuples(ASCII_RUN, st.text(up_to, max_size=3)), max_size=8)
    return st.tuples(runs, widest, st.integers(min_value=0)).map(
        lambda r: _insert("".join(a + b for a, b in r[0]), r[1], r[2]))


def _insert(text: str, ch: str, at: int) -> str:
    at %= len(text) + 1
    return text[:at] + ch + text[at:]


def token_spans(ref, text: str, ids: list[int]) -> list[tuple[int, int]]:
    """The offsets tiktoken's tokens give: characters of the str, each token's bytes found
    through the characters that hold its first and last byte."""
    char_of = [c for c, ch in enumerate(text) for _ in ch.encode("utf-8")]
    at, spans = 0, []
    for i in ids:
        n = len(ref.decode_single_token_bytes(i))
        spans.append((char_of[at], char_of[at + n - 1] + 1))
        at += n
    return spans


@pytest.mark.parametrize("width", sorted(WIDE))
def test_every_width_of_str_as_tiktoken_encodes_its_utf8(pairs, width):
    tok, ref = pairs["o200k_base"]
    low, high = WIDE[width]

    @settings(max_examples=200, deadline=None)
    @given(st.lists(texts_of_width(width), min_size=1, max_size=6))
    def check(texts):
        assert all(low <= max(map(ord, t)) <= high for t in texts)  # the width it is named for
        expected = [ref.encode_ordinary(t) for t in texts]
        assert [tok.encode_ordinary(t) for t in texts] == expected
        assert tok.encode_ordinary_batch(texts, num_threads=2) == expected
        assert tok.count_tokens(texts) == [len(x) for x in expected]
        flat = tok.encode_batch_np(texts)
        assert flat["ids"].tolist() == [i for x in expected for i in x]
        for t, ids in zip(texts, expected):
            assert tok.encode(t, disallowed_special=()).offsets == token_spans(ref, t, ids)

    check()


# Runs of ASCII digits of every length about the shortest one that takes the three-digit table
# (12), some long enough that a batch of pieces ends inside them, each ending on what may take
# the last one or two digits into a group of \p{N} (digits beyond ASCII, superscripts, Roman
# numerals, circled numbers) or on anything else.
DIGIT_RUN = st.integers(min_value=0, max_value=400).map(lambda n: "".join(
    "0123456789"[(i * 7 + n) % 10] for i in range(n)))
AFTER_DIGITS = st.sampled_from(["", "\u0663", "\u0663\u0664\u0665", "\u00b2", "\u216b", "\u2460",
                                "\u4e94", " ", "\n", "a", "Z", ".", "'s", "\u00e9", "\u4e2d", "1"])


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_runs_of_digits_cut_three_at_a_time_as_tiktoken_cuts_them(pairs, name):
    tok, ref = pairs[name]

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from(["", " x" * 3, " x" * 70, "\u0663", "a"]),
                              DIGIT_RUN, AFTER_DIGITS).map(lambda p: "".join(p)),
                    min_size=1, max_size=5).map("".join))
    def check(text):
        expected = ref.encode_ordinary(text)
        assert tok.encode_ordinary(text) == expected
        assert tok.encode_ordinary_batch([text, text], num_threads=2) == [expected, expected]
        assert tok.count_tokens([text]) == [len(expected)]
        assert tok.encode(text, disallowed_special=()).offsets == token_spans(ref, text, expected)

    check()
    # Runs whose groups end about where ids are written a chunk at a time (256 groups, 768
    # digits), and two chunks on, with what follows them.
    for n in [*range(762, 776), *range(1530, 1544)]:
        for after in ("", "\u0663", "a", "1"):
            text = "0123456789" * (n // 10) + "0123456789"[: n % 10] + after
            assert tok.encode_ordinary(text) == ref.encode_ordinary(text), (n, after)
    # A megabyte of digits: three a token, each its three digits' token.
    text = "".join(random.Random(7).choices("0123456789", k=1_000_002))
    ids = tok.encode_ordinary(text)
    assert len(ids) == 333_334
    assert ids == ref.encode_ordinary(text)


def test_clauses_of_cjk_through_two_models_in_turn(pairs):
    # Clauses of CJK (pieces of 36 bytes and of 6-15 bytes, many tokens each) through both
    # encodings in turn on one thread, again and again: nothing one model keeps about a piece
    # (a cache entry, a pair lookup) may reach the other; then 140,000 distinct long pieces,
    # more than any cache here holds, while the first pieces come back.
    rnd = random.Random(7)
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    clauses = ["".join(rnd.choices(han, k=rnd.choice([2, 3, 4, 5, 12]))) for _ in range(2000)]
    texts = ["\uff0c".join(rnd.choices(clauses, k=30)) for _ in range(100)]
    for _ in range(2):
        for name in ("cl100k_base", "o200k_base"):
            tok, ref = pairs[name]
            assert tok.encode_ordinary_batch(texts, num_threads=1) == \
                ref.encode_ordinary_batch(texts, num_threads=1), name
    tok, ref = pairs["o200k_base"]
    many = ["\uff0c".join("".join(rnd.choices(han, k=12)) for _ in range(1000))
            for _ in range(140)]
    expected = ref.encode_ordinary_batch(texts[:10] + many + texts[:10], num_threads=1)
    for _ in range(2):
        assert tok.encode_ordinary_batch(texts[:10] + many + texts[:10], num_threads=1) == expected


def test_special_tokens_follow_tiktokens_rules(pairs):
    tok, ref = pairs["cl100k_base"]
    text = "a<|endoftext|>b<|fim_prefix|>"
    with pytest.raises(InputError, match=r"special token '<\|endoftext\|>' at character 1"):
        tok.encode(text)
    with pytest.raises(InputError, match="allowed_special"):
        tok.encode(text, allowed_special={"<|endoftext|>"})  # fim_prefix still disallowed
    assert tok.encode(text, allowed_special="all").ids == ref.encode(text, allowed_special="all")
    assert tok.encode(text, allowed_special={"<|endoftext|>"}, disallowed_special=()).ids == \
        ref.encode(text, allowed_special={"<|endoftext|>"}, disallowed_special=())
    assert tok.encode(text, disallowed_special=()).ids == ref.encode(text, disallowed_special=())
    assert tok.encode_ordinary(text) == ref.encode_ordinary(text)
    ids = tok.encode(text, allowed_special="all").ids
    assert tok.decode(ids, skip_special_tokens=False) == ref.decode(ids)
    with pytest.raises(InputError, match="not a special token"):
        tok.encode("x", allowed_special={"<|nope|>"})


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_digit_runs_of_a_vocabulary_without_every_three_digits(encodings, name):
    # Ranks with the bytes, a few digit pairs and "123" only: not every three digits are one
    # token, so the model has no table and long runs go through the scanner and the merges.
    from tokenmill.formats import tiktoken as tiktoken_format

    ranks = {bytes([b]): b for b in range(256)}
    for extra in (b"12", b"123", b"45", b"99", b"999"):
        ranks[extra] = len(ranks)
    pattern = encodings[name]["pat_str"]
    tok = tiktoken_format.from_ranks(ranks, pattern, {})
    ref = tiktoken.Encoding(name=f"digits-{name}", pat_str=pattern, mergeable_ranks=ranks,
                            special_tokens={})
    for text in ("1234512345123451234599999", "x 123456789012345678 y",
                 "".join(random.Random(3).choices("0123459", k=5000)) + "\u0663"):
        assert tok.encode_ordinary(text) == ref.encode_ordinary(text)
        assert tok.encode(text, disallowed_special=()).offsets == \
            token_spans(ref, text, ref.encode_ordinary(text))


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_any_ids_decode_as_tiktoken_decodes_them(pairs, name):
    # The core copies a token of up to 16 bytes as 16 bytes from its table (the end of the
    # token's own and the start of the next) and moves on by the token's length; longer ones,
    # and tokens that end the buffer's room, are copied by length. Ids of every length, the
    # longest of the vocabulary among them, in any order, texts of up to 300 tokens.
    tok, ref = pairs[name]
    by_length: dict[int, list[int]] = {}
    for i in range(ref.max_token_value + 1):
        try:
            by_length.setdefault(len(ref.decode_single_token_bytes(i)), []).append(i)
        except KeyError:  # no token has this id (cl100k_base's gap before its specials)
            continue
    assert max(by_length) > 16 and 16 in by_length
    lengths = sorted(by_length)
    an_id = st.sampled_from(lengths).flatmap(lambda n: st.sampled_from(by_length[n]))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(an_id, max_size=300))
    def check(ids):
        assert tok.decode(ids) == ref.decode(ids)
        assert tok.decode_bytes(ids) == ref.decode_bytes(ids)

    check()
    longest = by_length[lengths[-1]]
    assert tok.decode(longest * 1000) == ref.decode(longest * 1000)


def test_partial_utf8_decodes_as_tiktoken_does(pairs):
    tok, ref = pairs["o200k_base"]
    ids = tok.encode_ordinary("日本語 😀")
    for cut in range(1, len(ids) + 1):
        assert tok.decode(ids[:cut]) == ref.decode(ids[:cut])
        assert tok.decode_bytes(ids[:cut]) == ref.decode_bytes(ids[:cut])


def test_gpt2_files_equal_r50k(shared_data, pairs):
    gpt2 = tokenmill.load(shared_data / "tokenizers" / "gpt2")
    tok, _ = pairs["r50k_base"]
    text = (shared_data / "text" / "en" / "ud_en_ewt_dev.txt").read_text("utf-8")
    assert gpt2.encode_ordinary(text) == tok.encode_ordinary(text)


def test_export_to_tiktoken_round_trips(shared_data, tmp_path):
    from tokenmill import BPE, BPETrainer, Tokenizer, decoders, pre_tokenizers
    from tokenmill.formats import tiktoken as tiktoken_format

    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel(),
                    decoder=decoders.ByteLevel())
    lines = (shared_data / "text" / "en" / "tinyshakespeare.txt").read_text("utf-8")
    tok.train_from_iterator(lines.splitlines(), BPETrainer(
        vocab_size=1500, special_tokens=("<|endoftext|>",),
        initial_alphabet=tuple(pre_tokenizers.ByteLevel.alphabet())))
    path = tmp_path / "mine.tiktoken"
    tiktoken_format.save(tok, path)
    meta = json.loads((tmp_path / "mine.tiktoken.json").read_text("utf-8"))
    ref = tiktoken.Encoding(name="mine", pat_str=meta["pat_str"],
                            mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)),
                            special_tokens=meta["special_tokens"])
    sample = (shared_data / "text" / "en" / "ud_en_ewt_dev.txt").read_text("utf-8").splitlines()
    assert [tok.encode_ordinary(s) for s in sample] == ref.encode_ordinary_batch(sample)


@pytest.mark.parametrize("content, message", [
    (b"IQ== 0\nnot-base64! 1\n", r":2: 'not-base64!' is not valid base64"),
    (b"IQ== 0\nIg== 0\n", r":2: rank 0 appears twice \(first on line 1\)"),
    (b"IQ== 0\nIQ== 1\n", r":2: token 'IQ==' \(base64\) appears twice"),
    (b"IQ== zero\n", r":1: expected 'BASE64 RANK'"),
])
def test_bad_tiktoken_files(tmp_path, content, message):
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(content)
    with pytest.raises(tokenmill.FormatError, match=message):
        tokenmill.load("cl100k_base", path=path)


def test_another_encodings_ranks_are_refused(shared_data):
    ranks = shared_data / "tokenizers" / "tiktoken"
    with pytest.raises(tokenmill.FormatError, match=r"r50k_base.tiktoken: 50,256 ranks, where "
                       r"cl100k_base's cl100k_base.tiktoken has 100,256: the ranks of another"):
        tokenmill.load("cl100k_base", path=ranks / "r50k_base.tiktoken")
    with pytest.raises(tokenmill.FormatError, match="50,280 ranks, where r50k_base's"):
        tokenmill.load("r50k_base", path=ranks / "p50k_base.tiktoken")


def test_unknown_preset_and_missing_path(tmp_path):
    with pytest.raises(InputError, match="unknown preset 'cl200k'"):
        tokenmill.load("cl200k")
    with pytest.raises(InputError, match="needs path="):
        tokenmill.load("o200k_base")


def test_gpt2_merges_that_disagree_with_the_vocab(tmp_path):
    (tmp_path / "vocab.json").write_text('{"a": 0, "b": 1, "ab": 2}', encoding="utf-8")
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\nb a\n", encoding="utf-8")
    with pytest.raises(tokenmill.FormatError, match=r"merges.txt:3: merge 'b' \+ 'a' needs 'ba'"):
        tokenmill.load(tmp_path)


# The piece cache (cpp/src/bpe.cc) starts with 65,536 sets and grows once, to four times that,
# when pieces keep losing their place in full sets, copying each entry whose piece now belongs
# in another quarter. In a process of its own, so the growth happens here and inside a batch on
# two threads: words of random letters are mostly new pieces, far more than the first quarter
# holds.
GROWTH_SCRIPT = r"""
import random, sys
from pathlib import Path
import tiktoken, tiktoken.load
import tokenmill
from tokenmill import _core

ranks, name, pat_str = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
ref = tiktoken.Encoding(name=name, pat_str=pat_str, special_tokens={},
                        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(ranks)))
tok = tokenmill.load(name, path=ranks)
rnd = random.Random(7)
def texts(n):
    words = [" " + "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=rnd.randint(2, 6)))
             + rnd.choice(["", ",", ".", " 12", " é", " 東京"]) for _ in range(n)]
    return ["".join(words[i:i + 40]) for i in range(0, n, 40)]
early, late = texts(40_000), texts(400_000)
assert _core.piece_cache_sets() == 65_536, _core.piece_cache_sets()
got = tok.encode_ordinary_batch(early, num_threads=1)  # entries made before the growth
assert _core.piece_cache_sets() == 65_536, "grew too early"
assert got == ref.encode_ordinary_batch(early, num_threads=2)
want = ref.encode_ordinary_batch(late, num_threads=2)
assert tok.encode_ordinary_batch(late, num_threads=2) == want  # the growth, on two threads
assert _core.piece_cache_sets() == 262_144, _core.piece_cache_sets()
for threads in (1, 2):  # after it: entries copied, left behind, written since
    assert tok.encode_ordinary_batch(early, num_threads=threads) == got
    assert tok.encode_ordinary_batch(late, num_threads=threads) == want
    assert [tok.encode_ordinary(t) for t in early[:200]] == got[:200]
print("ok")
"""


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_piece_cache_grows_without_changing_an_id(shared_data, encodings, name):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", GROWTH_SCRIPT,
                          str(shared_data / encodings[name]["file"]), name,
                          encodings[name]["pat_str"]], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


# A text whose ASCII pieces of four bytes or more nearly all miss the piece cache, batch after
# batch (random base64), merges them without it for a while (cpp/src/bpe.cc, PieceMisses),
# then looks again: ids as tiktoken's through every change, text before and after included.
@pytest.mark.parametrize("name", NAMES)
def test_random_text_merged_without_the_piece_cache_keeps_every_id(pairs, name):
    tok, ref = pairs[name]
    rnd = random.Random(name)
    blob = base64.b64encode(rnd.randbytes(150_000)).decode("ascii")
    words = " ".join(rnd.choice(["the", "tokenizer", "merges", "pieces", "of", "text,",
                                 "Piece", "12345", "caché", "東京"]) for _ in range(20_000))
    texts = [blob, words + blob + words, blob[:5_000] + words[:20_000] + blob[5_000:],
             words, "x" + blob[:3_000], blob + "é" + blob[::-1]]
    before = _core.piece_cache_skipped_batches()
    want = [ref.encode_ordinary(t) for t in texts]
    assert [tok.encode_ordinary(t) for t in texts] == want
    skipped = _core.piece_cache_skipped_batches() - before
    # A blob of 200 kB is 900 to 1,400 batches of 64 pieces (by the encoding's pattern), and
    # the texts hold it about five times: most of those batches are skipped.
    assert skipped > 3_000, skipped
    assert tok.encode_ordinary_batch(texts, num_threads=2) == want
    flat = tok.encode_batch_np(texts, num_threads=2)
    assert flat["ids"].tolist() == [i for ids in want for i in ids]
    assert tok.count_tokens(texts, num_threads=1) == [len(ids) for ids in want]
    # Words that come back are found in the cache: no batch of them is skipped.
    before = _core.piece_cache_skipped_batches()
    assert tok.encode_ordinary(words) == want[3]
    assert _core.piece_cache_skipped_batches() == before
    # With pieces of 16 bytes or more cut by backtracking, the scanner hands the core pairs of
    # bounds (the other way into the batches), which skip as well. (A new blob: the texts above,
    # met five times now, are in the cache enough that their batches no longer skip.)
    fresh = [base64.b64encode(rnd.randbytes(150_000)).decode("ascii")]
    fresh.append(words[:10_000] + fresh[0] + words[:10_000])
    previous = _core.set_backtrack_bytes(16)
    try:
        before = _core.piece_cache_skipped_batches()
        assert [tok.encode_ordinary(t) for t in fresh] == [ref.encode_ordinary(t) for t in fresh]
        assert _core.piece_cache_skipped_batches() - before > 500
    finally:
        _core.set_backtrack_bytes(previous)


@pytest.mark.parametrize("name", NAMES)
def test_every_code_point_beside_letters_digits_and_quotes(pairs, name):
    # Each code point (surrogates aside) beside a contraction, a lowercase letter, a capital
    # and a digit, so every class the patterns test decides a cut: tiktoken's engine knows
    # Unicode 16.0, and a code point assigned only later (U+0558, Tangut, CJK extension J) is
    # of no class to it nor here.
    tok, ref = pairs[name]
    points = [chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000]
    for start in range(0, len(points), 4096):
        text = "".join(f"{c}'s A{c}b {c}7\n" for c in points[start:start + 4096])
        assert tok.encode_ordinary(text) == ref.encode_ordinary(text), hex(ord(points[start]))


def test_a_disallowed_special_token_is_a_value_error_as_in_tiktoken(pairs):
    # Code written for tiktoken catches ValueError; tokenmill's InputError is one.
    tok, ref = pairs["cl100k_base"]
    for encode in (ref.encode, lambda text: tok.encode(text).ids):
        with pytest.raises(ValueError, match=re.escape("<|endoftext|>")):
            encode("hello <|endoftext|>")
    with pytest.raises(InputError):
        tok.encode("hello <|endoftext|>")


# Texts of every kind the encoder has a way for, mixed in one text and across a batch: words
# met before (the piece cache), words in capitals and after spaces, runs of digits (the
# three-digit table), every kind of whitespace, contractions, base64 (merged without the cache
# once its batches miss), any code point, runs of punctuation, and runs of one character long
# enough for backtracking. Each example goes through every ids path: one text at a time, the
# batch on two threads, numpy's flat ids and count_tokens, and decodes back to its text.
# TOKENMILL_FUZZ_EXAMPLES draws more (a longer search than CI's, by hand).
_MIXED_WORDS = ["the", "Tokenizer", "merges", "pieces", "of", "text,", "naïve", "Straße",
                "東京", "über", "Ĳssel", "Ωmega", "日本語", "x", "HTTPServer", "camelCase"]
_MIXED_SPACES = [" ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", " \n ", "\n\n", "   \t",
                 "\u2028", "\x0b", "\x0c", "\r"]
_MIXED_CONTRACTIONS = ["'s", "'S", "'ll", "'LL", "'ve", "'re", "'d", "'m", "'t", "n't", "'"]
_mixed_chunk = st.one_of(
    st.sampled_from(_MIXED_WORDS),
    st.sampled_from(_MIXED_WORDS).map(lambda w: " " + w),
    st.sampled_from(_MIXED_WORDS).map(str.upper),
    st.text("0123456789", min_size=1, max_size=12),
    st.sampled_from(_MIXED_SPACES),
    st.sampled_from(_MIXED_CONTRACTIONS),
    st.text(string.ascii_letters + string.digits + "+/=", min_size=1, max_size=300),
    st.binary(min_size=1_000, max_size=4_000).map(lambda b: base64.b64encode(b).decode()),
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=8),
    st.text(string.punctuation, min_size=1, max_size=4),
    st.tuples(st.sampled_from("aZ7é中 -"), st.integers(1, 1200)).map(lambda t: t[0] * t[1]),
)
# (A text's chunks, joined by a separator, and the whole said up to eight times: long texts,
# whose pieces come back.)
_mixed_text = st.tuples(st.sampled_from(["", " ", "\n"]), st.lists(_mixed_chunk, max_size=400),
                        st.integers(1, 8)).map(lambda t: t[0].join(t[1]) * t[2])


@pytest.mark.parametrize("name", NAMES)
def test_mixed_random_texts_through_every_ids_path(pairs, name):
    tok, ref = pairs[name]

    @settings(max_examples=int(os.environ.get("TOKENMILL_FUZZ_EXAMPLES", "60")))
    @given(st.lists(_mixed_text, min_size=1, max_size=4))
    def check(texts):
        want = [ref.encode_ordinary(t) for t in texts]
        assert [tok.encode_ordinary(t) for t in texts] == want
        assert tok.encode_ordinary_batch(texts, num_threads=2) == want
        assert tok.encode_batch_np(texts, num_threads=2)["ids"].tolist() == \
            [i for ids in want for i in ids]
        assert tok.count_tokens(texts, num_threads=2) == [len(ids) for ids in want]
        assert [tok.decode(ids) for ids in want] == texts

    check()
