"""`tokenmill eval` and `tokenmill sweep` through main(argv); bad input ends in one line."""

from __future__ import annotations

import json

import pytest

from tokenmill import Tokenizer
from tokenmill.cli import main
from tokenmill.errors import InputError
from tokenmill.sweep import cut, parse_sizes, train_sizes


def test_eval_table_and_json(trained_file, corpora, capsys):
    args = ["eval", str(trained_file), "--corpus", f"en={corpora['en']}",
            "--corpus", f"upper={corpora['upper']}", "--corpus", str(corpora["more"]),
            "--reference", "en", "--context", "20"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "Tokens per byte over documents" in out and "parity" in out
    assert "Unknown tokens and vocabulary use" in out and "all corpora" in out
    assert "evaluated 1 tokenizer on 3 corpora" in err
    assert main(args + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["settings"]["context"] == 20 and doc["settings"]["reference"] == "en"
    assert [c["name"] for c in doc["corpora"]] == ["en", "upper", "more"]
    rows = {r["corpus"]: r for r in doc["results"]}
    assert rows["en"]["parity"] == 1.0 and rows["upper"]["parity"] > 1.0
    assert rows["more"]["parity"] is None  # not parallel: 200 lines against 60
    assert set(rows["en"]["tokens_per_byte"]) == {"mean", "p50", "p95", "p99"}
    assert doc["tokenizers"][0]["name"] == "tok"
    assert doc["tokenizers"][0]["fingerprint"] == Tokenizer.from_file(trained_file).fingerprint()


def test_eval_writes_json_and_html_files(trained_file, corpora, tmp_path, capsys):
    out = tmp_path / "report.html"  # matplotlib is a test dependency: no skip without it
    assert main(["eval", f"mine={trained_file}", "--corpus", str(corpora["en"]),
                 "--json", str(tmp_path / "m.json"), "--html", str(out)]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["tokenizers"][0]["name"] == "mine"
    page = out.read_text(encoding="utf-8")
    assert page.count("<figure id=") == 4  # no parity without --reference
    assert 'src="http' not in page and "<link" not in page  # self-contained


@pytest.mark.parametrize("argv, message", [
    (["eval", "missing.json", "--corpus", "x=x.txt"], "missing.json: no such file"),
    (["eval", "cl100k_base", "--corpus", "x=x.txt"],
     "tiktoken preset 'cl100k_base' needs its ranks file"),
    (["eval", "{tok}", "--corpus", "x=nowhere.txt"], "nowhere.txt: no such file or folder"),
    (["eval", "{tok}", "--corpus", "x={empty}"], "empty corpus"),
    (["eval", "{tok}"], "no corpus"),
    (["eval", "{bad}", "--corpus", "x=x.txt"], "bad.json"),
    (["eval", "{merges}", "--corpus", "x=x.txt"], "merges.txt: a merges file is half of"),
    (["eval", "{tok}", "--corpus", "{en}", "--reference", "fr"], "--reference 'fr'"),
    (["sweep", "{en}", "--vocab-sizes", "2k,x", "--corpus", "{en}"], "'x' is not a size"),
    (["sweep", "{en}", "--vocab-sizes", "256,300", "--corpus", "{en}"], "leaves no room"),
    (["sweep", "{en}", "--vocab-sizes", "100", "--corpus", "{en}"], "smaller than the alphabet"),
])
def test_bad_input_is_one_line(argv, message, trained_file, corpora, tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\n", encoding="utf-8")
    names = {"tok": trained_file, "empty": tmp_path / "empty.txt", "bad": tmp_path / "bad.json",
             "en": corpora["en"], "merges": tmp_path / "merges.txt"}
    assert main([a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tokenmill: error: ") and message in err
    assert len(err.strip().splitlines()) == 1


def test_files_that_cannot_be_read_are_one_line(trained_file, corpora, tmp_path, capsys,
                                                monkeypatch):
    # root reads any file whatever its mode, so the refusal is made here
    import errno
    from pathlib import Path

    def refused(read):
        def read_unless_refused(self, *args, **kwargs):
            if self.name.startswith("noperm"):
                raise PermissionError(errno.EACCES, "Permission denied", str(self))
            return read(self, *args, **kwargs)
        return read_unless_refused

    monkeypatch.setattr(Path, "read_bytes", refused(Path.read_bytes))
    monkeypatch.setattr(Path, "read_text", refused(Path.read_text))
    noperm = tmp_path / "noperm.json"
    noperm.write_text(trained_file.read_text("utf-8"), encoding="utf-8")
    for argv in (["eval", str(noperm), "--corpus", str(corpora["en"])],
                 ["golden", "freeze", str(noperm), "-o", str(tmp_path / "g.jsonl")],
                 ["check-config", str(trained_file), str(noperm)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == f"tokenmill: error: {noperm}: cannot read (Permission denied)\n"


def test_two_tokenizers_with_one_name(trained_file, corpora, capsys):
    assert main(["eval", str(trained_file), str(trained_file), "--corpus",
                 str(corpora["en"])]) == 2
    assert "two tokenizers are named 'tok'; name them NAME=PATH" in capsys.readouterr().err


# -- sweep --------------------------------------------------------------------------------------

def test_parse_sizes():
    assert parse_sizes("2k,8k,32k") == [2000, 8000, 32000]
    assert parse_sizes("32Ki, 300") == [300, 32768]
    with pytest.raises(InputError):
        parse_sizes("2k,,3k")


def test_cut_equals_training_each_size(sample_lines):
    toks, steps, notes = train_sizes(sample_lines, [300, 420, 600],
                                     special_tokens=["<|endoftext|>"])
    assert not notes and len(steps) == 600 - 257
    for size in (300, 420):
        alone, _, _ = train_sizes(sample_lines, [size], special_tokens=["<|endoftext|>"])
        assert toks[size].to_dict() == alone[size].to_dict()
        assert toks[size].get_vocab_size() == size
    assert cut(toks[600], 600).to_dict() == toks[600].to_dict()


def test_sweep_cli(tmp_path, corpora, sample_lines, capsys):
    train = tmp_path / "train.txt"
    train.write_text("\n".join(sample_lines[400:]) + "\n", encoding="utf-8")
    assert main(["sweep", str(train), "--vocab-sizes", "300,400,600", "--corpus",
                 f"en={corpora['en']}", "--corpus", f"upper={corpora['upper']}",
                 "--reference", "en", "--json", "--save-dir", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    summary = doc["sweep"]["summary"]
    assert [s["vocab_size"] for s in summary] == [300, 400, 600]
    assert [t["name"] for t in doc["tokenizers"]] == ["V=300", "V=400", "V=600"]
    means = [s["tokens_per_byte"]["mean"] for s in summary]
    assert means[0] > means[1] > means[2]  # more merges, fewer tokens
    assert len(doc["sweep"]["merge_counts"]) == 600 - 256
    assert Tokenizer.from_file(tmp_path / "tokenizer-400.json").get_vocab_size() == 400
