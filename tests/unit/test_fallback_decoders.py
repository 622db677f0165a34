"""The decoders of SentencePiece-style files (Mistral's chain): Replace, ByteFallback, Fuse and
Strip. Known answers, the same text as `tokenizers` (alone and chained, since each passes its
own granularity of pieces on), and the file schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
import tokenizers
from tokenizers import decoders as hf
from tokenizers import models

from tokenmill import _registry
from tokenmill.decoders import ByteFallback, Fuse, Replace, Sequence, Strip
from tokenmill.errors import FormatError, InputError

MISTRAL = Sequence([Replace("▁", " "), ByteFallback(), Fuse(), Strip(" ", 1, 0)])
HF_MISTRAL = hf.Sequence([hf.Replace("▁", " "), hf.ByteFallback(), hf.Fuse(),
                          hf.Strip(" ", 1, 0)])


# ---- known answers ---------------------------------------------------------------------------

def test_replace_in_every_token() -> None:
    assert Replace("▁", " ").decode_chain(["▁a▁", "b"]) == [" a ", "b"]
    assert Replace("ab", "X").decode_chain(["aab", "b"]) == ["aX", "b"]
    assert Replace(r"\s+", "_", regex=True).decode_chain(["a \t b", " "]) == ["a_b", "_"]
    assert Replace("", "-").decode_chain(["ab"]) == ["-a-b-"]


def test_byte_fallback_reads_runs_of_byte_tokens() -> None:
    assert ByteFallback().decode_chain(["<0x41>", "<0x42>"]) == ["AB"]
    assert ByteFallback().decode_chain(["a", "<0xE6>", "<0x97>", "<0xA5>", "b"]) == [
        "a", "日", "b"]
    assert ByteFallback().decode_chain(["<0x4a>"]) == ["J"]  # lower-case hex too


def test_byte_fallback_invalid_run_gives_one_replacement_per_byte() -> None:
    assert ByteFallback().decode_chain(["<0xE6>", "<0x97>"]) == ["\ufffd", "\ufffd"]
    # The whole run is rejected, not only its bad tail.
    assert ByteFallback().decode_chain(["<0xE6>", "<0x97>", "<0xA5>", "<0xE6>"]) == \
        ["\ufffd"] * 4
    # Another token ends a run, even an empty one.
    assert ByteFallback().decode(["<0xE6>", "<0x97>", "x", "<0xA5>"]) == "\ufffd\ufffdx\ufffd"
    assert ByteFallback().decode_chain(["<0x41>", "", "<0x42>"]) == ["A", "", "B"]


def test_byte_fallback_leaves_other_tokens_alone() -> None:
    tokens = ["<0x4>", "<0x041>", "<0xg1>", "<0X41>", "<0x 4>", "0x41", "<0x41"]
    assert ByteFallback().decode_chain(tokens) == tokens


def test_byte_fallback_reads_a_plus_sign_as_rust_does() -> None:
    assert ByteFallback().decode(["<0x+4>"]) == "\x04"


def test_fuse_joins_everything() -> None:
    assert Fuse().decode_chain(["a", " b", "c"]) == ["a bc"]
    assert Fuse().decode_chain([]) == [""]


def test_strip_removes_up_to_start_and_stop_copies() -> None:
    assert Strip(" ", 1, 0).decode_chain(["  a ", " b", "c "]) == [" a ", "b", "c "]
    assert Strip(" ", 2, 1).decode_chain(["  a  ", " b", "c ", "   "]) == ["a ", "b", "c", ""]
    assert Strip("a", 1, 1).decode_chain(["aab", "ba", "xaax", "aa"]) == ["ab", "b", "xaax", ""]


def test_strip_where_tokenizers_panics_gives_empty_tokens() -> None:
    assert Strip("a", 1, 1).decode_chain(["a", ""]) == ["", ""]


def test_mistral_chain() -> None:
    tokens = ["▁Hello", "▁w", "<0xC3>", "<0xB6>", "rld", "<0x0A>", "▁", "▁x"]
    assert MISTRAL.decode(tokens) == "Hello wörld\n  x"


def test_options_are_checked() -> None:
    with pytest.raises(InputError, match="one character"):
        Strip("ab", 1, 0)
    with pytest.raises(InputError, match=">= 0"):
        Strip(" ", -1, 0)
    with pytest.raises(InputError, match="invalid regular expression"):
        Replace("(", "", regex=True)


# ---- the same text as `tokenizers` -----------------------------------------------------------

TOKEN_LISTS = [
    [],
    ["▁Hello", "▁world", "▁", "x"],
    ["<0x20>", "<0x20>", "<0x41>"],
    ["<0x20>", "<0x20>", "b", "<0x20>", "<0x20>"],
    [" a", "<0x20>", "<0x41>", "<0x20>", "<0xE6>", "<0x20>"],
    ["<0xE6>", "<0x97>", "<0xA5>", "▁日", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"],
    ["<0xF0>", "<0x9F>", "<0x98>"],
    ["<0xED>", "<0xA0>", "<0x80>", "<0xC0>", "<0x80>", "<0xF4>", "<0x90>", "<0x80>", "<0x80>"],
    ["<s>", "▁a", "</s>", "<0x0A>", "[INST]"],
    ["  a  ", " b", "c ", "   ", "▁▁"],
    ["aab", "b", " ab", "a  b"],
]

COMPARED = [
    (Replace("▁", " "), hf.Replace("▁", " ")),
    (Replace("ab", "X"), hf.Replace("ab", "X")),
    (Replace(r"\s+", "_", regex=True), hf.Replace(tokenizers.Regex(r"\s+"), "_")),
    (Replace("a*", "-", regex=True), hf.Replace(tokenizers.Regex("a*"), "-")),
    (ByteFallback(), hf.ByteFallback()),
    (Fuse(), hf.Fuse()),
    (Strip(" ", 1, 0), hf.Strip(" ", 1, 0)),
    (Strip(" ", 0, 2), hf.Strip(" ", 0, 2)),
    (Strip("▁", 3, 0), hf.Strip("▁", 3, 0)),
    (MISTRAL, HF_MISTRAL),
    # Granularity matters in a chain: Strip sees what ByteFallback and Fuse pass on.
    (Sequence([ByteFallback(), Strip(" ", 1, 0)]), hf.Sequence([hf.ByteFallback(),
                                                                hf.Strip(" ", 1, 0)])),
    (Sequence([Replace("▁", " "), Strip(" ", 1, 0), Fuse()]),
     hf.Sequence([hf.Replace("▁", " "), hf.Strip(" ", 1, 0), hf.Fuse()])),
]


@pytest.mark.parametrize(("ours", "theirs"), COMPARED, ids=repr)
@pytest.mark.parametrize("tokens", TOKEN_LISTS, ids=repr)
def test_same_text_as_tokenizers(ours: Any, theirs: Any, tokens: list[str]) -> None:
    assert ours.decode(tokens) == theirs.decode(tokens)


# ---- the file schema -------------------------------------------------------------------------

def written_by_tokenizers(decoder: dict[str, Any]) -> Any:
    file = json.loads(tokenizers.Tokenizer(models.BPE({"a": 0}, [])).to_str())
    file["decoder"] = decoder
    return json.loads(tokenizers.Tokenizer.from_str(json.dumps(file)).to_str())["decoder"]


SCHEMA = [
    (Replace("▁", " "), hf.Replace("▁", " ")),
    (Replace("a+", "b", regex=True), hf.Replace(tokenizers.Regex("a+"), "b")),
    (ByteFallback(), hf.ByteFallback()),
    (Fuse(), hf.Fuse()),
    (Strip(" ", 1, 0), hf.Strip(" ", 1, 0)),
    (Strip("x", 0, 7), hf.Strip("x", 0, 7)),
    (MISTRAL, HF_MISTRAL),
]


@pytest.mark.parametrize(("ours", "theirs"), SCHEMA, ids=repr)
def test_to_dict_is_what_tokenizers_writes(ours: Any, theirs: Any) -> None:
    assert ours.to_dict() == json.loads(theirs.__getstate__())
    assert written_by_tokenizers(ours.to_dict()) == ours.to_dict()


@pytest.mark.parametrize(("ours", "theirs"), SCHEMA, ids=repr)
def test_round_trip(ours: Any, theirs: Any) -> None:
    assert _registry.build("decoder", ours.to_dict(), "x") == ours


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"type": "Replace", "content": " "}, "x.pattern"),
        ({"type": "Replace", "pattern": "▁", "content": " "}, "x.pattern"),
        ({"type": "Replace", "pattern": {"String": "▁"}}, "x.content"),
        ({"type": "Replace", "pattern": {"Regex": "("}, "content": ""}, "x.pattern.Regex"),
        ({"type": "Strip", "content": " ", "start": 1}, "x.stop"),
        ({"type": "Strip", "start": 1, "stop": 0}, "x.content"),
        ({"type": "Strip", "content": "ab", "start": 1, "stop": 0}, "x.content"),
        ({"type": "Strip", "content": " ", "start": True, "stop": 0}, "x.start"),
        ({"type": "Strip", "content": " ", "start": 1, "stop": -1}, "x.stop"),
        ({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Fusion"}]},
         "x.decoders[1].type"),
    ],
)
def test_malformed_dicts_name_the_field(data: object, path: str) -> None:
    with pytest.raises(FormatError) as caught:
        _registry.build("decoder", data, "x")
    assert str(caught.value).startswith(path + ":")


def test_the_byte_spellings_are_those_the_pattern_takes():
    # ByteFallback answers "is this a byte token, and which byte" from a dict of spellings;
    # it must hold exactly what the pattern (Hugging Face's reading) takes.
    import itertools

    from tokenmill.decoders import _BYTE_TOKEN, _BYTE_VALUES

    chars = "0123456789abcdefABCDEFgG+-x "
    taken = {}
    for a, b in itertools.product(chars, repeat=2):
        for token in (f"<0x{a}{b}>", f"<0x{a}>"):
            match = _BYTE_TOKEN.fullmatch(token)
            if match is not None:
                taken[token] = int(match[1], 16)
    assert taken == _BYTE_VALUES and len(taken) == 506
