"""The WordPiece model (BERT): a vocabulary, matched greedily longest-first within each word.

The data lives here; the longest-match loop runs in the C++ core (``tokenmill._core.
WordPieceModel``), built once and never changed, so encoding runs with the GIL released.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from tokenmill import _core
from tokenmill._registry import field, register
from tokenmill.errors import FormatError, InputError
from tokenmill.models._vocab import VocabLookups


@register("model", "WordPiece")
class WordPiece(VocabLookups):
    """Greedy longest-match-first: from a word's start, the longest prefix that is a token, then
    the longest continuation that is a ``continuing_subword_prefix`` token ("##able"), and so on.

    A word with a part no token matches, or longer than ``max_input_chars_per_word`` characters,
    becomes ONE ``unk_token`` spanning the whole word, as in BERT and Hugging Face.

    >>> wp = WordPiece({"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3})
    >>> wp.encode_word("unaffable"), wp.encode_word("able")
    (['un', '##aff', '##able'], ['[UNK]'])
    """

    # Never run end to end by the core's byte-level encoder (see Tokenizer.native_plan).
    byte_level_core = None

    def __init__(self, vocab: Mapping[str, int], *, unk_token: str = "[UNK]",
                 continuing_subword_prefix: str = "##",
                 max_input_chars_per_word: int = 100) -> None:
        if max_input_chars_per_word < 0:
            raise InputError(f"max_input_chars_per_word must be >= 0, got "
                             f"{max_input_chars_per_word}")
        self.vocab = dict(vocab)
        self.unk_token = unk_token
        self.continuing_subword_prefix = continuing_subword_prefix
        self.max_input_chars_per_word = max_input_chars_per_word
        self._id_to_token = {i: t for t, i in self.vocab.items()}
        if len(self._id_to_token) != len(self.vocab):
            seen: dict[int, str] = {}
            for token, i in self.vocab.items():
                if i in seen:
                    raise InputError(f"vocab: {seen[i]!r} and {token!r} have the same id {i}")
                seen[i] = token

    @classmethod
    def from_vocab_file(cls, path: str | os.PathLike[str], **options: Any) -> WordPiece:
        """A model from a BERT ``vocab.txt`` (one token per line, id = line number)."""
        from tokenmill.formats.bert_vocab import read_vocab

        return cls(read_vocab(path), **options)

    @functools.cached_property
    def core(self) -> _core.WordPieceModel:
        """The core's model (built on first use)."""
        unk = self.vocab.get(self.unk_token, -1)
        return _core.WordPieceModel(list(self.vocab), list(self.vocab.values()), unk,
                                    self.continuing_subword_prefix,
                                    self.max_input_chars_per_word)

    # -- encoding --------------------------------------------------------------------------

    def encode_pieces(self, pieces: list[str]) -> list[int]:
        """Tokens of a batch of pre-tokens as one flat list ``[id, piece, start, end] * n``
        (``start``/``end``: characters of the piece)."""
        try:
            return self.core.encode_words(pieces)
        except InputError as error:
            raise InputError(f"{error} (unk_token {self.unk_token!r} is not in the vocab)"
                             ) from None

    def encode_word(self, word: str) -> list[str]:
        """The tokens of one pre-token."""
        return [self._id_to_token[i] for i in self.encode_pieces([word])[0::4]]

    # -- files -----------------------------------------------------------------------------

    @property
    def hf_compatible(self) -> str | None:
        """None: every WordPiece model has the same meaning in Hugging Face's schema."""
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"type": "WordPiece", "unk_token": self.unk_token,
                "continuing_subword_prefix": self.continuing_subword_prefix,
                "max_input_chars_per_word": self.max_input_chars_per_word,
                "vocab": self.vocab}

    @classmethod
    def from_fields(cls, data: dict[str, Any], where: str) -> WordPiece:
        vocab = field(data, "vocab", dict, where)
        for token, i in vocab.items():
            if type(i) is not int or not 0 <= i < 2**32:
                raise FormatError(f"{where}.vocab[{token!r}]: expected an id (integer >= 0), "
                                  f"got {i!r}")
        limit = field(data, "max_input_chars_per_word", int, where, 100)
        if limit < 0:
            raise FormatError(f"{where}.max_input_chars_per_word: expected an integer >= 0, "
                              f"got {limit}")
        try:
            return cls(vocab, unk_token=field(data, "unk_token", str, where, "[UNK]"),
                       continuing_subword_prefix=field(data, "continuing_subword_prefix", str,
                                                       where, "##"),
                       max_input_chars_per_word=limit)
        except InputError as e:
            raise FormatError(f"{where}: {e}") from None
