"""BERT's pipeline pieces: its normalizer, pre-tokenizer, post-processor and decoder, under
Hugging Face's type names, and the preset that puts them around a WordPiece model.

Each keeps every character's alignment to the original input (offsets point into it through
normalization), and each follows Hugging Face's definitions exactly; the character classes are
in ``_bert_chars``.
"""

from __future__ import annotations

import dataclasses
import functools
import unicodedata
from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass
from typing import Any, Self

import regex

from tokenmill import _bert_chars, _core
from tokenmill._registry import field, register
from tokenmill.decoders import Decoder
from tokenmill.encoding import Encoding
from tokenmill.errors import FormatError, InputError
from tokenmill.normalized import NormalizedString
from tokenmill.normalizers import WHITE_SPACE, Lowercase, Normalizer
from tokenmill.pre_tokenizers import PreTokenizer
from tokenmill.processors import TemplateProcessing

# The special tokens of BERT's vocabularies, in the order Hugging Face adds them.
SPECIAL_TOKENS = ("[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]")


@functools.cache
def _patterns() -> dict[str, Any]:
    """Compiled once, on first use (building the classes walks all of Unicode)."""
    dropped = _bert_chars.cleaned()
    spaces = {ord(c) for c in WHITE_SPACE} - dropped
    punctuation = _bert_chars.punctuation()
    not_in_words = _bert_chars.character_class(punctuation | {ord(c) for c in WHITE_SPACE})
    marks = _bert_chars.nonspacing_marks()
    cjk = "".join(f"{regex.escape(chr(a))}-{regex.escape(chr(b))}"
                  for a, b in _bert_chars.CJK_RANGES)
    return {
        "clean": str.maketrans({**{cp: None for cp in dropped}, **{cp: " " for cp in spaces}}),
        "dropped": regex.compile(_bert_chars.character_class(dropped) + "+"),
        "cjk": regex.compile(f"[{cjk}]"),
        "marks": str.maketrans({cp: None for cp in marks}),
        "accented": regex.compile(_bert_chars.character_class(marks | _bert_chars.decomposed())),
        # a word: one punctuation character, or a run of characters that are neither that nor
        # space
        "words": regex.compile(_bert_chars.character_class(punctuation) + "|[^" +
                               not_in_words[1:] + "+"),
        # the same cut as text alone: spaces around punctuation, every space a " ", then split
        "spread": str.maketrans({**{cp: f" {chr(cp)} " for cp in punctuation},
                                 **{ord(c): " " for c in WHITE_SPACE}}),
    }


@register("normalizer", "BertNormalizer")
@dataclass(frozen=True)
class BertNormalizer(Normalizer):
    """BERT's text cleanup, in Hugging Face's order:

    1. ``clean_text``: drop NUL, U+FFFD, control, format and private-use characters; every
       whitespace character becomes a space;
    2. ``handle_chinese_chars``: a space on each side of every CJK ideograph (so each one is a
       word of its own);
    3. ``strip_accents`` (None: the same as ``lowercase``): NFD, then drop non-spacing marks;
    4. ``lowercase``, one character at a time.

    >>> n = BertNormalizer().normalize(NormalizedString("Héllo\\t世界"))
    >>> n.text, n.span(7, 8)
    ('hello  世  界 ', (6, 7))
    """

    _: KW_ONLY
    clean_text: bool = True
    handle_chinese_chars: bool = True
    strip_accents: bool | None = None
    lowercase: bool = True

    def normalize(self, s: NormalizedString) -> NormalizedString:
        patterns = _patterns()
        if self.clean_text:
            cleaned = s.text.translate(patterns["clean"])
            if len(cleaned) == len(s.text):  # spaces for spaces: the alignment stays
                s = NormalizedString(cleaned, s.base, s.starts, s.ends)
            else:
                s = s.transform(_kept(s.text, patterns["dropped"], patterns["clean"]))
        if self.handle_chinese_chars and not s.text.isascii() and patterns["cjk"].search(s.text):
            s = s.transform(_spaced(s.text, patterns["cjk"]))
        strip = self.lowercase if self.strip_accents is None else self.strip_accents
        if strip and not s.text.isascii() and patterns["accented"].search(s.text):
            s = s.transform(_stripped(s.text, patterns["accented"], patterns["marks"]))
        if self.lowercase:
            s = Lowercase().normalize(s)
        return s

    def normalize_str(self, text: str) -> str:
        """The normalized text alone (what training counts), at C speed: each character's
        replacement from the table the core uses, then the spaces around ideographs."""
        text = text.translate(_changes(self))
        if self.handle_chinese_chars and not text.isascii():
            text = _patterns()["cjk"].sub(r" \g<0> ", text)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "clean_text": self.clean_text,
                "handle_chinese_chars": self.handle_chinese_chars,
                "strip_accents": self.strip_accents, "lowercase": self.lowercase}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls(clean_text=field(data, "clean_text", bool, where, True),
                   handle_chinese_chars=field(data, "handle_chinese_chars", bool, where, True),
                   strip_accents=field(data, "strip_accents", bool, where, None),
                   lowercase=field(data, "lowercase", bool, where, True))


def _kept(text: str, dropped: Any, clean: dict[int, Any]) -> Iterator[tuple[str, int, int]]:
    """Chunks of ``text`` between runs of dropped characters, cleaned (spaces for spaces)."""
    done = 0
    for m in dropped.finditer(text):
        yield text[done:m.start()].translate(clean), done, m.start()
        done = m.end()
    yield text[done:].translate(clean), done, len(text)


def _spaced(text: str, cjk: Any) -> Iterator[tuple[str, int, int]]:
    """Chunks of ``text`` with " c " for each ideograph c; all three point at c."""
    done = 0
    for m in cjk.finditer(text):
        yield text[done:m.start()], done, m.start()
        yield f" {m[0]} ", m.start(), m.end()
        done = m.end()
    yield text[done:], done, len(text)


def _stripped(text: str, accented: Any, marks: dict[int, Any]) -> Iterator[tuple[str, int, int]]:
    """Chunks of ``text`` with each character that decomposes or is a mark replaced by its
    NFD without non-spacing marks (character by character, as Hugging Face aligns it)."""
    done = 0
    for m in accented.finditer(text):
        yield text[done:m.start()], done, m.start()
        yield unicodedata.normalize("NFD", m[0]).translate(marks), m.start(), m.end()
        done = m.end()
    yield text[done:], done, len(text)


@register("pre_tokenizer", "BertPreTokenizer")
@dataclass(frozen=True)
class BertPreTokenizer(PreTokenizer):
    """Split on whitespace (dropped) and make every punctuation character a piece of its own.

    Punctuation is Unicode's P* categories plus ASCII's symbols (``$ + < = > ^ ` | ~``), as
    Hugging Face counts it.

    >>> BertPreTokenizer().pre_tokenize_str("Hi, you!!")
    [('Hi', (0, 2)), (',', (2, 3)), ('you', (4, 7)), ('!', (7, 8)), ('!', (8, 9))]
    """

    def split(self, s: NormalizedString) -> list[NormalizedString]:
        return [s.slice(*m.span()) for m in _patterns()["words"].finditer(s.text)]

    def split_text(self, text: str) -> list[str]:
        # str.translate and str.split run at C speed; a regex with these large classes does not
        return [p for p in text.translate(_patterns()["spread"]).split(" ") if p]


@register("decoder", "WordPiece")
@dataclass(frozen=True)
class WordPieceDecoder(Decoder):
    """Join WordPiece tokens: ``prefix`` tokens glue to the previous one, the others follow a
    space. With ``cleanup``, the spaces the tokenization put before punctuation and English
    contractions are taken out again, token by token, as Hugging Face does.

    >>> WordPieceDecoder().decode(["un", "##aff", "##able", "wins", "!", "it", "'s", "##s"])
    "unaffable wins! it'ss"
    """

    _: KW_ONLY
    prefix: str = "##"
    cleanup: bool = True

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for k, token in enumerate(tokens):
            if k > 0:
                token = token[len(self.prefix):] if token.startswith(self.prefix) else " " + token
            out.append(_cleanup(token) if self.cleanup else token)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "prefix": self.prefix, "cleanup": self.cleanup}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> Self:
        return cls(prefix=field(data, "prefix", str, where, "##"),
                   cleanup=field(data, "cleanup", bool, where, True))


# In this order: " ' " goes before " 's" so that "' s" is not half-joined.
_CLEANUPS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
             (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"),
             (" 're", "'re"))


def _cleanup(text: str) -> str:
    if " " not in text:
        return text  # (every pattern holds a space: most tokens, the first one above all)
    for before, after in _CLEANUPS:
        text = text.replace(before, after)
    return text


@register("post_processor", "BertProcessing")
class BertProcessing(TemplateProcessing):
    """``[CLS] $A [SEP]`` and, for pairs, ``[CLS] $A [SEP] $B:1 [SEP]:1`` (the second input and
    its separator get type id 1).

    >>> from tokenmill.encoding import Encoding
    >>> p = BertProcessing(sep=("[SEP]", 102), cls=("[CLS]", 101))
    >>> e = p.process(Encoding([7], ["a"], [(0, 1)]), Encoding([8], ["b"], [(0, 1)]))
    >>> e.ids, e.type_ids
    ([101, 7, 102, 8, 102], [0, 0, 0, 1, 1])
    """

    def __init__(self, *, sep: tuple[str, int] = ("[SEP]", 102),
                 cls: tuple[str, int] = ("[CLS]", 101)) -> None:
        self.sep = (sep[0], sep[1])
        self.cls = (cls[0], cls[1])
        super().__init__([cls[0], "$A", sep[0]], [cls[0], "$A", sep[0], "$B:1", f"{sep[0]}:1"],
                         [self.cls, self.sep])

    keeps_marks = False  # (see TemplateProcessing)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "BertProcessing", "sep": list(self.sep), "cls": list(self.cls)}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> BertProcessing:
        def token(name: str) -> tuple[str, int]:
            value = field(data, name, list, where)
            if len(value) != 2 or not isinstance(value[0], str) or type(value[1]) is not int:
                raise FormatError(f"{where}.{name}: expected [token, id], got {value!r}")
            return value[0], value[1]

        return cls(sep=token("sep"), cls=token("cls"))


# ---- the core's twin of the whole pipeline ---------------------------------------------------

BertPlan = tuple[_core.WordPieceModel, _core.BertPipeline]  # (model core, pipeline core)


def native_plan(tok: Any) -> BertPlan | None:
    """``(model core, pipeline core)`` when the core can run ``tok``'s normalizer, pre-tokenizer
    and model in one pass: BertNormalizer, BertPreTokenizer and a WordPiece with its unknown
    token (Hugging Face's BERT files); else None."""
    from tokenmill.models.wordpiece import WordPiece

    model, normalizer = tok.model, tok.normalizer
    if not (isinstance(model, WordPiece) and isinstance(normalizer, BertNormalizer)
            and isinstance(tok.pre_tokenizer, BertPreTokenizer)
            and model.unk_token in model.vocab):
        return None
    return model.core, _native_pipeline(normalizer)


@functools.cache
def _native_pipeline(normalizer: BertNormalizer) -> _core.BertPipeline:
    """The core's twin of ``normalizer`` and BertPreTokenizer."""
    cjk = list(_bert_chars.CJK_RANGES) if normalizer.handle_chinese_chars else []
    return _core.BertPipeline(sorted(_changes(normalizer).items()), cjk,
                              sorted(_bert_chars.punctuation()),
                              sorted(ord(c) for c in WHITE_SPACE))


@functools.cache
def _changes(normalizer: BertNormalizer) -> dict[int, str]:
    """What ``normalizer`` makes of each character it changes, CJK spacing aside (it applies to
    the characters that are ideographs before and after the other steps alike). Computed with
    ``normalizer`` itself, so the table and the Python path agree by construction."""
    plain = dataclasses.replace(normalizer, handle_chinese_chars=False)
    spaces = {ord(c) for c in WHITE_SPACE}
    changed: dict[int, str] = {}
    if normalizer.clean_text:
        changed.update({cp: "" for cp in _bert_chars.cleaned()})
        changed.update({cp: " " for cp in spaces - _bert_chars.cleaned() - {32}})
    candidates: set[int] = set()
    if normalizer.lowercase if normalizer.strip_accents is None else normalizer.strip_accents:
        candidates |= _bert_chars.nonspacing_marks() | _bert_chars.decomposed()
    if normalizer.lowercase:
        candidates |= _bert_chars.lowercased()
    for cp in sorted(candidates - changed.keys()):
        out = plain.normalize(NormalizedString(chr(cp))).text
        if out != chr(cp):
            changed[cp] = out
    return changed


def encode_natively(plan: BertPlan, text: str,
                    segments: list[tuple[int | None, int, int]], id_to_token: Any) -> Encoding:
    """The Encoding of ``text``, cut into ``(added token id or None, start, end)`` segments:
    the text segments go through the core in one call."""
    return Encoding.spliced(segments, _core.bert_encode_batch(
        *plan, [text[i:j] for t, i, j in segments if t is None], 1, True), id_to_token)


def bert_processing(model: Any) -> BertProcessing | None:
    """BERT's template with the ids of ``model``'s [CLS] and [SEP]; None if it lacks either."""
    sep, cls = model.token_to_id("[SEP]"), model.token_to_id("[CLS]")
    if sep is None or cls is None:
        return None
    return BertProcessing(sep=("[SEP]", sep), cls=("[CLS]", cls))


def bert_tokenizer(model: Any, *, lowercase: bool = True, strip_accents: bool | None = None,
                   clean_text: bool = True, handle_chinese_chars: bool = True,
                   source: str = "vocab") -> Any:
    """A BERT tokenizer around ``model`` (a WordPiece), as Hugging Face's
    ``BertWordPieceTokenizer`` builds one: BERT's normalizer and pre-tokenizer, its special
    tokens (those in the vocabulary), ``[CLS] ... [SEP]`` around the inputs and the WordPiece
    decoder. ``source`` names the vocabulary in errors.
    """
    from tokenmill.tokenizer import Tokenizer

    for name in ("[CLS]", "[SEP]"):
        if model.token_to_id(name) is None:
            raise InputError(f"{source}: has no {name} token, which BERT's template needs "
                             "(expected a BERT vocabulary)")
    tok = Tokenizer(model, normalizer=BertNormalizer(
        clean_text=clean_text, handle_chinese_chars=handle_chinese_chars,
        strip_accents=strip_accents, lowercase=lowercase), pre_tokenizer=BertPreTokenizer(),
        post_processor=bert_processing(model),
        decoder=WordPieceDecoder(prefix=model.continuing_subword_prefix))
    tok.add_special_tokens([t for t in SPECIAL_TOKENS if model.token_to_id(t) is not None])
    return tok
