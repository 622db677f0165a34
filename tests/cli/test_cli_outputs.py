"""The commands refuse, before any work, an output that would replace one of their inputs or
that cannot be written, and numbers the core cannot take; what a review of the CLI found."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from importlib import resources

import pytest

from tokenmill import Tokenizer
from tokenmill.cli import main

SAMPLE = str(resources.files("tokenmill") / "data" / "sample.txt")


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(capsys, *argv):
    """main(argv)'s exit status (argparse's own errors included) and its stderr."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    return code, err


def one_line_error(code, err, text):
    assert code == 2 and text in err, err
    assert "Traceback" not in err and err.count("\n") == 1, err


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text("".join(open(SAMPLE, encoding="utf-8").readlines()[:200]), encoding="utf-8")
    return path


@pytest.fixture
def tok_json(tmp_path, small, capsys):
    out = tmp_path / "tok.json"
    assert main(["train", str(small), "--vocab-size", "400", "--quiet", "-o", str(out)]) == 0
    capsys.readouterr()
    return out


def test_an_output_inside_an_input_folder_is_refused(shared_data, small, tmp_path, capsys):
    # The ranks folder and a model folder are inputs: a file in them is one too.
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    shutil.copy(shared_data / "tokenizers" / "tiktoken" / "r50k_base.tiktoken", ranks)
    target = ranks / "r50k_base.tiktoken"
    before = digest(target)
    code, err = run(capsys, "encode-corpus", small, "-t", "r50k_base", "--ranks", ranks,
                    "-o", target)
    one_line_error(code, err, f"{target}: is also an input ({target}, in {ranks}); writing "
                              "the output would replace it")
    assert digest(target) == before and sorted(p.name for p in ranks.iterdir()) == \
        ["r50k_base.tiktoken"]
    model = tmp_path / "gpt2"
    shutil.copytree(shared_data / "tokenizers" / "gpt2", model)
    before = digest(model / "vocab.json")
    code, err = run(capsys, "encode-corpus", small, "-t", model, "-o", model / "vocab.json")
    one_line_error(code, err, "is also an input")
    assert digest(model / "vocab.json") == before


def test_eval_sweep_and_golden_refuse_their_inputs_as_outputs(small, tok_json, tmp_path,
                                                              capsys):
    corpus = tmp_path / "held.txt"
    shutil.copy(small, corpus)
    kept = {p: digest(p) for p in (small, tok_json, corpus)}
    for argv in (["golden", "freeze", tok_json, "-o", tok_json],
                 ["golden", "freeze", tok_json, "--strings", small, "-o", small],
                 ["eval", tok_json, "--corpus", corpus, "--json", corpus],
                 ["eval", tok_json, "--corpus", f"held={corpus}", "--html", tok_json],
                 ["sweep", small, "--vocab-sizes", "300", "--corpus", corpus, "--json", small]):
        code, err = run(capsys, *argv)
        one_line_error(code, err, "is also an input")
    assert {p: digest(p) for p in kept} == kept
    # Two outputs on one file, an output in a missing folder: refused before anything is
    # written (the JSON was written, then the HTML failed).
    code, err = run(capsys, "eval", tok_json, "--corpus", corpus, "--json", tmp_path / "x.json",
                    "--html", tmp_path / "x.json")
    one_line_error(code, err, "x.json: named as two outputs; each needs its own file")
    code, err = run(capsys, "eval", tok_json, "--corpus", corpus, "--json",
                    tmp_path / "good.json", "--html", tmp_path / "nodir" / "x.html")
    one_line_error(code, err, "x.html: directory")
    assert not (tmp_path / "good.json").exists()


def test_sweep_saves_its_tokenizers_only_once_the_evaluation_is_done(small, tmp_path, capsys):
    saved = tmp_path / "saved"
    saved.mkdir()
    code, err = run(capsys, "sweep", small, "--vocab-sizes", "300,400", "--corpus", small,
                    "--save-dir", saved, "--reference", "nope")
    one_line_error(code, err, "--reference 'nope' is not a corpus name")
    assert list(saved.iterdir()) == []
    assert run(capsys, "sweep", small, "--vocab-sizes", "300,400", "--corpus", small,
               "--save-dir", saved)[0] == 0
    assert sorted(p.name for p in saved.iterdir()) == ["tokenizer-300.json",
                                                       "tokenizer-400.json"]


@pytest.mark.parametrize("argv, message", [
    (["train", "{small}", "--vocab-size", str(2**64), "-o", "{out}"],
     f"vocab_size must be below 2**63, got {2**64}"),
    (["train", "{small}", "--num-merges", str(2**64), "-o", "{out}"],
     f"num_merges must be below 2**63, got {2**64}"),
    (["train", "{small}", "--min-frequency", str(10**20), "-o", "{out}"],
     f"min_frequency must be below 2**63, got {10**20}"),
    (["train", "{small}", "--model", "unigram", "--seed-size", str(2**64), "-o", "{out}"],
     f"seed_size must be below 2**63, got {2**64}"),
    (["sweep", "{small}", "--vocab-sizes", str(10**23), "--corpus", "{small}"],
     f"vocab_size must be below 2**63, got {10**23}"),
    (["golden", "check", "{tok}", "{small}", "--max-diffs", "-1"],
     "argument --max-diffs: expected an integer >= 0, got '-1'"),
    (["eval", "{tok}", "--corpus", "{small}", "--context", "0"],
     "argument --context: expected an integer >= 1, got '0'"),
    (["eval", "{tok}", "--corpus", "{small}", "--max-documents", "-1"],
     "argument --max-documents: expected an integer >= 1, got '-1'"),
    (["train", "{small}", "--byte-level", "--limit-alphabet", "10", "-o", "{out}"],
     "--limit-alphabet 10 is below the 256 byte symbols a byte-level tokenizer needs"),
])
def test_numbers_out_of_range_are_one_line_errors(small, tok_json, tmp_path, capsys, argv,
                                                   message):
    out = tmp_path / "new.json"
    filled = [a.format(small=small, out=out, tok=tok_json) for a in argv]
    code, err = run(capsys, *filled)
    one_line_error(code, err, message)
    assert not out.exists()


def test_golden_files_cut_short_or_malformed_are_format_errors(tok_json, tmp_path, capsys):
    goldens = tmp_path / "g.jsonl"
    assert run(capsys, "golden", "freeze", tok_json, "-o", goldens)[0] == 0
    lines = goldens.read_text(encoding="utf-8").splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:30]) + "\n", encoding="utf-8")
    code, err = run(capsys, "golden", "check", tok_json, cut)
    one_line_error(code, err, f"{cut}: holds 29 strings where its header says {len(lines) - 1}")
    record = json.loads(lines[1])
    for field, value, problem in (("offsets", [[0]], '"offsets" must be a list of [start, end]'),
                                  ("tokens", 5, '"tokens" must be a list of strings'),
                                  ("ids", None, '"ids" must be a list of integers'),
                                  ("decoded", None, '"decoded" must be a string')):
        bad = tmp_path / f"{field}.jsonl"
        bad.write_text("\n".join([lines[0], json.dumps({**record, field: value}), *lines[2:]])
                       + "\n", encoding="utf-8")
        code, err = run(capsys, "golden", "check", tok_json, bad)
        one_line_error(code, err, f"{bad}:2: {problem}")
    missing = {k: v for k, v in record.items() if k != "ids"}
    bad = tmp_path / "missing.jsonl"
    bad.write_text("\n".join([lines[0], json.dumps(missing), *lines[2:]]) + "\n",
                   encoding="utf-8")
    code, err = run(capsys, "golden", "check", tok_json, bad)
    one_line_error(code, err, f'{bad}:2: the record has no "ids" (nor an "error")')
    assert run(capsys, "golden", "check", tok_json, goldens)[0] == 0


def test_golden_strings_of_several_files_are_named_apart(tok_json, tmp_path, capsys):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("one\ntwo\n", encoding="utf-8")
    b.write_text("three\n", encoding="utf-8")
    goldens = tmp_path / "g.jsonl"
    assert run(capsys, "golden", "freeze", tok_json, "--no-builtin", "--strings", a,
               "--strings", b, "-o", goldens)[0] == 0
    names = [json.loads(line)["name"] for line in goldens.read_text().splitlines()[1:]]
    assert names == ["user/a.txt/1", "user/a.txt/2", "user/b.txt/1"]
    assert run(capsys, "golden", "freeze", tok_json, "--no-builtin", "--strings", a,
               "-o", goldens)[0] == 0
    assert [json.loads(line)["name"] for line in goldens.read_text().splitlines()[1:]] == \
        ["user/1", "user/2"]


def test_a_prefix_bpe_decodes_its_words_whole(small, tmp_path, capsys):
    out = tmp_path / "prefix.json"
    assert main(["train", str(small), "--vocab-size", "300", "--continuing-subword-prefix",
                 "##", "--quiet", "-o", str(out)]) == 0
    tok = Tokenizer.from_file(out)
    text = "Alice was beginning to get very tired"
    assert any(t.startswith("##") for t in tok.encode(text).tokens)
    assert tok.decode(tok.encode(text).ids) == text


def test_eval_of_a_tokenizer_that_gives_no_token(small, tmp_path, capsys):
    # An empty vocabulary (--limit-alphabet 0, no initial alphabet): no row goes unused and
    # bytes per token is undefined, not a division by zero or 0.00.
    out = tmp_path / "empty.json"
    assert main(["train", str(small), "--limit-alphabet", "0", "--vocab-size", "10",
                 "--quiet", "-o", str(out)]) == 0
    assert Tokenizer.from_file(out).get_vocab_size() == 0
    report = tmp_path / "r.json"
    code, err = run(capsys, "eval", out, "--corpus", small, "--json", report)
    assert code == 0, err
    result = json.loads(report.read_text())["results"][0]
    assert result["tokens"] == 0 and result["bytes_per_token"] is None
    assert result["vocab_unused"] == 0.0


def test_a_bad_scheduler_address_is_one_line_and_leaves_no_folder(small, tok_json, tmp_path,
                                                                  capsys):
    pytest.importorskip("distributed")
    out = tmp_path / "shards"
    code, err = run(capsys, "encode-corpus", small, "-t", tok_json, "-o", out, "--engine", "dask",
                    "--scheduler", "notaurl", "--timeout", "2")
    one_line_error(code, err, "notaurl: not a Dask scheduler address (missing port number")
    assert not out.exists()
    code, err = run(capsys, "encode-corpus", small, "-t", tok_json, "-o", out, "--engine", "dask",
                    "--scheduler", "tcp://127.0.0.1:1", "--timeout", "1")
    one_line_error(code, err, "cannot reach the Dask scheduler at tcp://127.0.0.1:1")
    assert not out.exists()


COUNT_FLAGS = {"char": [], "byte": ["--byte-level"], "unigram": ["--model", "unigram"],
               "wordpiece": ["--model", "wordpiece"],
               "cased": ["--model", "wordpiece", "--no-lowercase"]}


def test_a_count_file_trains_only_the_model_it_was_counted_for(small, tmp_path, capsys):
    # A unigram trained on whitespace words decoded without its spaces, a BPE on ▁-marked
    # pieces kept the marks in its text, a --no-lowercase WordPiece lowercased: each pair of
    # count file and --model that do not go together is refused, the others train (a BPE's
    # count file of either level trains a BPE without --byte-level or --char-level).
    files = {}
    for name, flags in COUNT_FLAGS.items():
        files[name] = tmp_path / f"{name}.tmc"
        assert main(["count", str(small), *flags, "-o", str(files[name])]) == 0
    capsys.readouterr()
    out = tmp_path / "t.json"
    for counted, path in files.items():
        for name, flags in COUNT_FLAGS.items():
            code, err = run(capsys, "train", "--from-counts", path, *flags, "--vocab-size",
                            "300", "--quiet", "-o", out)
            fits = counted == name or (counted == "byte" and name == "char")
            if fits:
                assert code == 0, (counted, name, err)
                tok = Tokenizer.from_file(out)
                text = "Alice was beginning"
                decoded = tok.decode(tok.encode(text).ids)
                if name == "char":  # (no decoder: words of pieces, joined by spaces)
                    assert decoded.replace(" ", "") == text.replace(" ", ""), counted
                else:
                    assert decoded == (text.lower() if name == "wordpiece" else text), counted
            else:
                one_line_error(code, err, "counted with another ")


def test_sigterm_removes_the_temporary_files(shared_data, tmp_path):
    # A job scheduler's stop (SIGTERM) unwinds as Ctrl-C does: exit status 143, one line, and
    # no hidden .tmp file left beside the output (they were, before). The corpus comes from a
    # pipe left open, so the signal finds the command mid-file however slow or fast it runs.
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenmill", "encode-corpus", "-", "-t", "r50k_base",
         "--ranks", str(shared_data / "tokenizers" / "tiktoken"), "-o", str(out_dir / "t.bin")],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    proc.stdin.write(open(SAMPLE, encoding="utf-8").read() * 20)
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while sorted(p.name.startswith(".t.bin.idx.") for p in out_dir.iterdir()) != [False, True]:
        assert proc.poll() is None and time.monotonic() < deadline, "no temporary files seen"
        time.sleep(0.002)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]  # (closes the pipe)
    assert proc.returncode == 143 and err == "tokenmill: terminated\n", err
    assert list(out_dir.iterdir()) == []


def test_a_strings_file_not_in_utf8_is_named_without_a_flag_golden_lacks(tok_json, tmp_path,
                                                                         capsys):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"caf\xe9\n")
    code, err = run(capsys, "golden", "freeze", tok_json, "--strings", latin1, "-o",
                    tmp_path / "g.jsonl")
    one_line_error(code, err, f"{latin1}: not UTF-8 at byte offset 3 (byte 0xe9); golden "
                              "strings are read as UTF-8 text only: save the file as UTF-8")
    assert not (tmp_path / "g.jsonl").exists()
