"""Strings that are not valid Unicode (a lone surrogate) are refused where they come in: as an
added token, and anywhere in a tokenizer.json (vocab keys, merges, added tokens, components)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tokenmill import BPE, AddedToken, FormatError, InputError, Tokenizer


def make() -> Tokenizer:
    return Tokenizer(BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))


@pytest.mark.parametrize("method", ["add_special_tokens", "add_tokens"])
def test_an_added_token_with_a_lone_surrogate_is_refused(method, tmp_path):
    tok = make()
    with pytest.raises(InputError, match=r"^added token 'x\\udfff' holds a lone surrogate "
                                         r"U\+DFFF at character 1; it is not valid Unicode text$"):
        getattr(tok, method)(["<s>", "x\udfff"])
    assert tok.added_tokens == [] and tok.get_vocab_size() == 3  # nothing half-added
    tok.save(tmp_path / "tok.json")  # and what is there still saves
    with pytest.raises(InputError, match=r"^added token '\\ud800' holds a lone surrogate"):
        AddedToken("\ud800", 3)


def saved(tmp_path, change) -> Any:
    """The file of :func:`make` with ``change`` applied, written as Python's json writes it
    (lone surrogates as ``\\ud800`` escapes)."""
    data = make().to_dict()
    change(data)
    path = tmp_path / "tok.json"
    path.write_text(json.dumps(data), "utf-8")
    return path


@pytest.mark.parametrize("change, message", [
    (lambda d: d["model"]["vocab"].update({"\ud800": 3}),
     r"model\.vocab: key '\\ud800' holds a lone surrogate U\+D800 at "
     r"character \d+; it is not valid Unicode text"),
    (lambda d: d["model"]["merges"].append("a \udbff"),
     r"model\.merges\[1\]: 'a \\udbff' holds a lone surrogate U\+DBFF at "
     r"character \d+; it is not valid Unicode text"),
    (lambda d: d["model"]["merges"].append(["\udc00", "b"]),
     r"model\.merges\[1\]\[0\]: '\\udc00' holds a lone surrogate U\+DC00 at "
     r"character \d+; it is not valid Unicode text"),
    (lambda d: d["added_tokens"].append({"id": 3, "content": "<\ude00>", "special": True}),
     r"added_tokens\[0\]\.content: '<\\ude00>' holds a lone surrogate U\+DE00 at "
     r"character \d+; it is not valid Unicode text"),
    (lambda d: d.update(normalizer={"type": "Replace", "pattern": {"String": "\ud83d"},
                                    "content": "x"}),
     r"normalizer\.pattern\.String: '\\ud83d' holds a lone surrogate U\+D83D at "
     r"character \d+; it is not valid Unicode text"),
    (lambda d: d["model"].update(type="Unigram", vocab=[["a", -1.0], ["\udfff", -2.0]],
                                 merges=None),
     r"model\.vocab\[1\]\[0\]: '\\udfff' holds a lone surrogate U\+DFFF at "
     r"character \d+; it is not valid Unicode text"),
])
def test_a_file_with_a_lone_surrogate_names_the_file_and_field(tmp_path, change, message):
    path = saved(tmp_path, change)
    with pytest.raises(FormatError, match=f"^{re.escape(str(path))}: {message}$"):
        Tokenizer.from_file(path)
    data = json.loads(path.read_text("utf-8"))
    with pytest.raises(FormatError, match=f"^tok: {message}$"):
        Tokenizer.from_dict(data, "tok")
    with pytest.raises(FormatError, match=f"^tokenizer: {message}$"):
        Tokenizer.from_str(json.dumps(data, ensure_ascii=False))  # a raw surrogate in a str


def test_escaped_surrogate_pairs_are_valid_text(tmp_path):
    # An ensure_ascii writer spells U+1F600 as the pair \ud83d\ude00: one valid character.
    path = saved(tmp_path, lambda d: (d["model"]["vocab"].update({"\U0001F600": 3}),
                                      d["added_tokens"].append({"id": 4, "content": "<\u00e9>"})))
    assert "\\ud83d\\ude00" in path.read_text("utf-8")
    tok = Tokenizer.from_file(path)
    assert tok.token_to_id("\U0001F600") == 3
    assert tok.encode("ab<\u00e9>").ids == [2, 4]
    assert len(tok.fingerprint()) == 64
