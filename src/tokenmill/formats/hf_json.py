"""The Hugging Face ``tokenizer.json`` schema: what we save and what we load.

A file saved here loads in ``tokenizers``/``transformers``; theirs load here. Every field is
checked on load and a bad one is named with its path (``model.merges[3]``) and what was expected.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from itertools import chain
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
from tokenmill._io import is_utf8_text, lone_surrogate, read_file
from tokenmill._registry import build, field
from tokenmill.added_tokens import AddedToken
from tokenmill.encoding import STRATEGIES, Padding, Truncation
from tokenmill.errors import FormatError

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


def from_dict(data: Any, source: str = "tokenizer", *, check_unicode: bool = True) -> Tokenizer:
    """The tokenizer ``data`` describes; ``check_unicode=False`` when the caller knows no
    string in it holds a lone surrogate."""
    from tokenmill.tokenizer import Tokenizer

    if not isinstance(data, dict):
        raise FormatError(f"{source}: expected a JSON object at the top level")
    where = source
    if check_unicode:
        _check_unicode(data, where)
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
    strategy = field(data, "strategy", str, where, "LongestFirst")
    if strategy not in STRATEGIES:
        raise FormatError(f"{where}.strategy: expected one of {', '.join(STRATEGIES)}, got "
                          f"{strategy!r}")
    return Truncation(max_length=_count(data, "max_length", where, 1),
                      stride=_count(data, "stride", where, 0, 0),
                      side=_SIDES[side],  # type: ignore[arg-type]
                      strategy=strategy)  # type: ignore[arg-type]


def _padding(data: Any, where: str) -> Padding | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise FormatError(f"{where}: expected an object or null")
    strategy = data.get("strategy", "BatchLongest")
    length = None
    if isinstance(strategy, dict) and "Fixed" in strategy:
        length = _count(strategy, "Fixed", f"{where}.strategy", 1)
    elif strategy != "BatchLongest":
        raise FormatError(f"{where}.strategy: expected \"BatchLongest\" or {{\"Fixed\": N}}, "
                          f"got {strategy!r}")
    side = field(data, "direction", str, where, "Right")
    if side not in _SIDES:
        raise FormatError(f"{where}.direction: expected \"Right\" or \"Left\", got {side!r}")
    # tokenizers reads 0 as no rounding, as null is.
    multiple = _count(data, "pad_to_multiple_of", where, 0, None) or None
    return Padding(side=_SIDES[side],  # type: ignore[arg-type]
                   pad_id=_count(data, "pad_id", where, 0, 0),
                   pad_token=field(data, "pad_token", str, where, "[PAD]"),
                   pad_type_id=_count(data, "pad_type_id", where, 0, 0),
                   length=length,
                   pad_to_multiple_of=multiple)


def _count(data: dict[str, Any], name: str, where: str, least: int,
           *default: int | None) -> Any:
    """``data[name]``, an integer of at least ``least`` (or the ``default``, if one is given,
    when it is missing or null)."""
    value = field(data, name, int, where, *default)
    if value is not None and value < least:
        raise FormatError(f"{where}.{name}: expected an integer >= {least}, got {value}")
    return value


def _check_unicode(data: dict[str, Any], where: str) -> None:
    """A FormatError naming the first string of ``data`` that holds a lone surrogate (the
    core cannot take it, nor can it be saved as UTF-8).

    The vocabulary and the merges (200k strings in large models) are each checked joined, in
    one encode, and the rest in one dump; only a failure walks them to name the string.
    """
    rest = dict(data)
    model = data.get("model")
    if isinstance(model, dict):
        rest["model"] = {k: v for k, v in model.items() if k not in ("vocab", "merges")}
        vocab, merges = model.get("vocab"), model.get("merges")
        if isinstance(vocab, dict) and not _joined_valid(lambda: "".join(vocab)):
            _walk_keys(vocab, f"{where}: model.vocab")
        if isinstance(vocab, list) and not _joined_valid(
                lambda: "".join(piece for piece, _ in vocab)):  # Unigram: [piece, score]
            _walk(vocab, f"{where}: model.vocab")
        if isinstance(merges, list) and not _joined_valid(
                lambda: "".join(merges) if all(type(m) is str for m in merges)
                else "".join(chain.from_iterable(merges))):  # "a b" or [a, b]
            _walk(merges, f"{where}: model.merges")
    if not _joined_valid(lambda: json.dumps(rest, ensure_ascii=False)):
        for key, value in rest.items():
            _walk(value, f"{where}: {key}")


def _joined_valid(joined: Callable[[], str]) -> bool:
    """Whether the string ``joined()`` makes is valid Unicode; False if it cannot be made
    (a value that is not a string: the walk looks at each)."""
    try:
        return is_utf8_text(joined())
    except (TypeError, ValueError):
        return False


def _lone(where: str, text: str, what: str = "") -> FormatError:
    return FormatError(lone_surrogate(text, f"{where}: {what}{text!r}") or
                       f"{where}: {what}{text!r} is not valid Unicode")


def _walk_keys(mapping: dict[str, Any], where: str) -> None:
    for key in mapping:
        if isinstance(key, str) and not is_utf8_text(key):
            raise _lone(where, key, "key ")


def _walk(value: Any, where: str) -> None:
    """Raise :func:`_lone` for the first string in ``value`` (keys included) that is not
    valid Unicode."""
    if isinstance(value, str):
        if not is_utf8_text(value):
            raise _lone(where, value)
    elif isinstance(value, dict):
        _walk_keys(value, where)
        for key, item in value.items():
            _walk(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, f"{where}[{i}]")


def loads(text: str, source: str = "tokenizer") -> Tokenizer:
    return _loads(text, source, check_unicode=True)


def _loads(text: str, source: str, check_unicode: bool) -> Tokenizer:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        what = "truncated (unexpected end of data)" if e.pos >= len(text.rstrip()) else e.msg
        raise FormatError(f"{source}: not valid JSON at line {e.lineno} column {e.colno}: "
                          f"{what}") from None
    return from_dict(data, source, check_unicode=check_unicode)


def load(path: str | os.PathLike[str]) -> Tokenizer:
    path = Path(path)
    raw = read_file(path, "a tokenizer.json file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: not UTF-8 at byte offset {e.start}") from None
    # Text decoded from UTF-8 holds no lone surrogate; only a JSON escape (\ud800) can make
    # one, and a file without escapes skips the search of its strings.
    return _loads(text, str(path), check_unicode="\\u" in text)
