"""BERT files id for id and offset for offset against `tokenizers`: MiniLM's tokenizer.json and
bert-base-uncased's vocab.txt (as BertWordPieceTokenizer builds it), on the goldens and on every
distinct line of the corpora in ../shared/data; pairs with type ids; decoding; every code point
through the BERT normalizer and pre-tokenizer; and WordPiece tokenizers trained here, loaded by
`tokenizers` with the same ids. Zero mismatches is the bar.
"""

from __future__ import annotations

import gzip
import json
import sys

import pytest

tokenizers = pytest.importorskip("tokenizers")

from tokenmill import Tokenizer, WordPieceTrainer, load, pre_tokenizers  # noqa: E402
from tokenmill.bert import BertNormalizer, BertPreTokenizer, WordPieceDecoder  # noqa: E402

MINILM = "tokenizers/all-MiniLM-L6-v2/tokenizer.json"
VOCAB = "tokenizers/bert-base-uncased/vocab.txt"


@pytest.fixture(scope="module")
def pairs(shared_data):
    """name -> (ours, theirs), both without the MiniLM file's truncation and padding."""
    minilm = (Tokenizer.from_file(shared_data / MINILM),
              tokenizers.Tokenizer.from_file(str(shared_data / MINILM)))
    minilm[0].truncation = minilm[0].padding = None
    minilm[1].no_truncation()
    minilm[1].no_padding()
    vocab = (load(shared_data / VOCAB),
             tokenizers.BertWordPieceTokenizer.from_file(str(shared_data / VOCAB))._tokenizer)
    return {"minilm": minilm, "vocab.txt": vocab}


def test_goldens(shared_data, pairs):
    ours, theirs = pairs["minilm"]
    with gzip.open(shared_data / "goldens" / "strings.jsonl.gz", "rt", encoding="utf-8") as f:
        strings = [json.loads(line)["text"] for line in f]
    with gzip.open(shared_data / "goldens" / "all-MiniLM-L6-v2_tokenizer_json.jsonl.gz", "rt",
                   encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert [r["text"] for r in rows] == strings and len(rows) == 295
    bad = []
    for row in rows:
        plain = ours.encode(row["text"], add_special_tokens=False)
        if plain.ids != row["ids"] or plain.offsets != [tuple(o) for o in row["offsets"]] or \
                ours.encode(row["text"]).ids != row["ids_with_special_tokens"]:
            bad.append(row["text"][:60])
        for name in pairs:  # the vocab.txt tokenizer gives the goldens' ids too
            tok, ref = pairs[name]
            if tok.encode(row["text"]).ids != row["ids_with_special_tokens"]:
                bad.append((name, row["text"][:60]))
            for skip in (True, False):
                ids = row["ids_with_special_tokens"]
                if tok.decode(ids, skip_special_tokens=skip) != \
                        ref.decode(ids, skip_special_tokens=skip):
                    bad.append(("decode", name, skip, row["text"][:60]))
    assert bad == [], f"{len(bad)} mismatches, first: {bad[:3]}"


@pytest.fixture(scope="module")
def expected(corpus_lines, pairs):
    """`tokenizers`' ids and offsets of every distinct corpus line (about 1.07M lines: a line
    repeated gives the same tokens each time), computed once: the two files' Hugging Face
    tokenizers are the same pipeline (checked below)."""
    lines = list(dict.fromkeys(corpus_lines))
    assert len(lines) > 1_000_000
    encodings = pairs["minilm"][1].encode_batch(lines, add_special_tokens=False)
    return lines, [(e.ids, e.offsets) for e in encodings]


def test_the_two_files_are_one_pipeline_in_tokenizers(pairs):
    a, b = (json.loads(pairs[name][1].to_str()) for name in ("minilm", "vocab.txt"))
    for part in ("normalizer", "pre_tokenizer", "model", "added_tokens"):
        key = (lambda t: t["id"]) if part == "added_tokens" else None
        assert (sorted(a[part], key=key) if key else a[part]) == \
            (sorted(b[part], key=key) if key else b[part]), part


@pytest.mark.parametrize("name", ["minilm", "vocab.txt"])
def test_every_line_of_every_corpus(pairs, expected, name):
    full = pairs[name][0]
    # without the post-processor, which adds nothing here (pairs are tested below)
    ours = Tokenizer(full.model, normalizer=full.normalizer, pre_tokenizer=full.pre_tokenizer,
                     added_tokens=full.added_tokens)
    lines, reference = expected
    bad = []
    for k, (line, (ids, offsets)) in enumerate(zip(lines, reference)):
        got = ours.encode(line, add_special_tokens=False)
        if got.ids != ids or got.offsets != offsets:
            bad.append((k, line[:60]))
    assert bad == [], f"{name}: {len(bad)} of {len(lines)} lines differ, first {bad[:3]}"
    # the threaded batch path, ids only: the lines holding no special token's text
    plain = [line for line in lines[::7] if "[" not in line]
    assert ours.encode_ordinary_batch(plain, num_threads=2) == \
        [ids for line, (ids, _) in zip(lines[::7], reference[::7]) if "[" not in line]


def test_pairs_with_type_ids(shared_data, pairs):
    with gzip.open(shared_data / "text" / "flores200_dev" / "eng_Latn.dev.gz", "rt",
                   encoding="utf-8") as f:
        english = f.read().splitlines()[:200]
    with gzip.open(shared_data / "text" / "flores200_dev" / "zho_Hans.dev.gz", "rt",
                   encoding="utf-8") as f:
        chinese = f.read().splitlines()[:200]
    texts = list(zip(english, chinese)) + [("[CLS] a [SEP]", "b[MASK]c"), ("", "x"), ("x", "")]
    bad = []
    for name, (ours, theirs) in pairs.items():
        for add in (True, False):
            batch = ours.encode_batch(texts, add_special_tokens=add, num_threads=2)
            for (a, b), e, in_batch in zip(texts, theirs.encode_batch(
                    texts, add_special_tokens=add), batch, strict=True):
                expected = (e.ids, e.type_ids, e.offsets, e.special_tokens_mask,
                            e.attention_mask)
                for how, got in (("encode", ours.encode(a, b, add_special_tokens=add)),
                                 ("encode_batch", in_batch)):
                    if (got.ids, got.type_ids, got.offsets, got.special_tokens_mask,
                            got.attention_mask) != expected:
                        bad.append((name, add, how, a[:30]))
    assert bad == [], f"{len(bad)} mismatches, first: {bad[:3]}"


def test_every_code_point_through_normalizer_and_pre_tokenizer(pairs):
    # Each code point between two letters, 64 to a text: the classes (control, format,
    # punctuation, marks, CJK, case) of all of Unicode, offsets included.
    points = [chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp < 0xE000]
    texts = [" ".join(f"a{c}b" for c in points[i:i + 64]) for i in range(0, len(points), 64)]
    for name, options in [("uncased", {}), ("cased", {"lowercase": False}),
                          ("accents kept", {"strip_accents": False})]:
        theirs = tokenizers.Tokenizer(pairs["minilm"][1].model)
        theirs.normalizer = tokenizers.normalizers.BertNormalizer(**options)
        theirs.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
        reference = theirs.encode_batch(texts)
        # the core's one-pass route, and the Python components (a Sequence is not taken
        # natively)
        # natively (for the default only and every fifth text: it is slow, and a property test
        # holds both equal)
        python = pre_tokenizers.Sequence([BertPreTokenizer()])
        for splitter, step in [(BertPreTokenizer(), 1)] + ([(python, 5)] if not options else []):
            ours = Tokenizer(pairs["minilm"][0].model, normalizer=BertNormalizer(**options),
                             pre_tokenizer=splitter)
            bad = [k for k, (text, e) in enumerate(zip(texts, reference))
                   if k % step == 0 and (lambda got: (got.ids, got.offsets) != (
                       e.ids, e.offsets))(ours.encode(text))]
            assert bad == [], f"{name}: {len(bad)} texts differ, first {texts[bad[0]][:40]!r}"


def test_trained_tokenizer_loads_in_tokenizers(shared_data, tmp_path):
    lines = (shared_data / "text" / "en" / "tinyshakespeare.txt").read_text("utf-8")
    lines = lines.splitlines()
    tok = load(shared_data / VOCAB)  # BERT's pipeline, to be retrained
    result = tok.train_from_iterator(lines, WordPieceTrainer(vocab_size=3000))
    assert len(tok.get_vocab()) == 3000 and len(result.steps) > 2000
    from tokenmill.bert import bert_processing

    tok.post_processor = bert_processing(tok.model)
    path = tmp_path / "tokenizer.json"
    tok.save(path, hf_compatible=True)
    theirs = tokenizers.Tokenizer.from_file(str(path))
    sample = lines[::37] + ["Ünïcödé 中文 [MASK] text!", "a" * 150]
    for add in (True, False):
        assert [e.ids for e in theirs.encode_batch(sample, add_special_tokens=add)] == \
            [tok.encode(t, add_special_tokens=add).ids for t in sample]
    ids = [tok.encode(t).ids for t in sample]
    assert [tok.decode(i) for i in ids] == theirs.decode_batch(ids)


def test_saved_bert_files_load_in_tokenizers(pairs, tmp_path):
    text = "Héllo, wörld! 你好 [SEP] don't stop"
    for name, (ours, theirs) in pairs.items():
        path = tmp_path / f"{name}.json"
        ours.save(path)
        again = tokenizers.Tokenizer.from_file(str(path))
        assert again.encode(text, "pair").ids == theirs.encode(text, "pair").ids
        assert again.encode(text, "pair").type_ids == theirs.encode(text, "pair").type_ids
        assert Tokenizer.from_file(path).to_dict() == ours.to_dict()


def test_decoder_matches_tokenizers():
    tokens = ["hello", "##s", ",", "it", "'", "s", "don", "'", "t", ".", "do", "not", "?",
              "##'", "' s", " ", "##"]
    for cleanup in (True, False):
        theirs = tokenizers.decoders.WordPiece(prefix="##", cleanup=cleanup)
        for k in range(len(tokens)):
            chunk = tokens[k:] + tokens[:k]
            assert WordPieceDecoder(cleanup=cleanup).decode(chunk) == theirs.decode(chunk)


def test_runtime_added_tokens_as_in_tokenizers(shared_data):
    # add_tokens matches in the normalized text (tokenizers' default for a plain token), so
    # "NEW_TOK" is the new token under the uncased normalizer; add_special_tokens of a token
    # already added makes it special (left out by decode).
    ours = Tokenizer.from_file(shared_data / MINILM)
    theirs = tokenizers.Tokenizer.from_file(str(shared_data / MINILM))
    ours.truncation = ours.padding = None
    theirs.no_truncation()
    theirs.no_padding()
    for tok in (ours, theirs):
        tok.add_tokens(["new_tok", "hello"])
    for text in ["NEW_TOK", "a New_Tok b", "HELLOworld", "hello"]:
        assert ours.encode(text).ids == theirs.encode(text).ids, text
    assert ours.encode("NEW_TOK").ids == [101, 30522, 102]
    for tok in (ours, theirs):
        tok.add_special_tokens(["new_tok"])
    ids = ours.encode("a new_tok").ids
    assert ours.decode(ids) == theirs.decode(ids) == "a"
    saved = ours.to_dict()["added_tokens"]
    assert [(t["content"], t["normalized"], t["special"]) for t in saved][-2:] == \
        [("new_tok", True, True), ("hello", True, False)]


@pytest.mark.parametrize("side, pad_token", [("right", "[PAD]"), ("left", "[PAD]"),
                                             ("right", "<pad>")])
def test_the_files_own_truncation_and_padding(shared_data, side, pad_token):
    # MiniLM's file truncates to 128 and pads to 128: encodings that fit are laid out the short
    # way and then padded (the pad's tokens left unmade where the vocabulary spells them so);
    # longer ones are cut into windows. Every field against tokenizers, as the file has it.
    from tokenmill.encoding import Padding

    ours = Tokenizer.from_file(shared_data / MINILM)
    theirs = tokenizers.Tokenizer.from_file(str(shared_data / MINILM))
    assert ours.truncation is not None and ours.padding is not None
    ours.padding = Padding(side=side, pad_token=pad_token, length=128)
    theirs.enable_padding(direction=side, pad_token=pad_token, length=128)
    with gzip.open(shared_data / "text" / "flores200_dev" / "eng_Latn.dev.gz", "rt",
                   encoding="utf-8") as f:
        english = f.read().splitlines()[:40]
    texts = english + [" ".join(english[:8]), ""]  # (one text past 128 tokens)
    pairs_ = list(zip(texts, texts[1:] + texts[:1])) + [(texts[-2], texts[-2])]

    def fields(e):
        return (e.ids, e.tokens, e.type_ids, e.offsets, e.special_tokens_mask, e.attention_mask,
                e.word_ids, e.sequence_ids,
                [(o.ids, o.tokens, o.type_ids, o.attention_mask) for o in e.overflowing])

    for inputs in (texts, pairs_):
        expected = [fields(e) for e in theirs.encode_batch(inputs)]
        one = [fields(ours.encode(*(x if isinstance(x, tuple) else (x,)))) for x in inputs]
        assert one == expected
        assert [fields(e) for e in ours.encode_batch(inputs)] == expected
    assert any(len(e.overflowing) > 0 for e in theirs.encode_batch(pairs_))
