"""One registry of the ``"type"`` names of every pipeline component, and strict field readers.

Each component class has ``to_dict()`` (including its ``"type"``) and a classmethod
``from_fields(data, where)``; ``build(kind, data, where)`` picks the class by ``"type"``. Field
readers raise :class:`FormatError` naming the field's path (``where``) and what was expected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tokenmill.errors import FormatError

KINDS = ("normalizer", "pre_tokenizer", "model", "post_processor", "decoder")
_REGISTRY: dict[str, dict[str, type]] = {kind: {} for kind in KINDS}

T = TypeVar("T", bound=type)
_MISSING: Any = object()


def register(kind: str, type_name: str) -> Callable[[T], T]:
    """Class decorator: make ``cls`` the component of ``kind`` named ``type_name`` in files."""

    def add(cls: T) -> T:
        _REGISTRY[kind][type_name] = cls
        cls.type_name = type_name  # type: ignore[attr-defined]
        return cls

    return add


def build(kind: str, data: Any, where: str) -> Any:
    """The component ``data`` describes, or None for a JSON null."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise FormatError(f"{where}: expected an object with a \"type\", got {_kind(data)}")
    type_name = data.get("type")
    classes = _REGISTRY[kind]
    if type_name not in classes:
        known = ", ".join(sorted(classes))
        raise FormatError(f"{where}.type: expected one of {known}, got {type_name!r}")
    return classes[type_name].from_fields(data, where)  # type: ignore[attr-defined]


def field(data: dict[str, Any], name: str, expected: type | tuple[type, ...], where: str,
          default: Any = _MISSING) -> Any:
    """``data[name]`` checked against ``expected``; a missing field takes ``default`` if given."""
    # A place ending in ":" is a file's top level: "tok.json: model", not "tok.json:.model".
    at = f"{where} {name}" if where.endswith(":") else f"{where}.{name}"
    if name not in data or (data[name] is None and default is not _MISSING):
        if default is _MISSING:
            raise FormatError(f"{at}: missing (expected {_type_names(expected)})")
        return default
    value = data[name]
    if isinstance(value, bool) and bool not in _as_tuple(expected):
        ok = False
    else:
        ok = isinstance(value, expected)
    if not ok:
        raise FormatError(f"{at}: expected {_type_names(expected)}, got {_kind(value)}")
    return value


def _as_tuple(expected: type | tuple[type, ...]) -> tuple[type, ...]:
    return expected if isinstance(expected, tuple) else (expected,)


def _type_names(expected: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", bool: "true or false", list: "a list",
             dict: "an object", float: "a number", type(None): "null"}
    return " or ".join(names.get(t, t.__name__) for t in _as_tuple(expected))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    for t, name in ((str, "a string"), (int, "an integer"), (float, "a number"),
                    (list, "a list"), (dict, "an object")):
        if isinstance(value, t):
            return name
    return type(value).__name__
