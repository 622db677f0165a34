"""Properties of whole tokenizers on arbitrary text: byte-level round trips, and offsets that
always slice the original text to the characters a token came from."""

from importlib import resources

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tokenmill import (
    BPE,
    AddedToken,
    BPETrainer,
    InputError,
    Tokenizer,
    decoders,
    normalizers,
    pre_tokenizers,
)

# Any Unicode text but lone surrogates (which are not text; encode rejects them).
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)


def sample_lines() -> list[str]:
    path = resources.files("tokenmill") / "data" / "sample.txt"
    return path.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def byte_level() -> Tokenizer:
    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=False),
                    decoder=decoders.ByteLevel())
    tok.train_from_iterator(sample_lines() + ["naïve café 東京 😀👍🏽"], BPETrainer(
        vocab_size=600, initial_alphabet=tuple(pre_tokenizers.ByteLevel.alphabet())))
    return tok


@pytest.fixture(scope="module")
def normalized_char_level() -> Tokenizer:
    tok = Tokenizer(BPE({}, []),
                    normalizer=normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]),
                    pre_tokenizer=pre_tokenizers.Whitespace(),
                    decoder=decoders.BPEDecoder(suffix="</w>"))
    tok.train_from_iterator(sample_lines(), BPETrainer(
        vocab_size=600, end_of_word_suffix="</w>", continuing_subword_prefix="##",
        special_tokens=("[UNK]",), unk_token="[UNK]"))
    return tok


@settings(max_examples=300, deadline=None)
@given(texts)
def test_byte_level_round_trip(byte_level, text):
    assert byte_level.decode(byte_level.encode(text).ids) == text


@settings(max_examples=300, deadline=None)
@given(texts)
def test_native_path_equals_python_path(byte_level, text):
    # An empty normalizer Sequence changes nothing but keeps the pipeline in Python.
    python_path = Tokenizer(byte_level.model, normalizer=normalizers.Sequence([]),
                            pre_tokenizer=byte_level.pre_tokenizer, decoder=byte_level.decoder)
    assert byte_level.native_plan() is not None and python_path.native_plan() is None
    fast, slow = byte_level.encode(text), python_path.encode(text)
    assert (fast.ids, fast.offsets, fast.tokens) == (slow.ids, slow.offsets, slow.tokens)


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, max_size=6))
def test_whitespace_pipelines_count_natively_as_in_python(docs):
    # The core counts Whitespace's pieces (plain or spelled byte by byte) itself; an empty
    # normalizer Sequence keeps the same pipeline on the Python path. Counts and their
    # first-seen order must agree.
    for steps in ([pre_tokenizers.Whitespace()],
                  [pre_tokenizers.Whitespace(), pre_tokenizers.ByteLevel(use_regex=False)]):
        pre = pre_tokenizers.Sequence(steps) if len(steps) > 1 else steps[0]
        native = Tokenizer(BPE({}, []), pre_tokenizer=pre)
        python = Tokenizer(BPE({}, []), normalizer=normalizers.Sequence([]), pre_tokenizer=pre)
        assert pre_tokenizers.native_counting(pre) is not None
        assert list(native.count_words(docs).items()) == list(python.count_words(docs).items())


@settings(max_examples=200, deadline=None)
@given(texts)
def test_byte_level_words_native_path_equals_python_path(byte_level, text):
    pre = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                   pre_tokenizers.ByteLevel(use_regex=False)])
    fast = Tokenizer(byte_level.model, pre_tokenizer=pre, decoder=byte_level.decoder)
    slow = Tokenizer(byte_level.model, normalizer=normalizers.Sequence([]), pre_tokenizer=pre)
    assert fast.native_plan() is not None and slow.native_plan() is None
    a, b = fast.encode(text), slow.encode(text)
    assert (a.ids, a.offsets) == (b.ids, b.offsets)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_byte_level_offsets_cover_token_bytes(byte_level, text):
    enc = byte_level.encode(text)
    to_bytes = pre_tokenizers.unicode_to_bytes()
    previous_start = previous_end = 0
    for token, (start, end) in zip(enc.tokens, enc.offsets):
        assert 0 <= start < end <= len(text)
        # Monotone; a token may end inside a multi-byte character that the next one finishes.
        assert start >= previous_start and end >= previous_end
        token_bytes = bytes(to_bytes[c] for c in token)
        assert token_bytes in text[start:end].encode("utf-8")
        previous_start, previous_end = start, end
    # every character is covered by some token
    covered = set()
    for start, end in enc.offsets:
        covered.update(range(start, end))
    assert covered == set(range(len(text)))


@settings(max_examples=300, deadline=None)
@given(texts)
def test_offsets_through_normalization(normalized_char_level, text):
    tok = normalized_char_level
    enc = tok.encode(text)
    starts = [s for s, _ in enc.offsets]
    assert starts == sorted(starts)
    for token, (start, end) in zip(enc.tokens, enc.offsets):
        assert 0 <= start < end <= len(text)
        if token == "[UNK]":  # a character outside the vocabulary
            continue
        core = token.removeprefix("##").removesuffix("</w>")
        assert core in tok.normalizer.normalize_str(text[start:end])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 620), max_size=30), st.booleans())
@example(ids=[601], skip=True)  # the non-special added token is kept when specials are skipped
@example(ids=[600, 5, 601], skip=True)
def test_native_decode_equals_the_decoder(byte_level, ids, skip):
    # The core decodes byte-level ids itself; the general path (tokens through the decoder)
    # must agree, with special and non-special added tokens in the mix. Ids beyond the
    # vocabulary are errors on both paths.
    tok = Tokenizer(byte_level.model, pre_tokenizer=byte_level.pre_tokenizer,
                    decoder=byte_level.decoder,
                    added_tokens=[AddedToken("<|end|>", 600, special=True),
                                  AddedToken("<ｍask>", 601, special=False)])
    general = Tokenizer(byte_level.model, pre_tokenizer=byte_level.pre_tokenizer,
                        decoder=decoders.Sequence([byte_level.decoder]),
                        added_tokens=tok.added_tokens)
    known = set(tok.get_vocab().values())
    if all(i in known for i in ids):
        assert tok.decode(ids, skip_special_tokens=skip) == \
            general.decode(ids, skip_special_tokens=skip)
        to_bytes = pre_tokenizers.unicode_to_bytes()
        expected = b""
        for i in ids:
            token = tok.id_to_token(i)
            if skip and i == 600:
                continue
            expected += bytes(to_bytes[c] for c in token) \
                if i < 600 and all(c in to_bytes for c in token) else token.encode("utf-8")
        assert tok.decode_bytes(ids, skip_special_tokens=skip) == expected
    else:
        with pytest.raises(InputError, match=r"ids\[\d+\]: \d+ is not an id"):
            tok.decode(ids, skip_special_tokens=skip)
