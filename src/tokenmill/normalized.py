"""Text aligned to the original input, carried through normalizers and pre-tokenizers.

Offsets in an Encoding always point into the ORIGINAL text. Every transformation of the text
(NFKC, lowercasing, replacing, splitting, byte-level mapping) therefore keeps, for each character
it produces, the span of original characters it came from.
"""

from __future__ import annotations

from collections.abc import Iterable


class NormalizedString:
    """A string whose character ``i`` came from original characters ``[starts[i], ends[i])``.

    While nothing has changed the text but cutting, the alignment is the identity shifted by
    ``base`` and no per-character lists are kept (the common, fast case).

    >>> s = NormalizedString("ab", base=3)
    >>> s.span(0, 2)
    (3, 5)
    """

    __slots__ = ("text", "base", "starts", "ends")

    def __init__(
        self,
        text: str,
        base: int = 0,
        starts: list[int] | None = None,
        ends: list[int] | None = None,
    ) -> None:
        self.text = text
        self.base = base
        self.starts = starts
        self.ends = ends

    def __repr__(self) -> str:
        return f"NormalizedString({self.text!r}, span={self.span(0, len(self.text))})"

    def __len__(self) -> int:
        return len(self.text)

    @property
    def is_identity(self) -> bool:
        return self.starts is None

    def span(self, i: int, j: int) -> tuple[int, int]:
        """Original character span of the characters ``[i, j)`` of this text."""
        if self.starts is None or self.ends is None:
            return self.base + i, self.base + j
        if j > i:
            return self.starts[i], self.ends[j - 1]
        # An empty span sits where the next character starts (or where the last one ends).
        # subtle: inside an expansion ("ﬁ" -> "fi", both from (0, 1)) the next character
        # starts before the previous one ends; the gap then takes the previous one's end so
        # offsets never run backwards.
        if i < len(self.starts):
            start = self.starts[i]
            return start, max(start, self.ends[i - 1]) if i > 0 else start
        end = self.ends[-1] if self.ends else self.base
        return end, end

    def slice(self, i: int, j: int) -> NormalizedString:
        """The characters ``[i, j)``, keeping their alignment."""
        if self.starts is None or self.ends is None:
            return NormalizedString(self.text[i:j], self.base + i)
        return NormalizedString(self.text[i:j], 0, self.starts[i:j], self.ends[i:j])

    def alignment(self) -> tuple[list[int], list[int]]:
        """Per-character (starts, ends), materialized if the alignment is the identity."""
        if self.starts is None or self.ends is None:
            starts = list(range(self.base, self.base + len(self.text)))
            return starts, [s + 1 for s in starts]
        return self.starts, self.ends

    def transform(self, chunks: Iterable[tuple[str, int, int]]) -> NormalizedString:
        """Rebuild the text from ``(new_text, i, j)`` chunks, each replacing characters ``[i, j)``.

        Chunks come in order; characters not covered by any chunk are dropped. A chunk whose
        length equals its source's keeps a one-to-one alignment; otherwise every new character
        points at the whole source span (as "ﬁ" -> "fi" both point at the ligature).
        """
        starts_in, ends_in = self.alignment()
        text: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        for new, i, j in chunks:
            if not new:
                continue
            text.append(new)
            if len(new) == j - i:
                starts.extend(starts_in[i:j])
                ends.extend(ends_in[i:j])
            else:
                lo, hi = self.span(i, j)
                starts.extend([lo] * len(new))
                ends.extend([hi] * len(new))
        return NormalizedString("".join(text), 0, starts, ends)
