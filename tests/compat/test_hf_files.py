"""Real Hugging Face ``tokenizer.json`` files, id for id and offset for offset: tokenmill against
`tokenizers` on the goldens and on the corpora of ../shared/data (every FLORES line, and a few MB
of English, Chinese and code). Decoding too, with and without special tokens. Zero mismatches
is the bar.

GPT-2's file is of the old format (a model without "type", empty prefix and suffix, a ByteLevel
post-processor); Mistral's is character-level BPE with byte fallback behind Metaspace, 771
special tokens, a decoder chain and a template.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")

from tokenmill import Tokenizer  # noqa: E402
from tokenmill.errors import FormatError  # noqa: E402

NAMES = ["gpt2", "mistral-7b-v0.3"]


def tokenizer_path(shared: Path, name: str) -> Path:
    return shared / "tokenizers" / name / "tokenizer.json"


@pytest.fixture(scope="module")
def pairs(shared_data):
    return {name: (Tokenizer.from_file(tokenizer_path(shared_data, name)),
                   tokenizers.Tokenizer.from_file(str(tokenizer_path(shared_data, name))))
            for name in NAMES}


def read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def flores_lines(shared: Path) -> list[str]:
    lines: list[str] = []
    for path in sorted((shared / "text" / "flores200_dev").glob("*.dev.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines += f.read().splitlines()
    assert len(lines) == 26 * 997
    return lines


def other_texts(shared: Path) -> list[str]:
    """About 3 MB: English prose, Chinese prose (simplified and traditional) and code, in
    paragraphs and whole chunks, so that long texts and line breaks are covered too."""
    texts: list[str] = []
    for path in ["text/en/tinyshakespeare.txt", "text/en/ud_en_ewt_dev.txt",
                 "text/zh/ud_zh_gsdsimp_dev.txt"]:
        texts += (shared / path).read_text("utf-8").split("\n\n")
    gutenberg = sorted((shared / "text" / "en" / "gutenberg").glob("*"))[0]
    prose = gutenberg.read_text("utf-8")[:400_000] + \
        (shared / "text" / "zh" / "hongloumeng.txt").read_text("utf-8")[:300_000]
    with gzip.open(shared / "text" / "zh" / "gutenberg_zh_hant.txt.gz", "rt",
                   encoding="utf-8") as f:
        prose += f.read(200_000)
    texts += [prose[i:i + 5000] for i in range(0, len(prose), 5000)]
    for path in sorted((shared / "code").glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for k, line in enumerate(f):
                if k == 12:
                    break
                texts.append(json.loads(line)["text"])
    return texts


def mismatches(ours: Tokenizer, theirs, texts: list[str]) -> list[tuple[int, str]]:
    """Texts whose ids or offsets differ, from ``encode`` one at a time or from ``encode_batch``
    (the core's threaded call where the tokenizer allows it)."""
    bad = []
    batch = ours.encode_batch(texts, add_special_tokens=False, num_threads=2)
    for k, (text, expected, in_batch) in enumerate(zip(texts, theirs.encode_batch(
            texts, add_special_tokens=False), batch, strict=True)):
        got = ours.encode(text, add_special_tokens=False)
        if got.ids != expected.ids or got.offsets != expected.offsets:
            bad.append((k, text[:60]))
        elif in_batch.ids != expected.ids or in_batch.offsets != expected.offsets:
            bad.append((k, "in a batch: " + text[:60]))
    return bad


@pytest.mark.parametrize("name", NAMES)
def test_goldens(shared_data, pairs, name):
    ours, theirs = pairs[name]
    strings = read_jsonl_gz(shared_data / "goldens" / "strings.jsonl.gz")
    rows = read_jsonl_gz(shared_data / "goldens" /
                         f"{name}_tokenizer_json.jsonl.gz")
    assert len(rows) == len(strings) == 295
    bad = []
    for string, row in zip(strings, rows):
        assert row["text"] == string["text"]
        plain = ours.encode(row["text"], add_special_tokens=False)
        full = ours.encode(row["text"])
        if (plain.ids != row["ids"] or plain.offsets != [tuple(o) for o in row["offsets"]]
                or full.ids != row["ids_with_special_tokens"]):
            bad.append(row["text"][:60])
        for ids in (row["ids"], row["ids_with_special_tokens"]):
            for skip in (True, False):
                if ours.decode(ids, skip_special_tokens=skip) != \
                        theirs.decode(ids, skip_special_tokens=skip):
                    bad.append(("decode", skip, row["text"][:60]))
    assert bad == [], f"{len(bad)} mismatches, first: {bad[:3]}"


@pytest.fixture(scope="module")
def corpora(shared_data):
    return {"flores": flores_lines(shared_data), "other": other_texts(shared_data)}


@pytest.mark.parametrize("corpus", ["flores", "other"])
@pytest.mark.parametrize("name", NAMES)
def test_corpora(pairs, corpora, name, corpus):
    ours, theirs = pairs[name]
    bad = mismatches(ours, theirs, corpora[corpus])
    assert bad == [], f"{len(bad)} mismatches, first: {bad[:3]}"


@pytest.mark.parametrize("name", NAMES)
def test_decode_corpora(pairs, corpora, name):
    ours, theirs = pairs[name]
    texts = corpora["flores"][::5] + corpora["other"][::4]
    bad = []
    for text, encoding in zip(texts, theirs.encode_batch(texts)):
        for skip in (True, False):
            if ours.decode(encoding.ids, skip_special_tokens=skip) != \
                    theirs.decode(encoding.ids, skip_special_tokens=skip):
                bad.append((skip, text[:60]))
    assert bad == [], f"{len(bad)} mismatches, first: {bad[:3]}"


ADDED_TOKEN_TEXTS = [
    "<s>Hello</s> [INST] do it [/INST]",
    "  <s>  x",
    "a<|endoftext|>b <|endoftext|> c<|endoftext|>",
    "[control_8][TOOL_CALLS]x[control_9] [INST]",
    "<unk><s></s>",
    "<0x41>▁▁ <s>",
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("text", ADDED_TOKEN_TEXTS)
def test_added_tokens_in_text_and_pairs(pairs, name, text):
    ours, theirs = pairs[name]
    for pair in (None, " and " + text):
        for add in (True, False):
            got = ours.encode(text, pair, add_special_tokens=add)
            expected = theirs.encode(text, pair, add_special_tokens=add)
            assert (got.ids, got.offsets, got.type_ids, got.attention_mask) == \
                (expected.ids, expected.offsets, expected.type_ids, expected.attention_mask)


@pytest.mark.parametrize("name", NAMES)
def test_saved_file_is_what_tokenizers_writes(shared_data, pairs, tmp_path, name):
    ours, theirs = pairs[name]
    assert ours.to_dict() == json.loads(theirs.to_str())
    path = tmp_path / "tokenizer.json"
    ours.save(path)
    again = Tokenizer.from_file(path)
    reloaded = tokenizers.Tokenizer.from_file(str(path))
    text = ADDED_TOKEN_TEXTS[0] + " héllo 日本語 😀"
    assert again.encode(text).ids == reloaded.encode(text).ids == theirs.encode(text).ids
    assert again.to_dict() == ours.to_dict()


def test_old_format_model_keeps_its_fields(shared_data):
    data = json.loads(tokenizer_path(shared_data, "gpt2").read_text("utf-8"))
    assert "type" not in data["model"]
    model = Tokenizer.from_dict(data).to_dict()["model"]
    assert model["type"] == "BPE"
    assert (model["continuing_subword_prefix"], model["end_of_word_suffix"]) == ("", "")


@pytest.mark.parametrize(("model", "message"), [
    ({"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
     "model.type: WordLevel models are not supported"),
    ({"vocab": {"a": 0}, "unk_token": "a"},
     "model.type: missing; the fields are those of a WordLevel model"),
    ({"vocab": {"a": 0}}, "model.type: missing, and the fields do not tell the model"),
])
def test_unsupported_models_are_named(model, message):
    with pytest.raises(FormatError, match=message.replace("(", r"\(")):
        Tokenizer.from_dict({"model": model})


def test_code_points_newer_than_pythons_unicode(pairs):
    # Letters, digits and marks that Unicode assigned after Python 3.11's 14.0: those of 15.0
    # to 16.0 are of their class to tokenizers' engine, those of 17.0 (U+0558, Tangut, CJK
    # extension J) of none, and GPT-2's pieces are cut the same here.
    import unicodedata

    import regex

    ours, theirs = pairs["gpt2"]
    classed = regex.compile(r"[\p{L}\p{N}\p{M}]")
    points = [chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000
              and unicodedata.category(chr(c)) == "Cn" and classed.match(chr(c))]
    assert len(points) > 20_000
    for start in range(0, len(points), 2048):
        text = "".join(f"{c}'s A{c}b {c}7\n" for c in points[start:start + 2048])
        assert ours.encode(text).ids == theirs.encode(text).ids, hex(ord(points[start]))
