"""The Hugging Face ``tokenizer.json`` schema: what we save and what we load.

A file saved here loads in ``tokenizers``/``transformers``; theirs load here. Every field is
checked on load and a bad one is named with its path (``model.merges[3]``) and what was expected.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Imported for their registrations: the component classes of each "type" name.
import tokenmill.bert  # noqa: F401
import tokenmill.decoders  # noqa: F401
import tokenmill.formats.sentencepiece  # noqa: F401  (its normalizers)
import tokenmill.models  # noqa: F401
import tokenmill.normalizers  # noqa: F401
import tokenmill.pre_tokenizers  # noqa: F401
import tokenmill.processors  # noqa: F401
from tokenmill._io import read_file
from tokenmill._registry import build, field
from tokenmill.added_tokens import AddedToken
from tokenmill.encoding import Padding, Truncation
from tokenmill.errors import FormatError, InputError

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer

_SIDES = {"Right": "right", "Left": "left"}


def to_dict(tok: Tokenizer) -> dict[str, Any]:
    def part(component: Any) -> Any:
        return component.to_dict() if component is not None else None

    return {
        "version": "1.0",
        "truncation": part(tok.truncation),
        "padding": part(tok.padding),
        "added_tokens": [t.to_dict() for t in tok.added_tokens],
        "normalizer": part(tok.normalizer),
        "pre_tokenizer": part(tok.pre_tokenizer),
        "post_processor": part(tok.post_processor),
        "decoder": part(tok.decoder),
        "model": tok.model.to_dict(),
    }


def from_dict(data: Any, source: str = "tokenizer") -> Tokenizer:
    from tokenmill.tokenizer import Tokenizer

    if not isinstance(data, dict):
        raise FormatError(f"{source}: expected a JSON object at the top level")
    where = source
    model = _model(field(data, "model", dict, f"{where}:"), f"{where}: model")
    added = []
    for i, item in enumerate(field(data, "added_tokens", list, f"{where}:", [])):
        at = f"{where}: added_tokens[{i}]"
        if not isinstance(item, dict):
            raise FormatError(f"{at}: expected an object")
        added.append(AddedToken.from_fields(item, at))
    tok = Tokenizer(
        model,
        normalizer=build("normalizer", data.get("normalizer"), f"{where}: normalizer"),
        pre_tokenizer=build("pre_tokenizer", data.get("pre_tokenizer"), f"{where}: pre_tokenizer"),
        post_processor=build("post_processor", data.get("post_processor"),
                             f"{where}: post_processor"),
        decoder=build("decoder", data.get("decoder"), f"{where}: decoder"),
        added_tokens=added,
        truncation=_truncation(data.get("truncation"), f"{where}: truncation"),
        padding=_padding(data.get("padding"), f"{where}: padding"),
    )
    return tok


# Model types of the schema that this version cannot run yet.
_UNSUPPORTED_MODELS = ("WordLevel",)


def _model(data: dict[str, Any], where: str) -> Any:
    """The model; one without a ``"type"`` (files of older versions) is recognised by its
    fields, as Hugging Face does."""
    what = "{} models are"
    if "type" not in data:
        data = {**data, "type": _infer_model_type(data, where)}
        what = "missing; the fields are those of a {} model, which is"
    if data["type"] in _UNSUPPORTED_MODELS:
        raise FormatError(f"{where}.type: {what.format(data['type'])} not supported yet (this "
                          "version runs BPE, WordPiece and Unigram models)")
    return build("model", data, where)


def _infer_model_type(data: dict[str, Any], where: str) -> str:
    vocab = data.get("vocab")
    if isinstance(vocab, list):
        return "Unigram"  # a list of [piece, score]
    if isinstance(vocab, dict):
        if "merges" in data:
            return "BPE"
        if "max_input_chars_per_word" in data:
            return "WordPiece"
        if "unk_token" in data:
            return "WordLevel"
    raise FormatError(f"{where}.type: missing, and the fields do not tell the model (a BPE "
                      "model has \"vocab\" and \"merges\"); add \"type\": \"BPE\" if it is one")


def _truncation(data: Any, where: str) -> Truncation | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise FormatError(f"{where}: expected an object or null")
    side = field(data, "direction", str, where, "Right")
    if side not in _SIDES:
        raise FormatError(f"{where}.direction: expected \"Right\" or \"Left\", got {side!r}")
    try:
        return Truncation(max_length=field(data, "max_length", int, where),
                          stride=field(data, "stride", int, where, 0),
                          side=_SIDES[side])  # type: ignore[arg-type]
    except InputError as e:
        raise FormatError(f"{where}: {e}") from None


def _padding(data: Any, where: str) -> Padding | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise FormatError(f"{where}: expected an object or null")
    strategy = data.get("strategy", "BatchLongest")
    length = None
    if isinstance(strategy, dict) and isinstance(strategy.get("Fixed"), int):
        length = strategy["Fixed"]
    elif strategy != "BatchLongest":
        raise FormatError(f"{where}.strategy: expected \"BatchLongest\" or {{\"Fixed\": N}}, "
                          f"got {strategy!r}")
    side = field(data, "direction", str, where, "Right")
    if side not in _SIDES:
        raise FormatError(f"{where}.direction: expected \"Right\" or \"Left\", got {side!r}")
    return Padding(side=_SIDES[side],  # type: ignore[arg-type]
                   pad_id=field(data, "pad_id", int, where, 0),
                   pad_token=field(data, "pad_token", str, where, "[PAD]"),
                   pad_type_id=field(data, "pad_type_id", int, where, 0),
                   length=length,
                   pad_to_multiple_of=field(data, "pad_to_multiple_of", int, where, None))


def loads(text: str, source: str = "tokenizer") -> Tokenizer:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        what = "truncated (unexpected end of data)" if e.pos >= len(text.rstrip()) else e.msg
        raise FormatError(f"{source}: not valid JSON at line {e.lineno} column {e.colno}: "
                          f"{what}") from None
    return from_dict(data, source)


def load(path: str | os.PathLike[str]) -> Tokenizer:
    path = Path(path)
    raw = read_file(path, "a tokenizer.json file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: not UTF-8 at byte offset {e.start}") from None
    return loads(text, str(path))
