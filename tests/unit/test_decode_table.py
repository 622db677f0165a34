"""The decode table (tokenmill.decode_table): SentencePiece-style chains decoded natively must
give what the chain gives, run in Python over the tokens, for every chain of its shape."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import BPE, AddedToken, Tokenizer, load
from tokenmill import decoders as d
from tokenmill._core import DecodeTable
from tokenmill.bert import WordPieceDecoder
from tokenmill.decode_table import plan_of
from tokenmill.decoders import chain_of, decode_raw
from tokenmill.errors import InputError

# A vocabulary with what the runs and steps can trip on: byte tokens (valid sequences, stray
# continuations, a lead byte cut short, overlong, surrogate and past-U+10FFFF forms), marks,
# spaces, an empty-looking token, and a hole at id 5.
BYTES = [0x41, 0x0A, 0xE4, 0xB8, 0xAD, 0xC3, 0xA9, 0xFF, 0x80, 0xC0, 0xED, 0xA0, 0xF4, 0x90,
         0xF0, 0x9F, 0x98, 0x80, 0xE0, 0x20]
PLAIN = ["▁", "a▁", "▁▁b", " c", "c ", "▁<0x41>", "<0x▁41>", "x", "é", "日本", "<unk>",
         "<0xZZ>", "<0x+4>", "▁▁", "  ", "##s", "##", ".", "'", "n't", "do", "not", "'s", "<"]
TOKENS = ["▁a", *(f"<0x{b:02X}>" for b in BYTES), *PLAIN]  # ("▁a" at 0: see the first entries)
VOCAB = {t: i + (i >= 5) for i, t in enumerate(TOKENS)}  # (no id 5)
ADDED = [AddedToken("<s>", 100), AddedToken("</s>", 101),
         AddedToken("▁new", 102, special=False), AddedToken("<0x42>", 103, special=False),
         AddedToken("<ctl>", 104)]
IDS = [*VOCAB.values(), *(t.id for t in ADDED)]


def tokenizer(decoder: d.Decoder) -> Tokenizer:
    return Tokenizer(BPE(dict(VOCAB), []), decoder=decoder, added_tokens=ADDED)


def reference(tok: Tokenizer, ids: list[int], skip: bool, raw: bool) -> str | bytes:
    """The chain run in Python over the tokens: what decode gave before the table."""
    tokens = tok._tokens_of(ids, skip)
    return decode_raw(tok.decoder, tokens) if raw else tok.decoder.decode(tokens)


def outcome(call) -> object:
    try:
        return call()
    except InputError as e:
        return ("error", str(e))


MARKS = "▁ a<"
step = st.one_of(
    st.builds(d.Replace, st.text(MARKS + "x0", min_size=1, max_size=2),
              st.text(MARKS, max_size=2)),
    st.builds(lambda p, c: d.Replace(p, c, regex=True),
              st.sampled_from(["▁+", "^ ", "a*", "<0x(..)>", " $"]), st.text(MARKS, max_size=2)),
    st.builds(lambda c, a, b, f, lead: d.Strip(c, a, b, first_only=f, leading=f and lead),
              st.sampled_from(" ▁a"), st.integers(0, 2), st.integers(0, 2), st.booleans(),
              st.booleans()),
    st.builds(lambda r, s: d.Metaspace(r, prepend_scheme=s),
              st.sampled_from("▁a"), st.sampled_from(["always", "first", "never"])),
    st.builds(lambda p, c: WordPieceDecoder(prefix=p, cleanup=c),
              st.sampled_from(["##", "▁", "<"]), st.booleans()))


@st.composite
def chains(draw) -> d.Decoder:
    built: list[d.Decoder] = draw(st.lists(step, max_size=3))
    fallback = draw(st.sampled_from([None, False, True]))
    if fallback is not None:
        built.append(d.ByteFallback(per_byte=fallback))
    if draw(st.booleans()):
        built.append(d.Fuse())
        built += draw(st.lists(step, max_size=2))
    if len(built) == 1 and draw(st.booleans()):
        return built[0]
    return d.Sequence(built)


@settings(max_examples=600)
@given(chains(), st.lists(st.sampled_from(IDS + [5, 999]), max_size=12), st.booleans())
def test_a_table_decodes_as_the_chain(decoder, ids, skip):
    tok = tokenizer(decoder)
    assert outcome(lambda: tok.decode(ids, skip_special_tokens=skip)) == \
        outcome(lambda: reference(tok, ids, skip, False))
    assert outcome(lambda: tok.decode_bytes(ids, skip_special_tokens=skip)) == \
        outcome(lambda: reference(tok, ids, skip, True))
    # The table answered, but where the empty token that stands for a skipped special one
    # makes text (an empty match's Replace before a per-byte ByteFallback), or where a Strip of
    # the leading tokens meets steps that could tell apart what it took for empty.
    plan = plan_of(decoder)
    if plan is None:
        assert any(isinstance(s, d.Strip) and s.leading for s in chain_of(decoder))
        return
    empty_makes_text = plan.byte_fallback is not None and plan.byte_fallback.per_byte and \
        d.Sequence(list(plan.each)).decode_chain(["", ""])[1] != ""
    assert (tok._table[1] is None) == empty_makes_text


@pytest.mark.parametrize("name", ["mistral-7b-v0.3/tokenizer.model",
                                  "mistral-7b-v0.3/tokenizer.json",
                                  "mistral-7b-v0.1/tokenizer.model",
                                  "albert-spiece-fixture/spiece.model",
                                  "all-MiniLM-L6-v2/tokenizer.json",
                                  "bert-base-uncased/vocab.txt"])
def test_real_models_decode_random_ids_as_their_chains(shared_data, name):
    tok = load(shared_data / "tokenizers" / name)
    assert plan_of(tok.decoder) is not None
    size = tok.get_vocab_size()
    rng = random.Random(name)
    # Byte tokens often, in runs (the hard part), special ones among them.
    byte_ids = [tok.token_to_id(f"<0x{b:02X}>") for b in range(256)]
    byte_ids = [i for i in byte_ids if i is not None] or [0]
    for _ in range(400):
        ids = [rng.choice(byte_ids) if rng.random() < 0.5 else rng.randrange(size)
               for _ in range(rng.randrange(30))]
        for skip in (True, False):
            assert tok.decode(ids, skip_special_tokens=skip) == reference(tok, ids, skip, False)
            assert tok.decode_bytes(ids, skip_special_tokens=skip) == \
                reference(tok, ids, skip, True)
    assert tok._table[1] is not None


@pytest.mark.parametrize("name", ["mistral-7b-v0.3/tokenizer.model",
                                  "mistral-7b-v0.1/tokenizer.model",
                                  "albert-spiece-fixture/spiece.model"])
def test_model_files_decode_random_ids_as_sentencepiece(shared_data, name):
    # Leading whitespace pieces, controls, unknown pieces and byte pieces anywhere: ALBERT's
    # model removes extra whitespace, and sentencepiece takes "▁" off every piece while the
    # text is empty there ("▁", "▁the" is "the"); Mistral's takes it off the first alone.
    import sentencepiece

    path = shared_data / "tokenizers" / name
    ours, theirs = load(path), sentencepiece.SentencePieceProcessor(model_file=str(path))
    rng = random.Random(name)
    lead = [i for i in range(theirs.get_piece_size()) if theirs.id_to_piece(i).startswith("▁")]
    odd = [i for i in range(theirs.get_piece_size())
           if theirs.is_control(i) or theirs.is_unknown(i) or theirs.is_byte(i)]
    for _ in range(3000):
        ids = [rng.choice(lead[:50]) if rng.random() < 0.3 else
               rng.choice(odd) if rng.random() < 0.3 else rng.randrange(theirs.get_piece_size())
               for _ in range(rng.randrange(8))]
        assert ours.decode(ids) == theirs.decode(ids), ids


def test_the_table_follows_added_tokens_and_a_new_decoder():
    tok = tokenizer(d.Sequence([d.Replace("▁", " "), d.ByteFallback(), d.Fuse(),
                                d.Strip(" ", 1, 0)]))
    a = VOCAB["▁a"]
    assert tok.decode([a, a]) == "a a"
    tok.add_tokens(["▁zz"])
    new = tok.token_to_id("▁zz")
    assert tok.decode([a, new]) == "a zz"
    tok.decoder = d.Metaspace()
    assert tok.decode([a, new]) == "a zz"
    tok.decoder = d.Sequence([d.Replace("▁", "_"), d.Fuse()])
    assert tok.decode([a, new]) == "_a_zz"


def test_bad_ids_are_named_as_before():
    tok = tokenizer(d.Sequence([d.Replace("▁", " "), d.ByteFallback(), d.Fuse()]))
    with pytest.raises(InputError, match=r"ids\[1\]: 5 is not an id"):
        tok.decode([0, 5])
    with pytest.raises(InputError, match=r"ids\[2\]: 'x' is not an id"):
        tok.decode([0, 1, "x"])  # type: ignore[list-item]
    with pytest.raises(InputError, match=r"ids\[0\]: -1 is not an id"):
        tok.decode([-1])
    assert tok.decode(iter([VOCAB["<0x41>"], 0])) == "A a"  # (any iterable, as before)


def test_only_chains_of_the_shape_have_a_plan():
    assert plan_of(None) is None
    assert plan_of(d.ByteLevel()) is None
    assert plan_of(d.Sequence([WordPieceDecoder(), d.ByteLevel()])) is None
    assert plan_of(d.BPEDecoder()) is None
    assert plan_of(d.Sequence([d.ByteFallback(), d.Replace("▁", " "), d.Fuse()])) is None
    assert plan_of(d.Sequence([d.Replace("▁", " "), d.ByteFallback(), d.ByteFallback()])) is None
    plan = plan_of(d.Sequence([d.Strip("▁", 1, 0, first_only=True), d.Metaspace(),
                               d.ByteFallback(per_byte=True), d.Fuse(), d.Strip(" ", 1, 0)]))
    assert plan is not None
    assert plan.first == (d.Strip("▁", 1, 0), d.Replace("▁", ""))
    assert plan.after == (d.Strip(" ", 1, 0),)


def test_the_core_refuses_tables_that_do_not_hold_together():
    with pytest.raises(ValueError, match="disagree"):
        DecodeTable(b"ab", b"\x01\x00\x00\x00", b"\xff\xff" * 2, b"\x00")
    ends = (1).to_bytes(4, "little") + (9).to_bytes(4, "little")
    with pytest.raises(ValueError, match="out of bounds"):
        DecodeTable(b"ab", ends, b"\xff\xff" * 2, b"\x00")
    with pytest.raises(ValueError, match="out of bounds"):
        DecodeTable(b"ab", (1).to_bytes(4, "little") * 2, (300).to_bytes(2, "little") * 2,
                    b"\x00")
    table = DecodeTable(b"ab", (1).to_bytes(4, "little") + (2).to_bytes(4, "little"),
                        b"\xff\xff" * 2, b"\x00")
    assert table.decode([0, 0], True, False, False, 0, True) == "ba"  # (first, then the other)
    assert table.decode([0, 1], True, False, False, 0, True) is None
    with pytest.raises(ValueError, match="runs"):
        table.decode([0], True, False, False, 3, True)


def test_a_stream_takes_tokens_added_after_it_began():
    tok = tokenizer(d.Sequence([d.Replace("▁", " "), d.ByteFallback(), d.Fuse(),
                                d.Strip(" ", 1, 0)]))
    stream = tok.decode_stream()
    a = VOCAB["▁a"]
    assert stream.step(a) == "a"
    tok.add_tokens(["▁zz"])
    new = tok.token_to_id("▁zz")
    assert "".join(p for p in (stream.step(new), stream.step(a), stream.flush()) if p) == " zz a"
    assert tok.decode([a, new, a]) == "a zz a"


def test_raw_bytes_of_runs_parted_by_nothing_stay_apart_for_steps_after_the_fuse():
    # Runs of byte tokens parted by a skipped special token (or a token whose text is empty)
    # are read apart by the chain: "\xc3" and "\xa9" stay two bytes that are no character, and
    # a step after the fuse sees them so; joined, they would be "é".
    chain = d.Sequence([d.ByteFallback(per_byte=True), d.Fuse(),
                        d.Replace("a?", "-", regex=True)])
    tok = Tokenizer(BPE({"<0xC3>": 0, "<0xA9>": 1, "a": 2, "▁": 4}, []), decoder=chain,
                    added_tokens=[AddedToken("<s>", 3)])
    assert tok.decode_bytes([0, 3, 1], skip_special_tokens=True) == b"-\xc3-\xa9-"
    assert tok.decode_bytes([0, 1], skip_special_tokens=True) == b"-\xc3\xa9-"
    emptied = d.Sequence([d.Replace("▁", ""), d.ByteFallback(), d.Fuse(),
                          d.Replace("a?", "-", regex=True)])
    tok = Tokenizer(BPE({"<0xC3>": 0, "<0xA9>": 1, "a": 2, "▁": 4}, []), decoder=emptied)
    assert tok.decode_bytes([0, 4, 1]) == b"-\xc3-\xa9-"
    assert tok.decode([0, 4, 1]) == "-\ufffd-\ufffd-"


def test_a_stream_follows_the_tokenizer_it_reads(shared_data):
    tok = load(shared_data / "tokenizers" / "mistral-7b-v0.3" / "tokenizer.json")
    ids = tok.encode("Hello world again", add_special_tokens=False).ids

    def streamed(stream) -> str:
        return "".join(p for p in [*(stream.step(i) for i in ids), stream.flush()] if p)

    stream = tok.decode_stream()
    tok.decoder = d.Sequence([d.Replace("▁", "_"), d.ByteFallback(), d.Fuse()])
    assert streamed(stream) == tok.decode(ids) == "_Hello_world_again"
    tok = load(shared_data / "tokenizers" / "mistral-7b-v0.3" / "tokenizer.json")
    stream = tok.decode_stream()
    assert stream.step(ids[0]) == "Hello"
    tok.add_special_tokens(["▁world"])
    rest = [stream.step(i) for i in ids[1:]] + [stream.flush()]
    assert "Hello" + "".join(p for p in rest if p) == tok.decode(ids) == "Hello again"


def test_a_stream_of_a_model_that_strips_leading_pieces_keeps_its_spaces(shared_data):
    # Under ALBERT's model a bare "▁" decodes to nothing at the text's start and strips the
    # next piece's "▁" too: a window that began with it lost a space.
    import sentencepiece

    path = shared_data / "tokenizers" / "albert-spiece-fixture" / "spiece.model"
    tok, sp = load(path), sentencepiece.SentencePieceProcessor(model_file=str(path))
    ids = [sp.piece_to_id(p) for p in ["▁a", "▁b", "▁c", "▁d", "▁e", "▁f", "▁g", "▁h", "▁",
                                       "▁the", "▁", "▁", "▁x"]]
    rng = random.Random(0)
    for case in range(200):
        seq = ids if case == 0 else [rng.choice(ids) for _ in range(rng.randrange(1, 40))]
        stream = tok.decode_stream()
        pieces = [stream.step(i) for i in seq] + [stream.flush()]
        assert "".join(p for p in pieces if p) == tok.decode(seq) == sp.decode(seq), seq


def test_a_stream_changed_midway_loses_no_text(shared_data):
    tok = load(shared_data / "tokenizers" / "mistral-7b-v0.3" / "tokenizer.json")
    ids = tok.encode("the quick brown fox", add_special_tokens=False).ids
    stream = tok.decode_stream()
    assert [stream.step(ids[0]), stream.step(ids[1])] == ["the", " quick"]
    tok.add_special_tokens(["▁the"])  # (released already: later text comes whole)
    rest = [stream.step(i) for i in ids[2:]] + [stream.flush()]
    assert "".join(p for p in rest if p) == " brown fox"
    bert = load(shared_data / "tokenizers" / "all-MiniLM-L6-v2" / "tokenizer.json")
    ids = bert.encode("the quick brown fox jumps", add_special_tokens=False).ids
    stream = bert.decode_stream()
    head = "".join(p for p in (stream.step(i) for i in ids[:2]) if p)
    bert.decoder = d.Fuse()
    tail = "".join(p for p in [*(stream.step(i) for i in ids[2:]), stream.flush()] if p)
    assert head + tail == "the quick" + "brownfoxjumps"
