"""The fast WordPiece trainer and encoder against the textbook twins in tokenmill.reference."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import Tokenizer, WordPiece, WordPieceTrainer, pre_tokenizers
from tokenmill.bert import BertNormalizer, BertPreTokenizer
from tokenmill.normalized import NormalizedString
from tokenmill.reference import wordpiece as reference

# Few letters, so pairs repeat and scores tie often; one CJK and one astral character.
LETTERS = "abcd语😀"
words = st.text(alphabet=LETTERS, min_size=1, max_size=9)
corpora = st.dictionaries(words, st.integers(1, 6), min_size=1, max_size=12)
SPECIALS = ("[UNK]", "[CLS]")


@settings(max_examples=300, deadline=None)
@given(corpora, st.integers(0, 40), st.integers(0, 3), st.none() | st.integers(0, 6),
       st.sampled_from(["##", "", "@"]), st.sampled_from(["", "ab", "z"]))
def test_trainer_equals_reference(counts, extra, min_frequency, limit_alphabet, prefix,
                                  initial):
    _, symbols = reference.alphabet(counts, initial_alphabet=tuple(initial),
                                    limit_alphabet=limit_alphabet,
                                    continuing_subword_prefix=prefix)
    size = len(dict.fromkeys([*SPECIALS, *symbols])) + extra
    trainer = WordPieceTrainer(vocab_size=size, min_frequency=min_frequency,
                               special_tokens=SPECIALS, initial_alphabet=tuple(initial),
                               limit_alphabet=limit_alphabet, continuing_subword_prefix=prefix)
    fast = trainer.train_from_counts(counts)
    vocab, steps = reference.train(counts, size, min_frequency=min_frequency,
                                   special_tokens=SPECIALS, initial_alphabet=tuple(initial),
                                   limit_alphabet=limit_alphabet,
                                   continuing_subword_prefix=prefix)
    assert list(fast.model.vocab) == vocab
    assert [(s.left, s.right, s.token, s.count) for s in fast.steps] == \
        [step[:4] for step in steps]
    assert [s.count / (s.left_count * s.right_count) for s in fast.steps] == \
        [float(step[4]) for step in steps]


tokens = st.text(alphabet="abc语😀", min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(tokens, max_size=15), st.lists(tokens, max_size=15),
       st.lists(st.text(alphabet="abcx语😀", min_size=1, max_size=30), min_size=1, max_size=6),
       st.integers(1, 25), st.sampled_from(["##", "", "@@"]))
def test_encoder_equals_reference(initial, continuing, words, max_chars, prefix):
    vocab = {t: i for i, t in enumerate(dict.fromkeys(
        ["[UNK]", *initial, *(prefix + t for t in continuing)]))}
    model = WordPiece(vocab, continuing_subword_prefix=prefix,
                      max_input_chars_per_word=max_chars)
    flat = model.encode_pieces(words)
    for w, word in enumerate(words):
        expected = reference.encode(word, vocab, continuing_subword_prefix=prefix,
                                    max_input_chars_per_word=max_chars)
        got = [(model.id_to_token(flat[k]), flat[k + 2], flat[k + 3])
               for k in range(0, len(flat), 4) if flat[k + 1] == w]
        assert got == expected


@settings(max_examples=100, deadline=None)
@given(corpora, st.integers(0, 30))
def test_trained_vocab_encodes_its_corpus_without_unknowns(counts, extra):
    # every character of the corpus is in the alphabet in both positions it occurs in
    _, symbols = reference.alphabet(counts)
    result = WordPieceTrainer(vocab_size=len(symbols) + 1 + extra,
                              special_tokens=("[UNK]",)).train_from_counts(counts)
    for word in counts:
        tokens = result.model.encode_word(word)
        assert "[UNK]" not in tokens
        assert "".join(t.removeprefix("##") for t in tokens) == word


# Characters each BERT step treats differently: ASCII, spaces, controls and format characters,
# punctuation (ASCII, Unicode, one that changed category), accents and marks, case that changes
# length (İ) or context (Σ), CJK ideographs (a compatibility one decomposes), Hangul (decomposes
# into jamo), astral characters, U+FFFD and NUL.
BERT_CHARS = "aZé \t\n\r\x00\x07\u200b\u2028!$-.،\u166dÉe\u0301\u0345İΣσ中\uf900한😀\ufffd\xa0ﬁ"
bert_texts = st.text(alphabet=BERT_CHARS, max_size=40)
VOCAB = {t: i for i, t in enumerate(dict.fromkeys(
    ["[UNK]", *BERT_CHARS, *("##" + c for c in BERT_CHARS), "ab", "##e", "ze", "i̇"]))}


@settings(max_examples=300, deadline=None)
@given(st.lists(bert_texts, min_size=1, max_size=4), st.booleans(), st.none() | st.booleans(),
       st.booleans(), st.booleans())
def test_native_bert_pipeline_equals_the_python_components(texts, lowercase, strip_accents,
                                                           clean_text, chinese):
    normalizer = BertNormalizer(lowercase=lowercase, strip_accents=strip_accents,
                                clean_text=clean_text, handle_chinese_chars=chinese)
    model = WordPiece(VOCAB)
    native = Tokenizer(model, normalizer=normalizer, pre_tokenizer=BertPreTokenizer())
    # a Sequence is never run by the core: these are the Python components
    python = Tokenizer(model, normalizer=normalizer,
                       pre_tokenizer=pre_tokenizers.Sequence([BertPreTokenizer()]))
    for text in texts:
        a, b = native.encode(text), python.encode(text)
        assert (a.ids, a.offsets) == (b.ids, b.offsets)
        # the text-only fast paths (training counts with them)
        assert normalizer.normalize_str(text) == normalizer.normalize(NormalizedString(text)).text
        assert BertPreTokenizer().split_text(text) == \
            [p for p, _ in BertPreTokenizer().pre_tokenize_str(text)]
    assert native.encode_ordinary_batch(texts, num_threads=2) == \
        [python.encode(t).ids for t in texts]
