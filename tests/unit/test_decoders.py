"""Decoders: known answers by hand, the same text as `tokenizers`, and the file schema."""

from __future__ import annotations

import doctest
import json
from typing import Any

import pytest
from tokenizers import Tokenizer, models
from tokenizers import decoders as hf

from tokenmill import _registry, decoders
from tokenmill.decoders import BPEDecoder, ByteLevel, Sequence
from tokenmill.errors import FormatError
from tokenmill.pre_tokenizers import ByteLevel as ByteLevelPieces
from tokenmill.pre_tokenizers import bytes_to_unicode


def spell(data: bytes) -> str:
    return "".join(bytes_to_unicode()[b] for b in data)


TOKEN_LISTS = [
    [],
    ["Hello", "Ġworld"],
    ["Ġ", "Ã", "©", "t", "Ã©"],                      # a character split across tokens
    [spell("日本".encode()), spell(" 👍🏽".encode())],
    [spell(b"\xe2\x82"), "a"],                      # truncated sequence
    [spell(b"\xf0\x9f"), spell(b"\xc0\xaf"), spell(b"\xed\xa0\x80"), spell(b"\xff")],
    ["Ġ€", "Ġa"],                                   # outside the alphabet: the token as is
    ["<|endoftext|>", "Ċ", "x y"],
    ["a</w>", "b</w>c", "</w>", "d"],
    ["hel", "lo</w>", "wor", "ld</w>"],
    ["@@", "a@@", "b"],
]


# ---- known answers ---------------------------------------------------------------------------

def test_byte_level_reads_the_alphabet_back() -> None:
    assert ByteLevel().decode_chain(["Hello", "Ġw", "Ã¶", "rld", "Ċ"]) == ["Hello wörld\n"]


def test_byte_level_invalid_utf8_becomes_replacement_characters() -> None:
    assert ByteLevel().decode([spell(b"\xe2\x82"), "a"]) == "\ufffda"
    assert ByteLevel().decode(["Ã"]) == "\ufffd"


def test_byte_level_passes_foreign_tokens_through_whole() -> None:
    # "Ġ" is in the alphabet, "€" is not: the token is kept as it is, "Ġ" included.
    assert ByteLevel().decode(["Ġ€", "Ġa"]) == "Ġ€ a"
    assert ByteLevel().decode(["a b"]) == "a b"  # a plain space is not in the alphabet either


def test_byte_level_undoes_the_pre_tokenizer() -> None:
    text = "Hello wörld, 日本 👍🏽\n\tdone"
    tokens = [p for p, _ in ByteLevelPieces(add_prefix_space=True).pre_tokenize_str(text)]
    assert ByteLevel().decode(tokens) == " " + text


def test_bpe_decoder() -> None:
    assert BPEDecoder().decode_chain(["hel", "lo</w>", "wor", "ld</w>"]) == [
        "hel", "lo ", "wor", "ld"]
    assert BPEDecoder().decode(["a</w>b", "c</w>"]) == "a bc"  # every occurrence, not a suffix
    assert BPEDecoder(suffix="@@").decode(["a@@", "b@@"]) == "a b"
    assert BPEDecoder().decode_chain([]) == []


def test_sequence_feeds_each_decoder_the_previous_output() -> None:
    # ByteLevel yields one piece, so BPEDecoder sees a single, last token.
    assert Sequence([ByteLevel(), BPEDecoder()]).decode(["a</w>", "Ġb</w>"]) == "a b"
    assert Sequence([BPEDecoder(), ByteLevel()]).decode(["a</w>", "Ġb</w>"]) == "a  b"
    assert Sequence([]).decode_chain(["x", "y"]) == ["x", "y"]


def test_docstring_examples_run() -> None:
    assert doctest.testmod(decoders).failed == 0


# ---- the same text as `tokenizers` -----------------------------------------------------------

COMPARED = [
    (ByteLevel(), hf.ByteLevel()),
    (BPEDecoder(), hf.BPEDecoder()),
    (BPEDecoder(suffix="@@"), hf.BPEDecoder(suffix="@@")),
    (Sequence([ByteLevel(), BPEDecoder()]), hf.Sequence([hf.ByteLevel(), hf.BPEDecoder()])),
    (Sequence([BPEDecoder(), ByteLevel()]), hf.Sequence([hf.BPEDecoder(), hf.ByteLevel()])),
    (Sequence([BPEDecoder(suffix="@@"), BPEDecoder()]),
     hf.Sequence([hf.BPEDecoder(suffix="@@"), hf.BPEDecoder()])),
]


@pytest.mark.parametrize(("ours", "theirs"), COMPARED, ids=repr)
@pytest.mark.parametrize("tokens", TOKEN_LISTS, ids=repr)
def test_same_text_as_tokenizers(ours: decoders.Decoder, theirs: Any, tokens: list[str]) -> None:
    assert ours.decode(tokens) == theirs.decode(tokens)


# ---- the file schema -------------------------------------------------------------------------

SCHEMA = [
    ByteLevel(),
    ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=False),
    BPEDecoder(),
    BPEDecoder(suffix="##"),
    Sequence([ByteLevel(), BPEDecoder()]),
]


def written_by_tokenizers(decoder: dict[str, object]) -> dict[str, object]:
    """What `tokenizers` writes after reading ``decoder`` into a tokenizer.

    Its Python ``decoders.ByteLevel()`` ignores its arguments (always add_prefix_space=true),
    so the file format is the only way to give it ours.
    """
    data = json.loads(Tokenizer(models.WordLevel({"a": 0}, unk_token="a")).to_str())
    data["decoder"] = decoder
    written: dict[str, object] = json.loads(Tokenizer.from_str(json.dumps(data)).to_str())
    return written["decoder"]  # type: ignore[return-value]


@pytest.mark.parametrize("ours", SCHEMA, ids=repr)
def test_to_dict_is_what_tokenizers_writes(ours: decoders.Decoder) -> None:
    assert written_by_tokenizers(ours.to_dict()) == ours.to_dict()


def test_to_dict_of_defaults_matches_tokenizers_constructors() -> None:
    assert BPEDecoder().to_dict() == json.loads(hf.BPEDecoder().__getstate__())
    assert ByteLevel(add_prefix_space=True).to_dict() == json.loads(hf.ByteLevel().__getstate__())


@pytest.mark.parametrize("ours", SCHEMA, ids=repr)
def test_round_trip(ours: decoders.Decoder) -> None:
    assert _registry.build("decoder", ours.to_dict(), "x") == ours


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"type": "BPEDecoder"}, "x.suffix"),
        ({"type": "BPEDecoder", "suffix": None}, "x.suffix"),
        ({"type": "ByteLevel", "add_prefix_space": True}, "x.trim_offsets"),
        ({"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": 0},
         "x.use_regex"),
        ({"type": "Sequence"}, "x.decoders"),
        ({"type": "Sequence", "decoders": [{"type": "BPEDecoder", "suffix": 3}]},
         "x.decoders[0].suffix"),
        ({"type": "Sequence", "decoders": [None]}, "x.decoders[0]"),
        ({"type": "WordPiece!"}, "x.type"),
        ("ByteLevel", "x"),
    ],
)
def test_malformed_dicts_name_the_field(data: object, path: str) -> None:
    with pytest.raises(FormatError) as caught:
        _registry.build("decoder", data, "x")
    assert str(caught.value).startswith(path + ":")


def test_sentencepiece_chains_keep_the_mark_that_bytes_spell():
    # (A Replace before ByteFallback never sees the "▁" that <0xE2><0x96><0x81> spell.)
    chain = Sequence([decoders.Replace("▁", " "), decoders.Replace("<unk>", " ⁇ "),
                      decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    assert chain.decode(["▁Hello", "<unk>", "▁wor", "ld"]) == "Hello ⁇  world"
    mistral = Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    assert mistral.decode(["▁a", "<0xE2>", "<0x96>", "<0x81>", "b"]) == " a▁b"
    assert Sequence([decoders.Replace("▁", ""), decoders.ByteFallback(),
                     decoders.Fuse()]).decode(["<0x▁41>"]) == "A"


