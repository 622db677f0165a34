"""Flag combinations of the command line that would have trained something other than what was
asked, usage errors in one line, and the encode table's columns on wide characters."""

import re

import pytest

from tokenmill import Tokenizer
from tokenmill.cli import main


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("low low lower newest\n", encoding="utf-8")
    return path


def _one_line_error(capsys, *needles):
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err
    return err


def test_special_tokens_do_not_swallow_the_corpus(corpus, tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["train", "--special-tokens", "<s>", "</s>", str(corpus), "--num-merges", "2",
                 "--quiet", "-o", str(out)]) == 2
    _one_line_error(capsys, f"--special-tokens took {str(corpus)!r}, which is a file",
                    "(or last, after --)")
    assert not out.exists()
    # The way the message gives works, and trains on the corpus, not on the bundled sample.
    assert main(["train", "--num-merges", "2", "--quiet", "-o", str(out), "--special-tokens",
                 "<s>", "</s>", "--", str(corpus)]) == 0
    tok = Tokenizer.from_file(out)
    assert [t.content for t in tok.added_tokens] == ["<s>", "</s>"]
    assert tok.model.merges == [("l", "o"), ("lo", "w")]


@pytest.mark.parametrize("flag", ["--end-of-word-suffix", "--end-of-word-marker",
                                  "--continuing-subword-prefix"])
def test_byte_level_refuses_word_marks(flag, corpus, tmp_path, capsys):
    out = tmp_path / "b.json"
    assert main(["train", str(corpus), "--byte-level", flag, "##", "--vocab-size", "260",
                 "--quiet", "-o", str(out)]) == 2
    _one_line_error(capsys, f"{flag} is for --char-level")
    assert not out.exists()


def test_marker_tokenizer_is_noted_at_training(corpus, tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["train", str(corpus), "--num-merges", "2", "--end-of-word-marker", "</w>",
                 "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"note: {out} loads in tokenmill, not in Hugging Face tokenizers: its end-of-word " \
           "marker '</w>' is a separate symbol" in err
    assert main(["train", str(corpus), "--num-merges", "2", "--end-of-word-suffix", "</w>",
                 "-o", str(out)]) == 0
    assert "note:" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, needle", [
    (["train", "--vocab-size", "10", "--num-merges", "3", "-o", "x.json"],
     "argument --num-merges: not allowed with argument --vocab-size"),
    (["train", "--tie-break", "random", "-o", "x.json"], "invalid choice: 'random'"),
    (["train"], "the following arguments are required: -o/--output"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_usage_errors_are_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = _one_line_error(capsys, needle)
    assert err.startswith("tokenmill") and "--help)" in err


def test_encode_table_aligns_wide_characters(tmp_path, capsys):
    from tokenmill.cli import _width

    out = tmp_path / "t.json"
    (tmp_path / "zh.txt").write_text("中文 中文 abc\n", encoding="utf-8")
    assert main(["train", str(tmp_path / "zh.txt"), "--num-merges", "1", "--quiet",
                 "-o", str(out)]) == 0
    assert main(["encode", "-t", str(out), "中文 abc"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:-1]
    assert "'中文'" in rows[0] and "'a'" in rows[1]
    # The offsets column, after the tokens, starts at the same terminal column in every row.
    starts = {_width(row[:re.search(r"\d+:\d+", row).start()]) for row in rows}
    assert len(starts) == 1, rows
    assert _width("中a") == 3 and _width("e\u0301") == 1


def test_wordpiece_keeps_its_prefix_and_refuses_byte_level(corpus, tmp_path, capsys):
    assert main(["train", str(corpus), "--model", "wordpiece", "--byte-level",
                 "--continuing-subword-prefix", "##", "--vocab-size", "60", "--quiet",
                 "-o", str(tmp_path / "w.json")]) == 2
    _one_line_error(capsys, "--byte-level is for --model bpe")


def test_marks_that_join_the_character_before_take_no_column():
    from tokenmill.cli import _width

    assert _width("กิ") == 1 and _width("❤\ufe0f") == 1 and _width("e\u0301") == 1
