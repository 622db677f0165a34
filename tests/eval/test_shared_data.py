"""Evaluation on real tokenizers and the FLORES parallel sentences of ../shared/data."""

from __future__ import annotations

import json

import pytest

import tokenmill
from tokenmill.cli import main
from tokenmill.evaluate import corpora_in, evaluate, read_corpus

LANGUAGES = ("eng_Latn", "zho_Hans", "amh_Ethi", "rus_Cyrl")


@pytest.fixture(scope="module")
def flores(shared_data):
    return [read_corpus(str(shared_data / "text" / "flores200_dev" / f"{lang}.dev.gz"),
                        max_documents=150) for lang in LANGUAGES]


def test_eval_cli_on_flores(shared_data, tmp_path, capsys):
    tiktoken_dir = shared_data / "tokenizers" / "tiktoken"
    assert main(["eval", f"cl100k_base={tiktoken_dir / 'cl100k_base.tiktoken'}",
                 str(shared_data / "tokenizers" / "gpt2" / "tokenizer.json"),
                 "--corpora", str(shared_data / "text" / "flores200_dev"),
                 "--max-documents", "40", "--reference", "eng_Latn", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in doc["tokenizers"]] == ["cl100k_base", "gpt2"]
    assert len(doc["corpora"]) == 26 and all(c["documents"] == 40 for c in doc["corpora"])
    rows = {(r["tokenizer"], r["corpus"]): r for r in doc["results"]}
    for name in ("cl100k_base", "gpt2"):
        assert rows[name, "eng_Latn"]["parity"] == 1.0
        assert rows[name, "zho_Hans"]["parity"] > 1.0
        assert all(r["unk_rate"] == 0 == r["byte_fallback_rate"] for r in doc["results"])
    # GPT-2 had little besides English to learn from; cl100k_base is cheaper elsewhere.
    assert rows["cl100k_base", "zho_Hans"]["tokens"] < rows["gpt2", "zho_Hans"]["tokens"]


def test_counts_match_direct_encoding(shared_data, flores):
    gpt2 = tokenmill.load(shared_data / "tokenizers" / "gpt2" / "tokenizer.json")
    ev = evaluate({"gpt2": gpt2}, flores, context=64, reference="eng_Latn")
    for corpus in flores:
        lengths = [len(gpt2.encode_ordinary(d)) for d in corpus.documents if d]
        r = ev.result("gpt2", corpus.name)
        assert r.tokens == sum(lengths)
        assert r.over_context == sum(n > 64 for n in lengths) / len(lengths)


def test_byte_fallback_on_a_sentencepiece_style_bpe(shared_data, flores):
    mistral = tokenmill.load(shared_data / "tokenizers" / "mistral-7b-v0.3" / "tokenizer.json")
    ev = evaluate({"mistral": mistral}, flores)
    assert ev.result("mistral", "amh_Ethi").byte_fallback_rate > 0.2
    assert ev.result("mistral", "eng_Latn").byte_fallback_rate < 0.01
    assert all(r.unk_rate == 0 for r in ev.results)


def test_check_config_of_real_files(shared_data, tmp_path, capsys):
    folder = shared_data / "tokenizers" / "mistral-7b-v0.3"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"vocab_size": 32768, "bos_token_id": 1, "eos_token_id": 2}))
    assert main(["check-config", str(folder / "tokenizer.json"), str(config)]) == 0
    out = capsys.readouterr().out
    assert "'</s>' = 2 (by tokenizer_config.json)" in out
    gpt2 = shared_data / "tokenizers" / "gpt2" / "tokenizer.json"
    config.write_text(json.dumps({"vocab_size": 50257, "bos_token_id": 50256,
                                  "eos_token_id": 50256}))
    assert main(["check-config", str(gpt2), str(config)]) == 0
    config.write_text(json.dumps({"vocab_size": 32000, "bos_token_id": 1, "eos_token_id": 2}))
    assert main(["check-config", str(gpt2), str(config)]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_golden_roundtrip_on_gpt2(shared_data, tmp_path, capsys):
    gpt2 = str(shared_data / "tokenizers" / "gpt2" / "tokenizer.json")
    goldens = tmp_path / "gpt2.jsonl"
    assert main(["golden", "freeze", gpt2, "-o", str(goldens)]) == 0
    assert main(["golden", "check", gpt2, str(goldens)]) == 0
    records = [json.loads(line) for line in goldens.read_text(encoding="utf-8").splitlines()]
    hello = next(r for r in records if r.get("name") == "script/english")
    assert hello["ids"][:4] == [464, 2068, 7586, 21831]  # "The quick brown fox", GPT-2's ids


def test_corpora_folder_names(shared_data):
    names = [c.name for c in corpora_in(shared_data / "text" / "flores200_dev",
                                        max_documents=1)]
    assert len(names) == 26 and "eng_Latn" in names and "zho_Hant" in names
