"""WordPiece by hand: encoding, the textbook training example, BERT's pipeline pieces, files,
and bad input. Every expected value here is worked out in the comments."""

from __future__ import annotations

import json

import pytest

from tokenmill import Tokenizer, WordPiece, WordPieceTrainer, load
from tokenmill.bert import (
    BertNormalizer,
    BertPreTokenizer,
    BertProcessing,
    WordPieceDecoder,
    bert_tokenizer,
)
from tokenmill.encoding import Encoding
from tokenmill.errors import FormatError, InputError
from tokenmill.formats.bert_vocab import read_vocab, write_vocab
from tokenmill.normalized import NormalizedString

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "a", "##b",
         "##bc", "hello", "!", "é"]


@pytest.fixture
def model() -> WordPiece:
    return WordPiece({t: i for i, t in enumerate(VOCAB)})


def test_longest_match_first(model):
    # "unaffable": "un" is the longest token starting the word; then "##aff", then "##able".
    assert model.encode_word("unaffable") == ["un", "##aff", "##able"]
    # "abc": "a", then the longest continuation "##bc" (not "##b" + "##c").
    assert model.encode_word("abc") == ["a", "##bc"]
    # "abcb": a, ##bc, ##b
    assert model.encode_word("abcb") == ["a", "##bc", "##b"]


def test_one_unmatchable_part_makes_the_whole_word_unknown(model):
    # "unx": "un" matches, "##x" does not: the WHOLE word is one [UNK], spanning it all.
    assert model.encode_pieces(["unx"]) == [1, 0, 0, 3]
    # a continuing token cannot start a word
    assert model.encode_word("able") == ["[UNK]"]


def test_max_input_chars_per_word():
    wp = WordPiece({"[UNK]": 0, "a": 1, "##a": 2}, max_input_chars_per_word=3)
    assert wp.encode_word("aaa") == ["a", "##a", "##a"]
    # four characters: over the limit, one [UNK] spanning the four
    assert wp.encode_pieces(["aaaa"]) == [0, 0, 0, 4]


def test_offsets_are_characters_not_bytes(model):
    # "éa" is 3 bytes, 2 characters: é at (0, 1); "##a" is not a token, so... [UNK] (0, 2)
    assert model.encode_pieces(["é", "éa"]) == [13, 0, 0, 1, 1, 1, 0, 2]


def test_missing_unk_is_an_error_only_when_needed():
    wp = WordPiece({"a": 0, "##b": 1})
    assert wp.encode_word("ab") == ["a", "##b"]
    with pytest.raises(InputError, match=r"'zz'.*no token of the vocabulary.*'\[UNK\]' is not"):
        wp.encode_word("zz")


def test_textbook_training_example():
    # Corpus (the Hugging Face course's): hug x10, pug x5, pun x12, bun x4, hugs x5.
    # Symbols: h ##u ##g | p ##u ##g | p ##u ##n | b ##u ##n | h ##u ##g ##s.
    # Counts: ##u 36, ##g 20, p 17, h 15, ##n 16, b 4, ##s 5.
    # Round 1 scores = count(ab) / (count(a) count(b)):
    #   (##g, ##s) 5/(20*5) = 1/20       (h, ##u) 15/(15*36) = 1/36
    #   (p, ##u) 17/(17*36) = 1/36       (b, ##u)  4/(4*36)  = 1/36
    #   (##u, ##g) 20/(36*20) = 1/36     (##u, ##n) 16/(36*16) = 1/36
    # -> merge ##g + ##s = ##gs (the frequent ##u pairs lose: ##u is everywhere).
    # Round 2: every pair scores 1/36 now: (p, ##u) 17, (##u, ##g) 15, (h, ##u) 15,
    #   (##u, ##n) 16, (b, ##u) 4, (##u, ##gs) 5. Ties go to the most frequent pair: p + ##u.
    # Round 3: pu appears 17 times; ##u is down to 19. (h, ##u) 15/(15*19) = 1/19,
    #   (b, ##u) 4/(4*19) = 1/19, (pu, ##g) 5/(17*15) = 1/51, ... -> h + ##u (15 beats 4).
    trainer = WordPieceTrainer(vocab_size=15, special_tokens=("[UNK]",))
    result = trainer.train_from_counts({"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5})
    assert result.merges == [("##g", "##s"), ("p", "##u"), ("h", "##u")]
    assert [(s.count, s.left_count, s.right_count) for s in result.steps] == \
        [(5, 20, 5), (17, 17, 36), (15, 15, 19)]
    # alphabet: b g h n p s u (every character) and ##g ##n ##s ##u (seen inside words)
    assert result.alphabet_size == 11
    assert list(result.model.vocab) == ["[UNK]", "b", "g", "h", "n", "p", "s", "u", "##g", "##n",
                                        "##s", "##u", "##gs", "pu", "hu"]
    assert result.trace_lines()[0] == \
        "Step 0: merge '##g' + '##s' -> '##gs' (count=5, score=5/(20*5)=0.05)"
    assert result.model.encode_word("hugs") == ["hu", "##gs"]


def test_trainer_options_and_errors():
    with pytest.raises(InputError, match="unk_token '\\[UNK\\]' must be one of"):
        WordPieceTrainer(special_tokens=("<s>",))
    with pytest.raises(InputError, match="distinct"):
        WordPieceTrainer(special_tokens=("[UNK]", "[UNK]"))
    counts = {"abc": 3, "bcd": 1}
    # alphabet a b c d + ##b ##c ##d = 7 symbols, plus [UNK]: 8 rows needed
    with pytest.raises(InputError, match=r"vocab_size 7 is smaller .* 1 special tokens plus the "
                                         r"alphabet \(7 symbols.*vocab_size >= 8"):
        WordPieceTrainer(vocab_size=7, special_tokens=("[UNK]",)).train_from_counts(counts)
    # limit_alphabet=3 keeps b, c (4 each) and a (3, beats d's 1): "bcd" is left out
    r = WordPieceTrainer(vocab_size=8, special_tokens=("[UNK]",),
                         limit_alphabet=3).train_from_counts(counts)
    assert r.words_dropped == 1 and "d" not in r.model.vocab
    # min_frequency: no pair is seen 4 times, so nothing merges
    r = WordPieceTrainer(vocab_size=50, special_tokens=("[UNK]",),
                         min_frequency=4).train_from_counts(counts)
    assert r.steps == []
    # the initial alphabet comes in both forms, seen or not
    r = WordPieceTrainer(vocab_size=8, special_tokens=("[UNK]",),
                         initial_alphabet=("z",)).train_from_counts({"a": 1})
    assert {"z", "##z"} <= set(r.model.vocab)


def test_bert_normalizer_steps_and_alignment():
    n = BertNormalizer()
    # clean_text drops controls (\x00, \x07, U+200B is a format char) and makes \t a space;
    # accents go (é -> e), case goes, the ideograph gets a space on each side
    s = n.normalize(NormalizedString("A\x00\u200bé\t中\x07b"))
    assert s.text == "ae  中 b"
    assert s.span(1, 2) == (3, 4)  # e, from é
    assert s.span(2, 3) == (4, 5)  # the space from "\t"
    assert s.span(3, 6) == (5, 6)  # " 中 ": all three point at 中
    assert s.span(6, 7) == (7, 8)  # b, after the dropped \x07
    # strip_accents follows lowercase unless given
    assert BertNormalizer(lowercase=False).normalize_str("É") == "É"
    assert BertNormalizer(lowercase=False, strip_accents=True).normalize_str("É") == "E"
    assert BertNormalizer(handle_chinese_chars=False).normalize_str("中") == "中"


def test_bert_pre_tokenizer_punctuation():
    # ASCII symbols count as punctuation; each is a piece of its own
    assert BertPreTokenizer().pre_tokenize_str("a$b  c...") == [
        ("a", (0, 1)), ("$", (1, 2)), ("b", (2, 3)), ("c", (5, 6)), (".", (6, 7)),
        (".", (7, 8)), (".", (8, 9))]


def test_decoder_and_processing():
    assert WordPieceDecoder().decode(["hello", "!", "un", "##aff"]) == "hello! unaff"
    assert WordPieceDecoder(cleanup=False).decode(["hello", "!"]) == "hello !"
    p = BertProcessing(sep=("[SEP]", 3), cls=("[CLS]", 2))
    e = p.process(Encoding([5], ["un"], [(0, 2)]), Encoding([11], ["hello"], [(0, 5)]))
    assert e.ids == [2, 5, 3, 11, 3]
    assert e.type_ids == [0, 0, 0, 1, 1]
    assert e.special_tokens_mask == [1, 0, 1, 0, 1]
    assert e.offsets == [(0, 0), (0, 2), (0, 0), (0, 5), (0, 0)]


def test_components_round_trip_under_hf_names(model):
    tok = bert_tokenizer(model)
    data = tok.to_dict()
    assert data["normalizer"]["type"] == "BertNormalizer"
    assert data["pre_tokenizer"] == {"type": "BertPreTokenizer"}
    assert data["post_processor"] == {"type": "BertProcessing", "sep": ["[SEP]", 3],
                                      "cls": ["[CLS]", 2]}
    assert data["decoder"] == {"type": "WordPiece", "prefix": "##", "cleanup": True}
    assert data["model"]["type"] == "WordPiece"
    again = Tokenizer.from_str(json.dumps(data))
    assert again.to_dict() == data
    assert again.encode("Unaffable abc!").tokens == \
        ["[CLS]", "un", "##aff", "##able", "a", "##bc", "!", "[SEP]"]


def test_vocab_txt_files(tmp_path, model):
    path = tmp_path / "vocab.txt"
    write_vocab(path, model.vocab)
    assert read_vocab(path) == model.vocab
    assert WordPiece.from_vocab_file(path, max_input_chars_per_word=5).encode_word("abcbb") == \
        ["a", "##bc", "##b", "##b"]
    tok = load(path)
    assert tok.encode("Hello unaffable!", "abcb").ids == [2, 11, 5, 6, 7, 12, 3, 8, 10, 9, 3]
    assert load(tmp_path).encode("hello").ids == [2, 11, 3]  # a folder with a vocab.txt
    assert tok.decode(tok.encode("Hello unaffable!").ids) == "hello unaffable!"
    # trailing whitespace (a CRLF file) is not part of a token
    (tmp_path / "crlf.txt").write_bytes(b"[UNK]\r\n[CLS]\r\n[SEP]\r\nab \r\n")
    assert read_vocab(tmp_path / "crlf.txt") == {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "ab": 3}


@pytest.mark.parametrize(("content", "message"), [
    (b"[UNK]\na\nb\na\n", r"bad\.txt:4: token 'a' is already on line 2"),
    (b"[UNK]\n\na\n", r"bad\.txt:2: empty line"),
    (b"", r"bad\.txt: empty"),
    (b"[UNK]\n\xff\n", r"bad\.txt:2: not UTF-8"),
])
def test_bad_vocab_txt(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(FormatError, match=message):
        read_vocab(path)


def test_vocab_txt_without_unk_or_template_tokens(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[CLS]\n[SEP]\nab\n##c\n")
    tok = load(path)
    assert tok.encode("abc").ids == [0, 2, 3, 1]
    with pytest.raises(InputError, match=r"\('xyz'\) has a part .*unk_token '\[UNK\]' is not"):
        tok.encode("xyz")
    path.write_text("[UNK]\nab\n")
    with pytest.raises(InputError, match=r"vocab\.txt: has no \[CLS\] token"):
        load(path)


def test_bad_wordpiece_json_fields():
    base = {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 1}}
    with pytest.raises(FormatError, match=r"model\.vocab\['a'\]: expected an id"):
        Tokenizer.from_dict({"model": {**base, "vocab": {"a": -1}}})
    with pytest.raises(FormatError, match=r"max_input_chars_per_word: expected an integer >= 0"):
        Tokenizer.from_dict({"model": {**base, "max_input_chars_per_word": -2}})
    with pytest.raises(FormatError, match="same id 0"):
        Tokenizer.from_dict({"model": {**base, "vocab": {"a": 0, "b": 0}}})
    with pytest.raises(FormatError, match=r"post_processor\.sep: expected \[token, id\]"):
        Tokenizer.from_dict({"model": base, "post_processor": {
            "type": "BertProcessing", "sep": ["[SEP]"], "cls": ["[CLS]", 1]}})
    # a file of an older version: no "type", the fields tell a WordPiece model
    old = Tokenizer.from_dict({"model": {"vocab": {"[UNK]": 0, "a": 1},
                                         "max_input_chars_per_word": 100}})
    assert isinstance(old.model, WordPiece)
