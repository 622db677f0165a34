"""encode_batch through the core on threads: the same Encodings as encode gives each input,
in input order, with the same errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenmill
from tokenmill import Tokenizer
from tokenmill.encoding import Padding, Truncation
from tokenmill.errors import InputError

TEXTS = ["Hello world!", "", "日本語のテキスト 😀👍🏽", "def f(x):\n    return x ** 2\n", " a  b ",
         "one<|endoftext|>two", "<|endoftext|>", "x" * 5000]


@pytest.fixture(scope="module")
def cl100k(shared_data):
    return tokenmill.load("cl100k_base", path=shared_data / "tokenizers" / "tiktoken")


@pytest.fixture(scope="module")
def gpt2(shared_data):
    return Tokenizer.from_file(shared_data / "tokenizers" / "gpt2" / "tokenizer.json")


@pytest.fixture(scope="module")
def bert(shared_data):
    return tokenmill.load(shared_data / "tokenizers" / "bert-base-uncased")


def fields(e):
    return (e.ids, e.tokens, e.offsets, e.type_ids, e.attention_mask, e.special_tokens_mask,
            [fields(o) for o in e.overflowing])


def one_by_one(tok, inputs, **options):
    return [fields(tok.encode(*((i,) if isinstance(i, str) else i), **options)) for i in inputs]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_gpt2_file_batch_equals_one_by_one(gpt2, threads):
    # An added token in the text ("match", as Hugging Face does): segments around it.
    assert gpt2.native_plan() is not None
    batch = gpt2.encode_batch(TEXTS, num_threads=threads)
    assert [fields(e) for e in batch] == one_by_one(gpt2, TEXTS)
    assert batch[5].ids == gpt2.encode("one").ids + [50256] + gpt2.encode("two").ids
    assert batch[5].offsets[len(gpt2.encode("one").ids)] == (3, 16)


def test_tiktoken_specials_raise_in_a_batch_as_one_by_one(cl100k):
    plain = [t for t in TEXTS if "<|" not in t]
    assert [fields(e) for e in cl100k.encode_batch(plain, num_threads=2)] == \
        one_by_one(cl100k, plain)
    with pytest.raises(InputError, match="<\\|endoftext\\|>"):
        cl100k.encode("one<|endoftext|>two")
    with pytest.raises(InputError, match="<\\|endoftext\\|>"):
        cl100k.encode_batch(["fine", "one<|endoftext|>two"])
    for special in ({"allowed_special": "all"}, {"disallowed_special": ()}):
        assert [fields(e) for e in cl100k.encode_batch(TEXTS, num_threads=2, **special)] == \
            one_by_one(cl100k, TEXTS, **special)
    assert cl100k.encode_batch(["a<|endoftext|>"], allowed_special="all")[0].ids[-1] == 100257
    assert cl100k.encode_batch(["a<|endoftext|>"], dropout=1e-12, seed=0,  # Python path
                               disallowed_special=())[0].ids[-1] != 100257


@pytest.mark.parametrize("threads", [1, 2])
def test_bert_pairs_truncated_and_padded(bert, threads):
    inputs = [("Hello, World!", "How are you?"), "Just one [MASK] here.", ("", "x"),
              ("A long first text " * 20, "and a second"), "Ünïcödé ÀÉÎ"]
    cut = Truncation(max_length=16, stride=2)
    pad = Padding(pad_id=0, pad_token="[PAD]")
    batch = bert.encode_batch(inputs, truncation=cut, padding=pad, num_threads=threads)
    longest = max(len(e) for e in (bert.encode(*((i,) if isinstance(i, str) else i),
                                               truncation=cut) for i in inputs))
    expected = [fields(pad.pad(bert.encode(*((i,) if isinstance(i, str) else i),
                                           truncation=cut), longest)) for i in inputs]
    assert [fields(e) for e in batch] == expected
    assert {len(e) for e in batch} == {16}


@pytest.mark.parametrize("threads", [1, 2, 8])
def test_many_texts_keep_their_order(cl100k, threads):
    texts = [f"text number {k} " * (k % 7) for k in range(1000)]
    batch = cl100k.encode_batch(texts, num_threads=threads)
    assert [e.ids for e in batch] == cl100k.encode_ordinary_batch(texts, num_threads=1)
    assert [e.offsets for e in batch[:50]] == [cl100k.encode(t).offsets for t in texts[:50]]


def test_long_texts_offsets_past_the_kept_ints(gpt2):
    # Offsets past 2^18 are ints made for the list, not kept: equal all the same.
    text = "word " * 60_000 + "end"
    (e,) = gpt2.encode_batch([text])
    assert e.offsets[-1] == (len(text) - 4, len(text))  # " end"
    assert e.offsets == gpt2.encode(text).offsets


@pytest.mark.parametrize("threads", [1, 2])
def test_a_bad_input_is_named(gpt2, bert, threads):
    for tok in (gpt2, bert):
        with pytest.raises(InputError, match=r"inputs\[1\]"):
            tok.encode_batch(["fine", "bad \ud800 surrogate"], num_threads=threads)
        with pytest.raises(InputError, match=r"inputs\[2\]"):
            tok.encode_batch(["fine", ("a", "b"), 42], num_threads=threads)  # type: ignore[list-item]


def test_empty_batch(gpt2, bert):
    assert gpt2.encode_batch([]) == []
    assert bert.encode_batch([]) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=40),
                          st.tuples(st.text(max_size=20), st.text(max_size=20))), max_size=12),
       st.integers(1, 3))
def test_any_batch_equals_one_by_one(gpt2, bert, inputs, threads):
    for tok in (gpt2, bert):
        assert [fields(e) for e in tok.encode_batch(inputs, num_threads=threads)] == \
            one_by_one(tok, inputs)


def test_a_special_token_across_two_inputs_is_not_in_either(cl100k):
    # The batch looks for disallowed special tokens in all its texts joined by "\0", then
    # input by input: a token's text split over two inputs (or over a pair) is in neither.
    inputs = ["one <|endof", "text|> two", ("<|endof", "text|>")]
    assert [fields(e) for e in cl100k.encode_batch(inputs, num_threads=2)] == \
        one_by_one(cl100k, inputs)
    assert [fields(e) for e in cl100k.encode_batch(["<|endof\0text|>"])] == \
        one_by_one(cl100k, ["<|endof\0text|>"])


@pytest.mark.parametrize(("inputs", "bad", "named"), [
    (["fine", "also fine", "three <|fim_prefix|> <|endoftext|>", "<|endoftext|>"], 2,
     "'<|fim_prefix|>' at character 6;"),
    ([("fine", "a pair"), ("first", "second <|endoftext|>")], 1,
     "'<|endoftext|>' at character 13;"),  # (in the pair's two texts joined by "\0")
])
def test_the_first_input_holding_a_special_token_raises_as_encode(cl100k, inputs, bad, named):
    item = inputs[bad]
    with pytest.raises(InputError) as alone:
        cl100k.encode(*((item,) if isinstance(item, str) else item))
    with pytest.raises(InputError) as batched:
        cl100k.encode_batch(inputs, num_threads=2)
    assert str(batched.value) == str(alone.value)
    assert named in str(batched.value)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_cyclic_collector_is_left_as_it_was(cl100k, gpt2, enabled):
    import gc

    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        assert len(gpt2.encode_batch(TEXTS, num_threads=2)) == len(TEXTS)
        assert gc.isenabled() is enabled
        with pytest.raises(InputError):
            cl100k.encode_batch(["fine", "one<|endoftext|>two"])
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_only_byte_level_without_trimming_keeps_a_single_input(bert):
    from tokenmill.processors import ByteLevel, TemplateProcessing

    assert ByteLevel(trim_offsets=False).keeps_single()
    assert not ByteLevel(trim_offsets=True).keeps_single()
    assert not TemplateProcessing("$A", "$A $B:1", []).keeps_single()
    assert not bert.post_processor.keeps_single()  # BertProcessing, a template


def test_trimmed_offsets_in_a_batch_as_one_by_one(shared_data):
    # GPT-2's file with trim_offsets on: the batch takes _post for every input.
    from tokenmill.processors import ByteLevel

    tok = Tokenizer.from_file(shared_data / "tokenizers" / "gpt2" / "tokenizer.json")
    tok.post_processor = ByteLevel(trim_offsets=True)
    texts = ["Hello world", "  spaced  out  ", "one<|endoftext|> two"]
    batch = tok.encode_batch(texts, num_threads=2)
    assert [fields(e) for e in batch] == one_by_one(tok, texts)
    assert batch[0].offsets == [(0, 5), (6, 11)]


def test_errors_come_in_the_order_encode_meets_them(cl100k):
    # A special token in an input before a bad one raises first, as one by one.
    with pytest.raises(InputError, match="special token '<\\|endoftext\\|>' at character 0"):
        cl100k.encode_batch(["<|endoftext|>", ("a", b"x")])  # type: ignore[list-item]
    with pytest.raises(InputError, match=r"inputs\[1\]: expected a string"):
        cl100k.encode_batch(["fine", ("a", b"x"), "<|endoftext|>"])  # type: ignore[list-item]
    # A lone surrogate in an input before one holding a special token raises first, as one
    # by one; within one input, the special token does (encode looks for it first).
    for inputs, named in ((["fine", "bad \ud800", "<|endoftext|>"], "inputs[1] holds a lone "
                           "surrogate U+D800 at character 4"),
                          ([("a", "b\udfff"), "<|endoftext|>"], "inputs[0] holds a lone "
                           "surrogate U+DFFF at character 1"),
                          (["x \ud800 <|endoftext|>"], "special token '<|endoftext|>' at "
                           "character 4")):
        with pytest.raises(InputError) as alone:
            for item in inputs:
                cl100k.encode(*((item,) if isinstance(item, str) else item))
        with pytest.raises(InputError) as batched:
            cl100k.encode_batch(inputs, num_threads=2)
        assert named in str(batched.value)
        assert named.split(" ", 1)[1] in str(alone.value)  # (encode names no input)
    # An empty batch has nothing to check, whatever the options (as the Python path).
    assert cl100k.encode_batch([], allowed_special={"bogus"}) == []


def test_a_single_input_truncated_through_a_keeping_post_processor(gpt2, cl100k):
    # keeps_single says nothing of truncation: with it, _post is taken (and cuts).
    cut = Truncation(max_length=2)
    for tok in (gpt2, cl100k):
        texts = ["a b c d e", "one two three four five six"]
        batch = tok.encode_batch(texts, truncation=cut, num_threads=2)
        assert [fields(e) for e in batch] == one_by_one(tok, texts, truncation=cut)
        assert [len(e) for e in batch] == [2, 2]


def test_a_post_processor_of_ones_own_without_keeps_single(shared_data):
    tok = Tokenizer.from_file(shared_data / "tokenizers" / "gpt2" / "tokenizer.json")

    class Tagging:  # process and added_tokens only
        first_input = "A"

        def added_tokens(self, is_pair):
            return 1

        def process(self, a, b=None, add_special_tokens=True, *, overflow=(False, False)):
            from tokenmill.encoding import Encoding

            return Encoding.concat([a, Encoding([50256], ["<|endoftext|>"], [(0, 0)])])

    tok.post_processor = Tagging()
    texts = ["Hello world", "two"]
    assert [fields(e) for e in tok.encode_batch(texts)] == one_by_one(tok, texts)
    assert tok.encode_batch(texts)[1].ids[-1] == 50256


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_restored_after_an_error_while_it_is_paused(bert, enabled):
    # The pair is too long to truncate to one token: raised in _post, within the pause.
    import gc

    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        with pytest.raises(InputError):
            bert.encode_batch([("Hello there", "and more")], truncation=Truncation(max_length=1))
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


@pytest.mark.parametrize("enabled", [True, False])
def test_padding_a_batch_holds_off_the_collector_and_restores_it(bert, enabled):
    # Padding makes seven lists and an Encoding a text: 5,000 texts set off dozens of the
    # collector's runs, each a walk over every list of the batch.
    import gc

    texts = ["Hello world", "a longer line, with more words in it"] * 2_500
    padding = Padding(length=32)
    bert.encode_batch(texts[:10], padding=padding)
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        before = gc.get_stats()[0]["collections"]
        out = bert.encode_batch(texts, padding=padding, num_threads=1)
        # (a few runs come of the batch's items, made before the core's call; unpaused,
        # padding set off about a hundred)
        assert gc.get_stats()[0]["collections"] - before <= 20
        assert gc.isenabled() is enabled
        assert {len(e) for e in out} == {32} and out[1].ids == bert.encode(texts[1]).ids + \
            [0] * (32 - len(bert.encode(texts[1])))
    finally:
        gc.enable() if was else gc.disable()


def test_the_lists_of_a_laid_out_and_padded_encoding_are_left_out_of_the_collector(bert):
    # Lists of ints and strings cannot form cycles: walked at every run of the collector, an
    # encoding's lists made in Python (the template's layout, the pad) were half of encoding a
    # line at a time while the encodings were kept.
    import gc

    from tokenmill import _core

    for padding in (None, Padding(length=32), Padding(length=32, pad_token="<pad>")):
        out = bert.encode_batch(["Hello world", ("a pair", "of texts")], padding=padding)
        for e in [*out, bert.encode("Hello world")]:
            assert type(e._offsets) is tuple
            lists = [e.ids, *e._offsets, e._special_tokens_mask, e._type_ids, e._tokens,
                     e._attention_mask]
            assert not any(gc.is_tracked(x) for x in lists if x is not None)
        if padding is not None:
            assert out[0].tokens[-1] == padding.pad_token
    # Only lists, and only those holding ints, strings and None, are taken out.
    holder, nested, other = [1, "a", None], [1, []], {"a": [1]}
    _core.untrack_lists(holder, nested, other, (1, 2), None)
    assert not gc.is_tracked(holder) and gc.is_tracked(nested) and gc.is_tracked(other)
