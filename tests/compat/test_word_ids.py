"""Word ids, sequence ids and the maps between tokens, words and characters
(``char_to_token``, ``word_to_tokens``...) against tokenizers' ``Encoding``: on tokenizers
trained here from the bundled sample (byte-level BPE, BERT's WordPiece pipeline, a Unigram
behind Metaspace), on drawn texts and pairs; on the real files of ../shared/data under every
truncation strategy, side, stride and padding side; and in batches. Zero differences is the bar.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import (
    BPE,
    BPETrainer,
    Encoding,
    InputError,
    Padding,
    Tokenizer,
    Truncation,
    Unigram,
    UnigramTrainer,
    WordPiece,
    WordPieceTrainer,
    _core,
    decoders,
    pre_tokenizers,
)
from tokenmill.bert import BertNormalizer, BertPreTokenizer, WordPieceDecoder, bert_processing
from tokenmill.processors import ByteLevel as ByteLevelProcessor

tokenizers = pytest.importorskip("tokenizers")

SAMPLE = Path(__file__).resolve().parents[2] / "src" / "tokenmill" / "data" / "sample.txt"
FIELDS = ("ids", "word_ids", "sequence_ids", "n_sequences", "offsets", "type_ids",
          "attention_mask", "special_tokens_mask")


def differences(ours: Encoding, theirs, text_length: int, where: str = "") -> list[str]:
    """Where ``ours`` and tokenizers' ``theirs`` differ: every field, every map at every
    index (and one past), for both inputs; then their overflowing windows, in order."""
    out = []
    for field in FIELDS:
        mine, other = getattr(ours, field), getattr(theirs, field)
        if field == "offsets":
            other = [tuple(o) for o in other]
        if mine != other:
            out.append(f"{where}{field}: {mine} != {other}")
    n = len(theirs.ids)
    for i in range(-1, n + 2):
        for name in ("token_to_sequence", "token_to_chars", "token_to_word"):
            mine, other = answer(ours, name, i), answer(theirs, name, i)
            if mine != other:
                out.append(f"{where}{name}({i}): {mine} != {other}")
    for sequence in (-1, 0, 1):
        for word in range(-1, max((w for w in theirs.word_ids if w is not None), default=0) + 2):
            for name in ("word_to_tokens", "word_to_chars"):
                mine = answer(ours, name, word, sequence)
                other = answer(theirs, name, word, sequence)
                if mine != other:
                    out.append(f"{where}{name}({word}, {sequence}): {mine} != {other}")
        for pos in range(-1, text_length + 2):
            for name in ("char_to_token", "char_to_word"):
                mine = answer(ours, name, pos, sequence)
                other = answer(theirs, name, pos, sequence)
                if mine != other:
                    out.append(f"{where}{name}({pos}, {sequence}): {mine} != {other}")
    if len(ours.overflowing) != len(theirs.overflowing):
        out.append(f"{where}{len(ours.overflowing)} overflowing, tokenizers "
                   f"{len(theirs.overflowing)}")
    else:
        for k, (a, b) in enumerate(zip(ours.overflowing, theirs.overflowing)):
            out += differences(a, b, text_length, f"{where}overflowing[{k}].")
    return out


def answer(encoding, name: str, *args: object) -> object:
    """What ``encoding.name(*args)`` returns, or the name of the error it raises (tokenizers
    reads indices as unsigned: a negative one is an OverflowError, a float a TypeError)."""
    try:
        result = getattr(encoding, name)(*args)
    except (OverflowError, TypeError) as e:
        return type(e).__name__
    return tuple(result) if isinstance(result, list) else result


# -- exact values -------------------------------------------------------------------------

def test_wordpiece_words_by_hand():
    vocab = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "hello", "world", "##s", ",", "un",
             "##believ", "##able"]
    tok = Tokenizer(WordPiece({t: i for i, t in enumerate(vocab)}),
                    normalizer=BertNormalizer(), pre_tokenizer=BertPreTokenizer())
    tok.post_processor = bert_processing(tok.model)
    e = tok.encode("Hello worlds, unbelievable", "hello")
    assert e.tokens == ["[CLS]", "hello", "world", "##s", ",", "un", "##believ", "##able",
                        "[SEP]", "hello", "[SEP]"]
    assert e.word_ids == e.words == [None, 0, 1, 1, 2, 3, 3, 3, None, 0, None]
    assert e.sequence_ids == [None, 0, 0, 0, 0, 0, 0, 0, None, 1, None]
    assert e.n_sequences == 2
    assert e.word_to_tokens(1) == (2, 4) and e.word_to_tokens(0, 1) == (9, 10)
    assert e.word_to_chars(3) == (14, 26) and e.word_to_tokens(4) is None
    assert e.char_to_token(8) == 2 and e.char_to_token(11) == 3 and e.char_to_token(5) is None
    assert e.char_to_token(2, 1) == 9 and e.char_to_word(20) == 3
    assert e.token_to_word(0) is None and e.token_to_word(7) == 3
    assert e.token_to_sequence(9) == 1 and e.token_to_sequence(8) is None
    assert e.token_to_chars(6) == (16, 22) and e.token_to_chars(10) is None
    # Padding is no input's and no word's; without a post-processor one input is every token.
    padded = tok.encode("hello", truncation=None).padded(5, pad_id=3, side="left")
    assert padded.word_ids == [None, None, None, 0, None]
    assert padded.sequence_ids == [None, None, None, 0, None]
    tok.post_processor = None
    plain = tok.encode("un, hello").padded(6, pad_id=3)
    assert plain.word_ids == [0, 1, 2, None, None, None] and plain.sequence_ids == [0] * 6


def test_added_tokens_in_the_text_are_words():
    tok = Tokenizer(WordPiece({"[UNK]": 0, "a": 1, "b": 2}), pre_tokenizer=BertPreTokenizer())
    tok.add_special_tokens(["<x>"])
    tok.add_tokens(["ab"])
    e = tok.encode("a<x>b a ab b")
    assert e.tokens == ["a", "<x>", "b", "a", "ab", "b"]
    assert e.word_ids == [0, 1, 2, 3, 4, 5]


def test_dropout_words_hold_their_tokens():
    tok = bpe_tokenizer()
    text = SAMPLE.read_text("utf-8")[5000:9000]
    for seed in range(3):
        e = tok.encode(text, dropout=0.4, seed=seed)
        assert len(e.word_ids) == len(e.ids)
        for i, word in enumerate(e.word_ids):
            start, end = e.word_to_chars(word)
            assert start <= e.offsets[i][0] <= e.offsets[i][1] <= end


def test_encoding_by_hand_and_its_windows():
    e = Encoding([5, 6, 7, 8], offsets=[(0, 2), (2, 4), (5, 8), (9, 9)], words=[0, 0, 1, 2])
    assert (e.word_ids, e.sequence_ids, e.n_sequences) == ([0, 0, 1, 2], [0] * 4, 1)
    assert e.char_to_token(9) is None and e.word_to_chars(2) == (9, 9)
    # As in tokenizers: the one input marked is input 1, yet sequence_ids, which counts
    # inputs from 0, finds no input 0 marked and takes every token for it.
    e.set_sequence_id(1)
    assert e.sequence_ids == [0] * 4 and e.n_sequences == 1
    assert e.token_to_sequence(1) == 1 and e.char_to_token(3) == e.char_to_token(3, 1) == 1
    e.set_sequence_id(0)
    assert e.sequence_ids == [1] * 4 and e.n_sequences == 2  # (input 1 filled in last)
    # A window marks no input, as tokenizers' truncate leaves one.
    cut = Encoding([5, 6, 7, 8], words=[0, 0, 1, 2], sequence_ranges={0: (1, 3)}).truncated(
        3, stride=1)
    assert cut.word_ids == [0, 0, 1] and cut.overflowing[0].word_ids == [1, 2]
    assert cut.sequence_ids == [0, 0, 0] and cut.overflowing[0].sequence_ids == [0, 0]
    assert Encoding([1, 2]).word_ids == [None, None]


def test_indices_are_unsigned():
    e = Encoding([5, 6, 7], offsets=[(0, 2), (2, 4), (5, 8)], words=[0, 0, 1])
    # A negative index does not count back from the end (as a list's would): tokenizers
    # reads indices as unsigned and raises OverflowError, and so do we.
    for call in (lambda: e.token_to_word(-1), lambda: e.token_to_chars(-1),
                 lambda: e.token_to_sequence(-1), lambda: e.word_to_tokens(-1),
                 lambda: e.word_to_chars(0, -1), lambda: e.char_to_token(-1),
                 lambda: e.char_to_word(3, -1)):
        with pytest.raises(OverflowError, match="must not be negative, got -1"):
            call()
    with pytest.raises(TypeError):
        e.char_to_token(3.0)  # type: ignore[arg-type]
    assert e.token_to_word(2) == 1 and e.char_to_token(3) == 1 and e.word_to_tokens(1) == (2, 3)
    # (tokenizers' quirk, kept: one past the end of an encoding with no input marked is of
    # input 0; two past it, of none)
    assert e.token_to_sequence(3) == 0 and e.token_to_sequence(4) is None


def test_encodings_equal_only_with_equal_words_and_inputs():
    e = Encoding([5, 6, 7], offsets=[(0, 2), (2, 4), (5, 8)], words=[0, 0, 1])
    assert e == Encoding([5, 6, 7], offsets=[(0, 2), (2, 4), (5, 8)], words=[0, 0, 1])
    assert e != Encoding([5, 6, 7], offsets=[(0, 2), (2, 4), (5, 8)], words=[0, 1, 2])
    marked = Encoding([5, 6, 7], offsets=[(0, 2), (2, 4), (5, 8)], words=[0, 0, 1],
                      sequence_ranges={0: (0, 2)})
    assert e != marked and marked.sequence_ids == [0, 0, None]
    # Words that can no longer be made (the tokenizer changed, the ids were replaced) do not
    # make a comparison raise: their sources are compared.
    tok = bpe_tokenizer()
    a, b = tok.encode("hello world, foo"), tok.encode("hello world, foo")
    tok.add_tokens(["zzz"])
    assert a == b and a != tok.encode("hello world, foo bar")
    with pytest.raises(InputError, match="the tokenizer changed"):
        a.word_ids  # noqa: B018
    c, d = tok.encode("hello world"), tok.encode("hello world")
    c.ids, d.ids = c.ids + [0], d.ids + [0]
    assert c == d


def test_word_ids_are_the_encoding_tokenizers():
    # Made when first asked for, by the tokenizer as it was when it encoded the text: one
    # changed since is an error, not other words.
    tok = wordpiece_tokenizer()
    e, kept = tok.encode("hellos world"), tok.encode("hellos world")
    words = kept.word_ids  # (made now, and kept)
    window = tok.encode("hellos world").truncated(2)  # (which shares the words to be made)
    tok.add_tokens(["s"])
    for late in (e, window):
        with pytest.raises(InputError, match="tokenizer changed"):
            _ = late.word_ids
    assert kept.word_ids == words
    fresh = tok.encode("hellos world")  # ("s" is a word of its own now, as in tokenizers)
    assert fresh.word_ids == [None] + [0] * 5 + [1] + [2] * 5 + [None]
    later = tok.encode("hellos world")
    # (special tokens read as text: the words are made with the added tokens of that call)
    plain = tok.encode("[CLS] hellos", allowed_special=set(), disallowed_special=())
    assert plain.tokens[1:6] == ["[", "c", "##l", "s", "]"]  # (the added "s" cuts "cls")
    assert plain.word_ids == [None, 0, 1, 1, 2, 3, 4, 4, 4, 4, 4, 5, None]
    plain = tok.encode("[CLS] hellos", allowed_special=set(), disallowed_special=())
    tok.normalizer = BertNormalizer(lowercase=False)
    for late in (later, plain):
        with pytest.raises(InputError, match="tokenizer changed"):
            _ = late.word_ids


def test_encodings_with_words_to_be_made_pickle():
    import pickle

    bpe = bpe_tokenizer()  # (its post-processor trims offsets: the encoding is a copy)
    wordpiece = wordpiece_tokenizer()
    made = [bpe.encode("Alice was beginning", "to get very tired"),
            wordpiece.encode("Alice was beginning to get very tired",
                             truncation=Truncation(max_length=6, stride=2)),
            bpe.encode("Alice was beginning").truncated(2)]
    for e in made:
        back = pickle.loads(pickle.dumps(e))
        assert (back.ids, back.word_ids, back.sequence_ids) == (e.ids, e.word_ids,
                                                                e.sequence_ids)
        assert [o.word_ids for o in back.overflowing] == [o.word_ids for o in e.overflowing]


# -- tokenizers trained here, on drawn texts ----------------------------------------------

def sample_lines() -> list[str]:
    return SAMPLE.read_text("utf-8").splitlines()


def bpe_tokenizer() -> Tokenizer:
    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=False),
                    decoder=decoders.ByteLevel(), post_processor=ByteLevelProcessor())
    tok.train_from_iterator(sample_lines(), BPETrainer(
        vocab_size=600, special_tokens=("<|endoftext|>",),
        initial_alphabet=tuple(pre_tokenizers.ByteLevel.alphabet())))
    return tok


def wordpiece_tokenizer() -> Tokenizer:
    tok = Tokenizer(WordPiece({"[UNK]": 0}), normalizer=BertNormalizer(),
                    pre_tokenizer=BertPreTokenizer(), decoder=WordPieceDecoder())
    tok.train_from_iterator(sample_lines(), WordPieceTrainer(
        vocab_size=600, special_tokens=("[UNK]", "[CLS]", "[SEP]", "[PAD]")))
    tok.post_processor = bert_processing(tok.model)
    return tok


def unigram_tokenizer() -> Tokenizer:
    tok = Tokenizer(Unigram([("<unk>", 0.0)], unk_id=0), pre_tokenizer=pre_tokenizers.Metaspace(),
                    decoder=decoders.Metaspace())
    tok.train_from_iterator(sample_lines(), UnigramTrainer(
        vocab_size=400, special_tokens=("<unk>", "<s>"), unk_token="<unk>"))
    tok.add_special_tokens(["<s>"])
    return tok


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> list[tuple[Tokenizer, object]]:
    out = []
    for name, make in [("bpe", bpe_tokenizer), ("wordpiece", wordpiece_tokenizer),
                       ("unigram", unigram_tokenizer)]:
        tok = make()
        path = tmp_path_factory.mktemp("words") / f"{name}.json"
        tok.save(path, hf_compatible=True)
        out.append((Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))))
    return out


TEXT = st.lists(st.sampled_from(list("abcdefghij ALICE,.!'-\n\t0123 éü中文") +
                                ["<s>", "[CLS]", "<|endoftext|>", "  "]),
                max_size=40).map("".join)


@settings(max_examples=60)
@given(text=TEXT, pair=st.none() | TEXT)
def test_trained_tokenizers_agree(trained, text, pair):
    for ours, theirs in trained:
        expected = theirs.encode(text, pair) if pair is not None else theirs.encode(text)
        got = ours.encode(text, pair)
        assert differences(got, expected, max(len(text), len(pair or ""))) == []


@settings(max_examples=25)
@given(texts=st.lists(st.tuples(TEXT, st.none() | TEXT), min_size=1, max_size=4),
       max_length=st.integers(6, 12), stride=st.integers(0, 2),
       strategy=st.sampled_from(["longest_first", "only_first", "only_second"]),
       side=st.sampled_from(["right", "left"]), pad_side=st.sampled_from(["right", "left"]))
def test_trained_tokenizers_agree_in_batches(trained, texts, max_length, stride, strategy,
                                             side, pad_side):
    inputs = [t if p is None else (t, p) for t, p in texts]
    longest = max(len(t) + len(p or "") for t, p in texts)
    ours_truncation = Truncation(max_length=max_length, stride=stride, side=side,
                                 strategy=STRATEGIES[strategy])
    for ours, theirs in trained:
        theirs.enable_truncation(max_length, stride=stride, strategy=strategy, direction=side)
        theirs.enable_padding(direction=pad_side, pad_id=0, pad_token="[PAD]")
        try:
            expected = theirs.encode_batch(inputs)
        except BaseException as e:  # (a stride too long for what is left: a Rust panic)
            expected = e
        finally:
            theirs.no_truncation()
            theirs.no_padding()
        try:
            got = ours.encode_batch(inputs, truncation=ours_truncation,
                                    padding=Padding(side=pad_side))
        except Exception as e:
            assert isinstance(expected, BaseException), e
            continue
        assert not isinstance(expected, BaseException), expected
        for mine, other in zip(got, expected, strict=True):
            assert differences(mine, other, longest) == []


STRATEGIES = {"longest_first": "LongestFirst", "only_first": "OnlyFirst",
              "only_second": "OnlySecond"}


# -- real files ---------------------------------------------------------------------------

REAL = ["gpt2", "all-MiniLM-L6-v2", "mistral-7b-v0.3"]


@pytest.fixture(scope="module")
def real(shared_data) -> list[tuple[Tokenizer, object]]:
    out = []
    for name in REAL:
        path = shared_data / "tokenizers" / name / "tokenizer.json"
        ours = Tokenizer.from_file(path)
        ours.truncation = ours.padding = None  # (MiniLM's file pads to 128)
        theirs = tokenizers.Tokenizer.from_file(str(path))
        theirs.no_truncation()
        theirs.no_padding()
        out.append((ours, theirs))
    return out


def test_real_files_agree(real, shared_data):
    lines = (shared_data / "text" / "en" / "ud_en_ewt_dev.txt").read_text("utf-8").splitlines()
    lines = lines[:120:3] + (shared_data / "text" / "zh" / "ud_zh_gsdsimp_dev.txt").read_text(
        "utf-8").splitlines()[:20] + ["<s>Hi</s> [CLS] x<|endoftext|>y", "", " ", "a  b\n\nc"]
    for ours, theirs in real:
        for k, text in enumerate(lines):
            pair = lines[k - 1] if k % 2 else None
            expected = theirs.encode(text, pair) if pair is not None else theirs.encode(text)
            found = differences(ours.encode(text, pair), expected,
                                max(len(text), len(pair or "")))
            assert found == [], (text, pair, found[:3])
        got = ours.encode_batch(lines)
        for text, mine, other in zip(lines, got, theirs.encode_batch(lines), strict=True):
            assert differences(mine, other, len(text)) == [], text


def test_bert_words_around_added_tokens_agree(real, shared_data):
    # BERT's word ids come from one core call a stretch of text between added tokens, each
    # stretch's words counted on from the last; [MASK] and [SEP] in the text are words.
    ours, theirs = real[REAL.index("all-MiniLM-L6-v2")]
    words = (shared_data / "text" / "en" / "ud_en_ewt_dev.txt").read_text("utf-8").split()
    marks = ["[MASK]", "[SEP]", "[MASK][MASK]", "##s", "中文", "  "]
    texts = [" ".join(words[k:k + 1 + k % 9] + [marks[k % 6]] + words[k + 9:k + 9 + k % 4])
             for k in range(0, 1200, 7)] + ["[MASK]", "a[MASK]b", "[MASK] ", " [SEP]x"]
    for k, text in enumerate(texts):
        pair = texts[k - 1] if k % 3 == 0 else None
        expected = theirs.encode(text, pair) if pair is not None else theirs.encode(text)
        mine = ours.encode(text, pair)
        assert (mine.word_ids, mine.ids) == (expected.word_ids, expected.ids), (text, pair)
    e = ours.encode("hyperparameters [MASK]believable!", add_special_tokens=False)
    assert e.tokens == ["hyper", "##para", "##meter", "##s", "[MASK]", "bel", "##ie",
                        "##vable", "!"]
    assert e.word_ids == [0, 0, 0, 0, 1, 2, 2, 2, 3]


def test_bert_word_ids_in_the_core(real):
    ours, _ = real[REAL.index("all-MiniLM-L6-v2")]
    plan = ours._core_plans()[0]
    begins = ours._word_starts()
    # "hyperparameters" is hyper ##para ##meter ##s: one word; "," and "ok" one each
    words, after = _core.bert_word_ids(*plan, "hyperparameters, ok", begins, 5)
    assert (words, after) == ([5, 5, 5, 5, 6, 7], 8)
    assert _core.bert_word_ids(*plan, "  ", begins, 3) == ([], 3)
    # An id past the table begins a word (the table is the model's: none is)
    assert _core.bert_word_ids(*plan, "hyperparameters", b"", 0) == ([0, 1, 2, 3], 4)


def test_post_processors_called_alone_agree(real, trained):
    # Each marks the tokens of its inputs as theirs, as tokenizers' do (inputs encoded
    # without special tokens, which a post-processor marked as input 0 already).
    a, b = "hello there", "good friend"
    for ours, theirs in real + trained:
        if theirs.post_processor is None:
            continue
        mine = [ours.encode(t, add_special_tokens=False) for t in (a, b)]
        other = [theirs.encode(t, add_special_tokens=False) for t in (a, b)]
        for add in (True, False):
            for pair in (False, True):
                got = ours.post_processor.process(mine[0], mine[1] if pair else None, add)
                expected = theirs.post_processor.process(other[0], other[1] if pair else None,
                                                         add)
                # (b is then marked as both input 0 and input 1: which token_to_sequence
                # finds first, tokenizers leaves to its hash map's order)
                for field in FIELDS:
                    assert getattr(got, field) == (
                        [tuple(o) for o in expected.offsets] if field == "offsets"
                        else getattr(expected, field)), field


def test_real_files_agree_when_truncated_and_padded(real):
    text = "Hello world, how are you doing today, my naïve friend? Don't stop-believing!"
    pair = "And the second one, too: 123456 日本語"
    for ours, theirs in real:
        for strategy, ours_strategy in STRATEGIES.items():
            for side in ("right", "left"):
                for max_length, stride in [(9, 2), (14, 4)]:
                    for pad_side in ("right", "left"):
                        theirs.enable_truncation(max_length, stride=stride, strategy=strategy,
                                                 direction=side)
                        theirs.enable_padding(direction=pad_side, length=16)
                        ours.padding = Padding(side=pad_side, length=16)
                        truncation = Truncation(max_length=max_length, stride=stride, side=side,
                                                strategy=ours_strategy)
                        try:
                            for add in (True, False):
                                where = f"{strategy} {side} {max_length}/{stride} {pad_side} "
                                try:
                                    other = theirs.encode(text, pair, add_special_tokens=add)
                                except BaseException:  # (an input too short to cut: both
                                    with pytest.raises(InputError):  # refuse it)
                                        ours.encode(text, pair, add_special_tokens=add,
                                                    truncation=truncation)
                                    continue
                                mine = ours.encode(text, pair, add_special_tokens=add,
                                                   truncation=truncation)
                                assert differences(mine, other, len(text), where) == []
                        finally:
                            ours.padding = None
                            theirs.no_truncation()
                            theirs.no_padding()


def test_one_part_laid_out_as_the_walk_over_parts_lays_it_out(real, trained):
    # laid_out takes a short way for a single encoding (a template without special tokens);
    # an empty encoding after it sends the same parts the long way. (Each layout gets fresh
    # encodings, with and without tokens made; special tokens around them, the long way too.)
    for ours, _ in real + trained:
        fresh = (lambda tok=ours: tok.encode("hello there, friend", add_special_tokens=False),
                 lambda tok=ours: tok.encode("hello", "friend"),
                 lambda tok=ours: tok.encode("hello there friend",
                                             add_special_tokens=False).truncated(2))
        specials = [([ours.token_to_id(t) or 0], t, k) for k, t in
                    enumerate(ours.get_vocab())][:2]
        for make in fresh:
            for made_tokens in (False, True):
                for type_id in (None, 0, 1):
                    for sequence in (None, 0, 1):
                        for own in (True, False):
                            for before, after in (([], []), ([0], []), ([0, 1], [1])):
                                a, b = make(), make()
                                if made_tokens:
                                    assert a.tokens == b.tokens
                                parts = [specials[k] for k in before], [specials[k] for k in after]
                                short = Encoding.laid_out(
                                    parts[0] + [(a, type_id, sequence)] + parts[1], own)
                                walked = Encoding.laid_out(
                                    parts[0] + [(b, type_id, sequence)] + parts[1]
                                    + [(Encoding([]), None, None)], own)
                                for field in FIELDS + ("tokens",):
                                    assert getattr(short, field) == getattr(walked, field), \
                                        field
                                assert short.char_to_token(3) == walked.char_to_token(3)
