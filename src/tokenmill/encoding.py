"""Encoding: what a tokenizer makes of one input (ids, tokens, offsets and masks), with
truncation and padding."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from tokenmill import _core
from tokenmill.errors import InputError

Side = Literal["right", "left"]
Strategy = Literal["LongestFirst", "OnlyFirst", "OnlySecond"]
SIDES: tuple[Side, ...] = ("right", "left")
STRATEGIES: tuple[Strategy, ...] = ("LongestFirst", "OnlyFirst", "OnlySecond")

# Each token's word (its pre-token's place among its input's pre-tokens, None for a token a
# post-processor added or padding), or what makes them when first asked for: a function (such
# as _Words); the input's text, pre-tokenized again by the tokenizer whose id_to_token the
# encoding has, as it was when it encoded the text (a str is all an encoding keeps for its
# words until asked: a batch of encodings that each held a function and its arguments gave the
# cyclic collector more objects to walk); or, from Encoding.laid_out, a tuple of its parts'
# words, each a number of tokens of no word or one of these (a part is not kept for them);
# or ONE_WORD: every token is of word 0.


class _OneWord:
    """The words of an encoding whose tokens all come from one word, word 0: a text of one
    stretch through a SentencePiece pipeline that does not split it. Asked for, a list of
    zeros as long as the encoding; until then nothing (where a list, or a function to make
    one, cost every encoding an object)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ONE_WORD"


ONE_WORD = _OneWord()
Words = list[int | None] | str | tuple | Callable[[], list[int | None]] | _OneWord | None
# Which tokens belong to which input: {sequence id: (first token, end)}, as tokenizers keeps
# them. None: no input is marked (every token counts as input 0); _WHOLE: input 0 is every
# token, however many there are when asked.
Ranges = dict[int, tuple[int, int]] | str | None
_WHOLE = "whole"
# A part of Encoding.laid_out: (encoding, type id or None, input or None), or a special token's
# (ids, name, type id).
Layout = tuple[Any, Any, Any]


class Encoding:
    """The ids of one input and what each id stands for.

    ``offsets[i]`` is the span of the ORIGINAL input's characters that token ``i`` came from;
    special tokens added by a post-processor have ``(0, 0)``. Tokens, offsets and masks are made
    on first access (most callers want only the ids): an encoding from the core holds the ids
    and two flat offset lists until asked.

    ``word_ids`` and ``sequence_ids`` say which pre-token ("word") of which input each token
    comes from, and ``char_to_token``, ``word_to_tokens`` and the like map between tokens,
    words and characters, as on a tokenizers ``Encoding``. Word ids are made when first asked
    for, by pre-tokenizing the input again.

    >>> e = Encoding([5, 6, 7], offsets=[(0, 2), (2, 4), (5, 8)], words=[0, 0, 1])
    >>> e.word_to_tokens(0), e.char_to_token(3), e.char_to_word(6), e.word_to_chars(1)
    ((0, 2), 1, 1, (5, 8))
    """

    __slots__ = ("ids", "_tokens", "_offsets", "_type_ids", "_attention_mask",
                 "_special_tokens_mask", "_overflowing", "_id_to_token", "_words", "_ranges",
                 "_made_at")

    def __init__(self, ids: list[int], tokens: list[str] | None = None,
                 offsets: list[tuple[int, int]] | tuple[list[int], list[int]] | None = None,
                 type_ids: list[int] | None = None, attention_mask: list[int] | None = None,
                 special_tokens_mask: list[int] | None = None,
                 overflowing: list[Encoding] | None = None, *,
                 id_to_token: Callable[[int], str | None] | None = None,
                 words: Words = None, sequence_ranges: Ranges = None) -> None:
        self.ids = ids
        self._tokens = tokens
        self._offsets = offsets
        self._type_ids = type_ids or None
        self._attention_mask = attention_mask or None
        self._special_tokens_mask = special_tokens_mask or None
        self._overflowing = overflowing  # (None: no window, the list made when asked for)
        self._id_to_token = id_to_token
        self._words = words
        self._ranges = sequence_ranges or None
        self._made_at = -1  # (the tokenizer's _generation when it encoded a text of _words)

    def _untracked(self) -> Encoding:
        """This encoding, its lists of ints and strings taken out of the cyclic collector's
        sight, as the core's id lists are. Called where a layout or a pad makes them in Python:
        walked at every run of the collector, they were half of encoding MiniLM's lines one a
        call while the encodings were kept. (Not for every encoding made: a call a part cost
        batches more than the walks it saved.)"""
        offsets = self._offsets
        starts, ends = offsets if type(offsets) is tuple else (None, None)
        _core.untrack_lists(self.ids, self._tokens, self._type_ids, self._attention_mask,
                            self._special_tokens_mask, starts, ends)
        return self

    def _settled(self) -> Encoding:
        """This encoding, its windows' likewise, with its own lists, tuples and dicts of ints
        (ids, offsets, sequence ranges, word parts) taken out of the cyclic collector's sight:
        CPython keeps a tuple that holds a list tracked for good, and each full run of the
        collector walked them all for every encoding kept. Called on what encode and
        encode_batch hand back. (The encoding itself stays in sight: it refers to its
        tokenizer, which may reach a script's globals through a class or component defined
        there, and a cycle through an untracked object is never freed, not even at exit.)"""
        _core.untrack_parts(self.ids, self._offsets, self._ranges, self._words)
        for window in self._overflowing or ():
            window._settled()
        return self

    @property
    def overflowing(self) -> list[Encoding]:
        """The windows truncation cut from this encoding (tokenizers' ``overflowing``)."""
        if self._overflowing is None:
            self._overflowing = []
        return self._overflowing

    @overflowing.setter
    def overflowing(self, value: list[Encoding]) -> None:
        self._overflowing = value

    @property
    def tokens(self) -> list[str]:
        if self._tokens is None:
            to_token = self._id_to_token
            self._tokens = [to_token(i) or "" for i in self.ids] if to_token else \
                [""] * len(self.ids)
        return self._tokens

    @tokens.setter
    def tokens(self, value: list[str]) -> None:
        self._tokens = value

    @property
    def offsets(self) -> list[tuple[int, int]]:
        if self._offsets is None:
            self._offsets = [(0, 0)] * len(self.ids)
        elif isinstance(self._offsets, tuple):
            self._offsets = list(zip(*self._offsets))
        return self._offsets

    @offsets.setter
    def offsets(self, value: list[tuple[int, int]]) -> None:
        self._offsets = value

    @property
    def type_ids(self) -> list[int]:
        if self._type_ids is None:
            self._type_ids = [0] * len(self.ids)
        return self._type_ids

    @type_ids.setter
    def type_ids(self, value: list[int]) -> None:
        self._type_ids = value

    @property
    def attention_mask(self) -> list[int]:
        if self._attention_mask is None:
            self._attention_mask = [1] * len(self.ids)
        return self._attention_mask

    @attention_mask.setter
    def attention_mask(self, value: list[int]) -> None:
        self._attention_mask = value

    @property
    def special_tokens_mask(self) -> list[int]:
        if self._special_tokens_mask is None:
            self._special_tokens_mask = [0] * len(self.ids)
        return self._special_tokens_mask

    @special_tokens_mask.setter
    def special_tokens_mask(self, value: list[int]) -> None:
        self._special_tokens_mask = value

    # -- words and sequences ---------------------------------------------------------------

    @property
    def word_ids(self) -> list[int | None]:
        """Each token's word: the place of the pre-token it comes from among its input's
        (counting an added token met in the text as one), None for a token the post-processor
        added and for padding."""
        words = self._words
        if type(words) is list:
            return words
        if words is None:
            words = [None] * len(self.ids)
        elif words is ONE_WORD:
            words = [0] * len(self.ids)
        elif isinstance(words, (str, tuple)):
            words = _made_words(words, _tokenizer_of(self._id_to_token, words), self._made_at,
                                len(self.ids))
        else:
            words = cast("Callable[[], list[int | None]]", words)()
        self._words = words
        return words

    @word_ids.setter
    def word_ids(self, value: list[int | None]) -> None:
        self._words = value

    @property
    def words(self) -> list[int | None]:
        """``word_ids`` (tokenizers' older name for them)."""
        return self.word_ids

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        # Words still to be made are made first: a text's need its tokenizer as it was when
        # it encoded the text, which an unpickled copy of the tokenizer cannot say it is.
        state = {name: getattr(self, name) for name in self.__slots__}
        state["_words"] = self.word_ids
        return None, state

    def _word_source(self) -> Words:
        """What makes this encoding's words, to share with the encodings made from it (its
        windows, its copies): its list, or a _Words that will make them once for all of
        them, which does not keep this encoding."""
        words = self._words
        if words is ONE_WORD:  # (a list: a window or copy may be shorter)
            words = self.word_ids
        elif isinstance(words, (str, tuple)):
            words = self._words = _Words(words, _tokenizer_of(self._id_to_token, words),
                                         self._made_at, len(self.ids))
        return words

    def _sequence_ranges(self) -> dict[int, tuple[int, int]]:
        ranges = self._ranges
        if ranges is None:
            return {}
        if isinstance(ranges, str):  # _WHOLE
            return {0: (0, len(self.ids))}
        return ranges

    @property
    def n_sequences(self) -> int:
        """How many inputs this encoding holds (1 where none is marked)."""
        return len(self._sequence_ranges()) or 1

    def set_sequence_id(self, sequence_id: int) -> None:
        """Marks every token as of input ``sequence_id`` (as a post-processor marks its
        inputs)."""
        _check_int("set_sequence_id", "sequence_id", sequence_id, 0)
        if self._ranges is None and sequence_id == 0:
            self._ranges = _WHOLE  # (what nearly every encoding a post-processor lays out has)
            return
        ranges = dict(self._sequence_ranges())
        ranges[sequence_id] = (0, len(self.ids))
        self._ranges = ranges

    def _range(self, sequence_id: int) -> tuple[int, int]:
        # (tokenizers: every token, where the input is not marked)
        return self._sequence_ranges().get(sequence_id, (0, len(self.ids)))

    @property
    def sequence_ids(self) -> list[int | None]:
        """Each token's input (0 or 1 for a pair), None for a token the post-processor added
        (and for padding where there is one)."""
        n = len(self.ids)
        ranges = self._ranges
        if ranges is None or isinstance(ranges, str):  # (_WHOLE, or an unpickled copy of it)
            return [0] * n
        if len(ranges) == 1 and 0 in ranges:  # (one input, laid out: most encodings)
            a, b = ranges[0]
            return [None] * a + [0] * (b - a) + [None] * (n - b)
        out: list[int | None] = [None] * n
        for sequence in range(len(ranges) or 1):
            a, b = self._range(sequence)
            out[a:b] = [sequence] * (b - a)
        return out

    def token_to_sequence(self, token_index: int) -> int | None:
        """The input token ``token_index`` comes from (None: a token added around them).
        As in tokenizers, one past the last token of an encoding with no input marked is of
        input 0."""
        if _position(token_index, "token_index") > len(self.ids):
            return None
        ranges = self._sequence_ranges()
        if not ranges:
            return 0
        return next((s for s, (a, b) in ranges.items() if a <= token_index < b), None)

    def token_to_chars(self, token_index: int) -> tuple[int, int] | None:
        """The characters of its input that token ``token_index`` covers."""
        if self.token_to_sequence(token_index) is None or token_index >= len(self.ids):
            return None
        return self.offsets[token_index]

    def token_to_word(self, token_index: int) -> int | None:
        """The word of its input that token ``token_index`` comes from."""
        if self.token_to_sequence(token_index) is None or token_index >= len(self.ids):
            return None
        return self.word_ids[token_index]

    def word_to_tokens(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        """The tokens ``[start, end)`` of word ``word_index`` of input ``sequence_index``."""
        word_index = _position(word_index, "word_index")
        a, b = self._range(_position(sequence_index, "sequence_index"))
        words = self.word_ids
        start = end = None
        for i in range(a, b):
            w = words[i]
            if w is not None and w > word_index:
                break  # (words only grow along an input)
            if w == word_index:
                start = i if start is None else start
                end = i + 1
        return None if start is None or end is None else (start, end)

    def word_to_chars(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        """The characters of its input that word ``word_index`` of input ``sequence_index``
        covers."""
        tokens = self.word_to_tokens(word_index, sequence_index)
        if tokens is None:
            return None
        offsets = self.offsets
        return offsets[tokens[0]][0], offsets[tokens[1] - 1][1]

    def char_to_token(self, char_pos: int, sequence_index: int = 0) -> int | None:
        """The first token of input ``sequence_index`` that covers its character
        ``char_pos``."""
        char_pos = _position(char_pos, "char_pos")
        a, b = self._range(_position(sequence_index, "sequence_index"))
        offsets = self.offsets
        return next((i for i in range(a, b) if offsets[i][0] <= char_pos < offsets[i][1]), None)

    def char_to_word(self, char_pos: int, sequence_index: int = 0) -> int | None:
        """The word of input ``sequence_index`` that covers its character ``char_pos``."""
        token = self.char_to_token(char_pos, sequence_index)
        return None if token is None else self.token_to_word(token)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Encoding):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in
                   ("ids", "tokens", "offsets", "type_ids", "attention_mask",
                    "special_tokens_mask", "sequence_ids")) and \
            (self._overflowing or []) == (other._overflowing or []) and \
            self._comparable_words() == other._comparable_words()

    def _comparable_words(self) -> object:
        """The word ids, or where they can no longer be made (the tokenizer changed since, the
        ids were replaced) what they would have been made from: a comparison answers, never
        raises."""
        try:
            return self.word_ids
        except InputError:
            return _word_source_key(self._words)

    __hash__ = None  # type: ignore[assignment]

    def replace(self, **changes: object) -> Encoding:
        """A copy with some fields changed (``ids``, ``tokens``, ``offsets``, masks...)."""
        fields: dict[str, object] = {f: getattr(self, f) for f in
                                     ("ids", "tokens", "offsets", "type_ids", "attention_mask",
                                      "special_tokens_mask")}
        fields["overflowing"] = self._overflowing
        fields["words"] = self._word_source()  # (made only if asked for)
        fields["sequence_ranges"] = self._ranges
        fields.update(changes)
        return Encoding(**fields)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        more = "..." if len(self) > 8 else ""
        return f"Encoding(num_tokens={len(self.ids)}, ids={self.ids[:8]}{more})"

    def _window(self, i: int, j: int) -> Encoding:
        """Tokens ``[i, j)``, with no input marked (as tokenizers' truncate leaves a window).
        What this encoding has not made yet (tokens, offset pairs, masks at their defaults)
        the window does not make either: making a truncated Mistral line's tokens in Python
        was a fifth of a truncated batch."""
        words = self._word_source()
        offsets = self._offsets
        type_ids, attention, special = \
            self._type_ids, self._attention_mask, self._special_tokens_mask
        window = Encoding(
            self.ids[i:j], None if self._tokens is None else self._tokens[i:j],
            (offsets[0][i:j], offsets[1][i:j]) if type(offsets) is tuple else self.offsets[i:j],
            None if type_ids is None else type_ids[i:j],
            None if attention is None else attention[i:j],
            None if special is None else special[i:j],
            id_to_token=self._id_to_token,
            words=words[i:j] if isinstance(words, list) else None if words is None else
            _WordSlice(cast("Callable[[], list[int | None]]", words), i, j))
        window._made_at = self._made_at
        return window

    @staticmethod
    def whole(encoded: tuple[list[int], list[int], list[int]],
              id_to_token: Callable[[int], str | None] | None) -> Encoding:
        """The Encoding of a text that is one stretch, from its (ids, starts, ends): tokens
        and offset pairs are made only if they are asked for."""
        ids, starts, ends = encoded
        return Encoding(ids, offsets=(starts, ends), id_to_token=id_to_token)

    @staticmethod
    def spliced(cut: list[tuple[int | None, int, int]],
                encoded: list[tuple[list[int], list[int], list[int]]],
                id_to_token: Callable[[int], str | None] | None) -> Encoding:
        """The Encoding of a text cut into ``(added token id or None, start, end)``, given the
        (ids, starts, ends) of its stretches of text in ``encoded`` (in order, offsets counted
        from each stretch's start)."""
        if len(cut) == 1 and cut[0][0] is None and cut[0][1] == 0:
            return Encoding.whole(encoded[0], id_to_token)  # no added token in the text
        ids = []
        starts = []
        ends = []
        parts = iter(encoded)
        for token, a, b in cut:
            if token is not None:
                ids.append(token)
                starts.append(a)
                ends.append(b)
                continue
            seg_ids, seg_starts, seg_ends = next(parts)
            ids += seg_ids
            starts += [a + s for s in seg_starts]
            ends += [a + e for e in seg_ends]
        return Encoding(ids, offsets=(starts, ends), id_to_token=id_to_token)

    @property
    def token_source(self) -> Callable[[int], str | None] | None:
        """The id -> token function this encoding's tokens are made with when asked for (None:
        they were given)."""
        return self._id_to_token

    def _lazy_tokens(self) -> Callable[[int], str | None] | None:
        """The id -> token function this encoding's tokens are (or would be) made with, if its
        tokens are exactly what it gives its ids; else None."""
        to_token = self._id_to_token
        if to_token is None or self._tokens is None:
            return to_token
        for i, t in zip(self.ids, self._tokens):  # (a special token's one or two)
            if (to_token(i) or "") != t:
                return None
        return to_token

    def _starts_ends(self) -> tuple[list[int], list[int]]:
        """Where each token starts and ends, as two lists."""
        if isinstance(self._offsets, tuple):
            return self._offsets
        if self._offsets is None:
            return [0] * len(self.ids), [0] * len(self.ids)
        return [s for s, _ in self._offsets], [e for _, e in self._offsets]

    @staticmethod
    def concat(parts: list[Encoding]) -> Encoding:
        """One encoding holding ``parts`` one after another. Where every part's tokens are
        what one id -> token function gives their ids (the model's tokens, and special tokens
        spelled as in the vocabulary), the tokens stay unmade, and the offsets stay in two
        lists until asked for; so do masks unmade in every part (their defaults)."""
        return Encoding.laid_out([(p, None, None) for p in parts])

    @staticmethod
    def laid_out(layout: list[Layout], own_marks: bool = True) -> Encoding:
        """Parts laid out one after another: each an encoding, with the type id its tokens
        take (None: their own) and the input it is marked as (None: none; its own marks are
        kept too, unless ``own_marks`` is false), as ``(encoding, type_id, sequence)``; or a
        special token as a post-processor adds it, as ``(ids, name, type_id)`` (offsets
        (0, 0), special mask 1, no word, no input). A template's special tokens are not made
        encodings of their own first: their making and a walk over them were a third of
        ``encode`` on a BERT tokenizer."""
        alone = layout[0][0] if len(layout) == 1 else None
        if isinstance(alone, Encoding) and (alone._words is None or
                                            alone._lazy_tokens() is alone._id_to_token):
            return Encoding._laid_out_alone(*layout[0], own_marks)  # type: ignore[misc]
        typed = masked = attended = False  # (a list made only where a part has one)
        to_token = None  # the id -> token function of every part, if they share one
        first: Encoding | None = None  # (whose function to_token starts as)
        for item in layout:
            e = item[0]
            if not isinstance(e, Encoding):
                typed = typed or item[2] != 0
                masked = True
                continue
            type_id = item[1]
            typed = typed or (e._type_ids is not None if type_id is None else type_id != 0)
            masked = masked or e._special_tokens_mask is not None
            attended = attended or e._attention_mask is not None
            if first is None:
                to_token, first = e._lazy_tokens(), e
        ids: list[int] = []
        starts: list[int] = []
        ends: list[int] = []
        types: list[int] = []
        special: list[int] = []
        attention: list[int] = []
        ranges: dict[int, tuple[int, int]] | None = None  # (each part's, moved along)
        words: list[int | Words] = []  # (the tuple of the parts' words)
        worded = mixed = False  # some part has words; their parts' tokenizers differ
        owner: Encoding | None = None  # the first part with words
        for item in layout:
            at = len(ids)
            if not isinstance(item[0], Encoding):  # a special token
                token_ids, name, special_type = cast("tuple[list[int], str, int]", item)
                k = len(token_ids)
                ids += token_ids
                starts += [0] * k
                ends += [0] * k
                if typed:
                    types += [special_type] * k
                special += [1] * k
                if attended:
                    attention += [1] * k
                words.append(k)
                if to_token is not None:
                    for i in token_ids:
                        if (to_token(i) or "") != name:
                            to_token = None
                            break
                continue
            e, type_id, sequence = cast("tuple[Encoding, int | None, int | None]", item)
            n = len(e.ids)
            own = e._ranges if own_marks else None
            if own is not None or sequence is not None:
                if ranges is None:
                    ranges = {}
                if own is _WHOLE:
                    ranges[0] = (at, at + n)
                elif own is not None:
                    for seq_id, (a, b) in e._sequence_ranges().items():
                        ranges[seq_id] = (a + at, b + at)
                if sequence is not None:
                    ranges[sequence] = (at, at + n)
            w = e._words
            if w is None:
                words.append(n)
            else:
                words += _word_parts(e)
                if owner is None:
                    worded, owner = True, e
                elif (e._id_to_token is not owner._id_to_token and
                      e._id_to_token != owner._id_to_token) or e._made_at != owner._made_at:
                    mixed = True  # (or the same tokenizer, encoding them as it changed)
            if to_token is not None and e is not first and e._lazy_tokens() != to_token:
                to_token = None
            ids += e.ids
            s, t = e._starts_ends()
            starts += s
            ends += t
            if typed:
                types += e.type_ids if type_id is None else [type_id] * n
            if masked:
                special += e._special_tokens_mask or [0] * n
            if attended:
                attention += e._attention_mask or [1] * n
        tokens: list[str] | None = None
        if to_token is None:
            tokens = []
            for item in layout:
                if isinstance(item[0], Encoding):
                    tokens += item[0].tokens
                else:
                    tokens += [item[1]] * len(item[0])
        out = Encoding(ids, tokens, (starts, ends), types if typed else None,
                       attention if attended else None, special if masked else None,
                       id_to_token=to_token, sequence_ranges=ranges)
        if worded and owner is not None:
            # (a text's words are made by the tokenizer of the encoding's id_to_token, as it
            # was when it encoded it: where a part's is another, each part's are bound to its
            # own)
            if mixed or (owner._id_to_token is not to_token and owner._id_to_token != to_token):
                words = [w for item in layout for w in
                         (_word_sources(item[0]) if isinstance(item[0], Encoding)
                          else [len(item[0])])]
            out._words = tuple(words)
            out._made_at = owner._made_at
        return out._untracked()

    def _padded_lazily(self, missing: int, pad_id: int, pad_type_id: int, right: bool,
                       pad_token: str) -> Encoding:
        """padded(), where this encoding's tokens and the pad's are what its id -> token
        function gives: as concat lays out the encoding and its pad, without the walk over
        parts (which was the most of encoding a line of a BERT file that pads to 128)."""
        n = len(self.ids)

        def joined(mine: list[Any], pads: list[Any]) -> list[Any]:
            return mine + pads if right else pads + mine

        starts, ends = self._starts_ends()
        at = 0 if right else missing
        ranges = {k: (a + at, b + at) for k, (a, b) in self._sequence_ranges().items()}
        out = Encoding(joined(self.ids, [pad_id] * missing), None,
                       (joined(starts, [0] * missing), joined(ends, [0] * missing)),
                       joined(self.type_ids, [pad_type_id] * missing),
                       joined(self._attention_mask or [1] * n, [0] * missing),
                       joined(self._special_tokens_mask or [0] * n, [1] * missing),
                       id_to_token=self._id_to_token, sequence_ranges=ranges)
        if self._words is not None:  # (the pad's tokens: a run without words, as concat keeps it)
            own = _word_parts(self)
            out._words = (*own, missing) if right else (missing, *own)
            out._made_at = self._made_at
        if self._overflowing:
            out.overflowing = [o.padded(n + missing, pad_id=pad_id, pad_token=pad_token,
                                        pad_type_id=pad_type_id, side="right" if right else "left")
                               for o in self._overflowing]
        return out._untracked()

    @staticmethod
    def _laid_out_alone(e: Encoding, type_id: int | None, sequence: int | None,
                        own_marks: bool) -> Encoding:
        """laid_out of the one part ``(e, type_id, sequence)``: the same encoding, without
        the walk over parts (a template without special tokens, as ``encode(...,
        add_special_tokens=False)`` lays out each text: a third of encoding a line through
        Mistral's tokenizer.json)."""
        n = len(e.ids)
        own = e._ranges if own_marks else None
        ranges: dict[int, tuple[int, int]] | None = None
        if own is not None or sequence is not None:
            ranges = {}
            if own is _WHOLE:
                ranges[0] = (0, n)
            elif own is not None:
                ranges.update(e._sequence_ranges())
            if sequence is not None:
                ranges[sequence] = (0, n)
        if type_id is None:
            types = None if e._type_ids is None else list(e._type_ids)
        else:
            types = [type_id] * n if type_id else None
        starts, ends = e._starts_ends()
        to_token = e._lazy_tokens()
        out = Encoding(list(e.ids), None if to_token is not None else list(e.tokens),
                       (list(starts), list(ends)), types,
                       None if e._attention_mask is None else list(e._attention_mask),
                       None if e._special_tokens_mask is None else list(e._special_tokens_mask),
                       id_to_token=to_token, sequence_ranges=ranges)
        if e._words is ONE_WORD:  # (as many tokens)
            out._words = ONE_WORD
        elif e._words is not None:
            out._words = e._words if type(e._words) is tuple else (e._words,)
            out._made_at = e._made_at
        return out

    def truncated(self, max_length: int, stride: int = 0, side: Side = "right") -> Encoding:
        """At most ``max_length`` tokens; what is cut goes to ``overflowing`` in windows that
        overlap by ``stride`` tokens (the windows a question-answering model reads)."""
        if max_length < 0:
            raise InputError(f"truncation max_length must be >= 0, got {max_length}")
        n = len(self.ids)
        if n <= max_length:
            return self
        if max_length == 0:
            kept = self._window(0, 0)
            kept.overflowing = [self._window(0, n)]
            return kept
        if stride >= max_length:
            raise InputError(f"truncation stride ({stride}) must be smaller than max_length "
                             f"({max_length})")
        step = max_length - stride
        windows: list[Encoding] = []
        if side == "right":
            start = 0
            while True:
                windows.append(self._window(start, min(start + max_length, n)))
                if start + max_length >= n:
                    break
                start += step
        else:
            end = n
            while True:
                windows.append(self._window(max(0, end - max_length), end))
                if end - max_length <= 0:
                    break
                end -= step
        first, rest = windows[0], windows[1:]
        first.overflowing = rest
        return first

    def padded(self, length: int, *, pad_id: int = 0, pad_token: str = "[PAD]",
               pad_type_id: int = 0, side: Side = "right") -> Encoding:
        """The encoding padded to ``length`` with masked-out pad tokens (longer ones unchanged)."""
        missing = length - len(self.ids)
        if missing <= 0:
            if not self._overflowing:
                return self
            # tokenizers pads the overflowing windows even when the first needs none.
            return self.replace(overflowing=[o.padded(length, pad_id=pad_id, pad_token=pad_token,
                                                      pad_type_id=pad_type_id, side=side)
                                             for o in self._overflowing])
        # Where this encoding's tokens are unmade and the pad token is what its id -> token
        # function gives pad_id, the pad's are left unmade too: concat then makes none (padding
        # a BERT pair to its fixed length made every token, a third of encoding the pair).
        to_token = self._lazy_tokens()
        lazy = to_token is not None and (to_token(pad_id) or "") == pad_token
        if lazy and to_token is self._id_to_token:
            return self._padded_lazily(missing, pad_id, pad_type_id, side == "right",
                                       pad_token)
        pad = Encoding([pad_id] * missing, None if lazy else [pad_token] * missing,
                       ([0] * missing, [0] * missing), [pad_type_id] * missing, [0] * missing,
                       [1] * missing, id_to_token=to_token if lazy else None)
        parts = [self, pad] if side == "right" else [pad, self]
        out = Encoding.concat(parts)
        if self._overflowing:
            out.overflowing = [o.padded(length, pad_id=pad_id, pad_token=pad_token,
                                        pad_type_id=pad_type_id, side=side)
                               for o in self._overflowing]
        return out


@dataclass(frozen=True, kw_only=True)
class Truncation:
    """Keep at most ``max_length`` tokens (special tokens included); overflow in ``stride``-
    overlapping windows; cut on the ``side`` given.

    A pair is cut by ``strategy``: "LongestFirst" takes from the longer input until both are
    as long, then from both; "OnlyFirst"/"OnlySecond" take from that input only.

    >>> Truncation(max_length=8, strategy="OnlySecond").to_dict()["strategy"]
    'OnlySecond'
    """

    max_length: int
    stride: int = 0
    side: Side = "right"
    strategy: Strategy = "LongestFirst"

    def __post_init__(self) -> None:
        _check_int("truncation", "max_length", self.max_length, 1)
        _check_int("truncation", "stride", self.stride, 0)
        _check_choice("truncation", "side", self.side, SIDES)
        _check_choice("truncation", "strategy", self.strategy, STRATEGIES)

    def to_dict(self) -> dict:
        return {"direction": self.side.capitalize(), "max_length": self.max_length,
                "strategy": self.strategy, "stride": self.stride}


@dataclass(frozen=True, kw_only=True)
class Padding:
    """Pad a batch to its longest member (or to ``length``), rounded up to a multiple."""

    side: Side = "right"
    pad_id: int = 0
    pad_token: str = "[PAD]"
    pad_type_id: int = 0
    length: int | None = None
    pad_to_multiple_of: int | None = None

    def __post_init__(self) -> None:
        _check_choice("padding", "side", self.side, SIDES)
        _check_int("padding", "pad_id", self.pad_id, 0)
        _check_int("padding", "pad_type_id", self.pad_type_id, 0)
        if not isinstance(self.pad_token, str):
            raise InputError(f"padding pad_token must be a string, got {self.pad_token!r}")
        if self.length is not None:
            _check_int("padding", "length", self.length, 1)
        if self.pad_to_multiple_of is not None:
            _check_int("padding", "pad_to_multiple_of", self.pad_to_multiple_of, 1)

    def target(self, longest: int) -> int:
        n = self.length if self.length is not None else longest
        m = self.pad_to_multiple_of
        if m:
            n = -(-n // m) * m
        return n

    def pad(self, encoding: Encoding, longest: int) -> Encoding:
        """``encoding`` padded to :meth:`target` of ``longest`` (the longest of its batch)."""
        return encoding.padded(self.target(longest), pad_id=self.pad_id,
                               pad_token=self.pad_token, pad_type_id=self.pad_type_id,
                               side=self.side)

    def to_dict(self) -> dict:
        strategy: object = {"Fixed": self.length} if self.length is not None else "BatchLongest"
        return {"strategy": strategy, "direction": self.side.capitalize(),
                "pad_to_multiple_of": self.pad_to_multiple_of, "pad_id": self.pad_id,
                "pad_type_id": self.pad_type_id, "pad_token": self.pad_token}


def _word_parts(part: Encoding) -> tuple:
    """The words of ``part`` (which has some) as a laid-out encoding holds its parts' (see
    Words): a tuple of sources, ONE_WORD as its list of zeros."""
    words = part._words
    if words is ONE_WORD:
        return ([0] * len(part.ids),)
    return words if type(words) is tuple else (words,)


def _word_sources(part: Encoding) -> list[int | Words]:
    """``part``'s words as Encoding.laid_out keeps them where its parts' tokenizers differ:
    each text's bound to its tokenizer."""
    words = part.word_ids if part._words is ONE_WORD else part._words
    sources = words if type(words) is tuple else (words if words is not None else len(part.ids),)
    tokenizer = None
    out: list[int | Words] = []
    for w in sources:
        if isinstance(w, str):
            tokenizer = tokenizer or _tokenizer_of(part._id_to_token, w)
            w = _Words(w, tokenizer, part._made_at, None)
        out.append(w)
    return out


def _tokenizer_of(to_token: Callable[[int], str | None] | None, words: Words) -> Any:
    """The Tokenizer whose id_to_token ``to_token`` is, which makes the words of an
    encoding's text (None where ``words`` hold no text)."""
    texts = (words,) if isinstance(words, str) else words if isinstance(words, tuple) else ()
    for w in texts:  # (a loop: any() over a generator cost some 300 ns more a call)
        if isinstance(w, str):
            break
    else:
        return None
    tokenizer = getattr(to_token, "__self__", None)
    if not hasattr(tokenizer, "_word_ids_of"):
        raise InputError("this encoding's word ids were to be made by the tokenizer that "
                         "encoded it, which it no longer names")
    return tokenizer


def _made_words(source: Words, tokenizer: Any, made_at: int,
                count: int | None) -> list[int | None]:
    """The words ``source`` stands for (see Words): a text's by ``tokenizer``, which must be
    as it was (its _generation ``made_at``) when it encoded the text; ``count`` of them."""
    words: list[int | None] = []
    for part in source if type(source) is tuple else (source,):
        if isinstance(part, int):
            words += [None] * part
        elif isinstance(part, list):
            words += part
        elif isinstance(part, str):
            words += tokenizer._word_ids_of(part, tokenizer._added, None, made_at)
        else:
            words += cast("Callable[[], list[int | None]]", part)()
    if count is not None and len(words) != count:
        raise InputError(f"the encoding has {count} tokens but its words are {len(words)} "
                         "(its ids were replaced, or its tokenizer changed since): encode "
                         "the text again")
    return words


class _Words:
    """Words made when first asked for, once, for every encoding that shares this: an
    encoding and its windows and copies (which keep this, not the encoding)."""

    __slots__ = ("source", "tokenizer", "made_at", "count", "words")

    def __init__(self, source: Words, tokenizer: Any, made_at: int, count: int | None) -> None:
        self.source = source
        self.tokenizer = tokenizer
        self.made_at = made_at
        self.count = count
        self.words: list[int | None] | None = None

    def __call__(self) -> list[int | None]:
        if self.words is None:
            self.words = _made_words(self.source, self.tokenizer, self.made_at, self.count)
        return self.words


def _word_source_key(words: Words) -> object:
    """What an encoding's words would be made from, comparable (a _Words is by its text, its
    tokenizer and its time, not by identity)."""
    if type(words) is tuple:
        return tuple(_word_source_key(w) for w in words)
    if isinstance(words, _Words):
        return ("words", _word_source_key(words.source), id(words.tokenizer), words.made_at,
                words.count)
    if isinstance(words, _WordSlice):
        return ("slice", _word_source_key(cast(Any, words.whole)), words.start, words.stop)
    return words


class _WordSlice:
    """Words ``[start, stop)`` of a shared _Words (an encoding's window)."""

    __slots__ = ("whole", "start", "stop")

    def __init__(self, whole: Callable[[], list[int | None]], start: int, stop: int) -> None:
        self.whole = whole
        self.start = start
        self.stop = stop

    def __call__(self) -> list[int | None]:
        return self.whole()[self.start:self.stop]


def _position(value: object, name: str) -> int:
    """An index asked about (a token's, a word's, a character's, an input's): an int, not
    negative. As tokenizers' (which reads it as unsigned): TypeError for a float, and
    OverflowError for a negative one, where the end would be counted back from."""
    index = operator.index(value)  # type: ignore[arg-type]
    if index < 0:
        raise OverflowError(f"{name} must not be negative, got {index}")
    return index


def _check_int(option: str, name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InputError(f"{option} {name} must be an integer >= {least}, got {value!r}")


def _check_choice(option: str, name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        expected = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
        raise InputError(f"{option} {name} must be {expected}, got {value!r}")
