"""Added tokens (special tokens among them): strings matched whole before pre-tokenization and
given their own ids, with Hugging Face's rules.

Tokens with ``normalized=False`` are found in the original text; the text between them is
normalized, and tokens with ``normalized=True`` are then found in the normalized text, spelled
as the normalizer spells them. Within each pass the leftmost match wins, and the longest token
on a tie; matches never overlap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import regex

from tokenmill._io import check_text
from tokenmill._registry import field
from tokenmill.errors import FormatError, InputError
from tokenmill.normalized import NormalizedString
from tokenmill.normalizers import WHITE_SPACE

_WORD = regex.compile(r"\w")  # Unicode word characters: what single_word looks at


@dataclass(frozen=True)
class AddedToken:
    """A string that is always one token.

    ``single_word``: matched only where neither neighbour is a word character (``\\w``).
    ``lstrip``/``rstrip``: the token also takes the whitespace on its left/right.
    ``normalized``: matched in the normalized text (spelled as normalized) instead of the
    original. ``special``: left out by ``decode`` unless asked for.

    >>> AddedToken("<s>", 1).to_dict()["normalized"]
    False
    """

    content: str
    id: int
    special: bool = True
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False

    def __post_init__(self) -> None:
        # Caught here, not at save or encode: a lone surrogate cannot be written as UTF-8,
        # nor matched by the core.
        check_text(self.content, f"added token {self.content!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {"id": d.pop("id"), "content": d.pop("content"), **d}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> AddedToken:
        special = field(data, "special", bool, where, False)
        try:
            return cls(
                content=field(data, "content", str, where),
                id=field(data, "id", int, where),
                special=special,
                single_word=field(data, "single_word", bool, where, False),
                lstrip=field(data, "lstrip", bool, where, False),
                rstrip=field(data, "rstrip", bool, where, False),
                # Hugging Face's own default: special tokens match the original text.
                normalized=field(data, "normalized", bool, where, not special),
            )
        except InputError as e:
            raise FormatError(f"{where}.content: {e}") from None


class Segment(NamedTuple):
    """A stretch of the input: an added token (``id``), or text for the model (``id`` None),
    normalized and aligned to the input (``normalized``). ``start``/``end`` are its offsets in
    the input."""

    id: int | None
    start: int
    end: int
    normalized: NormalizedString | None = None


class AddedVocabulary:
    """The added tokens of a tokenizer, and where they occur in a text.

    >>> vocab = AddedVocabulary([AddedToken("<s>", 1), AddedToken("ab", 9, normalized=True)])
    >>> vocab.split("x<s>yab")
    [(None, 0, 1), (1, 1, 4), (None, 4, 5), (9, 5, 7)]
    """

    def __init__(self, tokens: list[AddedToken]) -> None:
        self.tokens = list(tokens)
        self.by_content = {t.content: t for t in self.tokens}
        self.by_id = {t.id: t for t in self.tokens}
        self.special_ids = frozenset(t.id for t in self.tokens if t.special)
        self.special_contents = frozenset(t.content for t in self.tokens if t.special)
        # For the core's decoding: ids it leaves out (specials, when skipped), and added ids it
        # must leave to the general path (their text is their own): by skip_special_tokens.
        specials = sorted(self.special_ids)
        self.decode_lists = {True: (specials, sorted(set(self.by_id) - self.special_ids)),
                             False: ([], sorted(self.by_id))}
        self._original = _Matcher([(t.content, t) for t in self.tokens if not t.normalized])
        self._normalized_tokens = [t for t in self.tokens if t.normalized]
        # Whether a token is found in the normalized text (the core's pipelines find none).
        self.any_normalized = bool(self._normalized_tokens)
        self.all_special = all(t.special for t in self.tokens)  # (none matched by encode_ordinary)
        # (the original text's matcher's finder, where every token is found there)
        self._contents = self._original.finder if not self._normalized_tokens else \
            LiteralFinder(t.content for t in self.tokens)
        # The normalized-token matcher of each normalizer seen, keyed by identity (the entry
        # keeps the normalizer alive, so the id cannot be reused while it is cached).
        self._normalized: dict[int, tuple[Any, _Matcher]] = {}
        # Its tokens less the special ones not allowed, by the allowed set (made by
        # Tokenizer._special_rules): kept here, so a tokenizer given new added tokens (a new
        # AddedVocabulary) never meets those of the old ones.
        self.restricted: dict[frozenset[str], AddedVocabulary] = {}
        # The finders of the special tokens not allowed, by the same key.
        self.disallowed: dict[frozenset[str], LiteralFinder] = {}

    def __len__(self) -> int:
        return len(self.tokens)

    def segments(self, text: str, normalizer: Any = None) -> list[Segment]:
        """``text`` cut into added tokens and normalized text, in order.

        The ``normalized=False`` tokens are found in ``text``; each stretch between them is
        normalized by ``normalizer`` (None: left as it is), and the ``normalized=True`` tokens
        are then found in that. Text segments are never empty; their ``normalized`` is what
        the pre-tokenizer gets.

        >>> from tokenmill.normalizers import Lowercase
        >>> vocab = AddedVocabulary([AddedToken("<S>", 1), AddedToken("AB", 2, normalized=True)])
        >>> [(s.id, s.start, s.end, s.normalized and s.normalized.text)
        ...  for s in vocab.segments("<S>xAB", Lowercase())]
        [(1, 0, 3, None), (None, 3, 4, 'x'), (2, 4, 6, None)]
        """
        out: list[Segment] = []
        for token_id, start, end in self._original.split(text):
            if token_id is not None:
                out.append(Segment(token_id, start, end))
                continue
            part = NormalizedString(text[start:end], start)
            if normalizer is not None:
                part = normalizer.normalize(part)
            out += self.split_normalized(part, normalizer)
        return out

    def split_normalized(self, s: NormalizedString, normalizer: Any = None) -> list[Segment]:
        """Normalized text ``s`` cut at the ``normalized=True`` tokens, spelled as
        ``normalizer`` spells them."""
        if not self._normalized_tokens:
            return [Segment(None, *s.span(0, len(s)), s)] if s.text else []
        out: list[Segment] = []
        for token_id, i, j in self._normalized_matcher(normalizer).split(s.text):
            if token_id is not None:
                out.append(Segment(token_id, *s.span(i, j)))
            else:
                part = s.slice(i, j)
                out.append(Segment(None, *part.span(0, j - i), part))
        return out

    def spelled_in(self, text: str) -> bool:
        """Whether any added token's text is in ``text`` as it is (where there is none,
        :meth:`split` gives the whole text as one stretch)."""
        return self._contents.found_in(text)

    def split(self, text: str) -> list[tuple[int | None, int, int]]:
        """``text`` cut into ``(token id or None, start, end)`` segments that cover it, for a
        tokenizer without a normalizer (``normalized=True`` tokens are then found in the
        original text too, after the others, as Hugging Face does): :meth:`segments`' cut,
        without a NormalizedString for each stretch of text."""
        if not self.spelled_in(text):
            return [(None, 0, len(text))] if text else []  # (what is not there cannot match)
        out: list[tuple[int | None, int, int]] = []
        for token_id, start, end in self._original.split(text):
            if token_id is not None or not self._normalized_tokens:
                out.append((token_id, start, end))
                continue
            for inner_id, i, j in self._normalized_matcher(None).split(text[start:end]):
                out.append((inner_id, start + i, start + j))
        return out

    def _normalized_matcher(self, normalizer: Any) -> _Matcher:
        cached = self._normalized.get(id(normalizer))
        if cached is None or cached[0] is not normalizer:
            spell: Callable[[str], str] = (normalizer.normalize_str if normalizer is not None
                                           else str)
            cached = (normalizer, _Matcher([(spell(t.content), t)
                                            for t in self._normalized_tokens]))
            self._normalized[id(normalizer)] = cached
        return cached[1]


class LiteralFinder:
    """Finds any of a set of strings in a text: the leftmost, and the longest of those that
    start there. Its regular expression is the strings' trie, so a text is read once,
    whatever their number (a loop of ``str.find`` over Mistral's 770 control tokens took 200
    ms a megabyte; this takes 5). A few strings are looked for with ``str.find``, faster
    still.

    >>> finder = LiteralFinder(["<s>", "</s>", "<s>x", "[a]", "[b]"])
    >>> finder.first("a</s><s>x"), finder.found_in("<s"), bool(LiteralFinder([""]))
    ((1, '</s>'), False, False)
    """

    _FEW = 4  # as many strings as str.find looks for faster than one search
    # As many first characters as `in` looks for faster than one search of the pattern: most
    # texts hold none of them (Mistral v0.3's 771 added tokens all start with "<" or "["), and
    # the search of a line through its trie took 480 ns of a 7 us encode.
    _FEW_FIRSTS = 8

    def __init__(self, strings: Iterable[str]) -> None:
        self.strings = sorted({s for s in strings if s})
        self.pattern = _literal_pattern(self.strings) if self.strings else None
        firsts = sorted({s[0] for s in self.strings})
        self._firsts = firsts if len(firsts) <= self._FEW_FIRSTS else None

    def __bool__(self) -> bool:
        return self.pattern is not None

    def first(self, text: str) -> tuple[int, str] | None:
        """Where the first of the strings is in ``text`` (the longest there), and which."""
        if len(self.strings) <= self._FEW:
            found = [(at, -len(s), s) for s in self.strings if (at := text.find(s)) >= 0]
            return (min(found)[0], min(found)[2]) if found else None
        if not self._may_be_in(text):
            return None
        match = self.pattern.search(text) if self.pattern is not None else None
        return (match.start(), match.group()) if match else None

    def found_in(self, text: str) -> bool:
        if len(self.strings) <= self._FEW:
            return any(s in text for s in self.strings)
        return self._may_be_in(text) and self.pattern is not None and \
            self.pattern.search(text) is not None

    def _may_be_in(self, text: str) -> bool:
        """False where ``text`` holds none of the strings' first characters (when they are
        few), so none of the strings."""
        firsts = self._firsts
        if firsts is None:
            return True
        for c in firsts:  # (a loop: any() over a generator cost 380 ns, this 100)
            if c in text:
                return True
        return False


def _literal_pattern(strings: list[str]) -> re.Pattern[str]:
    """A pattern matching exactly the (sorted, non-empty, distinct) ``strings``; at a given
    start, the longest that is there."""
    trie: dict[str, Any] = {}
    for s in strings:
        node = trie
        for ch in s:
            node = node.setdefault(ch, {})
        node[""] = None  # a string ends here

    def spelled(node: dict[str, Any]) -> str:
        out = []
        while True:  # (a chain of single children is a plain run of characters)
            ends = "" in node
            kids = [ch for ch in node if ch]
            if len(kids) == 1 and not ends:
                out.append(re.escape(kids[0]))
                node = node[kids[0]]
                continue
            if kids:  # the longer continuations first, then the string that ends here
                alts = "|".join(re.escape(ch) + spelled(node[ch]) for ch in kids)
                out.append(f"(?:{alts}){'?' if ends else ''}")
            return "".join(out)

    try:
        return re.compile(spelled(trie))
    except (RecursionError, re.error, OverflowError):
        # (strings nested hundreds deep: "a", "aa", "aaa", ...) the plain alternation, whose
        # longest-first order gives the same matches, each start paying for every string
        return re.compile("|".join(map(re.escape, sorted(strings, key=lambda s: (-len(s), s)))))


class _Matcher:
    """Finds one set of added tokens, each by the string it is spelled as, the way Hugging
    Face does.

    The tokens' matches are found first: leftmost, longest on a tie, never overlapping. Then,
    in order, each is dropped if ``single_word`` and a neighbour is a word character (what it
    covered is not searched again), and stretched over whitespace: ``lstrip`` leftwards but
    not into the previous kept token, ``rstrip`` rightwards. subtle: the right stretch does not
    stop at the next token, so two tokens' spans can overlap (as in Hugging Face), and an
    ``lstrip`` token inside the previous one's stretch, left with nothing, is dropped.
    """

    def __init__(self, spelled: list[tuple[str, AddedToken]]) -> None:
        # Two tokens spelled alike ("AB" and "ab" behind Lowercase): the later one wins.
        # (Hugging Face picks one in hash order, which changes from run to run.)
        self._token = {text: token for text, token in spelled if text}
        self.finder = LiteralFinder(self._token)
        self._pattern = self.finder.pattern

    def split(self, text: str) -> list[tuple[int | None, int, int]]:
        """``(token id or None, start, end)`` covering ``text``; text parts are never empty."""
        if self._pattern is None:
            return [(None, 0, len(text))] if text else []
        out: list[tuple[int | None, int, int]] = []
        done = 0  # the end of the last kept token
        n = len(text)
        # The last whitespace run rstrip walked, [run_start, run_end): a token matched inside
        # it stretches to its end without walking it again (linear time, even for a token
        # that is itself a space, in a long run of them).
        run_start = run_end = -1
        for match in self._pattern.finditer(text):
            token = self._token[match.group()]
            start, end = match.span()
            if token.single_word and (start > 0 and _WORD.match(text, start - 1) or
                                      end < n and _WORD.match(text, end)):
                continue
            if token.lstrip:
                while start > done and text[start - 1] in WHITE_SPACE:
                    start -= 1
                start = max(start, done)
            if token.rstrip:
                if not run_start <= end <= run_end:
                    run_start = run_end = end
                    while run_end < n and text[run_end] in WHITE_SPACE:
                        run_end += 1
                end = run_end
            if start >= end:  # (an lstrip token inside the last one's strip: nothing left)
                continue
            if start > done:
                out.append((None, done, start))
            out.append((token.id, start, end))
            done = end  # (HF resumes after the token, even one inside the last one's strip)
        if done < n:
            out.append((None, done, n))
        return out
