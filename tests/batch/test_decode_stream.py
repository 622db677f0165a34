"""The streaming decoder against decode, on every kind of decoder the real files use: whatever
the ids (byte tokens that make invalid UTF-8, special tokens skipped or kept, flushes between),
the pieces a stream releases join to what decode gives, and each id is decoded a bounded number
of times."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenmill
from tokenmill import InputError, Tokenizer
from tokenmill.streaming import _WINDOW

FILES = {
    "cl100k_base": None,
    "gpt2": "gpt2/tokenizer.json",
    "mistral.json": "mistral-7b-v0.3/tokenizer.json",
    "mistral.model": "mistral-7b-v0.3/tokenizer.model",
    "albert": "albert-spiece-fixture/spiece.model",
    "bert": "bert-base-uncased/vocab.txt",
    "minilm": "all-MiniLM-L6-v2/tokenizer.json",
}
SAMPLE = "Hello  world, 日本語 😀 naïve ﬁ 👍🏽 ok\tend"


@pytest.fixture(scope="module")
def toks(shared_data):
    root = shared_data / "tokenizers"
    out: dict[str, tuple[Tokenizer, list[int]]] = {}
    for name, path in FILES.items():
        tok = tokenmill.load(name, path=root / "tiktoken") if path is None \
            else tokenmill.load(root / path)
        # Ids worth drawing: byte tokens (0xFF never starts a character), special tokens,
        # those of mixed text, and a spread over the vocabulary.
        pool = [i for i in (tok.token_to_id(f"<0x{b:02X}>") for b in
                            (0x41, 0xE4, 0xB8, 0xAD, 0xF0, 0x9F, 0x98, 0x80, 0xFF, 0xCC))
                if i is not None]
        pool += sorted(tok._added.special_ids)[:6]
        pool += tok.encode(SAMPLE, add_special_tokens=False).ids
        size = tok.get_vocab_size()
        pool += [size * k // 97 for k in range(97)]
        out[name] = (tok, pool)
    return out


def streamed(tok: Tokenizer, ops: list[list[int] | None], skip: bool,
             pickled_at: int | None = None) -> str:
    """The text a stream releases for ``ops``: chunks of ids fed (a chunk of one by step),
    None a flush; a flush at the end. Before op ``pickled_at`` the stream is pickled, and
    its copy goes on."""
    stream = tok.decode_stream(skip_special_tokens=skip)
    out: list[str] = []
    for k, op in enumerate(ops):
        if k == pickled_at:
            stream = pickle.loads(pickle.dumps(stream))
        if op is None:
            out.append(stream.flush() or "")
        elif len(op) == 1:
            out.append(stream.step(op[0]) or "")
        else:
            out.extend(stream.feed(op))
    out.append(stream.flush() or "")
    return "".join(out)


def decoded(tok: Tokenizer, ops: list[list[int] | None], skip: bool) -> str:
    """decode's text for ``ops``: each flush ends a text, decoded apart."""
    texts: list[str] = []
    ids: list[int] = []
    for op in [*ops, None]:
        if op is None:
            texts.append(tok.decode(ids, skip_special_tokens=skip))
            ids = []
        else:
            ids += op
    return "".join(texts)


@settings(max_examples=60)
@given(st.data())
@pytest.mark.parametrize("name", list(FILES))
def test_a_stream_adds_up_to_decode(toks, name, data):
    tok, pool = toks[name]
    chunk = st.lists(st.sampled_from(pool), min_size=1, max_size=6)
    ops = data.draw(st.lists(st.one_of(chunk, chunk, chunk, st.none()), max_size=12))
    skip = data.draw(st.booleans())
    assert streamed(tok, ops, skip) == decoded(tok, ops, skip)


@settings(max_examples=8, deadline=None)
@given(st.data())
@pytest.mark.parametrize("name", list(FILES))
def test_a_pickled_stream_goes_on_as_the_original(toks, name, data):
    # (a server that hands a stream to another worker, mid-text)
    tok, pool = toks[name]
    chunk = st.lists(st.sampled_from(pool), min_size=1, max_size=6)
    ops = data.draw(st.lists(st.one_of(chunk, chunk, chunk, st.none()), min_size=1,
                             max_size=12))
    skip = data.draw(st.booleans())
    at = data.draw(st.integers(0, len(ops) - 1))
    assert streamed(tok, ops, skip, pickled_at=at) == decoded(tok, ops, skip)


def test_a_pickled_stream_keeps_a_cut_character_and_its_window(toks):
    tok, _ = toks["gpt2"]  # (23877 and 229 are the bytes of "文")
    stream = tok.decode_stream()
    assert stream.step(23877) is None
    again = pickle.loads(pickle.dumps(stream))
    assert again.step(229) == "文" and stream.step(229) == "文"
    tok, _ = toks["mistral.json"]
    ids = tok.encode("Hello world, naïve 日本語", add_special_tokens=False).ids
    zhong = [tok.token_to_id(f"<0x{b:02X}>") for b in (0xE4, 0xB8, 0xAD)]
    stream = tok.decode_stream()
    head = "".join(stream.feed([*ids, *zhong[:2]]))
    again = pickle.loads(pickle.dumps(stream))
    assert again._ids == stream._ids and again._tok is not tok
    rest = "".join(again.feed([zhong[2], *ids])) + (again.flush() or "")
    assert head + rest == tok.decode([*ids, *zhong, *ids])
    state = stream.__getstate__()
    state["version"] = 2
    with pytest.raises(InputError, match="a pickled DecodeStream of version 2"):
        pickle.loads(pickle.dumps(stream)).__setstate__(state)


def test_a_byte_run_is_released_once_it_ends(toks):
    # Under Hugging Face's ByteFallback a run holding invalid UTF-8 is U+FFFD byte for byte:
    # the "A" and the "中" before the 0xFF were released too soon (A, then "\ufffd A").
    tok, _ = toks["mistral.json"]
    a, ff, space_a = (tok.token_to_id(t) for t in ("<0x41>", "<0xFF>", "▁A"))
    stream = tok.decode_stream()
    assert [stream.step(i) for i in (a, ff, space_a)] == [None, None, "\ufffd\ufffd A"]
    zhong = [tok.token_to_id(f"<0x{b:02X}>") for b in (0xE4, 0xB8, 0xAD)]
    assert list(tok.decode_stream().feed([*zhong, space_a])) == ["中 A"]
    assert list(tok.decode_stream().feed([*zhong, ff, space_a])) == ["\ufffd" * 4 + " A"]


def test_a_flush_ends_the_text(toks):
    # gpt2's 23877 and 229 are the bytes of "文"; a flush between them ends the first text,
    # and the second starts anew: a lone continuation byte, U+FFFD at once (it was lost
    # before, as was the character).
    tok, _ = toks["gpt2"]
    assert tok.decode([23877, 229]) == "文"
    stream = tok.decode_stream()
    assert [stream.step(23877), stream.flush(), stream.step(229), stream.flush()] == \
        [None, "\ufffd", "\ufffd", None]
    for name in ("mistral.json", "bert"):
        tok, _ = toks[name]
        ids = tok.encode("Hello world", add_special_tokens=False).ids
        stream = tok.decode_stream()
        first = "".join(stream.feed(ids)) + (stream.flush() or "")
        assert first == "".join(stream.feed(ids)) + (stream.flush() or "") == tok.decode(ids)


@pytest.mark.parametrize("name, token, skip", [
    ("mistral.json", "<0xFF>", True), ("mistral.model", "<0xFF>", True),
    ("mistral.json", "</s>", True), ("bert", "[PAD]", True), ("gpt2", "ï¿½", True),
    ("minilm", "[SEP]", False)])
def test_each_id_is_decoded_a_bounded_number_of_times(toks, name, token, skip, monkeypatch):
    # Held-back ids stayed in the window, so 8,000 of 0xFF took 28 s (quadratic); each id is
    # now decoded at most as many times as the window is long, whatever the stream holds.
    tok, _ = toks[name]
    i = tok.token_to_id(token)
    assert i is not None
    decoded_ids = [0]
    for call in ("decode", "decode_bytes"):
        real = getattr(tok, call)

        def counting(ids, *args, real=real, **kwargs):
            decoded_ids[0] += len(ids)
            return real(ids, *args, **kwargs)

        monkeypatch.setattr(tok, call, counting)
    n = 3000
    stream = tok.decode_stream(skip_special_tokens=skip)
    text = "".join(stream.feed([i] * n)) + (stream.flush() or "")
    monkeypatch.undo()
    assert text == tok.decode([i] * n, skip_special_tokens=skip)
    assert decoded_ids[0] <= (_WINDOW + 2) * n  # (quadratic: about n * n / 2)


def test_a_bad_id_is_named_by_its_position_and_nothing_is_lost(toks):
    tok, _ = toks["gpt2"]
    ids = tok.encode("Hello world").ids
    stream = tok.decode_stream()
    with pytest.raises(InputError, match=r"^ids\[2\]: 50257 is not an id"):
        list(stream.feed([*ids[:2], 50257, *ids[2:]]))
    assert "".join(stream.feed(ids)) == "Hello world"  # (the sequence was checked first)
    with pytest.raises(InputError, match=r"^ids\[1\]: -1 is not an id"):
        list(stream.feed(iter([ids[0], -1])))
    with pytest.raises(InputError, match=r"^decode_stream: 'a' is not an id"):
        stream.step("a")
