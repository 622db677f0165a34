"""Added tokens (special tokens among them): strings matched whole, before normalization and
pre-tokenization, and given their own ids."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import regex

from tokenmill._registry import field


@dataclass(frozen=True)
class AddedToken:
    """A string that is always one token. ``lstrip``/``rstrip`` absorb the whitespace beside
    it; ``single_word`` matches it only when it is not inside a word."""

    content: str
    id: int
    special: bool = True
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {"id": d.pop("id"), "content": d.pop("content"), **d}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> AddedToken:
        return cls(
            content=field(data, "content", str, where),
            id=field(data, "id", int, where),
            special=field(data, "special", bool, where, False),
            single_word=field(data, "single_word", bool, where, False),
            lstrip=field(data, "lstrip", bool, where, False),
            rstrip=field(data, "rstrip", bool, where, False),
            normalized=field(data, "normalized", bool, where, False),
        )


class AddedVocabulary:
    """Finds added tokens in text: the leftmost match, and the longest token on a tie."""

    def __init__(self, tokens: list[AddedToken]) -> None:
        self.tokens = list(tokens)
        self.by_content = {t.content: t for t in self.tokens}
        self.by_id = {t.id: t for t in self.tokens}
        self.special_ids = frozenset(t.id for t in self.tokens if t.special)
        alternatives = []
        for t in sorted(self.tokens, key=lambda t: -len(t.content)):
            body = regex.escape(t.content)
            if t.single_word:
                body = rf"(?<!\w){body}(?!\w)"
            # The named group tells which token matched; the optional spaces are absorbed.
            alternatives.append((r"\s*" if t.lstrip else "") + f"(?P<t{t.id}>{body})" +
                                (r"\s*" if t.rstrip else ""))
        self._pattern = regex.compile("|".join(alternatives)) if alternatives else None

    def __len__(self) -> int:
        return len(self.tokens)

    def split(self, text: str) -> list[tuple[int | None, int, int]]:
        """``text`` cut into ``(token id or None, start, end)`` segments that cover it."""
        if self._pattern is None:
            return [(None, 0, len(text))] if text else []
        out: list[tuple[int | None, int, int]] = []
        pos = 0
        for m in self._pattern.finditer(text):
            if m.start() > pos:
                out.append((None, pos, m.start()))
            name = m.lastgroup
            out.append((int(name[1:]) if name else None, m.start(), m.end()))
            pos = m.end()
        if pos < len(text):
            out.append((None, pos, len(text)))
        return out
