"""Tokenizers pickle (as Hugging Face's and tiktoken's do): a process pool or a data loader that
spawns its workers sends the tokenizer to them."""

from __future__ import annotations

import copy
import multiprocessing
import pickle

import pytest

from tokenmill import load
from tokenmill.encoding import Padding, Truncation
from tokenmill.errors import InputError

FILES = ["gpt2/tokenizer.json", "mistral-7b-v0.3/tokenizer.json",
         "mistral-7b-v0.3/tokenizer.model", "albert-spiece-fixture/spiece.model",
         "all-MiniLM-L6-v2/tokenizer.json", "bert-base-uncased/vocab.txt"]
TEXTS = ["Hello world! It's  2024, über 日本語 \U0001F600\t\n  x", "<s> a </s> [CLS] <|endoftext|>",
         "  leading and trailing  ", "ﬁ ① ＡＢＣ <unk> ▁a"]


def outcome(call) -> object:
    try:
        return call()
    except InputError as e:
        return str(e)


def behaviour(tok, lines: list[str]) -> list[object]:
    """What tok makes of texts: ids, tokens and offsets with and without special tokens, the
    ids of the lines in one batch, and the decoded text of each."""
    def encoded(text: str, add: bool) -> object:
        e = tok.encode(text, add_special_tokens=add)
        return e.ids, e.tokens, e.offsets

    seen = [outcome(lambda t=text, a=add: encoded(t, a)) for text in TEXTS  # type: ignore[misc]
            for add in (True, False)]
    encodings = tok.encode_batch(lines)
    seen += [e.ids for e in encodings]
    seen += tok.decode_batch([e.ids for e in encodings])
    return seen


@pytest.mark.parametrize("name", FILES)
def test_a_pickled_tokenizer_behaves_as_the_original(shared_data, name):
    tok = load(shared_data / "tokenizers" / name)
    lines = (shared_data / "text" / "en" / "tinyshakespeare.txt").read_text().splitlines()[:300]
    tok.decode([0, 1, 2])  # (a decode table or other cache made: not pickled)
    tok.add_tokens(["zzqx"])
    tok.add_special_tokens(["<|mine|>"])
    tok.truncation = Truncation(max_length=40)
    tok.padding = Padding(pad_id=0, pad_token=tok.id_to_token(0) or "")
    again = pickle.loads(pickle.dumps(tok))
    assert again.special_tokens_in_text == tok.special_tokens_in_text
    assert again.truncation == tok.truncation and again.padding == tok.padding
    assert again.fingerprint() == tok.fingerprint()
    assert behaviour(again, lines) == behaviour(tok, lines)
    assert behaviour(copy.deepcopy(tok), lines) == behaviour(tok, lines)


def test_tiktoken_encodings_pickle_with_their_special_token_rule(shared_data):
    tok = load("cl100k_base", path=shared_data / "tokenizers" / "tiktoken" /
               "cl100k_base.tiktoken")
    again = pickle.loads(pickle.dumps(tok))
    assert again.special_tokens_in_text == "error"
    with pytest.raises(InputError, match="special token"):
        again.encode("<|endoftext|>")
    text = (shared_data / "text" / "en" / "tinyshakespeare.txt").read_text()[:100_000]
    assert again.encode_ordinary(text) == tok.encode_ordinary(text)


def test_a_spawned_pool_encodes_with_a_pickled_tokenizer(shared_data):
    tok = load(shared_data / "tokenizers" / "gpt2" / "tokenizer.json")
    lines = (shared_data / "text" / "en" / "tinyshakespeare.txt").read_text().splitlines()[:200]
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.map(tok.encode_ordinary, lines) == [tok.encode_ordinary(x) for x in lines]
