"""SentencePiece's pipelines in the core (tokenmill.spaced) give what the Python pipeline
gives: the same ids and offsets on random texts, for a .model's normalizer, each Metaspace
scheme with and without split, and Llama's Prepend + Replace; BPE (Mistral's) and Unigram
(ALBERT's); one text at a time and in batches, with added tokens in the text."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenmill
from tokenmill import BPE, Tokenizer, spaced
from tokenmill.encoding import ONE_WORD, Encoding, Padding, Truncation
from tokenmill.normalizers import Prepend, Replace
from tokenmill.normalizers import Sequence as NormalizerSequence
from tokenmill.pre_tokenizers import Metaspace

MISTRAL = "tokenizers/mistral-7b-v0.3"
ALBERT = "tokenizers/albert-spiece-fixture/spiece.model"
# Spaces, the mark itself, known and unknown characters (byte fallback, or dropped), and the
# text of added tokens, so stretches start after a token too.
PIECES = [" ", "  ", "▁", "a", "the", " the", "é", "语", "😀", "\t", "\n", "x y", "<s>", "[INST]",
          "\u3000", "ﬁ", "Ａ"]
texts = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)


def python_path(tok: Tokenizer, text: str, plain: bool = False
                ) -> tuple[list[int], list[tuple[int, int]]]:
    """The Python pipeline's ids and offsets: special tokens in the text matched, or (plain)
    read as text."""
    vocab = tok._special_rules(None, ())[0] if plain else tok._added
    e = tok._encode_in_python(text, vocab, None)
    return e.ids, e.offsets


def python_words(tok: Tokenizer, text: str) -> list[int | None]:
    """The word ids the Python pipeline gives ``text`` (special tokens matched)."""
    tok.__dict__["_native_word_ids"] = lambda text, vocab: None
    try:
        return tok._word_ids_of(text, tok._added, None)
    finally:
        del tok.__dict__["_native_word_ids"]


def check(tok: Tokenizer, batch: list[str]) -> None:
    assert spaced.native_plan(tok) is not None
    for plain in (False, True):
        rules: dict[str, Any] = {"disallowed_special": ()} if plain else \
            {"allowed_special": "all"}
        singles = [tok.encode(t, add_special_tokens=False, **rules) for t in batch]
        for text, e in zip(batch, singles):
            assert (e.ids, e.offsets) == python_path(tok, text, plain), text
        together = tok.encode_batch(batch, add_special_tokens=False, **rules)
        assert [(e.ids, e.offsets) for e in together] == [(e.ids, e.offsets) for e in singles]
        if not plain:  # (word ids, made by the core where the plan does not split)
            words = [python_words(tok, t) for t in batch]
            assert [e.word_ids for e in singles] == words
            assert [e.word_ids for e in together] == words
    # ids alone, special tokens' text plain (the batch through the core on two threads)
    plain_ids = [python_path(tok, text, plain=True)[0] for text in batch]
    assert tok.encode_ordinary_batch(batch, num_threads=2) == plain_ids
    assert [tok.encode_ordinary(text) for text in batch] == plain_ids
    assert tok.count_tokens(batch, num_threads=2) == [len(x) for x in plain_ids]
    flat = tok.encode_batch_np(batch, num_threads=2)
    assert flat["ids"].tolist() == [i for x in plain_ids for i in x]


@pytest.fixture(scope="module")
def mistral(shared_data: Path) -> dict[str, Tokenizer]:
    """Mistral's vocabulary behind each pipeline the core runs."""
    json_tok = tokenmill.load(shared_data / MISTRAL / "tokenizer.json")
    model_tok = tokenmill.load(shared_data / MISTRAL / "tokenizer.model")
    out = {".model": model_tok}
    for scheme in ("always", "first", "never"):
        for split in (False, True):
            tok = copy.deepcopy(json_tok)
            tok.pre_tokenizer = Metaspace(prepend_scheme=scheme, split=split)
            out[f"metaspace {scheme} split={split}"] = tok
    llama = {"prepend, replace": NormalizerSequence([Prepend("▁"), Replace(" ", "▁")]),
             "replace, prepend": NormalizerSequence([Replace(" ", "▁"), Prepend("▁")]),
             "replace": Replace(" ", "▁")}
    for name, normalizer in llama.items():
        tok = copy.deepcopy(json_tok)
        tok.pre_tokenizer = None
        tok.normalizer = normalizer
        out[name] = tok
    return out


@pytest.fixture(scope="module")
def albert(shared_data: Path) -> dict[str, Tokenizer]:
    """ALBERT's Unigram behind its own normalizer and behind Metaspace."""
    model_tok = tokenmill.load(shared_data / ALBERT)
    out = {".model": model_tok}
    for scheme in ("always", "first"):
        tok = copy.deepcopy(model_tok)
        tok.normalizer = None
        tok.pre_tokenizer = Metaspace(prepend_scheme=scheme, split=scheme == "always")
        out[f"metaspace {scheme}"] = tok
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(texts, min_size=1, max_size=6))
def test_every_pipeline_as_the_python_path(mistral: dict[str, Tokenizer],
                                           albert: dict[str, Tokenizer],
                                           batch: list[str]) -> None:
    for tok in [*mistral.values(), *albert.values()]:
        check(tok, batch)


def test_the_model_files_special_rules_hold_on_the_native_path(mistral: Any) -> None:
    tok = mistral[".model"]
    with pytest.raises(tokenmill.InputError, match="special token '<s>' at character 2"):
        tok.encode("a <s>")
    assert tok.encode("a <s>", allowed_special="all").ids[-1] == tok.token_to_id("<s>")


@settings(max_examples=150, deadline=None)
@given(st.lists(texts, min_size=1, max_size=4), st.booleans())
def test_a_vocabulary_without_unknowns_or_bytes(batch: list[str], fuse: bool) -> None:
    # Unknown characters are dropped (no unk, no byte fallback), so a stretch of text can give
    # no tokens, or tokens with characters dropped between them.
    vocab = {"▁": 0, "a": 1, "t": 2, "h": 3, "e": 4, "▁t": 5, "he": 6, "▁the": 7, "▁▁": 8}
    model = BPE(vocab, [("▁", "t"), ("h", "e"), ("▁t", "he"), ("▁", "▁")], fuse_unk=fuse)
    tok = Tokenizer(model, pre_tokenizer=Metaspace(prepend_scheme="first", split=False))
    tok.add_special_tokens(["<s>"])
    check(tok, batch)
    tok.pre_tokenizer = None
    tok.normalizer = NormalizerSequence([Prepend("▁"), Replace(" ", "▁")])
    check(tok, batch)


def test_pipelines_the_core_does_not_run_take_the_python_path(mistral: Any) -> None:
    tok = copy.deepcopy(mistral["prepend, replace"])
    tok.normalizer = NormalizerSequence([Prepend("▁"), Replace("  ", "▁")])
    assert spaced.native_plan(tok) is None
    tok.normalizer = NormalizerSequence([Prepend("_"), Replace(" ", "▁")])
    assert spaced.native_plan(tok) is None
    tok.normalizer = None
    tok.pre_tokenizer = Metaspace(replacement="_")
    assert spaced.native_plan(tok) is None
    tok.pre_tokenizer = Metaspace()
    assert spaced.native_plan(tok) is not None
    # BPE-dropout draws as the Python path does, so it goes there
    assert tok.encode("a b", dropout=1.0, add_special_tokens=False).ids == [
        tok.token_to_id(c) for c in "▁a▁b"]


def test_a_model_s_own_dropout_takes_the_python_path() -> None:
    # encode_ordinary, its batch and the counts draw a model's own BPE-dropout as encode does
    vocab = {"▁": 0, "a": 1, "b": 2, "▁a": 3, "▁ab": 4}
    model = BPE(vocab, [("▁", "a"), ("▁a", "b")], dropout=1.0)
    tok = Tokenizer(model, pre_tokenizer=Metaspace())
    chars = [0, 1, 2, 0, 1, 2]
    assert tok.encode("ab ab").ids == chars
    assert tok.encode_ordinary("ab ab") == chars
    assert tok.encode_ordinary_batch(["ab ab"]) == [chars]
    assert tok.count_tokens(["ab ab"]) == [6]
    model.dropout = None
    assert tok.encode_ordinary("ab ab") == [4, 4]


def test_byte_level_tokenizers_build_no_character_core(shared_data: Path) -> None:
    # (the SentencePiece plan is looked for on every encode; a byte-level BPE never needs the
    # core over characters, 30 MB for o200k_base)
    tok = tokenmill.load(shared_data / "tokenizers" / "gpt2" / "tokenizer.json")
    tok.encode("warm up")
    tok.encode_ordinary_batch(["warm up"])
    tok.count_tokens(["warm up"])
    assert spaced.native_plan(tok) is None
    assert "_char_core" not in tok.model.__dict__


def test_a_text_of_one_stretch_is_one_word_through_every_layout(shared_data: Path) -> None:
    # Mistral's tokenizer.json ("<s> $A"): a text without added tokens is one word, kept as
    # ONE_WORD until asked for, through the template, windows, padding, copies and pickling.
    tok = tokenmill.load(shared_data / MISTRAL / "tokenizer.json")
    text = "Once upon a time, in a land far away"
    words = python_words(tok, text)
    assert set(words) == {0}
    bare = tok.encode(text, add_special_tokens=False)
    assert bare._words is ONE_WORD and bare.word_ids == words
    batch = tok.encode_batch([text, "a"], add_special_tokens=False)
    assert batch[0]._words is ONE_WORD and [e.word_ids for e in batch] == [words, [0]]
    assert tok.encode(text).word_ids == [None, *words]
    assert tok.encode_batch([text])[0].word_ids == [None, *words]
    cut = tok.encode(text, truncation=Truncation(max_length=5, stride=1))
    assert cut.word_ids == [None, 0, 0, 0, 0]
    assert cut.overflowing  # (each window laid out with "<s>" again, as tokenizers does)
    assert all(w.word_ids == [None] + [0] * (len(w.ids) - 1) for w in cut.overflowing)
    padded = tok.encode_batch([text, "a"], padding=Padding(pad_id=0, pad_token="<unk>"))
    assert padded[1].word_ids == [None, 0] + [None] * (len(padded[1].ids) - 2)
    assert bare.replace(type_ids=[1] * len(bare.ids)).word_ids == words
    assert Encoding.concat([bare, bare]).word_ids == words + words
    assert pickle.loads(pickle.dumps(bare)).word_ids == words
    # (an unpickled encoding's input mark is an equal string, not the same object)
    assert pickle.loads(pickle.dumps(bare)).sequence_ids == [0] * len(bare.ids)
    assert pickle.loads(pickle.dumps(tok.encode(text))).sequence_ids == [None, *[0] * len(words)]
    assert bare.word_to_tokens(0) == (0, len(bare.ids)) and bare.token_to_word(2) == 0
    # With an added token in the text, each stretch and the token are words of their own.
    assert tok.encode("a <s> b", allowed_special="all",
                      add_special_tokens=False).word_ids == python_words(tok, "a <s> b")
