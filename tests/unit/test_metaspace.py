"""SentencePiece's spaces, Hugging Face style: the Prepend normalizer and the Metaspace
pre-tokenizer and decoder. Known answers, the same pieces, offsets and text as `tokenizers`,
and the file schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
import tokenizers
from tokenizers import decoders as hf_decoders
from tokenizers import models
from tokenizers import normalizers as hf_normalizers
from tokenizers import pre_tokenizers as hf_pre_tokenizers

from tokenmill import _registry
from tokenmill.decoders import Metaspace as MetaspaceDecoder
from tokenmill.errors import FormatError, InputError
from tokenmill.normalized import NormalizedString
from tokenmill.normalizers import Lowercase, Prepend, Strip
from tokenmill.pre_tokenizers import Metaspace, Sequence, WhitespaceSplit

SCHEMES = ["always", "first", "never"]

SAMPLES = [
    "", " ", "  ", "Hello world", " Hello", "  a  b ", "a\tb\nc", "日本語 テキスト", "▁x▁▁y",
    "x▁", "é 😀 ok", "a\u3000b\u00a0c", "trailing ",
]


def spans(pieces: list[NormalizedString]) -> list[tuple[str, tuple[int, int]]]:
    return [(p.text, p.span(0, len(p))) for p in pieces]


# ---- Prepend ---------------------------------------------------------------------------------

def test_prepend_aligns_the_prefix_with_the_first_character() -> None:
    n = Prepend("▁").normalize(NormalizedString("hi", base=3))
    assert n.text == "▁hi"
    assert n.alignment() == ([3, 3, 4], [4, 4, 5])
    n = Prepend("ab").normalize(NormalizedString(" x"))
    assert n.text == "ab x"
    assert n.alignment() == ([0, 0, 0, 1], [1, 1, 1, 2])


def test_prepend_leaves_empty_text_empty() -> None:
    assert Prepend("▁").normalize_str("") == ""


def test_prepend_after_a_realignment() -> None:
    n = Prepend("▁").normalize(Strip().normalize(NormalizedString("  ab")))
    assert n.text == "▁ab"
    assert n.alignment() == ([2, 2, 3], [3, 3, 4])


@pytest.mark.parametrize("text", SAMPLES)
def test_prepend_same_text_as_tokenizers(text: str) -> None:
    assert Prepend("▁").normalize_str(text) == hf_normalizers.Prepend("▁").normalize_str(text)


# ---- the Metaspace pre-tokenizer ---------------------------------------------------------------

def test_metaspace_replaces_spaces_and_cuts_before_them() -> None:
    assert Metaspace().pre_tokenize_str("Hey  you ") == [
        ("▁Hey", (0, 3)), ("▁", (3, 4)), ("▁you", (4, 8)), ("▁", (8, 9))]


def test_metaspace_only_replaces_the_ascii_space() -> None:
    assert Metaspace(split=False).pre_tokenize_str("a\tb\u3000c d") == [
        ("▁a\tb\u3000c▁d", (0, 7))]


def test_metaspace_prefix_takes_the_first_characters_span() -> None:
    # Shows when the prefix becomes a token of its own, as "▁" before "日" in Mistral.
    assert Metaspace().pre_tokenize_str("日本") == [("▁日本", (0, 2))]
    piece, = Metaspace().split(NormalizedString("日本"))
    assert piece.span(0, 1) == (0, 1)


def test_metaspace_no_prefix_before_a_leading_space_or_replacement() -> None:
    assert Metaspace().pre_tokenize_str(" a") == [("▁a", (0, 2))]
    assert Metaspace().pre_tokenize_str("▁a") == [("▁a", (0, 2))]


@pytest.mark.parametrize(("scheme", "expected"), [
    ("always", ["▁a", "▁b"]), ("first", ["▁a", "b"]), ("never", ["a", "b"])])
def test_prepend_scheme_first_only_at_the_start_of_the_input(scheme: str,
                                                              expected: list[str]) -> None:
    pre = Sequence([WhitespaceSplit(), Metaspace(prepend_scheme=scheme)])
    assert [p for p, _ in pre.pre_tokenize_str("a b")] == expected


def test_prepend_scheme_first_looks_at_the_original_offset() -> None:
    # Text after an added token, or whose start a normalizer removed, does not start the input.
    first = Metaspace(prepend_scheme="first")
    assert [p.text for p in first.split(NormalizedString("b", base=3))] == ["b"]
    assert [p.text for p in first.split(NormalizedString("b", base=0))] == ["▁b"]
    stripped = Strip().normalize(NormalizedString("  hi"))
    assert [p.text for p in first.split(stripped)] == ["hi"]


def test_metaspace_keeps_alignment_through_a_normalizer() -> None:
    lowered = Lowercase().normalize(NormalizedString("İ x"))
    assert spans(Metaspace().split(lowered)) == [("▁i\u0307", (0, 1)), ("▁x", (1, 3))]


def test_metaspace_options_are_checked() -> None:
    with pytest.raises(InputError, match="one character"):
        Metaspace("__")
    with pytest.raises(InputError, match="prepend_scheme 'First'"):
        Metaspace(prepend_scheme="First")


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize("text", SAMPLES)
def test_metaspace_same_pieces_and_offsets_as_tokenizers(scheme: str, split: bool,
                                                          text: str) -> None:
    theirs = hf_pre_tokenizers.Metaspace(prepend_scheme=scheme, split=split)
    ours = Metaspace(prepend_scheme=scheme, split=split)
    assert ours.pre_tokenize_str(text) == theirs.pre_tokenize_str(text)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_metaspace_after_another_split_as_tokenizers(scheme: str) -> None:
    ours = Sequence([WhitespaceSplit(), Metaspace(prepend_scheme=scheme)])
    theirs = hf_pre_tokenizers.Sequence([hf_pre_tokenizers.WhitespaceSplit(),
                                         hf_pre_tokenizers.Metaspace(prepend_scheme=scheme)])
    for text in SAMPLES:
        assert ours.pre_tokenize_str(text) == theirs.pre_tokenize_str(text)


# ---- the Metaspace decoder ---------------------------------------------------------------------

def test_metaspace_decoder_turns_replacements_into_spaces() -> None:
    assert MetaspaceDecoder().decode_chain(["▁Hey", "▁", "▁you"]) == ["Hey", " ", " you"]
    assert MetaspaceDecoder(prepend_scheme="never").decode(["▁Hey", "▁you"]) == " Hey you"


def test_metaspace_decoder_drops_every_replacement_of_the_first_token() -> None:
    # A Hugging Face quirk, kept: not only the leading one.
    assert MetaspaceDecoder().decode(["a▁▁b", "▁c"]) == "ab c"
    assert MetaspaceDecoder().decode([" a", "b"]) == " ab"  # a real space is kept


TOKEN_LISTS = [[], ["▁Hello", "▁world", "▁", "x"], ["Hello", "▁▁world"], ["▁", "▁a"],
               ["▁▁a"], ["a▁▁a", "▁"], [" a", "b"], ["", "▁a"], ["<0x41>", "▁"]]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("tokens", TOKEN_LISTS, ids=repr)
def test_metaspace_decoder_same_text_as_tokenizers(scheme: str, tokens: list[str]) -> None:
    theirs = hf_decoders.Metaspace(prepend_scheme=scheme)
    assert MetaspaceDecoder(prepend_scheme=scheme).decode(tokens) == theirs.decode(tokens)


# ---- the file schema -------------------------------------------------------------------------

def written_by_tokenizers(kind: str, data: dict[str, Any]) -> Any:
    """What `tokenizers` writes after reading ``data`` as the ``kind`` of a tokenizer."""
    file = json.loads(tokenizers.Tokenizer(models.BPE({"a": 0}, [])).to_str())
    file[kind] = data
    return json.loads(tokenizers.Tokenizer.from_str(json.dumps(file)).to_str())[kind]


SCHEMA = [
    ("normalizer", Prepend("▁")),
    ("normalizer", Prepend("")),
    *[("pre_tokenizer", Metaspace(prepend_scheme=s, split=b)) for s in SCHEMES
      for b in (True, False)],
    ("pre_tokenizer", Metaspace("_")),
    *[("decoder", MetaspaceDecoder(prepend_scheme=s, split=b)) for s in SCHEMES
      for b in (True, False)],
]


@pytest.mark.parametrize(("kind", "ours"), SCHEMA, ids=repr)
def test_to_dict_is_what_tokenizers_writes(kind: str, ours: Any) -> None:
    assert written_by_tokenizers(kind, ours.to_dict()) == ours.to_dict()
    assert _registry.build(kind, ours.to_dict(), "x") == ours


def test_to_dict_of_defaults_matches_tokenizers_constructors() -> None:
    assert Metaspace().to_dict() == json.loads(hf_pre_tokenizers.Metaspace().__getstate__())
    assert MetaspaceDecoder().to_dict() == json.loads(hf_decoders.Metaspace().__getstate__())


@pytest.mark.parametrize("kind", ["pre_tokenizer", "decoder"])
def test_old_files_say_add_prefix_space(kind: str) -> None:
    old = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
    assert _registry.build(kind, old, "x").to_dict() == written_by_tokenizers(kind, old)
    assert _registry.build(kind, {**old, "prepend_scheme": "first"}, "x").prepend_scheme == \
        "first"
    # Without a prepend_scheme, false means never (tokenizers refuses such a file).
    never = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": False}
    assert _registry.build(kind, never, "x").prepend_scheme == "never"


@pytest.mark.parametrize(
    ("kind", "data", "path"),
    [
        ("normalizer", {"type": "Prepend"}, "x.prepend"),
        ("normalizer", {"type": "Prepend", "prepend": 1}, "x.prepend"),
        ("pre_tokenizer", {"type": "Metaspace"}, "x.replacement"),
        ("pre_tokenizer", {"type": "Metaspace", "replacement": "ab"}, "x.replacement"),
        ("pre_tokenizer", {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "First"},
         "x.prepend_scheme"),
        ("pre_tokenizer", {"type": "Metaspace", "replacement": "▁", "split": "yes"}, "x.split"),
        ("pre_tokenizer", {"type": "Metaspace", "replacement": "▁", "add_prefix_space": False,
                           "prepend_scheme": "first"}, "x.add_prefix_space"),
        ("decoder", {"type": "Metaspace", "replacement": ""}, "x.replacement"),
        ("decoder", {"type": "Metaspace", "replacement": "▁", "prepend_scheme": 1},
         "x.prepend_scheme"),
    ],
)
def test_malformed_dicts_name_the_field(kind: str, data: object, path: str) -> None:
    with pytest.raises(FormatError) as caught:
        _registry.build(kind, data, "x")
    assert str(caught.value).startswith(path + ":")
