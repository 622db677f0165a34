"""What every model does with its vocabulary, written once."""

from __future__ import annotations


class VocabLookups:
    """Lookups of a model holding ``vocab`` (token -> id) and ``_id_to_token`` (its inverse)."""

    vocab: dict[str, int]
    _id_to_token: dict[int, str]

    def token_to_id(self, token: str) -> int | None:
        return self.vocab.get(token)

    def id_to_token(self, id: int) -> str | None:
        return self._id_to_token.get(id)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)
