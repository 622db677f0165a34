"""``tokenmill train --model unigram``: the Unigram trainer behind the same command."""

from __future__ import annotations

from tokenmill import Tokenizer
from tokenmill.cli import main
from tokenmill.models.unigram import Unigram


def test_train_unigram_on_the_sample_corpus(tmp_path, capsys):
    out = tmp_path / "tok.json"
    assert main(["train", "--model", "unigram", "--vocab-size", "300", "--special-tokens",
                 "<pad>", "--shrinking-factor", "0.5", "-o", str(out)]) == 0
    assert "trained Unigram: vocab 300" in capsys.readouterr().err
    tok = Tokenizer.from_file(out)
    assert isinstance(tok.model, Unigram)
    assert tok.model.pieces[0][0] == "<pad>" and tok.model.unk_token == "<unk>"
    text = "Alice was beginning to get very tired"
    assert tok.decode(tok.encode(text).ids) == text
    assert tok.encode(text).tokens[0].startswith("▁")
