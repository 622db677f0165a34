"""Post-processors: the ByteLevel processor's trim_offsets, TemplateProcessing's type ids, each
against `tokenizers` on a small byte-level tokenizer, and the file schema."""

from __future__ import annotations

import doctest
import gc
import json
from typing import Any, cast

import pytest
import tokenizers
from tokenizers import processors as hf

from tokenmill import BPE, AddedToken, Tokenizer, _core, _registry, processors
from tokenmill.encoding import Encoding
from tokenmill.errors import FormatError, InputError
from tokenmill.pre_tokenizers import ByteLevel as ByteLevelPieces
from tokenmill.processors import ByteLevel, TemplateProcessing


def encoding(tokens: list[str], offsets: list[tuple[int, int]]) -> Encoding:
    return Encoding(list(range(len(tokens))), tokens, offsets)


# ---- known answers ---------------------------------------------------------------------------

def test_trim_offsets_leaves_out_the_spaces_at_the_ends() -> None:
    e = encoding(["Hello", "Ġ", "Ġworld", "ĠĠ", "xĠ"], [(0, 5), (5, 6), (6, 12), (12, 14),
                                                      (14, 16)])
    assert ByteLevel(add_prefix_space=False).process(e).offsets == [
        (0, 5), (6, 6), (7, 12), (14, 14), (14, 15)]


def test_trim_offsets_keeps_the_added_prefix_of_the_first_token() -> None:
    e = encoding(["Ġa", "Ġb"], [(0, 1), (1, 3)])
    assert ByteLevel(add_prefix_space=True).process(e).offsets == [(0, 1), (2, 3)]
    assert ByteLevel(add_prefix_space=False).process(e).offsets == [(1, 1), (2, 3)]
    # Two leading spaces were not both added: they are trimmed.
    e = encoding(["ĠĠa"], [(0, 3)])
    assert ByteLevel(add_prefix_space=True).process(e).offsets == [(2, 3)]


def test_trim_offsets_counts_whitespace_of_added_tokens() -> None:
    e = encoding(["a", " xyz ", "\u3000q"], [(0, 1), (1, 6), (6, 8)])
    assert ByteLevel(add_prefix_space=False).process(e).offsets == [(0, 1), (2, 5), (7, 8)]


def test_without_trim_offsets_nothing_changes_but_pair_type_ids() -> None:
    a = encoding(["Ġa"], [(0, 2)])
    b = encoding(["Ġb", "c"], [(0, 2), (2, 3)])
    out = ByteLevel(trim_offsets=False).process(a, b)
    assert (out.ids, out.offsets, out.type_ids) == ([0, 0, 1], [(0, 2), (0, 2), (2, 3)],
                                                    [0, 1, 1])
    assert ByteLevel().added_tokens(True) == 0


def test_template_keeps_type_ids_without_special_tokens() -> None:
    p = TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                           special_tokens=[("<s>", 1)])
    a, b = encoding(["x"], [(0, 1)]), encoding(["y", "z"], [(0, 1), (1, 2)])
    with_specials = p.process(a, b)
    assert (with_specials.ids, with_specials.type_ids) == ([1, 0, 1, 0, 1], [0, 0, 1, 1, 1])
    assert with_specials.special_tokens_mask == [1, 0, 1, 0, 0]
    plain = p.process(a, b, add_special_tokens=False)
    assert (plain.ids, plain.type_ids) == ([0, 0, 1], [0, 1, 1])


def test_docstring_examples_run() -> None:
    assert doctest.testmod(processors).failed == 0


# ---- the same offsets as `tokenizers` --------------------------------------------------------

def byte_level_tokenizer(prefix_in_pre_tokenizer: bool, processor: Any) -> Tokenizer:
    alphabet = ByteLevelPieces.alphabet()
    vocab = {c: i for i, c in enumerate(alphabet)}
    merges = [("Ġ", "a"), ("Ġ", "Ġ"), ("ĠĠ", "Ġ"), ("Ġ", "w"), ("Ġw", "o"), ("Ġ", "æ")]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    added = [AddedToken(" xyz ", len(vocab), special=False),
             AddedToken("\u3000q", len(vocab) + 1, special=False)]
    return Tokenizer(BPE(vocab, merges),
                     pre_tokenizer=ByteLevelPieces(add_prefix_space=prefix_in_pre_tokenizer),
                     post_processor=processor, added_tokens=added)


TEXTS = ["Hello  world ", " a", "  a", "a  \n", " \u3000b", "日本 語", "a xyz b", "\u3000q",
         "   wo  ", ""]


@pytest.mark.parametrize("prefix_in_pre_tokenizer", [False, True])
@pytest.mark.parametrize("prefix", [False, True])
@pytest.mark.parametrize("trim", [False, True])
def test_same_offsets_as_tokenizers(prefix_in_pre_tokenizer: bool, prefix: bool,
                                    trim: bool) -> None:
    ours = byte_level_tokenizer(prefix_in_pre_tokenizer,
                                ByteLevel(add_prefix_space=prefix, trim_offsets=trim))
    theirs = tokenizers.Tokenizer.from_str(ours.to_str())
    for text in TEXTS:
        for pair in (None, "  wo a"):
            got, expected = ours.encode(text, pair), theirs.encode(text, pair)
            assert (got.ids, got.offsets, got.type_ids) == \
                (expected.ids, expected.offsets, expected.type_ids), (text, pair)


def test_template_same_as_tokenizers_with_and_without_special_tokens() -> None:
    template = TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                  special_tokens=[("<s>", 0)])
    ours = byte_level_tokenizer(False, template)
    theirs = tokenizers.Tokenizer.from_str(ours.to_str())
    for add in (True, False):
        got, expected = ours.encode("a b", " wo", add_special_tokens=add), \
            theirs.encode("a b", " wo", add_special_tokens=add)
        assert (got.ids, got.offsets, got.type_ids, got.special_tokens_mask) == \
            (expected.ids, expected.offsets, expected.type_ids, expected.special_tokens_mask)


def every_field(e: Encoding) -> tuple[Any, ...]:
    return (e.ids, e.tokens, e.offsets, e.type_ids, e.attention_mask, e.special_tokens_mask,
            e.word_ids, e.sequence_ids, e.n_sequences, [every_field(o) for o in e.overflowing])


def tokenizer_with_specials() -> tuple[Tokenizer, list[tuple[str, int]]]:
    """The byte-level tokenizer with <s>, </s> and <t> added, and the templates' special
    tokens: those three, and "<m>", named so by the template and "a" by the vocabulary."""
    tok = byte_level_tokenizer(False, None)
    tok.add_special_tokens(["<s>", "</s>", "<t>"])
    names = ("<s>", "</s>", "<t>", "a")
    ids = [(name, tok.token_to_id(name)) for name in names]
    return tok, [("<m>" if name == "a" else name, cast(int, i)) for name, i in ids]


TEMPLATES = ["<s> $A", "$A </s>", "<s> $A </s>", "<s> <t> $A </s> <t>", "$A", "<m> $A",
             "<s> $A:1", "<s>:1 $A", "<s> $A </s>:2"]


@pytest.mark.parametrize("single", TEMPLATES)
def test_a_single_input_laid_out_at_once_as_the_walk_lays_it_out(single: str) -> None:
    # TemplateProcessing lays out one input between special tokens of type id 0 at once; the
    # walk over the layout's parts (Encoding.laid_out) must give every field alike: lazy
    # tokens (and a special token the vocabulary spells otherwise, "<m>"), words of each
    # kind, the input marked or not.
    from tokenmill.encoding import _WHOLE, ONE_WORD

    tok, specials = tokenizer_with_specials()
    template = TemplateProcessing(single=single, special_tokens=specials)
    walk = TemplateProcessing(single=single, special_tokens=specials)
    walk._single_shape = lambda: None  # type: ignore[method-assign]
    text = "a bc"  # (four tokens: a, Ġ, b, c)
    for words in (None, ONE_WORD, tok.encode(text).word_ids, text, ("a", 3)):
        for ranges in (None, _WHOLE):
            e = tok.encode(text, add_special_tokens=False)
            e._words, e._ranges = words, ranges
            fast, slow = template.process(e), walk.process(e)
            assert every_field(fast) == every_field(slow), (words, ranges)


PAIR_TEMPLATES = ["<s> $A <s>:1 $B:1", "<s> $A </s> $B:1 </s>:1", "$A $B", "$A:1 $B:0",
                  "<s> <t> $A </s> $B:1 <t>:2", "$B:1 <m> $A", "<s>:1 $A:2 </s> $B:3",
                  "<s> $A $B:1 $A:2", "$B:1 <s> $A <t>"]


@pytest.mark.parametrize("pair", PAIR_TEMPLATES)
def test_a_pair_laid_out_at_once_as_the_walk_lays_it_out(pair: str) -> None:
    # The pair template's layout in one core call (_around_pair) against the walk over the
    # parts: every field, for words of each kind, inputs marked or not, overflowing windows
    # (which keep the type id they were encoded with), words encoded at different times.
    from tokenmill.encoding import _WHOLE, ONE_WORD

    tok, specials = tokenizer_with_specials()
    ids = {name: [i] for name, i in specials}
    ids["<t>"] *= 2  # (a special token of two ids)
    template = TemplateProcessing(single="$A", pair=pair, special_tokens=ids)
    walk = TemplateProcessing(single="$A", pair=pair, special_tokens=ids)
    walk._around_pair = lambda *args: None  # type: ignore[method-assign]
    taken = []
    real = template._around_pair

    def counted(*args: Any) -> Any:
        out = real(*args)
        taken.append(out is not None)
        return out

    template._around_pair = counted  # type: ignore[method-assign]
    texts = ("a bc", "cb a b")
    kinds = (None, ONE_WORD, "text", "parts")

    def words_of(kind: Any, e: Encoding, text: str) -> Any:
        return text if kind == "text" else ("a", len(e.ids) - 1) if kind == "parts" else kind

    for words_a in kinds:
        for words_b in kinds:
            for ranges in (None, _WHOLE):
                for overflow in ((False, False), (True, False), (False, True)):
                    a, b = (tok.encode(t, add_special_tokens=False) for t in texts)
                    a._words = words_of(words_a, a, texts[0])
                    b._words = words_of(words_b, b, texts[1])
                    a._ranges = b._ranges = ranges
                    b._made_at = a._made_at
                    fast = template.process(a, b, overflow=overflow)
                    slow = walk.process(a, b, overflow=overflow)
                    assert every_field(fast) == every_field(slow), (words_a, words_b, overflow)
    # Taken where nothing is marked, every special token is spelled as its name (not "<m>")
    # and each input is named once; declined elsewhere.
    assert any(taken) != ("<m>" in pair or pair.count("$A") > 1) and not all(taken)
    a, b = (tok.encode(t, add_special_tokens=False) for t in texts)
    a._ranges = b._ranges = None
    a._words, b._words = texts
    tok.add_tokens(["zz"])  # (b encoded again after the tokenizer changed: the walk binds
    b2 = tok.encode(texts[1], add_special_tokens=False)  # each part's words to its own time)
    b2._ranges, b2._words = None, texts[1]
    assert template.process(a, b2).ids == walk.process(a, b2).ids
    # Ids a caller lengthened (their offsets now shorter) take the walk, as before.
    a.ids = a.ids + [a.ids[0]]
    assert template.process(a, b2).ids == walk.process(a, b2).ids
    with pytest.raises(InputError, match="the tokenizer changed"):
        template.process(a, b2).word_ids  # noqa: B018 (a's words, of the old tokenizer)


def test_the_cores_layout_of_pieces() -> None:
    out = _core.lay_out_pieces([[1], ([7, 8], [0, 2], [2, 5]), [2, 3], ([9], [0], [4])],
                               [0, 0, 1, 1])
    assert out == ([1, 7, 8, 2, 3, 9], [0, 0, 2, 0, 0, 0], [0, 2, 5, 0, 0, 4],
                   [0, 0, 0, 1, 1, 1], [1, 0, 0, 1, 1, 0])
    assert not any(gc.is_tracked(items) for items in out if items is not None)
    assert _core.lay_out_pieces([([7], [0], [1]), []], [0, 0]) == ([7], [0], [1], None, [0])
    assert _core.lay_out_pieces([], []) == ([], [], [], None, [])
    with pytest.raises(TypeError):
        _core.lay_out_pieces([(1,)], [0])
    with pytest.raises(TypeError):
        _core.lay_out_pieces([[1]], [0, 1])
    with pytest.raises(TypeError):
        _core.lay_out_pieces([[1]], [0.0])
    with pytest.raises(ValueError, match="differ in length"):
        _core.lay_out_pieces([([1], [0], [])], [0])


MUTATED_DURING_LAYOUT = """
import gc
from tokenmill import _core
pieces, types = [[7], ([1, 2, 3], [0, 1, 2], [1, 2, 3])], [0, 0]
armed, hit = [], []
class Cycle:
    def __init__(self): self.me = self
    def __del__(self):
        if armed and not hit:
            pieces[1] = ("abc", "xyz", "xyz")  # (no lists: read as lists, a crash)
            hit.append(1)
        Cycle()
Cycle()
gc.set_threshold(1)  # (a collection at each allocation, finalizers run)
spare = [[] for _ in range(200)]  # (the free lists of lists used up: new lists allocate)
armed.append(1)
try:
    out = _core.lay_out_pieces(pieces, types)
    print("laid out", bool(hit), out)
except (TypeError, RuntimeError) as e:
    print("refused", bool(hit), e)
"""


def test_the_cores_layout_of_pieces_changed_while_in_use() -> None:
    # A finalizer run by the collector during the layout's allocations replaces an input
    # with a tuple of strings: checked again before anything is written, it is refused (it
    # was read as lists: a segmentation fault).
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", MUTATED_DURING_LAYOUT], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("refused True lay_out_pieces: "), run.stdout


def test_the_cores_single_layout() -> None:
    # (TemplateProcessing._around_single's lists: special tokens around the input, spanning
    # (0, 0), marked in the special-tokens mask; untracked, as the core's id lists are)
    out = _core.lay_out_single([1], [7, 8], [0, 2], [2, 5], [2, 3])
    assert out == ([1, 7, 8, 2, 3], [0, 0, 2, 0, 0], [0, 2, 5, 0, 0], [1, 0, 0, 1, 1])
    assert not any(gc.is_tracked(items) for items in out)
    assert _core.lay_out_single([], [], [], [], []) == ([], [], [], [])
    assert _core.lay_out_single([4, 5], [], [], [], []) == ([4, 5], [0, 0], [0, 0], [1, 1])
    words = _core.lay_out_single([1], [7, 8], [0, 2], [2, 5], [2, 3], True)[4]
    assert words == [None, 0, 0, None, None] and not gc.is_tracked(words)
    with pytest.raises(TypeError):
        _core.lay_out_single((1,), [], [], [], [])
    with pytest.raises(ValueError, match="differ in length"):
        _core.lay_out_single([], [1], [], [0], [])


def test_the_short_layout_for_a_subclass_of_its_own_and_ids_not_in_a_list() -> None:
    # (a subclass that sets the fields in its own __init__ has no kept shape; ids held in a
    # list's subclass take the walk over the parts, the core's layout taking lists alone)
    base = TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])

    class Own(TemplateProcessing):
        def __init__(self) -> None:  # noqa: D107 (sets the fields itself, as old code may)
            self.single, self.pair = base.single, base.pair
            self.special_tokens = base.special_tokens

    class Ids(list):  # type: ignore[type-arg]
        pass

    def to_token(i: int) -> str | None:
        return {1: "<s>", 7: "a", 8: "b"}.get(i)

    for ids in ([7, 8], Ids([7, 8])):
        e = Encoding(ids, offsets=([0, 1], [1, 2]), id_to_token=to_token)
        for template in (base, Own()):
            out = template.process(e)
            assert (out.ids, out.offsets, out.special_tokens_mask) == \
                ([1, 7, 8], [(0, 0), (0, 1), (1, 2)], [1, 0, 0])


def test_a_template_changed_in_place_lays_out_as_changed() -> None:
    # (the short layout reads the template each call: a copy kept by identity went stale)
    tok = byte_level_tokenizer(False, None)
    tok.add_special_tokens(["<s>", "</s>"])
    s, e = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    template = TemplateProcessing(single="<s> $A", special_tokens=[("<s>", s)])
    tok.post_processor = template
    plain = tok.encode("a", add_special_tokens=False).ids
    assert tok.encode("a").ids == [s, *plain]
    template.single.append(("special", "</s>", 0))
    template.special_tokens["</s>"] = [e]
    assert tok.encode("a").ids == [s, *plain, e]
    template.special_tokens["<s>"].append(e)
    assert tok.encode("a").ids == [s, e, *plain, e]
    assert template.added_tokens(False) == 3


# ---- the file schema -------------------------------------------------------------------------

SCHEMA = [
    (ByteLevel(), hf.ByteLevel()),
    (ByteLevel(add_prefix_space=False, trim_offsets=False),
     hf.ByteLevel(add_prefix_space=False, trim_offsets=False)),
    (ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=False),
     hf.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=False)),
]


@pytest.mark.parametrize(("ours", "theirs"), SCHEMA, ids=repr)
def test_to_dict_is_what_tokenizers_writes(ours: ByteLevel, theirs: Any) -> None:
    assert ours.to_dict() == json.loads(theirs.__getstate__())
    assert _registry.build("post_processor", ours.to_dict(), "x") == ours


def test_old_files_lack_use_regex() -> None:
    old = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False}
    assert _registry.build("post_processor", old, "x") == ByteLevel(trim_offsets=False)


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"type": "ByteLevel", "trim_offsets": False}, "x.add_prefix_space"),
        ({"type": "ByteLevel", "add_prefix_space": True}, "x.trim_offsets"),
        ({"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": 0}, "x.trim_offsets"),
        ({"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
          "use_regex": "yes"}, "x.use_regex"),
    ],
)
def test_malformed_dicts_name_the_field(data: object, path: str) -> None:
    with pytest.raises(FormatError) as caught:
        _registry.build("post_processor", data, "x")
    assert str(caught.value).startswith(path + ":")
