"""The command line, called in-process through main(argv), plus one real subprocess."""

import json
import os
import stat
import subprocess
import sys

import pytest

from tokenmill import Tokenizer
from tokenmill.cli import main


@pytest.fixture
def low(tmp_path):
    path = tmp_path / "low.txt"
    path.write_text("low low lower\n", encoding="utf-8")
    return path


def test_train_textbook_case_with_trace(low, tmp_path, capsys):
    out = tmp_path / "tok.json"
    code = main(["train", str(low), "--num-merges", "3", "--end-of-word-marker", "</w>",
                 "--trace", "--quiet", "-o", str(out)])
    assert code == 0
    assert capsys.readouterr().out.splitlines() == [
        "Step 0: merge 'l' + 'o' -> 'lo' (count=3)",
        "Step 1: merge 'lo' + 'w' -> 'low' (count=3)",
        "Step 2: merge 'low' + '</w>' -> 'low</w>' (count=2)",
    ]
    tok = Tokenizer.from_file(out)
    assert tok.model.merges == [("l", "o"), ("lo", "w"), ("low", "</w>")]
    assert tok.encode("low lower").tokens == ["low</w>", "low", "e", "r", "</w>"]
    assert tok.decode(tok.encode("low lower").ids) == "low lower"


def test_train_sample_corpus_then_encode_decode_inspect(tmp_path, capsys):
    out = tmp_path / "tok.json"
    assert main(["train", "--byte-level", "--vocab-size", "400", "--special-tokens",
                 "<|endoftext|>", "--quiet", "-o", str(out)]) == 0
    assert main(["encode", "-t", str(out), "Alice was tired.", "--json"]) == 0
    enc = json.loads(capsys.readouterr().out)
    text = "Alice was tired."
    assert "".join(text[s:e] for s, e in enc["offsets"]) == text
    assert main(["decode", "-t", str(out), *map(str, enc["ids"])]) == 0
    assert capsys.readouterr().out == text + "\n"
    assert main(["encode", "-t", str(out), "Alice"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == ["#", "id", "token", "offsets", "text"]
    assert main(["inspect", str(out)]) == 0
    info = capsys.readouterr().out
    assert Tokenizer.from_file(out).fingerprint() in info
    assert any(line.split() == ["Hugging", "Face", "compatible"] for line in info.splitlines())


def test_marker_tokenizer_says_why_it_is_not_hf(low, tmp_path, capsys):
    out = tmp_path / "tok.json"
    main(["train", str(low), "--num-merges", "2", "--end-of-word-marker", "</w>", "--quiet",
          "-o", str(out)])
    main(["inspect", str(out)])
    assert "not compatible: its end-of-word marker '</w>' is a separate symbol" in \
        capsys.readouterr().out


def bad(args, capsys):
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("tokenmill: error: ") and err.count("\n") == 1
    assert "Traceback" not in err
    return err


def test_bad_inputs_exit_2_with_one_line(tmp_path, capsys):
    out = tmp_path / "tok.json"
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    assert "empty corpus" in bad(["train", str(empty), "-o", str(out)], capsys)
    assert "no such file" in bad(["train", str(tmp_path / "nope.txt"), "-o", str(out)], capsys)
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("ok line\ncaf\xe9\n".encode("latin-1"))
    err = bad(["train", str(latin), "-o", str(out)], capsys)
    assert f"{latin}: not UTF-8 at byte offset 11" in err
    assert "smaller than the alphabet" in bad(
        ["train", "--vocab-size", "5", "-o", str(out)], capsys)
    assert "given twice" in bad(
        ["train", "--special-tokens", "<s>", "<s>", "-o", str(out)], capsys)
    assert not out.exists()  # nothing half-written by any of the failures
    truncated = tmp_path / "trunc.json"
    truncated.write_text('{"model": {"type": "BPE", "vocab": {"a": 0', encoding="utf-8")
    assert "truncated" in bad(["inspect", str(truncated)], capsys)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}}',
                     encoding="utf-8")
    assert "model.vocab['a']: expected an id" in bad(["inspect", str(wrong)], capsys)
    assert "truncated" in bad(["encode", "-t", str(truncated), "x"], capsys)


@pytest.mark.parametrize("tie_break, merges", [
    ("lexicographic", [("a", "b</w>"), ("x", "y</w>")]),
    ("first_seen", [("x", "y</w>"), ("a", "b</w>")]),
])
def test_train_flags_reach_the_trainer(tmp_path, capsys, tie_break, merges):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("xy xy ab ab zq\n", encoding="utf-8")
    out = tmp_path / "tok.json"
    # 5 merges allowed, but --min-frequency 2 stops before the pair seen once (z, q</w>)
    assert main(["train", str(corpus), "--num-merges", "5", "--min-frequency", "2",
                 "--end-of-word-suffix", "</w>", "--tie-break", tie_break, "--char-level",
                 "--special-tokens", "<s>", "--quiet", "-o", str(out)]) == 0
    tok = Tokenizer.from_file(out)
    assert tok.model.merges == merges
    assert tok.token_to_id("<s>") == 0
    assert tok.encode("xy ab zq").tokens == ["xy</w>", "ab</w>", "z", "q</w>"]
    assert main(["inspect", str(out)]) == 0
    assert any(line.split() == ["Hugging", "Face", "compatible"]
               for line in capsys.readouterr().out.splitlines())


def test_an_output_that_cannot_be_written(tmp_path, capsys):
    args = ["train", "--vocab-size", "300", "--quiet", "-o"]
    assert f"{tmp_path}: not a regular file (a device, a pipe or a directory)" in bad(
        [*args, str(tmp_path)], capsys)
    assert "does not exist" in bad([*args, str(tmp_path / "no" / "tok.json")], capsys)
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file left behind


def test_an_output_that_is_a_pipe_is_left_a_pipe(tmp_path, capsys):
    # A file renamed over a named pipe (or /dev/stdout, /dev/full) would replace it.
    pipe = tmp_path / "fifo"
    os.mkfifo(pipe)
    err = bad(["train", "--vocab-size", "300", "--quiet", "-o", str(pipe)], capsys)
    assert f"{pipe}: not a regular file" in err
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["fifo"]
    link = tmp_path / "link.json"  # (as /dev/stdout leads to a terminal or a pipe)
    link.symlink_to(pipe)
    assert f"{link}: not a regular file" in bad(
        ["train", "--vocab-size", "300", "--quiet", "-o", str(link)], capsys)
    assert link.is_symlink() and stat.S_ISFIFO(pipe.stat().st_mode)


def test_an_output_that_is_an_input_is_refused(tmp_path, capsys):
    corpus = tmp_path / "docs" / "corpus.txt"
    corpus.parent.mkdir()
    corpus.write_text("hello world\n", encoding="utf-8")
    err = bad(["train", str(corpus), "--vocab-size", "300", "--quiet", "-o", str(corpus)], capsys)
    assert err == (f"tokenmill: error: {corpus}: is also an input ({corpus}); writing the output "
                   "would replace it\n")
    same = tmp_path / "same.txt"  # the corpus under another name, met by walking a directory
    os.link(corpus, same)
    err = bad(["count", str(corpus.parent), "--byte-level", "--quiet", "-o", str(same)], capsys)
    assert f"{same}: is also an input ({corpus})" in err
    counts = tmp_path / "c.tmc"
    assert main(["count", str(corpus), "--byte-level", "--quiet", "-o", str(counts)]) == 0
    before = counts.read_bytes()
    err = bad(["train", "--from-counts", str(counts), "--vocab-size", "300", "--quiet", "-o",
               str(counts)], capsys)
    assert f"{counts}: is also an input ({counts})" in err
    assert corpus.read_text("utf-8") == "hello world\n" and counts.read_bytes() == before


def test_an_output_through_a_link_keeps_the_link(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "tok.json"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "tok.json"
    link.symlink_to(target)
    assert main(["train", "--vocab-size", "300", "--quiet", "-o", str(link)]) == 0
    assert link.is_symlink() and Tokenizer.from_file(target).get_vocab_size() > 256
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["tok.json"]


def test_errors_replace_goes_on(tmp_path, capsys):
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("caf\xe9 caf\xe9\n".encode("latin-1"))
    out = tmp_path / "tok.json"
    assert main(["train", str(latin), "--errors", "replace", "--num-merges", "2", "--quiet",
                 "-o", str(out)]) == 0
    assert "\ufffd" in Tokenizer.from_file(out).get_vocab()


def test_surrogate_text_on_the_command_line(tmp_path, capsys):
    out = tmp_path / "tok.json"
    main(["train", "--vocab-size", "300", "--quiet", "-o", str(out)])
    assert "lone surrogate" in bad(["encode", "-t", str(out), "ab\udcff"], capsys)


def test_console_script_in_a_subprocess(tmp_path):
    out = tmp_path / "tok.json"
    run = subprocess.run([sys.executable, "-m", "tokenmill", "train", "--vocab-size", "300",
                          "--quiet", "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    run = subprocess.run([sys.executable, "-m", "tokenmill", "inspect", str(tmp_path / "x")],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip() == f"tokenmill: error: {tmp_path / 'x'}: no such file"


def test_count_then_train_from_counts_equals_training_directly(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl.gz"
    import gzip

    docs = [json.dumps({"text": f"line {i}: the quick brown fox, {i * 7}"}) for i in range(300)]
    with gzip.open(corpus, "wt", encoding="utf-8") as f:
        f.write("\n".join(docs) + "\n")
    direct, via, counts = tmp_path / "direct.json", tmp_path / "via.json", tmp_path / "c.tmc"
    assert main(["train", str(corpus), "--byte-level", "--vocab-size", "300", "--quiet",
                 "-o", str(direct)]) == 0
    assert main(["count", str(corpus), "--byte-level", "--quiet", "-o", str(counts)]) == 0
    assert main(["train", "--from-counts", str(counts), "--vocab-size", "300", "--quiet",
                 "-o", str(via)]) == 0
    assert Tokenizer.from_file(direct).fingerprint() == Tokenizer.from_file(via).fingerprint()
    err = bad(["train", "--from-counts", str(counts), "--char-level", "-o",
               str(tmp_path / "x.json")], capsys)
    assert "counted with another pre-tokenizer" in err
    counts.write_bytes(counts.read_bytes()[:-5])
    assert "truncated" in bad(["train", "--from-counts", str(counts), "-o",
                               str(tmp_path / "x.json")], capsys)


def test_max_distinct_reports_what_it_dropped(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a a a b b c\n", encoding="utf-8")
    out = tmp_path / "tok.json"
    assert main(["train", str(corpus), "--max-distinct", "2", "--num-merges", "0",
                 "-o", str(out)]) == 0
    assert "dropped 1 distinct pre-tokens (1 occurrences)" in capsys.readouterr().err


def test_train_on_a_dask_cluster_equals_local(tmp_path):
    from distributed import LocalCluster

    for i in range(3):
        (tmp_path / f"shard{i}.txt").write_text(
            "\n".join(f"shard {i} line {j} words words" for j in range(50)), encoding="utf-8")
    local, remote = tmp_path / "local.json", tmp_path / "remote.json"
    assert main(["train", str(tmp_path / "shard*.txt"), "--byte-level", "--vocab-size", "280",
                 "--quiet", "-o", str(local)]) == 0
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster:
        assert main(["train", str(tmp_path / "shard*.txt"), "--byte-level", "--vocab-size",
                     "280", "--engine", "dask", "--scheduler", cluster.scheduler_address,
                     "--quiet", "-o", str(remote)]) == 0
    assert Tokenizer.from_file(local).fingerprint() == Tokenizer.from_file(remote).fingerprint()
