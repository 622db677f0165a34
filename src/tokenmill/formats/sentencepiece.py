"""SentencePiece ``.model`` files: the protobuf read directly, then turned into a Tokenizer.

A ``.model`` is one serialized ``ModelProto`` message. Only the protobuf wire format is needed to
read it (varints and length-delimited fields), so there is no run-time dependency on
``sentencepiece`` or ``protobuf``. Field numbers are those of sentencepiece's
``sentencepiece_model.proto``; a field absent from the file takes that schema's default.
Every read is bounds-checked: a truncated or corrupted file is a :class:`FormatError` naming the
file, the byte offset and the field, never a crash.
"""

from __future__ import annotations

import base64
import binascii
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from tokenmill import _core
from tokenmill._registry import field, register
from tokenmill.added_tokens import AddedToken
from tokenmill.decoders import ByteFallback, Decoder, Fuse, Replace, Strip
from tokenmill.decoders import Sequence as DecoderSequence
from tokenmill.errors import FormatError, InputError
from tokenmill.models.bpe import BPE
from tokenmill.models.unigram import Unigram
from tokenmill.normalized import NormalizedString
from tokenmill.normalizers import Normalizer

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer

# SentencePiece's whole normalization has no Hugging Face type: saved under tokenmill's name.
SP_NORMALIZER_TYPE = "tokenmill.SentencePiece"

# Piece types (SentencePiece.Type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
PIECE_TYPES = {NORMAL: "NORMAL", UNKNOWN: "UNKNOWN", CONTROL: "CONTROL",
               USER_DEFINED: "USER_DEFINED", UNUSED: "UNUSED", BYTE: "BYTE"}
# TrainerSpec.ModelType.
MODEL_TYPES = {1: "UNIGRAM", 2: "BPE", 3: "WORD", 4: "CHAR"}

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

# Fields read from each message: number -> (name, kind). Kinds: "str", "bytes", "int" (int32,
# two's complement in a varint), "uint", "bool", "float", "msg:<Message>"; a trailing "*" marks a
# repeated field. Everything else in the file is skipped, as protobuf readers do.
_SCHEMA: dict[str, dict[int, tuple[str, str]]] = {
    "ModelProto": {1: ("pieces", "msg:SentencePiece*"), 2: ("trainer_spec", "msg:TrainerSpec"),
                   3: ("normalizer_spec", "msg:NormalizerSpec"),
                   5: ("denormalizer_spec", "msg:NormalizerSpec")},
    "SentencePiece": {1: ("piece", "str"), 2: ("score", "float"), 3: ("type", "int")},
    "TrainerSpec": {3: ("model_type", "int"), 4: ("vocab_size", "int"),
                    10: ("character_coverage", "float"), 15: ("shrinking_factor", "float"),
                    17: ("num_sub_iterations", "int"), 20: ("max_sentencepiece_length", "int"),
                    22: ("split_by_whitespace", "bool"), 24: ("treat_whitespace_as_suffix", "bool"),
                    25: ("split_digits", "bool"), 35: ("byte_fallback", "bool"),
                    40: ("unk_id", "int"), 41: ("bos_id", "int"), 42: ("eos_id", "int"),
                    43: ("pad_id", "int"), 45: ("unk_piece", "str"), 44: ("unk_surface", "str")},
    "NormalizerSpec": {1: ("name", "str"), 2: ("precompiled_charsmap", "bytes"),
                       3: ("add_dummy_prefix", "bool"), 4: ("remove_extra_whitespaces", "bool"),
                       5: ("escape_whitespaces", "bool"), 6: ("normalization_rule_tsv", "str")},
}

# The schema's defaults for fields a file may leave out.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "SentencePiece": {"score": 0.0, "type": NORMAL},
    "TrainerSpec": {"model_type": 1, "vocab_size": 8000, "byte_fallback": False,
                    "unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1,
                    "unk_piece": "<unk>", "unk_surface": " \u2047 ",
                    "treat_whitespace_as_suffix": False, "split_digits": False,
                    "split_by_whitespace": True, "character_coverage": 0.9995,
                    "shrinking_factor": 0.75, "num_sub_iterations": 2,
                    "max_sentencepiece_length": 16},
    "NormalizerSpec": {"name": "", "precompiled_charsmap": b"", "add_dummy_prefix": True,
                       "remove_extra_whitespaces": True, "escape_whitespaces": True,
                       "normalization_rule_tsv": ""},
}


class _Reader:
    """A cursor over one message's bytes; every error names the file and the absolute offset."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data = data
        self.source = source

    def fail(self, at: int, what: str) -> FormatError:
        return FormatError(f"{self.source}: not a valid SentencePiece model at byte offset {at}: "
                           f"{what}")

    def varint(self, at: int, end: int, what: str) -> tuple[int, int]:
        value = shift = 0
        start = at
        while True:
            if at >= end:
                raise self.fail(start, f"{what} is truncated (a varint runs past the end)")
            b = self.data[at]
            at += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, at
            shift += 7
            if shift > 63:
                raise self.fail(start, f"{what}: a varint longer than 10 bytes")

    def message(self, name: str, at: int, end: int) -> dict[str, Any]:
        schema = _SCHEMA[name]
        out: dict[str, Any] = dict(_DEFAULTS.get(name, {}))
        for fname, kind in schema.values():
            if kind.endswith("*"):
                out[fname] = []
        while at < end:
            tag_at = at
            tag, at = self.varint(at, end, f"{name} field tag")
            number, wire = tag >> 3, tag & 7
            if number == 0:
                raise self.fail(tag_at, f"{name}: field number 0")
            fname, kind = schema.get(number, (f"field {number}", ""))
            where = f"{name}.{fname}"
            value: Any
            if wire == _VARINT:
                value, at = self.varint(at, end, where)
            elif wire == _I64:
                if at + 8 > end:
                    raise self.fail(at, f"{where} is truncated (8 bytes expected)")
                value, at = self.data[at:at + 8], at + 8
            elif wire == _I32:
                if at + 4 > end:
                    raise self.fail(at, f"{where} is truncated (4 bytes expected)")
                value, at = self.data[at:at + 4], at + 4
            elif wire == _LEN:
                length, at = self.varint(at, end, f"{where} length")
                if at + length > end:
                    raise self.fail(tag_at, f"{where} says {length} bytes but only {end - at} "
                                    "remain (the file is truncated or corrupted)")
                value, at = (at, at + length), at + length
            else:
                raise self.fail(tag_at, f"{where}: unknown wire type {wire}")
            if kind:
                self._store(out, fname, kind, wire, value, tag_at, where)
        return out

    def _store(self, out: dict[str, Any], fname: str, kind: str, wire: int, value: Any,
               at: int, where: str) -> None:
        base = kind.rstrip("*")
        expected = {"str": _LEN, "bytes": _LEN, "float": _I32, "int": _VARINT,
                    "uint": _VARINT, "bool": _VARINT}.get(base, _LEN)
        if wire != expected:
            raise self.fail(at, f"{where}: wire type {wire}, expected {expected}")
        if base.startswith("msg:"):
            item: Any = self.message(base[4:], value[0], value[1])
        elif base == "str":
            try:
                item = self.data[value[0]:value[1]].decode("utf-8")
            except UnicodeDecodeError as e:
                raise self.fail(value[0] + e.start, f"{where} is not UTF-8") from None
        elif base == "bytes":
            item = self.data[value[0]:value[1]]
        elif base == "float":
            item = struct.unpack("<f", value)[0]
        elif base == "int":
            item = value - (1 << 64) if value >= 1 << 63 else value
        elif base == "bool":
            item = value != 0
        else:
            item = value
        if kind.endswith("*"):
            out[fname].append(item)
        else:
            out[fname] = item


@dataclass(frozen=True)
class ModelProto:
    """What a ``.model`` file holds, as plain data."""

    pieces: list[tuple[str, float, int]]  # (piece, score, type)
    trainer_spec: dict[str, Any] = dataclass_field(default_factory=dict)
    normalizer_spec: dict[str, Any] = dataclass_field(default_factory=dict)

    @property
    def model_type(self) -> str:
        return MODEL_TYPES.get(self.trainer_spec["model_type"], "unknown")


def parse(data: bytes, source: str = "model") -> ModelProto:
    """The pieces and specs of a serialized ``ModelProto``."""
    reader = _Reader(data, source)
    top = reader.message("ModelProto", 0, len(data))
    if not top["pieces"]:
        raise FormatError(f"{source}: not a SentencePiece model (no pieces in it)")
    pieces = []
    for k, p in enumerate(top["pieces"]):
        if "piece" not in p:
            raise FormatError(f"{source}: pieces[{k}] has no piece string")
        if p["type"] not in PIECE_TYPES:
            raise FormatError(f"{source}: pieces[{k}] ({p['piece']!r}) has unknown type "
                              f"{p['type']}; expected 1..6")
        pieces.append((p["piece"], p["score"], p["type"]))
    trainer = top.get("trainer_spec") or dict(_DEFAULTS["TrainerSpec"])
    normalizer = top.get("normalizer_spec") or dict(_DEFAULTS["NormalizerSpec"])
    return ModelProto(pieces, trainer, normalizer)


def read(path: str | os.PathLike[str]) -> ModelProto:
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a SentencePiece .model file") from None
    return parse(data, str(path))


# -- the normalizer ---------------------------------------------------------------------------

@register("normalizer", SP_NORMALIZER_TYPE)
class SentencePieceNormalizer(Normalizer):
    """SentencePiece's normalization: the model's precompiled character map (NFKC and friends;
    empty: none), then its whitespace rules, with each output character aligned to the input.

    ``add_dummy_prefix`` puts a space before the text; ``remove_extra_whitespaces`` drops leading,
    trailing and repeated spaces; ``escape_whitespaces`` spells spaces "▁". ``user_defined``
    pieces pass through unmapped. Hugging Face has no such component, so it is saved under a
    tokenmill type name; ``Precompiled`` (below) is the character map alone, as in HF files.

    >>> SentencePieceNormalizer().normalize_str("  Hello   world ")
    '▁Hello▁world'
    """

    def __init__(self, charsmap: bytes = b"", *, add_dummy_prefix: bool = True,
                 remove_extra_whitespaces: bool = True, escape_whitespaces: bool = True,
                 user_defined: Sequence[str] = ()) -> None:
        self.charsmap = bytes(charsmap)
        self.add_dummy_prefix = add_dummy_prefix
        self.remove_extra_whitespaces = remove_extra_whitespaces
        self.escape_whitespaces = escape_whitespaces
        self.user_defined = tuple(user_defined)
        self._core = _core.SentencePieceNormalizer(
            self.charsmap, list(self.user_defined), add_dummy_prefix, remove_extra_whitespaces,
            escape_whitespaces)

    def normalize(self, s: NormalizedString) -> NormalizedString:
        text, starts, ends = self._core.normalize(s.text)
        if s.is_identity:
            base = s.base
            return NormalizedString(text, 0, [base + i for i in starts], [base + i for i in ends])
        return NormalizedString(text, 0, [s.span(i, j)[0] for i, j in zip(starts, ends)],
                                [s.span(i, j)[1] for i, j in zip(starts, ends)])

    def normalize_str(self, text: str) -> str:
        return self._core.normalize(text)[0]

    @property
    def hf_compatible(self) -> str | None:
        return ("its normalizer is SentencePiece's whole normalization (character map and "
                "whitespace rules), which has no Hugging Face type")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name,
                "precompiled_charsmap": base64.b64encode(self.charsmap).decode("ascii"),
                "add_dummy_prefix": self.add_dummy_prefix,
                "remove_extra_whitespaces": self.remove_extra_whitespaces,
                "escape_whitespaces": self.escape_whitespaces,
                "user_defined": list(self.user_defined)}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        options = {name: field(data, name, bool, where, True) for name in
                   ("add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces")}
        user_defined = field(data, "user_defined", list, where, [])
        return cls(_charsmap_field(data, where), user_defined=user_defined, **options)


@register("normalizer", "Precompiled")
class Precompiled(SentencePieceNormalizer):
    """The character map of a SentencePiece model alone (Hugging Face's ``Precompiled``)."""

    def __init__(self, charsmap: bytes = b"") -> None:
        super().__init__(charsmap, add_dummy_prefix=False, remove_extra_whitespaces=False,
                         escape_whitespaces=False)

    @property
    def hf_compatible(self) -> str | None:
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name,
                "precompiled_charsmap": base64.b64encode(self.charsmap).decode("ascii")}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls(_charsmap_field(data, where))


def _charsmap_field(data: dict[str, Any], where: str) -> bytes:
    text = field(data, "precompiled_charsmap", str, where, "")
    try:
        charsmap = base64.b64decode(text, validate=True)
        _core.SentencePieceNormalizer(charsmap, [], False, False, False)  # checks the map
    except (binascii.Error, ValueError):
        raise FormatError(f"{where}.precompiled_charsmap: expected base64") from None
    except InputError as e:
        raise FormatError(f"{where}.{e}") from None
    return charsmap


# -- the tokenizer ----------------------------------------------------------------------------

def load(path: str | os.PathLike[str]) -> Tokenizer:
    """The tokenizer a ``.model`` file describes: its normalizer, then a Unigram or BPE model
    over the whole normalized text (sentencepiece does not pre-tokenize), its control pieces as
    special tokens (never matched in text, as in sentencepiece), and a decoder back to text."""
    return from_proto(read(path), str(path))


def from_proto(proto: ModelProto, source: str = "model") -> Tokenizer:
    from tokenmill.tokenizer import Tokenizer

    trainer, norm = proto.trainer_spec, proto.normalizer_spec
    if trainer["treat_whitespace_as_suffix"]:
        raise FormatError(f"{source}: trainer_spec.treat_whitespace_as_suffix is not supported")
    if norm["normalization_rule_tsv"] and not norm["precompiled_charsmap"]:
        raise FormatError(f"{source}: normalizer_spec.normalization_rule_tsv without a "
                          "precompiled_charsmap is not supported (re-save the model with "
                          "sentencepiece, which compiles the rules)")
    kinds = [kind for _, _, kind in proto.pieces]
    user_defined = [p for p, _, kind in proto.pieces if kind == USER_DEFINED]
    try:
        normalizer = SentencePieceNormalizer(
            norm["precompiled_charsmap"], add_dummy_prefix=norm["add_dummy_prefix"],
            remove_extra_whitespaces=norm["remove_extra_whitespaces"],
            escape_whitespaces=norm["escape_whitespaces"], user_defined=user_defined)
    except InputError as e:
        raise FormatError(f"{source}: normalizer_spec.{e}") from None
    unk_id = trainer["unk_id"]
    if not 0 <= unk_id < len(kinds) or kinds[unk_id] != UNKNOWN:
        raise FormatError(f"{source}: trainer_spec.unk_id {unk_id} is not the id of an "
                          "UNKNOWN piece")
    model: Any
    if proto.model_type == "UNIGRAM":
        model = Unigram([(p, s) for p, s, _ in proto.pieces], unk_id=unk_id,
                        byte_fallback=trainer["byte_fallback"], kinds=kinds, float32_sums=True)
    elif proto.model_type == "BPE":
        model = _bpe(proto, unk_id)
    else:
        raise FormatError(f"{source}: trainer_spec.model_type {proto.model_type} is not "
                          "supported (expected UNIGRAM or BPE)")
    # As sentencepiece decodes: the dummy prefix dropped (a "▁" that starts the first piece, or
    # each piece while the text is empty: not the space of a byte piece <0x20>, nor of the unk
    # surface), the unk piece as its surface (" ⁇ "), "▁" as a space, and bytes as their text
    # (a byte that starts no valid character as U+FFFD, alone).
    steps: list[Decoder] = [Replace(proto.pieces[unk_id][0], trainer["unk_surface"]),
                            Replace("▁", " "), ByteFallback(per_byte=True), Fuse()]
    if norm["add_dummy_prefix"] or norm["remove_extra_whitespaces"]:
        # (Removing extra whitespace, sentencepiece takes "▁" off every piece until the text
        # holds something: "▁", "▁the" is "the".)
        steps.insert(0, Strip("▁", 1, 0, first_only=True,
                              leading=norm["remove_extra_whitespaces"]))
    control = [AddedToken(p, i, special=True) for i, (p, _, kind) in enumerate(proto.pieces)
               if kind == CONTROL]
    return Tokenizer(model, normalizer=normalizer, decoder=DecoderSequence(steps),
                     added_tokens=control, special_tokens_in_text="error")


def _bpe(proto: ModelProto, unk_id: int) -> BPE:
    """sentencepiece's BPE merges the adjacent pair whose joined piece scores highest (the
    leftmost on a tie). As ranked merges: every split of every piece into two pieces, the
    pieces in order of score (then id), the splits of one piece left to right."""
    vocab: dict[str, int] = {}
    for i, (piece, _, _) in enumerate(proto.pieces):
        vocab.setdefault(piece, i)
    matchable = {p for p, _, kind in proto.pieces if kind in (NORMAL, USER_DEFINED)}
    order = sorted((i for i, (p, _, kind) in enumerate(proto.pieces)
                    if kind in (NORMAL, USER_DEFINED) and len(p) > 1 and vocab[p] == i),
                   key=lambda i: (-proto.pieces[i][1], i))
    merges = []
    for i in order:
        piece = proto.pieces[i][0]
        merges += [(piece[:k], piece[k:]) for k in range(1, len(piece))
                   if piece[:k] in matchable and piece[k:] in matchable]
    model = BPE(vocab, merges, unk_token=proto.pieces[unk_id][0],
                byte_fallback=proto.trainer_spec["byte_fallback"])
    if not model.word_mark:
        # Whole sentences are the words the core merges: caching them would only fill memory.
        model.cache_capacity = 0
    return model
