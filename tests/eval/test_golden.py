"""Golden strings: freeze, check, and drift from a changed merge order, normalizer or special
token id; check-config against a model's config.json."""

from __future__ import annotations

import json

import pytest

from tokenmill import Tokenizer, TokenmillError, normalizers
from tokenmill.cli import main
from tokenmill.golden import BUILTIN, check, check_config, freeze, read_golden, read_strings


def _variant(tok: Tokenizer, change) -> Tokenizer:
    data = tok.to_dict()
    change(data)
    return Tokenizer.from_dict(data)


def test_builtin_strings_cover_the_hard_cases():
    groups = {name.split("/")[0] for name, _ in BUILTIN}
    assert {"space", "newline", "emoji", "url", "email", "number", "date", "code",
            "script"} <= groups
    text = "".join(t for _, t in BUILTIN)
    for needle in ("\t", "\r\n", "\r", "\u2028", "\u0085", "\u200d", "\U0001F3FD", "https://",
                   "@", "2024-02-29", "fn main", "#include", "def ", "func main", "=>",
                   "你好", "こんにちは", "안녕", "مرحبا", "שלום", "नमस्ते", "Съешь", "ሰላም"):
        assert needle in text, needle
    assert len({n for n, _ in BUILTIN}) == len(BUILTIN)


def test_freeze_then_check_passes(trained, tmp_path):
    path = tmp_path / "goldens.jsonl"
    n = freeze(trained, path, source="tok.json")
    header, records = read_golden(path)
    assert n == len(BUILTIN) == len(records) == header["strings"]
    assert header["fingerprint"] == trained.fingerprint()
    emoji = next(r for r in records if r["name"] == "emoji/zwj-family")
    assert emoji["decoded"] == emoji["text"]  # byte-level: decode(encode(s)) == s
    assert len(emoji["ids"]) == len(emoji["tokens"]) == len(emoji["offsets"])
    # One record a line, whatever line separators the strings hold.
    assert len(path.read_text(encoding="utf-8").split("\n")) == n + 2
    ok, lines = check(trained, path)
    assert ok and lines[-1].startswith(f"ok: {n} strings")


def _overlapping_merges(tok: Tokenizer) -> tuple[int, int]:
    """Ranks i < j of merges (a, b) and (b, c) of single characters such that "abc" occurs in
    the built-in strings: swapping them changes what "abc" encodes to."""
    merges = tok.model.merges
    text = "".join(t for _, t in BUILTIN)
    for i, (a, b) in enumerate(merges):
        for j in range(i + 1, len(merges)):
            left, right = merges[j]
            if left == b and len(a) == len(b) == len(right) == 1 and a + b + right in text:
                return i, j
    raise AssertionError("no overlapping merges")


def _swap_merges(tok: Tokenizer):
    i, j = _overlapping_merges(tok)

    def change(data):
        m = data["model"]["merges"]
        m[i], m[j] = m[j], m[i]
    return change


def _swap_special_ids(data):
    vocab = data["model"]["vocab"]
    vocab["<|endoftext|>"], vocab["<|pad|>"] = vocab["<|pad|>"], vocab["<|endoftext|>"]
    for t in data["added_tokens"]:
        t["id"] = vocab[t["content"]]


@pytest.mark.parametrize("what", ["merge order", "normalizer", "special-token id"])
def test_check_detects_drift(trained, tmp_path, what, capsys):
    path = tmp_path / "goldens.jsonl"
    freeze(trained, path)
    if what == "merge order":
        changed = _variant(trained, _swap_merges(trained))
    elif what == "normalizer":
        changed = _variant(trained, lambda d: None)
        changed.normalizer = normalizers.NFKC()
    else:
        changed = _variant(trained, _swap_special_ids)
    # The strings alone catch it, fingerprint aside ...
    ok, lines = check(changed, path, ignore_fingerprint=True)
    assert not ok
    assert lines[0].startswith("fingerprint MISMATCH")
    assert lines[1].startswith("drift in ")
    if what == "special-token id":
        assert any("[special/endoftext]" in line for line in lines)
        assert any(line.startswith("    ids @") for line in lines)
    if what == "normalizer":
        assert any("[unicode/compatibility]" in line for line in lines)
    # ... and the command exits 1 with the diff on stderr.
    changed.save(tmp_path / "changed.json")
    assert main(["golden", "check", str(tmp_path / "changed.json"), str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fingerprint MISMATCH") and "expected" in err


def test_a_changed_fingerprint_alone_fails_unless_ignored(trained, tmp_path, capsys):
    path = tmp_path / "goldens.jsonl"
    freeze(trained, path)
    changed = _variant(trained, lambda d: None)
    changed.add_special_tokens(["<|never_in_a_golden_string|>"])
    ok, lines = check(changed, path)
    assert not ok
    assert lines[0].startswith("fingerprint MISMATCH")
    assert lines[1] == (f"all {len(BUILTIN)} strings encode as frozen: the tokenizer differs "
                        "elsewhere (compare 'tokenmill inspect' of both)")
    ok, lines = check(changed, path, ignore_fingerprint=True)
    assert ok and lines[-1].endswith("... ignored")
    changed.save(tmp_path / "changed.json")
    assert main(["golden", "check", str(tmp_path / "changed.json"), str(path)]) == 1
    assert main(["golden", "check", str(tmp_path / "changed.json"), str(path),
                 "--ignore-fingerprint"]) == 0


@pytest.mark.parametrize("key, edit, shown", [
    ("ids", lambda r: r["ids"].__setitem__(0, r["ids"][0] + 1), "    ids @0: expected"),
    ("tokens", lambda r: r["tokens"].__setitem__(0, "x"), "    tokens @0: expected ['x']"),
    ("offsets", lambda r: r["offsets"].__setitem__(0, [0, 99]), "    offsets @0: expected [0:99]"),
    ("decoded", lambda r: r.__setitem__("decoded", "other"), "    decoded: expected 'other'"),
])
def test_every_frozen_field_is_compared(trained, tmp_path, key, edit, shown):
    path = tmp_path / "goldens.jsonl"
    freeze(trained, path, strings=[("one", "The cat sat."), ("two", "on the mat")])
    header, records = read_golden(path)
    edit(records[1])
    path.write_text("\n".join(json.dumps(x) for x in [header, *records]) + "\n",
                    encoding="utf-8")
    ok, lines = check(trained, path)
    assert not ok
    assert lines[0] == "drift in 1 of 2 strings; the first 1:"
    assert lines[1] == "  [two] 'on the mat'"
    assert lines[2].startswith(shown)


def test_drift_diff_is_readable(trained, tmp_path):
    path = tmp_path / "goldens.jsonl"
    freeze(trained, path, strings=[("one", "the cat")])
    changed = _variant(trained, lambda d: None)
    changed.normalizer = normalizers.Lowercase()
    ok, lines = check(changed, path, ignore_fingerprint=True)
    assert ok  # lowercase text is unchanged by lowercasing
    freeze(trained, path, strings=[("one", "The Cat")])
    ok, lines = check(changed, path, ignore_fingerprint=True)
    assert not ok
    assert lines[1:3] == ["drift in 1 of 1 strings; the first 1:", "  [one] 'The Cat'"]
    assert any(line.startswith("    tokens @0: expected ['") for line in lines)
    assert any(line.startswith("    decoded: expected 'The Cat'") for line in lines)


def test_golden_from_another_tokenizer(trained, tmp_path, sample_lines, capsys):
    from tokenmill.sweep import train_sizes

    other = train_sizes(sample_lines, [300], byte_level=False)[0][300]
    other.save(tmp_path / "other.json")
    trained.save(tmp_path / "tok.json")
    assert main(["golden", "freeze", str(tmp_path / "tok.json"), "-o",
                 str(tmp_path / "g.jsonl")]) == 0
    assert capsys.readouterr().err.startswith(f"froze {len(BUILTIN)} strings of tok (fingerprint ")
    assert main(["golden", "check", str(tmp_path / "other.json"),
                 str(tmp_path / "g.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith(f"fingerprint MISMATCH: {tmp_path / 'g.jsonl'} was "
                                          "frozen from tokenizer")
    assert "tok.json" in err.splitlines()[0]
    assert main(["golden", "check", str(tmp_path / "tok.json"), str(tmp_path / "g.jsonl")]) == 0


def test_strings_files(trained, tmp_path, capsys):
    (tmp_path / "s.txt").write_text("first\nsecond line\n", encoding="utf-8")
    (tmp_path / "s.json").write_text(json.dumps(["a\nb", "c"]), encoding="utf-8")
    (tmp_path / "s.jsonl").write_text(json.dumps({"name": "mine", "text": "x\ty"}) + "\n" +
                                      json.dumps("plain") + "\n", encoding="utf-8")
    assert read_strings(tmp_path / "s.txt") == [("user/1", "first"), ("user/2", "second line")]
    assert read_strings(tmp_path / "s.json") == [("user/1", "a\nb"), ("user/2", "c")]
    assert read_strings(tmp_path / "s.jsonl") == [("mine", "x\ty"), ("user/2", "plain")]
    trained.save(tmp_path / "tok.json")
    out = tmp_path / "g.jsonl"
    assert main(["golden", "freeze", str(tmp_path / "tok.json"), "-o", str(out), "--no-builtin",
                 "--strings", str(tmp_path / "s.jsonl")]) == 0
    assert [r["name"] for r in read_golden(out)[1]] == ["mine", "user/2"]


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("not json\n", "not JSON"),
    ('{"name": "x", "text": "y"}\n', "not a tokenmill golden file"),
    ('{"tokenmill_golden": 1, "fingerprint": "ab"}\n{"text": 3}\n', 'needs "name" and "text"'),
])
def test_bad_golden_files(trained, tmp_path, content, message, capsys):
    path = tmp_path / "g.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(TokenmillError, match=message):
        check(trained, path)
    trained.save(tmp_path / "tok.json")
    assert main(["golden", "check", str(tmp_path / "tok.json"), str(path)]) == 2
    assert capsys.readouterr().err.startswith("tokenmill: error: ")


# -- config.json --------------------------------------------------------------------------------

def _config(tmp_path, **fields):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields), encoding="utf-8")
    return path


def test_check_config(trained, tmp_path):
    # The trained tokenizer: <|endoftext|> = 0 (bos and eos by name), <|pad|> = 1, 500 rows.
    ok, lines = check_config(trained, _config(tmp_path, vocab_size=512, bos_token_id=0,
                                              eos_token_id=[0, 7], pad_token_id=1))
    assert ok, lines
    assert "ok (12 rows the tokenizer never emits)" in lines[1]
    ok, lines = check_config(trained, _config(tmp_path, vocab_size=400, eos_token_id=5,
                                              pad_token_id=None, unk_token_id=9999))
    assert not ok
    text = "\n".join(lines)
    assert "MISMATCH: ids up to 499 index past the model's 400 rows" in text
    assert "MISMATCH: id 5 is" in text
    assert "MISMATCH: id 9999 is not an id of the tokenizer" in text
    assert lines[-1] == "3 mismatches"
    ok, lines = check_config(trained, _config(tmp_path, eos_token_id=1),
                             tokens={"eos": "<|pad|>"})
    assert ok and "'<|pad|>' = 1 (by given)" in "\n".join(lines)


def test_check_config_reads_tokenizer_config_beside(trained, tmp_path, capsys):
    trained.save(tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"eos_token": {"content": "<|pad|>"}}), encoding="utf-8")
    config = _config(tmp_path, vocab_size=500, eos_token_id=1, bos_token_id=0)
    assert main(["check-config", str(tmp_path / "tokenizer.json"), str(config)]) == 0
    assert "by tokenizer_config.json" in capsys.readouterr().out
    assert main(["check-config", str(tmp_path / "tokenizer.json"), str(config),
                 "--eos-token", "<|endoftext|>"]) == 1


@pytest.mark.parametrize("content, message", [
    ({"hidden_size": 768}, "none of vocab_size, bos_token_id"),
    ([1, 2], "expected a JSON object"),
    ({"vocab_size": "big"}, "vocab_size must be an integer"),
    ({"eos_token_id": "2"}, "eos_token_id must be an integer or a list"),
])
def test_check_config_bad_config(trained, tmp_path, content, message, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(TokenmillError, match=message):
        check_config(trained, path)
    trained.save(tmp_path / "tok.json")
    assert main(["check-config", str(tmp_path / "tok.json"), str(path)]) == 2
    assert message in capsys.readouterr().err


def test_check_config_text_config(trained, tmp_path):
    ok, _ = check_config(trained, _config(tmp_path, text_config={"vocab_size": 500,
                                                                  "eos_token_id": 0}))
    assert ok
