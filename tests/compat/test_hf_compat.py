"""Tokenizers trained here load in Hugging Face `tokenizers` and give identical ids on the
multilingual corpora of ../shared/data (FLORES-200 dev, 26 languages): ids and offsets,
zero mismatches."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import tokenizers

from tokenmill import BPE, BPETrainer, Tokenizer, decoders, pre_tokenizers


def flores(shared: Path) -> dict[str, list[str]]:
    out = {}
    for path in sorted((shared / "text" / "flores200_dev").glob("*.dev.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            out[path.name.split(".")[0]] = f.read().splitlines()
    assert len(out) == 26
    return out


def training_text(shared: Path, corpora: dict[str, list[str]]) -> list[str]:
    # English and Chinese prose, plus the first 200 FLORES lines of each language so every
    # script has merges; all 997 lines of each language are then encoded.
    lines = (shared / "text" / "en" / "tinyshakespeare.txt").read_text("utf-8").splitlines()
    lines += (shared / "text" / "zh" / "ud_zh_gsdsimp_dev.txt").read_text("utf-8").splitlines()
    for sentences in corpora.values():
        lines += sentences[:200]
    return lines


def assert_same(ours: Tokenizer, path: Path, corpora: dict[str, list[str]], offsets: bool):
    theirs = tokenizers.Tokenizer.from_file(str(path))
    mismatches = []
    for lang, sentences in corpora.items():
        expected = theirs.encode_batch(sentences)
        for line, (text, exp) in enumerate(zip(sentences, expected)):
            got = ours.encode(text)
            if got.ids != exp.ids or (offsets and got.offsets != exp.offsets):
                mismatches.append((lang, line, text[:60]))
    assert mismatches == [], f"{len(mismatches)} mismatches, first: {mismatches[:3]}"


@pytest.fixture(scope="module")
def corpora(shared_data):
    return flores(shared_data)


def test_byte_level_ids_match(shared_data, corpora, tmp_path):
    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=False),
                    decoder=decoders.ByteLevel())
    trainer = BPETrainer(vocab_size=4000, special_tokens=("<|endoftext|>",),
                         initial_alphabet=tuple(pre_tokenizers.ByteLevel.alphabet()))
    tok.train_from_iterator(training_text(shared_data, corpora), trainer)
    path = tmp_path / "bytelevel.json"
    tok.save(path, hf_compatible=True)
    loaded = Tokenizer.from_file(path)
    assert loaded.native_plan() is not None  # the core runs this pipeline end to end
    assert_same(loaded, path, corpora, offsets=True)
    theirs = tokenizers.Tokenizer.from_file(str(path))
    sample = corpora["hin_Deva"][5] + "<|endoftext|>" + corpora["zho_Hans"][7]
    assert tok.encode(sample).ids == theirs.encode(sample).ids
    assert theirs.decode(tok.encode(sample).ids) == tok.decode(tok.encode(sample).ids)


def test_suffix_char_level_ids_and_offsets_match(shared_data, corpora, tmp_path):
    tok = Tokenizer(BPE({}, []), pre_tokenizer=pre_tokenizers.Whitespace(),
                    decoder=decoders.BPEDecoder(suffix="</w>"))
    trainer = BPETrainer(vocab_size=6000, special_tokens=("[UNK]", "[PAD]"), unk_token="[UNK]",
                         end_of_word_suffix="</w>", continuing_subword_prefix="##",
                         limit_alphabet=1500)
    tok.train_from_iterator(training_text(shared_data, corpora), trainer)
    path = tmp_path / "suffix.json"
    tok.save(path, hf_compatible=True)
    assert_same(tok, path, corpora, offsets=True)


def test_ignore_merges_tokens_the_merges_do_not_make(shared_data, tmp_path):
    # GPT-2 with ignore_merges and 300 tokens no merge makes: a word found whole in the
    # vocabulary is that token (Hugging Face's ignore_merges), on every path of the core. The
    # text is mostly new random words, so its batches come to merge their pieces without the
    # piece cache (cpp/src/bpe.cc, PieceMisses), where the whole-token lookup goes through a
    # filter of the vocabulary's hashes first; one word in twenty is one of the new tokens.
    import json
    import random

    from tokenmill import _core

    spec = json.loads((shared_data / "tokenizers" / "gpt2" / "tokenizer.json")
                      .read_text("utf-8"))
    spec["model"]["ignore_merges"] = True
    rnd = random.Random(11)
    vocab = spec["model"]["vocab"]
    new_words = set()
    while len(new_words) < 300:  # (Ġ: GPT-2's spelling of a space)
        word = "".join(rnd.choices("qxzjv", k=rnd.randint(4, 24)))
        if "Ġ" + word not in vocab:
            new_words.add(word)
    new_words = sorted(new_words)
    for i, word in enumerate(new_words):
        vocab["Ġ" + word] = 50_257 + i
    vocab["xqvzqzqzqzqzq"] = 50_257 + len(new_words)  # (a text's first word, no space)
    path = tmp_path / "gpt2-ignore-merges.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    theirs = tokenizers.Tokenizer.from_file(str(path))
    ours = Tokenizer.from_file(path)
    assert ours.native_plan() is not None

    words = [" " + rnd.choice(new_words) if rnd.random() < 0.05 else
             " " + "".join(rnd.choices("bcdfghjklmnpqrstvwxz", k=rnd.randint(5, 9)))
             for _ in range(60_000)]
    texts = ["".join(words[i:i + 20_000]) for i in range(0, len(words), 20_000)]
    texts.append("xqvzqzqzqzqzq" + texts[0][:5_000])
    want = [e.ids for e in theirs.encode_batch(texts)]
    new_ids = {i for ids in want for i in ids if i >= 50_257}
    assert len(new_ids) > 250 and want[3][0] == 50_257 + len(new_words), len(new_ids)
    before = _core.piece_cache_skipped_batches()
    assert ours.encode_ordinary_batch(texts, num_threads=1) == want
    assert _core.piece_cache_skipped_batches() - before > 100
    assert ours.encode_ordinary_batch(texts, num_threads=2) == want
    assert [ours.encode(t).ids for t in texts] == want  # (the path with offsets)
