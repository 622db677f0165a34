"""Metrics against values computed by hand on small fixtures; corpus reading and its errors."""

from __future__ import annotations

import gzip
import json
import random

import pytest

from tokenmill import BPE, InputError, Tokenizer, TokenmillError, pre_tokenizers
from tokenmill.evaluate import (
    Corpus,
    corpora_in,
    evaluate,
    merge_uses,
    percentile,
    read_corpus,
    split_named,
    summarize,
    token_bytes,
)

# -- percentiles ------------------------------------------------------------------------------


def test_percentile_by_hand():
    # Sorted [1, 2, 3, 4]: h = 3q/100. q=50 -> h=1.5 -> 2 + 0.5*(3-2) = 2.5.
    assert percentile([4, 1, 3, 2], 50) == 2.5
    # q=95 -> h=2.85 -> 3 + 0.85*(4-3) = 3.85; q=99 -> h=2.97 -> 3.97.
    assert percentile([4, 1, 3, 2], 95) == pytest.approx(3.85)
    assert percentile([4, 1, 3, 2], 99) == pytest.approx(3.97)
    assert percentile([4, 1, 3, 2], 0) == 1 and percentile([4, 1, 3, 2], 100) == 4
    # Five values, q=95 -> h=3.8 -> 40 + 0.8*10 = 48.
    assert percentile([10, 20, 30, 40, 50], 95) == pytest.approx(48.0)
    assert percentile([7], 99) == 7


def test_summarize_by_hand():
    assert summarize([0.5, 2 / 3, 0.5, 1.0]) == pytest.approx(
        {"mean": 2 / 3, "p50": 7 / 12, "p95": 0.95, "p99": 0.99})


def test_percentile_matches_numpy_linear():
    import numpy as np  # a test dependency: no skip without it
    rng = random.Random(6)
    for n in (1, 2, 3, 10, 101, 1000):
        values = [rng.random() for _ in range(n)]
        for q in (0, 1, 5, 25, 50, 95, 99, 100):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_rejects_nothing_and_bad_q():
    with pytest.raises(InputError):
        percentile([], 50)
    with pytest.raises(InputError):
        percentile([1.0], 101)


# -- every metric on a hand-made tokenizer ------------------------------------------------------

@pytest.fixture
def tiny() -> Tokenizer:
    vocab = {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "c": 4, "é": 5}
    return Tokenizer(BPE(vocab, [("a", "b")], unk_token="<unk>"),
                     pre_tokenizer=pre_tokenizers.Whitespace())


def test_metrics_by_hand(tiny):
    # x: "ab" -> [ab]: 1 token, 2 bytes, 2 chars; "abc" -> [ab, c]: 2, 3, 3;
    #    "éé" -> [é, é]: 2, 4, 2; "zz" -> [<unk>, <unk>]: 2, 2, 2; "" is not a document.
    # ref (parallel, 5 lines): "ab ab" -> 2; "ab" -> 1; "c" -> 1; "ab" -> 1: 5 tokens.
    x = Corpus("x", "-", ["ab", "abc", "éé", "zz", ""])
    ref = Corpus("ref", "-", ["ab ab", "ab", "c", "ab", ""])
    other = Corpus("other", "-", ["ab"])
    ev = evaluate({"tiny": tiny}, [x, ref, other], context=1, rare=2, reference="ref")
    r = ev.result("tiny", "x")
    assert (r.documents, r.tokens, r.bytes, r.chars) == (4, 7, 11, 9)
    # tokens per byte: [1/2, 2/3, 2/4, 2/2]; sorted [.5, .5, .667, 1].
    assert r.per_document == pytest.approx([0.5, 2 / 3, 0.5, 1.0])
    assert r.tokens_per_byte == pytest.approx(
        {"mean": (0.5 + 2 / 3 + 0.5 + 1) / 4, "p50": 0.5 + 0.5 * (2 / 3 - 0.5),
         "p95": 2 / 3 + 0.85 * (1 - 2 / 3), "p99": 2 / 3 + 0.97 * (1 - 2 / 3)})
    # tokens per char: [1/2, 2/3, 2/2, 2/2]; sorted [.5, .667, 1, 1].
    assert r.tokens_per_char == pytest.approx(
        {"mean": (0.5 + 2 / 3 + 1 + 1) / 4, "p50": 2 / 3 + 0.5 * (1 - 2 / 3), "p95": 1.0,
         "p99": 1.0})
    assert r.bytes_per_token == pytest.approx(11 / 7)
    assert r.unk_rate == pytest.approx(2 / 7)
    assert r.byte_fallback_rate == 0.0
    assert r.over_context == pytest.approx(3 / 4)  # 3 of the 4 documents have more than 1 token
    # Uses: <unk> 2, ab 2, c 1, é 2; a and b never: 2 of 6 rows unused, 3 of 6 used < 2 times.
    assert r.vocab_unused == pytest.approx(2 / 6)
    assert r.vocab_rare == pytest.approx(3 / 6)
    assert r.parity == pytest.approx(7 / 5)
    assert ev.result("tiny", "ref").parity == 1.0
    assert ev.result("tiny", "other").parity is None
    assert any("no parity for other" in n for n in ev.notes)
    # Over all corpora: ab 2+4+1, c 1+1, é 2, <unk> 2.
    info = ev.tokenizers[0]
    assert info.usage == [2, 0, 0, 7, 2, 2]
    assert (info.vocab_unused, info.vocab_rare) == (pytest.approx(2 / 6), pytest.approx(2 / 6))
    assert info.merge_counts == [7]  # every "ab" came from the one merge
    assert json.loads(json.dumps(ev.to_dict()))["results"][0]["unk_rate"] == \
        pytest.approx(2 / 7)


def test_byte_fallback_rate_by_hand():
    vocab = {"<unk>": 0, "a": 1, **{f"<0x{b:02X}>": 2 + b for b in range(256)}}
    tok = Tokenizer(BPE(vocab, [], unk_token="<unk>", byte_fallback=True),
                    pre_tokenizer=pre_tokenizers.Whitespace())
    # "aaz" -> a a <0x7A>; "é" -> <0xC3> <0xA9>: 3 of 5 tokens are bytes.
    r = evaluate({"fb": tok}, [Corpus("c", "-", ["aaz", "é"])]).results[0]
    assert r.tokens == 5
    assert r.byte_fallback_rate == pytest.approx(3 / 5)
    assert r.unk_rate == 0.0
    assert token_bytes(tok)[2 + 0x7A] == 1


def test_token_bytes_of_byte_level(trained):
    sizes = token_bytes(trained)
    vocab = trained.get_vocab()
    assert sizes[vocab["Ġ"]] == 1
    assert sizes[vocab["Ã"]] == 1  # one byte, though "Ã" is two bytes of UTF-8 itself
    assert all(sizes[i] == len(t) for t, i in vocab.items() if t.isascii() and t.isalpha())


def test_merge_uses_equal_training_counts(sample_lines):
    # Replaying the merges over the training text gives the counts the trainer saw.
    from tokenmill.sweep import train_sizes

    toks, steps, _ = train_sizes(sample_lines, [400], byte_level=False)
    tok = toks[400]
    usage = [0] * tok.get_vocab_size()
    for ids in tok.encode_ordinary_batch(sample_lines):
        for i in ids:
            usage[i] += 1
    assert merge_uses(tok, usage) == [s.count for s in steps]


def test_evaluate_rejects_bad_settings(tiny):
    c = Corpus("x", "-", ["ab"])
    with pytest.raises(InputError, match="--reference 'nope' is not a corpus"):
        evaluate({"t": tiny}, [c], reference="nope")
    with pytest.raises(InputError, match="two corpora are named 'x'"):
        evaluate({"t": tiny}, [c, c])
    with pytest.raises(InputError, match="--context"):
        evaluate({"t": tiny}, [c], context=0)
    with pytest.raises(InputError, match="no corpus"):
        evaluate({"t": tiny}, [])


# -- corpora ------------------------------------------------------------------------------------

def test_corpus_kinds(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\r\n\nthree", encoding="utf-8")
    with gzip.open(tmp_path / "b.dev.gz", "wt", encoding="utf-8") as f:
        f.write("gz one\ngz two\n")
    (tmp_path / "c.jsonl").write_text(json.dumps({"text": "code\nwith lines"}) + "\n"
                                      + json.dumps({"text": "plain"}) + "\n", encoding="utf-8")
    (tmp_path / "ignored.md").write_text("not a corpus", encoding="utf-8")
    assert read_corpus(str(tmp_path / "a.txt")).documents == ["one", "two", "", "three"]
    gz = read_corpus(str(tmp_path / "b.dev.gz"))
    assert (gz.name, gz.documents) == ("b", ["gz one", "gz two"])
    assert read_corpus(f"code={tmp_path / 'c.jsonl'}").documents == ["code\nwith lines", "plain"]
    folder = read_corpus(f"all={tmp_path}")
    assert folder.name == "all" and len(folder.documents) == 8
    assert [c.name for c in corpora_in(tmp_path)] == ["a", "b", "c"]
    assert read_corpus(str(tmp_path / "a.txt"), max_documents=2).documents == ["one", "two"]
    assert split_named("en=x.txt") == ("en", "x.txt")
    assert split_named("x.txt") == (None, "x.txt")


@pytest.mark.parametrize("content, message", [
    (None, "no such file or folder"),
    (b"\n\n", "empty corpus"),
    (b"caf\xe9\n", "not UTF-8 at byte offset 3"),
])
def test_corpus_errors(tmp_path, content, message):
    path = tmp_path / "c.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        read_corpus(f"c={path}")


def test_corpus_format_errors(tmp_path):
    (tmp_path / "bad.gz").write_bytes(b"not gzip")
    with pytest.raises(TokenmillError, match="bad.gz: cannot be read"):
        read_corpus(str(tmp_path / "bad.gz"))
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n[1]\n', encoding="utf-8")
    with pytest.raises(TokenmillError, match="bad.jsonl:2"):
        read_corpus(str(tmp_path / "bad.jsonl"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no files of documents in this folder"):
        corpora_in(tmp_path / "empty")


def test_log_bins_of_the_merge_curve():
    from tokenmill.report import binned

    # steps 1..100 in 2 geometric bins: edges at steps 1, 10 and 100 (and 0 before the first)
    xs, lo, mid, hi = binned(list(range(1, 101)), 2, log=True)
    assert mid == [1, 6, 55.5]  # the means of [1], [2..10] and [11..100]
    assert xs == pytest.approx([1, 20 ** 0.5, 1100 ** 0.5])  # geometric centres of the steps
    assert lo[2] == pytest.approx(19.9) and hi[2] == pytest.approx(91.1)  # p10, p90 of 11..100
    xs, _, mid, _ = binned([5, 7, 9, 11], 2)  # linear: two steps a bin, centred between them
    assert (xs, mid) == ([0.5, 2.5], [6, 10])
