"""Post-processors: what is added around the model's tokens (BOS/EOS, [CLS]/[SEP], pair layout)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

from tokenmill import _core
from tokenmill._registry import field, register
from tokenmill.encoding import _WHOLE, ONE_WORD, Encoding, Layout, _word_parts
from tokenmill.errors import FormatError, InputError
from tokenmill.normalizers import WHITE_SPACE
from tokenmill.pre_tokenizers import ByteLevelFields

# What trim_offsets trims: the byte-level alphabet's space, and whitespace proper (which only
# added tokens can hold).
_SPACES = "Ġ" + WHITE_SPACE

# One template item: ("sequence", "A" | "B", type_id) or ("special", token, type_id).
Item = tuple[str, str, int]
# A single template as special ids before $A, special ids after it, and each special id with
# its name (TemplateProcessing._single_shape).
_Shape = tuple[list[int], list[int], list[tuple[int, str]]]


class _PairPlan:
    """A pair template naming $A and $B once each, as TemplateProcessing._around_pair lays it
    out: its pieces (special ids, None where an input goes, at ``at_a`` and ``at_b``), each
    piece's type id, each special id with its name, how many special ids come before each
    input, whether $A comes first, and the words of the special tokens before, between and
    after the inputs (as Encoding.laid_out keeps them: a count a special item)."""

    __slots__ = ("pieces", "types", "names", "special", "at_a", "at_b", "specials_before_a",
                 "specials_before_b", "word_edges")

    def __init__(self) -> None:
        self.pieces: list[Any] = []
        self.types: list[int] = []
        self.names: list[tuple[int, str]] = []
        self.special = False
        self.at_a = self.at_b = -1
        self.specials_before_a = self.specials_before_b = 0
        self.word_edges: tuple[tuple[int, ...], ...] = ()

    @property
    def a_first(self) -> bool:
        return self.at_a < self.at_b

    @staticmethod
    def of(pair: list[Item], special_tokens: dict[str, list[int]]) -> _PairPlan | None:
        plan = _PairPlan()
        specials = 0
        edges: list[list[int]] = [[]]
        for kind, name, tid in pair:
            if type(tid) is not int or not 0 <= tid < 1 << 32:  # (the core's ints)
                return None
            if kind == "sequence":
                if name == "A" and plan.at_a < 0:
                    plan.at_a, plan.specials_before_a = len(plan.pieces), specials
                elif name == "B" and plan.at_b < 0:
                    plan.at_b, plan.specials_before_b = len(plan.pieces), specials
                else:
                    return None  # (an input named twice: the walk lays it out)
                plan.pieces.append(None)
                edges.append([])
            else:
                ids = special_tokens[name]
                if type(ids) is not list or any(type(i) is not int for i in ids):
                    return None
                plan.pieces.append(ids)
                plan.names += [(i, name) for i in ids]
                plan.special = True
                specials += len(ids)
                edges[-1].append(len(ids))
            plan.types.append(tid)
        if plan.at_a < 0 or plan.at_b < 0:
            return None
        plan.word_edges = tuple(tuple(e) for e in edges)
        return plan


def _word_parts_or_count(e: Encoding) -> tuple:
    """``e``'s words as a laid-out encoding holds its parts' (its token count where it has
    none)."""
    return (len(e.ids),) if e._words is None else _word_parts(e)


def _parse_template(template: str | list[str], where: str) -> list[Item]:
    words = template.split() if isinstance(template, str) else list(template)
    items: list[Item] = []
    for word in words:
        name, _, type_id = word.partition(":")
        if type_id and not type_id.isdigit():
            raise InputError(f"{where}: type id of {word!r} must be a number")
        tid = int(type_id) if type_id else 0
        if name in ("$", "$A", "$0"):
            items.append(("sequence", "A", tid))
        elif name in ("$B", "$1"):
            items.append(("sequence", "B", tid))
        elif name.startswith("$") and name[1:].isdigit():
            items.append(("sequence", "A", int(name[1:])))
        else:
            items.append(("special", name, tid))
    return items


@register("post_processor", "TemplateProcessing")
class TemplateProcessing:
    """Lays out one or two encodings with special tokens, e.g. ``[CLS] $A [SEP] $B:1 [SEP]:1``.

    ``$A``/``$B`` stand for the inputs; ``:N`` gives an item's type id; ``special_tokens`` maps
    each special token to its id(s).

    >>> from tokenmill.encoding import Encoding
    >>> p = TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    >>> p.process(Encoding([7, 8], ["a", "b"], [(0, 1), (1, 2)])).ids
    [0, 7, 8, 2]
    """

    def __init__(self, single: str | list[str] = "$A", pair: str | list[str] | None = None,
                 special_tokens: list[tuple[str, int]] | dict[str, list[int]] | None = None
                 ) -> None:
        self.single = _parse_template(single, "single")
        self.pair = _parse_template(pair if pair is not None else "$A $B:1", "pair")
        specials: dict[str, list[int]] = {}
        if isinstance(special_tokens, dict):
            specials = {k: list(v) for k, v in special_tokens.items()}
        else:
            specials = {tok: [i] for tok, i in special_tokens or []}
        self.special_tokens = specials
        for item in self.single + self.pair:
            if item[0] == "special" and item[1] not in specials:
                raise InputError(f"template uses special token {item[1]!r} but special_tokens "
                                 "does not give its id")
        if any(kind == "sequence" and name == "B" for kind, name, _ in self.single):
            raise InputError("the single template cannot use $B")

    def added_tokens(self, is_pair: bool) -> int:
        """How many tokens the template adds (what truncation must leave room for)."""
        items = self.pair if is_pair else self.single
        return sum(len(self.special_tokens[name]) for kind, name, _ in items if kind == "special")

    @property
    def first_input(self) -> str:
        """"A" or "B": the input the pair template names first (the order in which tokenizers
        pairs the overflowing windows of the two)."""
        return next((name for kind, name, _ in self.pair if kind == "sequence"), "A")

    def keeps_single(self) -> bool:
        """Whether :meth:`process` gives a single input's encoding back as it is: no (the
        template lays it out anew, retyped)."""
        return False

    def passes_single(self) -> bool:
        """Whether, without special tokens, a single input comes out as it went in, marked as
        input 0: the single template's one sequence has type id 0 (and :meth:`process` is
        this class's own)."""
        return type(self).process is TemplateProcessing.process and \
            [item for item in self.single if item[0] == "sequence"] == [("sequence", "A", 0)]

    # _single_shape's, with the template and special tokens it was made from (also where a
    # subclass's own __init__, or an older pickle, never set it); and _pair_plan's
    _shape_kept: tuple[list[Item], dict[str, list[int]], _Shape | None] | None = None
    _pair_kept: tuple[list[Item], dict[str, list[int]], _PairPlan | None] | None = None

    # Whether the inputs keep the marks they hold (of the inputs their tokens are of) beside
    # the template's: tokenizers' template adds its own to theirs, its BERT and RoBERTa
    # processors put theirs in place (but for a layout without special tokens).
    keeps_marks = True

    def process(self, a: Encoding, b: Encoding | None = None, add_special_tokens: bool = True,
                *, overflow: tuple[bool, bool] = (False, False)) -> Encoding:
        """The template's layout of ``a`` (and ``b``). ``overflow`` says which input is an
        overflowing window rather than the first: as in tokenizers, such a window keeps the
        type id it was encoded with (0 for $A, 1 for $B) instead of the template's."""
        if add_special_tokens and type(self).process is TemplateProcessing.process:
            around = self._around_single(a) if b is None else self._around_pair(a, b, overflow)
            if around is not None:
                return around
        layout: list[Layout] = []
        for kind, name, tid in self.pair if b is not None else self.single:
            # Without special tokens the inputs still take the template's type ids, as in
            # Hugging Face.
            if kind == "sequence":
                seq = a if name == "A" else b
                assert seq is not None  # the single template never names $B (checked above)
                second = name == "B"
                if overflow[second]:
                    tid = int(second)
                layout.append((seq, tid, int(second)))  # (marked as input 0 or 1)
            elif add_special_tokens:
                layout.append((self.special_tokens[name], name, tid))
        return Encoding.laid_out(layout, self.keeps_marks or not add_special_tokens)

    def _around_single(self, a: Encoding) -> Encoding | None:
        """process of ``a`` alone with special tokens, where the single template is special
        tokens of type id 0 around one $A of type id 0 and ``a`` has no type ids, masks or
        tokens of its own: the layout made at once (Encoding.laid_out's walk over the parts
        was most of what a line through Mistral's tokenizer.json cost over the core). None
        where it does not apply."""
        if a._type_ids is not None or a._attention_mask is not None or \
                a._special_tokens_mask is not None or a._tokens is not None or \
                a._id_to_token is None or a._ranges not in (None, _WHOLE):
            return None
        to_token = a._id_to_token
        shape = self._single_shape()
        if shape is None:
            return None
        before, after, names = shape
        for i, name in names:  # (its tokens then stay unmade: the id -> token function names them)
            if (to_token(i) or "") != name:
                return None
        starts, ends = a._starts_ends()
        k, m, n = len(before), len(after), len(a.ids)
        if type(a.ids) is not list or type(starts) is not list or type(ends) is not list or \
                len(starts) != n or len(ends) != n:
            return None  # (the core's layout takes lists alone, of one length)
        one_word = a._words is ONE_WORD
        laid = _core.lay_out_single(before, a.ids, starts, ends, after, one_word)
        out = Encoding(laid[0], None, (laid[1], laid[2]), None, None, laid[3],
                       id_to_token=to_token, sequence_ranges={0: (k, k + n)})
        if one_word:  # (its words made at once: a list of n zeros is made either way)
            out._words = laid[4]
        elif a._words is not None:
            out._words = (k, *_word_parts(a), m)
            out._made_at = a._made_at
        return out

    def _around_pair(self, a: Encoding, b: Encoding,
                     overflow: tuple[bool, bool]) -> Encoding | None:
        """process of ``a`` and ``b`` with special tokens, where both are of one id -> token
        function, encoded at one time, and have no type ids, masks, tokens or input marks of
        their own: the pair template's layout made in one native call, as Encoding.laid_out
        would make it (its walk over the parts was most of a Mistral pair's encode). None
        where it does not apply. (Its checks are _around_single's, written out in each:
        shared as two helpers and a kept-plan function, they cost a Mistral line's single
        layout 1.8 -> 2.2 us, and a native layout shared with it 0.40 -> 0.84 us.)"""
        plan = self._pair_plan()
        to_token = a._id_to_token
        if plan is None or to_token is None or (a._words is not None and b._words is not None
                                                and a._made_at != b._made_at):
            return None
        for e in (a, b):
            if e._type_ids is not None or e._attention_mask is not None or \
                    e._special_tokens_mask is not None or e._tokens is not None or \
                    e._ranges is not None or type(e.ids) is not list or \
                    (e._id_to_token is not to_token and e._id_to_token != to_token):
                return None
        for i, name in plan.names:  # (its tokens then stay unmade: the function names them)
            if (to_token(i) or "") != name:
                return None
        na, nb = len(a.ids), len(b.ids)
        sa, ea = a._starts_ends()
        sb, eb = b._starts_ends()
        if type(sa) is not list or type(ea) is not list or type(sb) is not list or \
                type(eb) is not list or len(sa) != na or len(ea) != na or len(sb) != nb or \
                len(eb) != nb:  # (ids a caller changed)
            return None
        pieces = plan.pieces.copy()
        pieces[plan.at_a] = (a.ids, sa, ea)
        pieces[plan.at_b] = (b.ids, sb, eb)
        types = plan.types
        if overflow[0] or overflow[1]:  # (a window keeps the type id it was encoded with)
            types = types.copy()
            if overflow[0]:
                types[plan.at_a] = 0
            if overflow[1]:
                types[plan.at_b] = 1
        laid = _core.lay_out_pieces(pieces, types)
        start_a = plan.specials_before_a + (0 if plan.a_first else nb)
        start_b = plan.specials_before_b + (na if plan.a_first else 0)
        ranges = {0: (start_a, start_a + na), 1: (start_b, start_b + nb)} if plan.a_first \
            else {1: (start_b, start_b + nb), 0: (start_a, start_a + na)}
        out = Encoding(laid[0], None, (laid[1], laid[2]), laid[3], None,
                       laid[4] if plan.special else None, id_to_token=to_token,
                       sequence_ranges=ranges)
        if a._words is not None or b._words is not None:  # (as laid_out keeps its parts')
            first, second = (a, b) if plan.a_first else (b, a)
            edges = plan.word_edges
            out._words = edges[0] + _word_parts_or_count(first) + edges[1] + \
                _word_parts_or_count(second) + edges[2]
            out._made_at = (a if a._words is not None else b)._made_at
        return out

    def _pair_plan(self) -> _PairPlan | None:
        """The pair template as _around_pair lays it out, where it names $A and $B once each,
        with type ids the core takes; else None. Kept with copies of the template and its
        special tokens, as _single_shape is."""
        kept = self._pair_kept
        if kept is not None and kept[0] == self.pair and kept[1] == self.special_tokens:
            return kept[2]
        plan = _PairPlan.of(self.pair, self.special_tokens)
        self._pair_kept = ([*self.pair],
                           {name: [*ids] for name, ids in self.special_tokens.items()}, plan)
        return plan

    def _single_shape(self) -> _Shape | None:
        """The single template as (ids before $A, ids after it, each special id and its
        name), where it is special tokens of type id 0 around one $A of type id 0; else None.
        (Kept with copies of the template and its special tokens, and made again when they
        differ: both may be changed in place, where a shape kept by their identity went
        stale. The comparison costs half of making it. The lists returned are not to be
        changed.)"""
        kept = self._shape_kept
        if kept is not None and kept[0] == self.single and kept[1] == self.special_tokens:
            return kept[2]
        shape = self._make_single_shape()
        self._shape_kept = ([*self.single],
                            {name: [*ids] for name, ids in self.special_tokens.items()}, shape)
        return shape

    def _make_single_shape(self) -> _Shape | None:
        before: list[int] = []
        after: list[int] = []
        names: list[tuple[int, str]] = []
        seen = False
        for kind, name, tid in self.single:
            if tid != 0 or (kind == "sequence" and (seen or name != "A")):
                return None
            if kind == "sequence":
                seen = True
                continue
            ids = self.special_tokens[name]
            (after if seen else before).extend(ids)
            names += [(i, name) for i in ids]
        return (before, after, names) if seen else None

    def to_dict(self) -> dict[str, Any]:
        def items(template: list[Item]) -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for kind, name, tid in template:
                key = "Sequence" if kind == "sequence" else "SpecialToken"
                out.append({key: {"id": name, "type_id": tid}})
            return out

        return {"type": "TemplateProcessing", "single": items(self.single),
                "pair": items(self.pair),
                "special_tokens": {k: {"id": k, "ids": v, "tokens": [k] * len(v)}
                                   for k, v in self.special_tokens.items()}}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> TemplateProcessing:
        def template(name: str) -> list[str]:
            words: list[str] = []
            for i, item in enumerate(field(data, name, list, where)):
                at = f"{where}.{name}[{i}]"
                if not isinstance(item, dict) or len(item) != 1:
                    raise FormatError(f"{at}: expected {{\"Sequence\": ...}} or "
                                      "{\"SpecialToken\": ...}")
                (key, body), = item.items()
                if key not in ("Sequence", "SpecialToken") or not isinstance(body, dict):
                    raise FormatError(f"{at}: expected {{\"Sequence\": ...}} or "
                                      "{\"SpecialToken\": ...}")
                ident = field(body, "id", str, at + "." + key)
                tid = field(body, "type_id", int, at + "." + key, 0)
                words.append(f"${ident}:{tid}" if key == "Sequence" else f"{ident}:{tid}")
            return words

        specials: dict[str, list[int]] = {}
        for name, body in field(data, "special_tokens", dict, where, {}).items():
            at = f"{where}.special_tokens.{name}"
            if not isinstance(body, dict):
                raise FormatError(f"{at}: expected an object with \"ids\"")
            ids = field(body, "ids", list, at)
            if not all(isinstance(i, int) for i in ids):
                raise FormatError(f"{at}.ids: expected a list of integers")
            specials[name] = ids
        try:
            return cls(template("single"), template("pair"), specials)
        except InputError as e:
            raise FormatError(f"{where}: {e}") from None


@register("post_processor", "ByteLevel")
@dataclass(frozen=True)
class ByteLevel(ByteLevelFields):
    """GPT-2's post-processor: adds no tokens; with ``trim_offsets``, a token's offsets leave
    out the spaces at its ends (so " world" points at "world").

    As in Hugging Face: a token's leading and trailing spaces (``Ġ`` or whitespace) move its
    start right and its end left, never past each other; with ``add_prefix_space``, a single
    leading space of the first token (or of one starting at 0) is kept, since the
    pre-tokenizer added it. ``use_regex`` only round-trips the file format.

    >>> e = Encoding([10, 11], ["Hi", "Ġyou"], [(0, 2), (2, 6)])
    >>> ByteLevel(trim_offsets=True).process(e).offsets
    [(0, 2), (3, 6)]
    >>> ByteLevel(trim_offsets=False).process(e).offsets
    [(0, 2), (2, 6)]
    """

    _: KW_ONLY
    add_prefix_space: bool = True
    trim_offsets: bool = True
    use_regex: bool = True

    first_input = "A"

    def added_tokens(self, is_pair: bool) -> int:
        return 0

    def keeps_single(self) -> bool:
        """Whether :meth:`process` gives a single input's encoding back as it is: without
        trim_offsets (GPT-2's case)."""
        return not self.trim_offsets

    def process(self, a: Encoding, b: Encoding | None = None, add_special_tokens: bool = True,
                *, overflow: tuple[bool, bool] = (False, False)) -> Encoding:
        """The inputs one after the other, the second with type id 1 (overflowing windows
        or not: ``overflow`` is taken for the other processors' sake)."""
        if b is None and self.keeps_single():
            # Nothing to change but the mark every post-processor puts on its input, which
            # tokenizers' puts on a copy (here the encoding stays lazy)
            a.set_sequence_id(0)
            return a
        parts = [a] if b is None else [a, b]
        if self.trim_offsets:
            parts = [p.replace(offsets=trimmed_offsets(p, self.add_prefix_space)) for p in parts]
        return Encoding.laid_out([(p, None if b is None else k, k) for k, p in enumerate(parts)])


def trimmed_offsets(e: Encoding, add_prefix_space: bool) -> list[tuple[int, int]]:
    """``e``'s offsets without the spaces at its tokens' ends (the ByteLevel and RoBERTa
    post-processors' trim_offsets; see ByteLevel)."""
    out = []
    for i, (token, (start, end)) in enumerate(zip(e.tokens, e.offsets)):
        leading = len(token) - len(token.lstrip(_SPACES))
        trailing = len(token) - len(token.rstrip(_SPACES))
        if leading and not (add_prefix_space and leading == 1 and (i == 0 or start == 0)):
            start = min(start + leading, end)
        if trailing and end >= trailing:
            end = max(end - trailing, start)
        out.append((start, end))
    return out


@register("post_processor", "RobertaProcessing")
@dataclass(frozen=True)
class RobertaProcessing:
    """RoBERTa's post-processor: ``<s> A </s>``, and ``<s> A </s> </s> B </s>`` for a pair,
    every type id 0 (the second input's too, as Hugging Face gives them); with
    ``trim_offsets``, offsets trimmed of their spaces as the ByteLevel post-processor trims
    them (``add_prefix_space`` keeps the one space the pre-tokenizer added).

    >>> p = RobertaProcessing(("</s>", 2), ("<s>", 0))
    >>> e = p.process(Encoding([31414], ["Hello"], [(0, 5)]), Encoding([232], ["Ġthere"],
    ...               [(5, 11)]))
    >>> e.ids, e.type_ids
    ([0, 31414, 2, 2, 232, 2], [0, 0, 0, 0, 0, 0])
    >>> e.offsets  # (B's first token keeps its space: first of its input, as in Hugging Face)
    [(0, 0), (0, 5), (0, 0), (0, 0), (5, 11), (0, 0)]
    """

    sep: tuple[str, int]
    cls: tuple[str, int]
    _: KW_ONLY
    trim_offsets: bool = True
    add_prefix_space: bool = True

    first_input = "A"

    def added_tokens(self, is_pair: bool) -> int:
        return 4 if is_pair else 2

    def keeps_single(self) -> bool:
        return False

    def process(self, a: Encoding, b: Encoding | None = None, add_special_tokens: bool = True,
                *, overflow: tuple[bool, bool] = (False, False)) -> Encoding:
        """The layout above; ``overflow`` is taken for the other processors' sake (every type
        id is 0 here, overflowing windows' too)."""
        inputs = [a] if b is None else [a, b]
        if self.trim_offsets:
            inputs = [e.replace(offsets=trimmed_offsets(e, self.add_prefix_space))
                      for e in inputs]
        marked: list[Layout] = [(e, 0, k) for k, e in enumerate(inputs)]
        if not add_special_tokens:
            return Encoding.laid_out(marked)
        cls: Layout = ([self.cls[1]], self.cls[0], 0)
        sep: Layout = ([self.sep[1]], self.sep[0], 0)
        layout = [cls, marked[0], sep]
        if b is not None:
            layout += [sep, marked[1], sep]
        return Encoding.laid_out(layout, own_marks=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "RobertaProcessing", "sep": list(self.sep), "cls": list(self.cls),
                "trim_offsets": self.trim_offsets, "add_prefix_space": self.add_prefix_space}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> RobertaProcessing:
        def token(name: str, default: tuple[str, int]) -> tuple[str, int]:
            value = field(data, name, list, where, list(default))
            if len(value) != 2 or not isinstance(value[0], str) or type(value[1]) is not int:
                raise FormatError(f"{where}.{name}: expected [token, id], got {value!r}")
            return value[0], value[1]

        return cls(token("sep", ("</s>", 2)), token("cls", ("<s>", 0)),
                   trim_offsets=field(data, "trim_offsets", bool, where, True),
                   add_prefix_space=field(data, "add_prefix_space", bool, where, True))
