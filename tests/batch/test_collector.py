"""What encodings and loaded tokenizers leave in the cyclic collector's sight.

Each full run of the collector walks every tracked object; a loop that keeps its encodings
makes such runs as they pile up. An encoding's own lists, tuples and dicts of ints are kept out
of its sight (the encoding itself stays: it may be part of a cycle through a script's
globals), and so are the large flat containers a tokenizer keeps (merges, pieces, character
classes): these tests pin both, and that nothing a user reaches changes for it.
"""

from __future__ import annotations

import gc
import weakref

import pytest

import tokenmill
from tokenmill import Tokenizer, _core
from tokenmill.encoding import Padding, Truncation


@pytest.fixture(scope="module")
def files(shared_data):
    root = shared_data / "tokenizers"
    return {"gpt2": Tokenizer.from_file(root / "gpt2" / "tokenizer.json"),
            "mistral": Tokenizer.from_file(root / "mistral-7b-v0.3" / "tokenizer.json"),
            "minilm": Tokenizer.from_file(root / "all-MiniLM-L6-v2" / "tokenizer.json"),
            "cl100k": tokenmill.load("cl100k_base", path=root / "tiktoken")}


def tracked_parts(e, seen=None):
    """Every object of an encoding (and of its windows) the collector still sees."""
    out = []
    for name in ("ids", "_tokens", "_offsets", "_type_ids", "_attention_mask",
                 "_special_tokens_mask", "_ranges", "_overflowing"):
        value = getattr(e, name)
        if name == "_overflowing" and value:
            continue  # (a list of windows, walked below)
        if gc.is_tracked(value):
            out.append((name, value))
        if type(value) is tuple:
            out += [(f"{name} item", v) for v in value if gc.is_tracked(v)]
    words = e._words
    # (a maker of words still to be made, shared with the windows and copies of an encoding,
    # refers to the tokenizer: it and the tuple holding it stay in sight)
    if type(words) in (tuple, list) and all(type(w) in (int, str, list) for w in words):
        out += [("_words", words)] if gc.is_tracked(words) else []
        if type(words) is tuple:
            out += [("_words item", w) for w in words if gc.is_tracked(w)]
    for window in e._overflowing or ():
        out += tracked_parts(window)
    return out


LINES = ["Hello world, this is a test.", "", "日本語のテキスト 😀", "<s> in the text [INST]",
         "def f(x):\n    return x ** 2\n", "word " * 60]


@pytest.mark.parametrize("name", ["gpt2", "mistral", "minilm", "cl100k"])
def test_the_parts_of_encodings_handed_back_are_out_of_the_collectors_sight(files, name):
    tok = files[name]
    made = [tok.encode(line) for line in LINES]
    made += [tok.encode(a, b) for a, b in zip(LINES, LINES[1:])]
    made += tok.encode_batch(LINES) + tok.encode_batch(list(zip(LINES, LINES[::-1])))
    made += tok.encode_batch(LINES, truncation=Truncation(max_length=8, stride=2),
                             padding=Padding(length=12))
    made += [tok.encode(a, b, truncation=Truncation(max_length=9, stride=1))
             for a, b in zip(LINES, LINES[1:])]
    assert any(e._overflowing for e in made)  # (windows were made, and are looked at)
    for e in made:
        assert tracked_parts(e) == [], e
    # What a user reaches is as it was: windows, words, tokens, and a list to append to.
    e = tok.encode(LINES[0])
    assert e._overflowing is None and e.overflowing == [] and e.overflowing is e.overflowing
    e.overflowing.append(tok.encode(LINES[1]))
    assert len(e.overflowing) == 1
    cut = tok.encode(LINES[-1], truncation=Truncation(max_length=8, stride=2))
    assert len(cut.overflowing) > 1 and all(sum(w.attention_mask) <= 8 for w in cut.overflowing)
    assert cut == tok.encode(LINES[-1], truncation=Truncation(max_length=8, stride=2))


def test_a_tokenizer_is_freed_once_its_encodings_are(shared_data):
    # Encodings refer to their tokenizer, which refers to none of them: it is freed as soon as
    # nothing refers to it, with the collector off, and not before its encodings.
    collecting = gc.isenabled()
    gc.disable()
    try:
        tok = Tokenizer.from_file(shared_data / "tokenizers" / "mistral-7b-v0.3" /
                                  "tokenizer.json")
        first, second = tok.encode("Hello world"), tok.encode_batch(["a b", "c"])[0]
        alive = weakref.ref(tok)
        del tok
        assert alive() is not None
        assert first.tokens == ["<s>", "▁Hello", "▁world"] and first.word_ids == [None, 0, 0]
        del first, second
        assert alive() is None
    finally:
        if collecting:
            gc.enable()


def test_large_flat_containers_of_loaded_tokenizers_are_left_out(files, shared_data):
    root = shared_data / "tokenizers"
    model = files["mistral"].model
    assert len(model.merges) > 50_000 and not gc.is_tracked(model.merges)
    assert not gc.is_tracked(model._triples)
    gpt2 = Tokenizer.from_file(root / "gpt2" / "tokenizer.json").model
    assert not gc.is_tracked(gpt2.merges) and not gc.is_tracked(gpt2._triples)
    unigram = tokenmill.load(root / "albert-spiece-fixture" / "spiece.model").model
    assert not gc.is_tracked(unigram.pieces) and not gc.is_tracked(unigram.kinds)
    files["minilm"].encode("Hello, world")  # (builds BERT's character classes)
    from tokenmill import _bert_chars

    for made in (_bert_chars.punctuation(), _bert_chars.nonspacing_marks(),
                 _bert_chars.cleaned(), _bert_chars._by_category()):
        assert not gc.is_tracked(made)
    assert not any(gc.is_tracked(v) for v in _bert_chars._by_category().values())


def test_untrack_parts_takes_out_only_what_cannot_hold_a_cycle():
    ints, strs = [1, 2, 3], ["a", None, 2.5]
    pair = (ints, strs)
    ranges = {0: (1, 5), 1: (6, 16)}
    classes = frozenset({1, 2, 3})
    holder = []
    with_list = ([1], holder)
    holder.append(with_list)  # a cycle: the tuple holds a list that holds the tuple
    odd = (1, {"a": [1, object()]})
    of_lists = {"a": [object()]}
    of_tuples = frozenset({(1, 2)})
    gc.collect()  # (the collector itself takes out tuples of atomic items)
    _core.untrack_parts(pair, ranges, classes, with_list, odd, of_lists, of_tuples, None, 3)
    assert not any(gc.is_tracked(x) for x in (pair, ints, strs, ranges, classes))
    assert gc.is_tracked(with_list) and gc.is_tracked(holder)
    assert gc.is_tracked(odd) and gc.is_tracked(of_lists) and gc.is_tracked(of_tuples)
    assert gc.is_tracked(of_lists["a"])
    merges = [("a", "b"), ("ab", "c")]
    nested = [("a", ["b"])]
    _core.untrack_lists(merges, nested)
    assert not gc.is_tracked(merges) and gc.is_tracked(nested)
    e = tokenmill.Encoding([1, 2], offsets=([0, 1], [1, 2]))
    e._settled()
    assert gc.is_tracked(e) and not gc.is_tracked(e._offsets) and not gc.is_tracked(e.ids)
    assert e.offsets == [(0, 1), (1, 2)]


def test_a_replaced_id_to_token_is_taken_at_once(shared_data):
    tok = Tokenizer.from_file(shared_data / "tokenizers" / "gpt2" / "tokenizer.json")
    kept = tok.encode("hello")
    tok.id_to_token = lambda i: f"<{i}>"  # type: ignore[method-assign]
    assert tok.encode("hello").tokens == [f"<{kept.ids[0]}>"]
    del tok.id_to_token
    assert tok.encode("hello").tokens == ["hello"] == kept.tokens


def test_cycles_through_encodings_are_still_freed(shared_data):
    # An encoding refers to its tokenizer; a tokenizer whose class is defined in a script
    # reaches that script's globals. An encoding kept in those globals is in a cycle, which
    # the collector must still free (an untracked encoding would keep it for good).
    path = shared_data / "tokenizers" / "gpt2" / "tokenizer.json"
    script = (
        "import tokenmill\n"
        "class Mine(tokenmill.Tokenizer):\n"
        "    def id_to_token(self, id):\n"
        "        return super().id_to_token(id)\n"
        f"tok = Mine.from_file({str(path)!r})\n"
        "enc = tok.encode('hello world')\n"
        "tok.last = tok.encode('again')\n")
    namespace: dict = {}
    exec(script, namespace)
    assert namespace["enc"].tokens == ["hello", "Ġworld"]
    alive = weakref.ref(namespace["tok"])
    del namespace
    gc.collect()
    assert alive() is None
