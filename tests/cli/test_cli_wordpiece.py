"""``tokenmill train --model wordpiece`` (and ``count``), called in-process through main(argv)."""

import json

import pytest

from tokenmill import Tokenizer, WordPiece, load
from tokenmill.cli import main
from tokenmill.formats.bert_vocab import write_vocab


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "hug.txt"
    # the textbook corpus: hug x10, pug x5, pun x12, bun x4, hugs x5 (Hugging Face's course)
    path.write_text("\n".join(["Hug"] * 10 + ["pug"] * 5 + ["pun"] * 12 + ["bun"] * 4 +
                              ["hugs"] * 5) + "\n", encoding="utf-8")
    return path


def test_train_wordpiece_with_trace(corpus, tmp_path, capsys):
    out = tmp_path / "tok.json"
    # 5 special tokens + b g h n p s u ##g ##n ##s ##u = 16 rows, + 3 merges
    assert main(["train", str(corpus), "--model", "wordpiece", "--vocab-size", "19", "--trace",
                 "--quiet", "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Step 0: merge '##g' + '##s' -> '##gs' (count=5, score=5/(20*5)=0.05)",
        "Step 1: merge 'p' + '##u' -> 'pu' (count=17, score=17/(17*36)=0.0277778)",
        "Step 2: merge 'h' + '##u' -> 'hu' (count=15, score=15/(15*19)=0.0526316)",
    ]
    tok = Tokenizer.from_file(out)
    assert isinstance(tok.model, WordPiece)
    # lowercased as uncased BERT; [CLS] ... [SEP] around; punctuation split off
    assert tok.encode("HUGS, pun!").tokens == \
        ["[CLS]", "hu", "##gs", "[UNK]", "pu", "##n", "[UNK]", "[SEP]"]
    assert tok.decode(tok.encode("hugs pun").ids) == "hugs pun"
    assert main(["inspect", str(out)]) == 0
    assert "WordPiece, 19 tokens" in capsys.readouterr().out


def test_count_then_train_from_counts(corpus, tmp_path, capsys):
    counts = tmp_path / "counts.tmcount"
    assert main(["count", str(corpus), "--model", "wordpiece", "--quiet", "-o",
                 str(counts)]) == 0
    direct, indirect = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["train", str(corpus), "--model", "wordpiece", "--vocab-size", "20", "--quiet",
                 "-o", str(direct)]) == 0
    assert main(["train", "--from-counts", str(counts), "--model", "wordpiece",
                 "--vocab-size", "20", "--quiet", "-o", str(indirect)]) == 0
    assert Tokenizer.from_file(direct).to_dict() == Tokenizer.from_file(indirect).to_dict()


def test_cased_and_options(corpus, tmp_path):
    out = tmp_path / "tok.json"
    assert main(["train", str(corpus), "--model", "wordpiece", "--no-lowercase",
                 "--vocab-size", "40", "--special-tokens", "[UNK]", "--quiet",
                 "-o", str(out)]) == 0
    tok = Tokenizer.from_file(out)
    assert "H" in tok.get_vocab() and tok.post_processor is None  # no [CLS]/[SEP] given
    assert tok.encode("Hug").ids == [tok.token_to_id("Hug")]


def bad(args, capsys):
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("tokenmill: error: ") and err.count("\n") == 1
    return err


def test_bad_input_exits_2_with_one_line(corpus, tmp_path, capsys):
    out = tmp_path / "tok.json"
    wp = ["train", str(corpus), "--model", "wordpiece", "-o", str(out)]
    assert "--num-merges is an option of --model bpe, not of --model wordpiece" in \
        bad(wp + ["--num-merges", "3"], capsys)
    assert "vocab_size 10 is smaller than the 5 special tokens plus the alphabet (11 symbols" \
        in bad(wp + ["--vocab-size", "10"], capsys)
    assert "--byte-level is for --model bpe" in bad(wp + ["--byte-level"], capsys)
    assert "unk_token '[UNK]' must be one of the special_tokens" in \
        bad(wp + ["--special-tokens", "<s>"], capsys)
    assert "--no-lowercase is for --model wordpiece" in \
        bad(["train", str(corpus), "--no-lowercase", "-o", str(out)], capsys)
    assert not out.exists()
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[UNK]\n[CLS]\n[SEP]\na\na\n", encoding="utf-8")
    assert f"{vocab}:5: token 'a' is already on line 4" in \
        bad(["encode", "-t", str(vocab), "a"], capsys)


def test_encode_with_a_vocab_txt(tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    write_vocab(vocab, {t: i for i, t in enumerate(["[UNK]", "[CLS]", "[SEP]", "hu", "##g"])})
    assert load(vocab).encode("hug").ids == [1, 3, 4, 2]
    assert main(["encode", "-t", str(vocab), "--json", "Hug"]) == 0
    assert json.loads(capsys.readouterr().out)["ids"] == [1, 3, 4, 2]
