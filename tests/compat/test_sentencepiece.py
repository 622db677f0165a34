"""SentencePiece models, id for id: tokenmill reading the .model files of ../shared/data itself
against sentencepiece (a test dependency) on the goldens and on every line of every corpus there.
Zero mismatches is the bar."""

from __future__ import annotations

import gzip
import json
import random

import pytest
import sentencepiece as spm
import tokenizers

import tokenmill
from tokenmill import FormatError, Tokenizer
from tokenmill.formats import sentencepiece as sp_format
from tokenmill.models.unigram import Unigram
from tokenmill.trainers.unigram import UnigramTrainer

MODELS = {
    "albert-spiece-fixture": "albert-spiece-fixture/spiece.model",
    "mistral-7b-v0.1": "mistral-7b-v0.1/tokenizer.model",
    "mistral-7b-v0.3": "mistral-7b-v0.3/tokenizer.model",
}


@pytest.fixture(scope="module")
def pairs(shared_data):
    return {name: (tokenmill.load(shared_data / "tokenizers" / path),
                   spm.SentencePieceProcessor(model_file=str(shared_data / "tokenizers" / path)))
            for name, path in MODELS.items()}


@pytest.fixture(scope="module")
def lines(corpus_lines):
    # every distinct line (a quarter of the lines repeat: blank lines, code); ~2 minutes in all
    return list(dict.fromkeys(corpus_lines))


@pytest.mark.parametrize("name", MODELS)
def test_goldens(shared_data, pairs, name):
    tok, ref = pairs[name]
    rows = [json.loads(line) for line in
            gzip.open(shared_data / "goldens" / f"{name}_sentencepiece.jsonl.gz", "rt")]
    assert len(rows) == 295
    for row in rows:
        assert tok.encode_ordinary(row["text"]) == row["ids"], row["text"][:60]
        assert tok.decode(row["ids"]) == ref.decode(row["ids"]), row["text"][:60]


def test_model_kinds(pairs):
    assert type(pairs["albert-spiece-fixture"][0].model).__name__ == "Unigram"
    assert type(pairs["mistral-7b-v0.1"][0].model).__name__ == "BPE"


@pytest.mark.parametrize("name", MODELS)
def test_every_line_of_every_corpus(pairs, lines, name, assert_same_ids):
    assert len(lines) > 400_000
    tok, ref = pairs[name]
    assert_same_ids(name, tok.encode_ordinary_batch(lines), ref.encode(lines, num_threads=2))


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes):
    """(field number, value) of a protobuf message: ints for varints, bytes for the rest."""
    at = 0
    while at < len(data):
        tag, at = _varint(data, at)
        kind = tag & 7
        if kind == 0:
            value, at = _varint(data, at)
        elif kind == 2:
            size, at = _varint(data, at)
            value, at = data[at:at + size], at + size
        else:
            size = 4 if kind == 5 else 8
            value, at = data[at:at + size], at + size
        yield tag >> 3, value


def surface_spans(ref, text: str) -> list[tuple[int, int] | None]:
    """Each piece's span in text's characters, from sentencepiece's SentencePieceText (its
    pieces' begin and end bytes); None where the span is empty or cuts a character."""
    char_at, at = {}, 0
    for k, ch in enumerate(text):
        char_at[at] = k
        at += len(ch.encode())
    char_at[at] = len(text)
    spans = []
    for number, piece in _fields(ref.encode(text, out_type="serialized_proto")):
        if number == 2:
            fields = dict(_fields(piece))
            begin, end = fields.get(4, 0), fields.get(5, 0)
            ok = begin < end and begin in char_at and end in char_at
            spans.append((char_at[begin], char_at[end]) if ok else None)
    return spans


@pytest.mark.parametrize("name", MODELS)
def test_offsets_equal_sentencepieces_surfaces(pairs, lines, name):
    # A run of spaces that remove_extra_whitespaces collapses is the kept "▁"'s span, as in
    # sentencepiece (a lone "▁" in "a  s" covers 1-3). (sentencepiece's empty spans, the dummy
    # prefix's and those of a character's leading byte pieces, are left out.)
    tok, ref = pairs[name]
    texts = ["a  s", "missed him. \u00a0He--", "|      TEMPERANCE.     |", *lines[::60]]
    for text in texts:
        ours = tok.encode(text, add_special_tokens=False).offsets
        theirs = surface_spans(ref, text)
        assert len(ours) == len(theirs), text
        assert all(t is None or o == t for o, t in zip(ours, theirs)), text


def test_offsets_point_into_the_original_text(pairs):
    tok, _ = pairs["albert-spiece-fixture"]
    text = "  Ｈello   wörld "
    enc = tok.encode(text)
    # the dummy prefix takes the span of the first character kept: the fullwidth "Ｈ" at 2
    assert enc.offsets[0][0] == 2
    assert enc.offsets[-1][1] == len(text) - 1
    for (start, end) in enc.offsets:
        assert 0 <= start <= end <= len(text)


def test_control_pieces_are_special_tokens_never_matched_in_text(pairs):
    tok, ref = pairs["mistral-7b-v0.3"]
    assert tok.encode_ordinary("<s>[INST]") == ref.encode("<s>[INST]")
    assert tok.encode("a", add_special_tokens=False).ids == ref.encode("a")
    assert tok.decode([1, *ref.encode("hi")]) == "hi"


def test_truncated_and_corrupted_files_are_format_errors(shared_data, tmp_path):
    data = (shared_data / "tokenizers" / MODELS["albert-spiece-fixture"]).read_bytes()
    path = tmp_path / "bad.model"
    for cut in (1, 3, 100, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(FormatError, match=rf"{path.name}.*byte offset \d+"):
            tokenmill.load(path)
    corrupted = bytearray(data)
    corrupted[0] = 0x0F  # field 1 with the invalid wire type 7
    path.write_bytes(bytes(corrupted))
    with pytest.raises(FormatError, match="byte offset 0.*wire type 7"):
        tokenmill.load(path)
    path.write_bytes(b"not a model at all")
    with pytest.raises(FormatError, match="bad.model"):
        tokenmill.load(path)


def test_a_corrupted_charsmap_is_a_format_error(shared_data):
    proto = sp_format.read(shared_data / "tokenizers" / MODELS["albert-spiece-fixture"])
    normalizer = dict(proto.normalizer_spec, precompiled_charsmap=b"\xff\xff\x00\x00abc")
    broken = sp_format.ModelProto(proto.pieces, proto.trainer_spec, normalizer)
    with pytest.raises(FormatError, match="precompiled_charsmap: its header says"):
        sp_format.from_proto(broken, "x.model")


def test_a_trained_unigram_loads_in_tokenizers_with_the_same_ids(lines, tmp_path):
    from tokenmill.pre_tokenizers import Metaspace

    tok = Tokenizer(Unigram([("<unk>", 0.0)], unk_id=0), pre_tokenizer=Metaspace())
    train, held_out = lines[:20_000], lines[20_000:24_000]
    tok.train_from_iterator(train, UnigramTrainer(vocab_size=2000, special_tokens=("<pad>",)))
    path = tmp_path / "tokenizer.json"
    tok.save(path, hf_compatible=True)
    theirs = tokenizers.Tokenizer.from_file(str(path))
    assert Tokenizer.from_file(path).to_dict() == tok.to_dict()
    for text in held_out:
        assert tok.encode(text).ids == theirs.encode(text).ids, text


def test_a_unigram_trained_by_tokenizers_loads_here_with_the_same_ids(lines, tmp_path):
    from tokenizers import decoders, models, pre_tokenizers, trainers

    theirs = tokenizers.Tokenizer(models.Unigram())
    theirs.pre_tokenizer = pre_tokenizers.Metaspace()
    theirs.decoder = decoders.Metaspace()
    theirs.train_from_iterator(lines[:20_000], trainers.UnigramTrainer(
        vocab_size=2000, special_tokens=["<unk>"], unk_token="<unk>", show_progress=False))
    path = tmp_path / "tokenizer.json"
    theirs.save(str(path))
    ours = Tokenizer.from_file(path)
    assert isinstance(ours.model, Unigram)
    for text in lines[30_000:34_000]:
        expected = theirs.encode(text)
        got = ours.encode(text)
        assert got.ids == expected.ids, text
        assert got.offsets == expected.offsets, text
        assert ours.decode(got.ids) == theirs.decode(expected.ids)


@pytest.mark.parametrize("name", MODELS)
def test_decode_equals_sentencepieces_on_any_ids(pairs, name):
    # Ids as a model may emit them: byte pieces that make no valid UTF-8 (each byte that starts
    # no character is one U+FFFD, the valid characters among them kept), the unknown and
    # control pieces, a byte <0x20> or the unknown piece first (whose space is no dummy
    # prefix), control pieces anywhere (one ends a run of bytes). Hugging Face's ByteFallback
    # gives one U+FFFD for every byte of such a run.
    tok, ref = pairs[name]
    size = ref.get_piece_size()
    byte_ids = [i for i in range(size) if ref.is_byte(i)] or [ref.unk_id()]
    other_ids = [i for i in range(size) if not ref.is_control(i)]
    control = [i for i in range(size) if ref.is_control(i)]
    rnd = random.Random(name)
    for _ in range(3000):
        ids = [rnd.choice(byte_ids) if (r := rnd.random()) < 0.6 else
               rnd.choice(control) if r < 0.7 else rnd.choice(other_ids)
               for _ in range(rnd.randrange(1, 12))]
        assert tok.decode(ids) == ref.decode(ids), ids
        kept = [i for i in ids if not ref.is_control(i)]
        assert tok.decode_bytes(kept) == bytes(_raw_pieces(ref, kept)), kept
    assert tok.decode([control[-1], *ids, control[0]]) == ref.decode(ids)
    if name != "albert-spiece-fixture":  # (no byte pieces)
        for pieces in (["<0x55>", "<0x03>", "<0x4D>", "<0xC2>"],
                       ["<0xE4>", "<0xB8>", "<0x3E>", "<0x3F>"], ["<0x20>", "▁a"],
                       ["<unk>", "▁a"], ["▁▁", "a"], ["<0xED>", "<0xA0>", "<0x80>", "▁x"]):
            ids = [ref.piece_to_id(p) for p in pieces]
            assert tok.decode(ids) == ref.decode(ids), pieces


def _raw_pieces(ref, ids):
    """The bytes of ids as sentencepiece's pieces spell them, each byte piece's byte as it is
    (not as text): the dummy prefix off the first, "▁" as a space, the unknown as " ⁇ "."""
    out = bytearray()
    for k, i in enumerate(ids):
        piece = ref.id_to_piece(i)
        if ref.is_byte(i):
            out.append(int(piece[3:5], 16))
            continue
        text = " \u2047 " if ref.is_unknown(i) else piece.replace("\u2581", " ")
        if k == 0 and piece.startswith("\u2581"):
            text = text[1:]
        out += text.encode()
    return out


@pytest.mark.parametrize("name", MODELS)
def test_decode_bytes_keeps_byte_pieces_and_spaces(pairs, name):
    # decode_bytes is decode's text with byte pieces' bytes as they are: the spaces of "▁",
    # characters whole across pieces, and no U+FFFD for a cut one (each id was decoded alone).
    tok, ref = pairs[name]
    for text in ["a b \u2460", "  x y  ", "\u00e9\u65e5\u672c z", "\U0001F600 ok"]:
        ids = ref.encode(text)
        assert tok.decode_bytes(ids) == ref.decode(ids, out_type=bytes), text
    if name != "albert-spiece-fixture":
        ids = [ref.piece_to_id(p) for p in ["\u2581a", "<0xC3>", "<0xA9>", "<0xC3>", "b"]]
        assert tok.decode_bytes(ids) == b"a\xc3\xa9\xc3b"
        assert tok.decode(ids) == ref.decode(ids) == "a\u00e9\ufffdb"


def test_a_model_file_round_trips_through_tokenizer_json(pairs, lines, tmp_path):
    for name in ("albert-spiece-fixture", "mistral-7b-v0.1"):
        tok, ref = pairs[name]
        path = tmp_path / f"{name}.json"
        with pytest.raises(tokenmill.InputError, match="cannot export to the Hugging Face"):
            tok.save(path, hf_compatible=True)
        tok.save(path)
        again = Tokenizer.from_file(path)
        for text in lines[:3000:3]:
            assert again.encode_ordinary(text) == ref.encode(text), text
        ids = [0, *ref.encode("cut bytes:"), *[i for i in range(300) if ref.is_byte(i)][:40]]
        assert again.decode(ids) == tok.decode(ids) == ref.decode(ids)


def test_the_normalizer_equals_sentencepieces_on_the_goldens(shared_data, pairs):
    rows = [json.loads(line) for line in gzip.open(shared_data / "goldens" / "strings.jsonl.gz",
                                                   "rt")]
    for name in ("albert-spiece-fixture", "mistral-7b-v0.3"):
        tok, ref = pairs[name]
        for row in rows:
            assert tok.normalizer.normalize_str(row["text"]) == ref.normalize(row["text"]), \
                (name, row["text"][:60])


def test_precompiled_is_the_character_map_alone(shared_data):
    import base64

    proto = sp_format.read(shared_data / "tokenizers" / MODELS["albert-spiece-fixture"])
    charsmap = base64.b64encode(proto.normalizer_spec["precompiled_charsmap"]).decode()
    tok = Tokenizer.from_dict({"model": {"type": "Unigram", "vocab": [["<unk>", 0.0]],
                                         "unk_id": 0},
                               "normalizer": {"type": "Precompiled",
                                              "precompiled_charsmap": charsmap}})
    assert tok.normalizer.normalize_str("  Ｈｅｌｌｏ ﬁ  ") == "  Hello fi  "
    with pytest.raises(FormatError, match="precompiled_charsmap: expected base64"):
        Tokenizer.from_dict({"model": {"type": "Unigram", "vocab": [["a", 0.0]]},
                             "normalizer": {"type": "Precompiled",
                                            "precompiled_charsmap": "%%%"}})
