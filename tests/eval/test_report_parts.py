"""The parts of the evaluation's output a person reads: terminal tables at a terminal's width,
the figures' axes and boxes, the page's word on plots it leaves out, and the CLI's reading of
corpora, names and config ids."""

from __future__ import annotations

import gzip
import io
import json

import pytest

from tokenmill import report
from tokenmill.cli import main
from tokenmill.cli_eval import default_name
from tokenmill.evaluate import evaluate, read_corpus
from tokenmill.golden import check_config


@pytest.fixture
def ev(trained, corpora):
    return evaluate({"tok": trained, "again": trained},
                    [read_corpus(f"en={corpora['en']}"), read_corpus(f"upper={corpora['upper']}")],
                    reference="en", details=True)


def test_tables_keep_every_number_at_80_columns(ev):
    out = io.StringIO()
    report.print_tables(ev, out, width=80)
    text = out.getvalue()
    assert "…" not in text
    for _, _, rows in report.terminal_tables(ev):
        for row in rows:
            for value in row:
                assert value in text, value
    # The parity column is there with a reference, and gone without one.
    assert "parity" in text
    ev.settings["reference"] = None
    assert all("parity" not in head for _, head, _ in report.terminal_tables(ev))


def test_tables_fit_80_columns_with_short_names(ev):
    out = io.StringIO()
    report.print_tables(ev, out, width=80)
    assert max(len(line.rstrip()) for line in out.getvalue().splitlines()) <= 80


def _figures(monkeypatch) -> list:
    figures: list = []
    monkeypatch.setattr(report, "svg_of", lambda fig: figures.append(fig) or b"<svg/>")
    return figures


def test_box_plot_has_a_box_per_tokenizer_and_corpus(ev, monkeypatch):
    figures = _figures(monkeypatch)
    report.plot_tokens_per_byte(ev)
    ax = figures[0].axes[0]
    boxes = [p for p in ax.patches if type(p).__name__ == "PathPatch"]
    assert len(boxes) == 2 * 2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["en", "upper"]


def test_merge_curve_is_logarithmic_and_draws_zero_counts(ev, monkeypatch):
    ev.tokenizers[0].merge_counts = [0, 0, 50, 40, 0, 30] + [3] * 100 + [0] * 100
    ev.tokenizers[1].merge_counts = None
    figures = _figures(monkeypatch)
    assert report.plot_merge_counts(ev) is not None
    ax = figures[0].axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "symlog"
    (line,) = ax.get_lines()
    ys = list(line.get_ydata())
    assert all(y == y for y in ys)  # no NaN: no gap where a bin's merges were never applied
    assert ys[0] == 0 and max(ys) == 50 and ys[-1] == 0


def test_the_page_says_which_plots_it_leaves_out(ev):
    ev.tokenizers[1].merge_counts = None
    ev.tokenizers[1].model = "WordPiece"
    missing = report.missing_plots(ev)
    assert missing == ["again (WordPiece): not in the merge-count plot, it has no merges"]
    ev.settings["reference"] = None
    missing = report.missing_plots(ev)
    assert missing[0] == "no parity plot: no reference corpus was given (--reference NAME)"
    page = report.render_html(ev, [], missing=missing)
    assert '<ul class="missing"><li>no parity plot: no reference corpus' in page


def test_sweep_mean_parity_leaves_out_the_reference(tmp_path, corpora, sample_lines, capsys):
    train = tmp_path / "train.txt"
    train.write_text("\n".join(sample_lines[400:]) + "\n", encoding="utf-8")
    assert main(["sweep", str(train), "--vocab-sizes", "300,400", "--corpus",
                 f"en={corpora['en']}", "--corpus", f"upper={corpora['upper']}",
                 "--reference", "en", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for summary in doc["sweep"]["summary"]:
        upper = next(r for r in doc["results"]
                     if r["tokenizer"] == summary["tokenizer"] and r["corpus"] == "upper")
        assert summary["mean_parity"] == pytest.approx(upper["parity"])  # not (1 + it) / 2


def test_eval_reads_corpora_as_train_does(trained_file, tmp_path, capsys):
    (tmp_path / "c.jsonl").write_text('{"body": "one two"}\n{"body": "three"}\n',
                                      encoding="utf-8")
    assert main(["eval", str(trained_file), "--corpus", str(tmp_path / "c.jsonl"),
                 "--text-field", "body", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["corpora"][0]["documents"] == 2
    with gzip.open(tmp_path / "book.txt.gz", "wt", encoding="utf-8") as f:
        f.write("line one\nline two\nline three\n")
    assert main(["eval", str(trained_file), "--corpus", str(tmp_path / "book.txt.gz"),
                 "--whole-file", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["corpora"][0]["documents"] == 1


def test_generic_file_names_are_named_after_their_folder(tmp_path):
    for folder, name in (("mistral-7b", "tokenizer.model"), ("bert", "vocab.txt"),
                         ("albert", "spiece.model"), ("gpt", "tokenizer.json")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text("", encoding="utf-8")
        assert default_name(str(tmp_path / folder / name)) == folder
    (tmp_path / "mine.v2.json").write_text("", encoding="utf-8")
    assert default_name(str(tmp_path / "mine.v2.json")) == "mine"
    assert default_name(str(tmp_path / "bert")) == "bert"


def test_check_config_refuses_a_special_id_on_an_ordinary_token(trained, tmp_path):
    path = tmp_path / "config.json"
    ordinary = trained.token_to_id("e")
    path.write_text(json.dumps({"vocab_size": 500, "unk_token_id": ordinary}), encoding="utf-8")
    ok, lines = check_config(trained, path)
    assert not ok
    assert f"MISMATCH: id {ordinary} is 'e', not a special token of the tokenizer" in lines[-2]
    # An id on a special token the tokenizer does not name as such is only unchecked.
    path.write_text(json.dumps({"vocab_size": 500, "unk_token_id": 1}), encoding="utf-8")
    ok, lines = check_config(trained, path)
    assert ok and lines[-1] == "ok: no mismatch (1 unchecked)"
    # A token named (here on the command line) that the tokenizer does not have is a mismatch,
    # not "unchecked: give --unk-token".
    ok, lines = check_config(trained, path, tokens={"unk": "zzz"})
    assert not ok and lines[-2].endswith("MISMATCH: 'zzz' (by given) is not a token of the "
                                         "tokenizer")


def test_golden_messages_name_what_they_mean(trained_file, tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    assert main(["golden", "freeze", str(trained_file), "-o", str(tmp_path / "g.jsonl"),
                 "--strings", str(tmp_path / "empty.txt"), "--no-builtin"]) == 2
    assert f"{tmp_path / 'empty.txt'}: no strings in it" in capsys.readouterr().err
    assert not (tmp_path / "g.jsonl").exists()
    (tmp_path / "one.txt").write_text("hello\n", encoding="utf-8")
    assert main(["golden", "freeze", str(trained_file), "-o", str(tmp_path / "g.jsonl"),
                 "--strings", str(tmp_path / "one.txt"), "--no-builtin"]) == 0
    capsys.readouterr()
    data = trained_file.read_text(encoding="utf-8").replace('"<|pad|>"', '"<|padding|>"')
    (tmp_path / "changed.json").write_text(data, encoding="utf-8")
    assert main(["golden", "check", str(tmp_path / "changed.json"),
                 str(tmp_path / "g.jsonl")]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert f"this tokenizer ({tmp_path / 'changed.json'}) is " in first


def test_check_config_takes_the_unknown_token_as_a_pad(shared_data, tmp_path):
    # Llama and Mistral pad with <unk> (id 0), a piece of the SentencePiece model, not an
    # added token: not a mismatch.
    from tokenmill import load

    tok = load(shared_data / "tokenizers" / "mistral-7b-v0.1" / "tokenizer.model")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"vocab_size": 32000, "bos_token_id": 1, "eos_token_id": 2,
                                "pad_token_id": 0}), encoding="utf-8")
    ok, lines = check_config(tok, path)
    assert ok, lines


def test_a_linked_file_is_named_after_the_folder_it_is_in(tmp_path):
    (tmp_path / "blobs").mkdir()
    (tmp_path / "blobs" / "0123abcd").write_text("{}", encoding="utf-8")
    (tmp_path / "my-model").mkdir()
    (tmp_path / "my-model" / "tokenizer.json").symlink_to(tmp_path / "blobs" / "0123abcd")
    assert default_name(str(tmp_path / "my-model" / "tokenizer.json")) == "my-model"


def test_rates_a_tokenizer_cannot_have_are_shown_as_a_dash(ev, shared_data, corpora):
    # The byte-level BPE has neither an unknown token nor byte fallback: "–", not "0.00%".
    head, rows = report.coverage_rows(ev)
    assert head[3:5] == ["unk", "fallback"]
    assert all(r[3:5] == ["–", "–"] for r in rows)
    from tokenmill import load

    mistral = load(shared_data / "tokenizers" / "mistral-7b-v0.1" / "tokenizer.model")
    both = evaluate({"mistral": mistral}, [read_corpus(f"en={corpora['en']}")])
    info = both.tokenizers[0]
    assert info.has_unk and info.has_byte_fallback
    _, rows = report.coverage_rows(both)
    assert rows[0][3].endswith("%") and rows[0][4].endswith("%")
