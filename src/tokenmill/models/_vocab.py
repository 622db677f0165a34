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

    def vocab_tokens(self) -> dict[int, str] | None:
        """The id -> token dict that :meth:`id_to_token` reads, for lookups in bulk; None
        for a model whose id_to_token reads something else."""
        return self._id_to_token if type(self).id_to_token is VocabLookups.id_to_token else None

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def max_id(self) -> int:
        """The highest id of the vocabulary (-1 if empty). Kept with the dict it came from, and
        taken again if ``vocab`` is replaced or grows: a max over 200k ids costs 2 ms, which
        every ``encode_batch_np`` paid (ten times the encoding of a sentence)."""
        memo = self.__dict__.get("_max_id_memo")
        if memo is None or memo[0] is not self.vocab or memo[1] != len(self.vocab):
            memo = (self.vocab, len(self.vocab), max(self.vocab.values(), default=-1))
            self.__dict__["_max_id_memo"] = memo
        return memo[2]
