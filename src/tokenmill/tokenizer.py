"""Tokenizer: normalizer -> pre-tokenizer -> model -> post-processor, and the decoder back."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import operator
import os
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, cast

from tokenmill import _core, bert, spaced
from tokenmill._args import checked_threads, refuse_one_text, thread_count
from tokenmill._io import atomic_write_text, check_text, check_texts, text_batch
from tokenmill.added_tokens import AddedToken, AddedVocabulary, LiteralFinder
from tokenmill.decoders import ByteLevel as ByteLevelDecoder
from tokenmill.decoders import decode_raw, skips_end_byte_runs
from tokenmill.encoding import _WHOLE, ONE_WORD, Encoding, Padding, Truncation
from tokenmill.errors import InputError
from tokenmill.models.bpe import BPE
from tokenmill.models.unigram import Unigram
from tokenmill.models.wordpiece import WordPiece
from tokenmill.normalized import NormalizedString
from tokenmill.pre_tokenizers import native_counting
from tokenmill.truncation import combine, truncate

if TYPE_CHECKING:
    from tokenmill.decode_table import TableDecoder
    from tokenmill.streaming import DecodeStream

Special = Literal["all"] | Set[str] | Sequence[str]
# The models a Tokenizer can hold.
Model = BPE | WordPiece | Unigram


class _Result(Protocol):
    @property
    def model(self) -> Any: ...


R = TypeVar("R", bound=_Result, covariant=True)


class Trainer(Protocol[R]):
    """What training needs of a trainer (BPE, WordPiece, Unigram): its special tokens, and
    a result holding the model."""

    @property
    def special_tokens(self) -> tuple[str, ...]: ...

    def train_from_counts(self, counts: Mapping[str, int]) -> R: ...


# The attributes whose change Tokenizer._generation counts.
_NO_FINDER = LiteralFinder(())  # nothing disallowed
_FINDERS_KEPT = 64  # disallowed sets' finders kept per vocabulary
_WATCHED = frozenset({"model", "decoder", "_added", "normalizer", "pre_tokenizer"})


class Tokenizer:
    """The whole input contract of a model: text in, ids out, and back.

    >>> from tokenmill import BPE
    >>> tok = Tokenizer(BPE({"h": 0, "i": 1, "hi": 2}, [("h", "i")]))
    >>> tok.encode("hi").ids
    [2]
    """

    def __init__(self, model: Model, *, normalizer: Any = None, pre_tokenizer: Any = None,
                 post_processor: Any = None, decoder: Any = None,
                 added_tokens: Sequence[AddedToken] = (), truncation: Truncation | None = None,
                 padding: Padding | None = None,
                 special_tokens_in_text: Literal["match", "error"] = "match") -> None:
        # Any model of the pipeline; each is used through the methods they share.
        self.model: Any = model
        self.normalizer = normalizer
        self.pre_tokenizer = pre_tokenizer
        self.post_processor = post_processor
        self.decoder = decoder
        self.truncation = truncation
        self.padding = padding
        self._added = AddedVocabulary(list(added_tokens))
        if special_tokens_in_text not in ("match", "error"):
            raise InputError("special_tokens_in_text must be 'match' or 'error', got "
                             f"{special_tokens_in_text!r}")
        # "match": special tokens in text are matched, as Hugging Face files expect; "error":
        # as tiktoken, a special token's text in the input is an error unless allowed.
        self.special_tokens_in_text = special_tokens_in_text
        self._native_for: tuple[Any, ...] = ()
        self._native: tuple[Any, int] | None = None
        # (the _generation it was made at, the TableDecoder or None): see _table_decoder.
        self._table: tuple[int, TableDecoder | None] | tuple[()] = ()
        # (the model it was made for, which of its ids begin a word): _word_starts
        self._word_starts_kept: tuple[Any, bytes] | None = None

    # Set anew whenever the model, the decoder, the added tokens, the normalizer or the
    # pre-tokenizer are: what a decode stream compares, once an id, to know that what it took
    # from them still holds, and an encoding, to know that its words can still be made.
    _generation = 0
    # (see _core_plans)
    _plans_kept: tuple[int, bert.BertPlan | None, spaced.SpacedPlan | None] | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _WATCHED:
            object.__setattr__(self, "_generation", self._generation + 1)

    # -- vocabulary ------------------------------------------------------------------------

    @property
    def added_tokens(self) -> list[AddedToken]:
        return list(self._added.tokens)

    def add_special_tokens(self, tokens: Iterable[str]) -> int:
        """Make each string a special token (matched whole in the original text, skipped by
        decode by default); a string already in the vocabulary keeps its id, and an added
        token becomes special. Returns how many were new."""
        return self._add(tokens, special=True)

    def add_tokens(self, tokens: Iterable[str]) -> int:
        """Make each string one token wherever it appears in the normalized text (as Hugging
        Face's ``add_tokens``: "NEW" is found by "new" under a lowercasing normalizer).
        Returns how many were new."""
        return self._add(tokens, special=False)

    def _add(self, tokens: Iterable[str], special: bool) -> int:
        current = list(self._added.tokens)
        known = {t.content: k for k, t in enumerate(current)}
        next_id = self.get_vocab_size()
        added = 0
        for content in tokens:
            if not content:
                raise InputError("an added token cannot be empty")
            if content in known:
                k = known[content]
                if special and not current[k].special:
                    current[k] = dataclasses.replace(current[k], special=True)
                continue
            token_id = self.model.token_to_id(content)
            if token_id is None:
                token_id = next_id
                next_id += 1
                added += 1
            current.append(AddedToken(content, token_id, special=special, normalized=not special))
            known[content] = len(current) - 1
        self._added = AddedVocabulary(current)
        return added

    def token_to_id(self, token: str) -> int | None:
        added = self._added.by_content.get(token)
        return added.id if added else self.model.token_to_id(token)

    def id_to_token(self, id: int) -> str | None:
        added = self._added.by_id.get(id)
        return added.content if added else self.model.id_to_token(id)

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        vocab = self.model.get_vocab()
        if with_added_tokens:
            vocab.update({t.content: t.id for t in self._added.tokens})
        return vocab

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        top = self.model.max_id()
        if with_added_tokens:
            top = max(top, max(self._added.by_id, default=-1))
        return top + 1

    # -- encoding --------------------------------------------------------------------------

    def pieces(self, text: str, base: int = 0) -> list[NormalizedString]:
        """``text`` normalized and pre-tokenized: the words the model sees, with alignment."""
        ns = NormalizedString(text, base)
        if self.normalizer is not None:
            ns = self.normalizer.normalize(ns)
        return self._pre_tokenize(ns)

    def _pre_tokenize(self, ns: NormalizedString) -> list[NormalizedString]:
        if self.pre_tokenizer is not None:
            return [p for p in self.pre_tokenizer.split(ns) if p.text]
        return [ns] if ns.text else []

    def native_plan(self) -> tuple[Any, int] | None:
        """``(byte-level core, scanner)`` when the core can run normalizer, pre-tokenizer and
        model on its own (a plain byte-level BPE behind a GPT-family split); else None."""
        f = self._native_for
        if not f or self.model is not f[0] or self.normalizer is not f[1] \
                or self.pre_tokenizer is not f[2]:
            components = (self.model, self.normalizer, self.pre_tokenizer)
            plan = native_counting(self.pre_tokenizer) if self.normalizer is None else None
            core = self.model.byte_level_core if plan is not None and plan[1] else None
            self._native = (core, plan[0]) if core is not None and plan is not None else None
            self._native_for = components
        return self._native

    def _core_plans(self) -> tuple[bert.BertPlan | None, spaced.SpacedPlan | None]:
        """bert.native_plan and spaced.native_plan of this tokenizer, kept until it changes
        (a few microseconds a call, on encodes of a line that take ten)."""
        kept = self._plans_kept
        generation = self._generation
        if kept is None or kept[0] != generation:
            kept = self._plans_kept = (generation, bert.native_plan(self),
                                       spaced.native_plan(self))
        return kept[1], kept[2]

    def _spaced_ordinary(self) -> spaced.SpacedPlan | None:
        """The SentencePiece plan of the ids-only calls (encode_ordinary and its batch), or
        None: also where the model's own BPE-dropout applies, which the Python path draws."""
        if getattr(self.model, "dropout", None):
            return None
        return self._core_plans()[1]

    def _added_for(self, allowed_special: Special | None,
                   disallowed_special: Special | None, text: str) -> AddedVocabulary:
        """The added tokens to match in ``text`` under tiktoken's special-token rules: allowed
        special tokens are matched; a disallowed one in the text is an error; any other is
        plain text. Non-special added tokens always match."""
        added, disallowed = self._special_rules(allowed_special, disallowed_special)
        if disallowed:
            _refuse_disallowed(disallowed, text)
        return added

    def _special_rules(self, allowed_special: Special | None, disallowed_special: Special | None
                       ) -> tuple[AddedVocabulary, LiteralFinder]:
        """The added tokens to match under tiktoken's special-token rules (see _added_for),
        and the finder of the special tokens whose text is an error."""
        vocab = self._added  # (read once: another thread may add tokens meanwhile)
        if allowed_special is None and disallowed_special is None \
                and self.special_tokens_in_text == "match":
            return vocab, _NO_FINDER
        # Built once per vocabulary: a .model file can have hundreds of control pieces.
        specials = vocab.special_contents
        if allowed_special is None and disallowed_special is None:
            allowed: Set[str] = set()
            disallowed: Set[str] = specials
        else:
            allowed = specials if allowed_special == "all" else set(allowed_special or ())
            unknown = allowed - specials
            if unknown:
                raise InputError(f"allowed_special names {sorted(unknown)[0]!r}, which is not a "
                                 "special token of this tokenizer")
            if disallowed_special is None or disallowed_special == "all":
                disallowed = specials - allowed
            else:
                disallowed = set(disallowed_special)
        key = frozenset(disallowed)
        finder = vocab.disallowed.get(key)
        if finder is None:
            if len(vocab.disallowed) >= _FINDERS_KEPT:  # (sets a caller makes up call by call)
                vocab.disallowed.clear()
            finder = vocab.disallowed[key] = LiteralFinder(key)
        if allowed == specials:
            return vocab, finder
        key = frozenset(allowed)
        restricted = vocab.restricted.get(key)
        if restricted is None:
            restricted = vocab.restricted[key] = AddedVocabulary(
                [t for t in vocab.tokens if not t.special or t.content in allowed])
        return restricted, finder

    def _encode_text(self, text: str, added: AddedVocabulary | None = None,
                     dropout: tuple[float, int] | None = None) -> Encoding:
        check_text(text)
        vocab = self._added if added is None else added
        out = self._encode_text_natively(text, vocab, dropout)
        if out is None:
            out = self._encode_in_python(text, vocab, dropout)
        # (its words made when asked for; see Encoding.word_ids; the core's path may know them)
        out._made_at = self._generation
        if out._words is None:
            out._words = text if vocab is self._added and dropout is None else \
                partial(self._word_ids_of, text, vocab, dropout, out._made_at)
        return out

    def _encode_text_natively(self, text: str, vocab: AddedVocabulary,
                              dropout: tuple[float, int] | None) -> Encoding | None:
        """_encode_text's Encoding where the core encodes the whole pipeline, else None."""
        bert_plan = self._core_plans()[0]
        if bert_plan is not None and not vocab.any_normalized:
            return bert.encode_natively(bert_plan, text, vocab.split(text), self.id_to_token)
        # only ever without a normalizer; BPE-dropout takes the pipeline's path
        native = self.native_plan() if dropout is None else None
        if native is not None:
            # no normalizer: each text segment is text[start:end] as it is
            cut = vocab.split(text)
            return Encoding.spliced(cut, [_core.encode_offsets(native[0], native[1], text[a:b])
                                          for token, a, b in cut if token is None],
                                    self.id_to_token)
        spaced_plan = self._core_plans()[1] if dropout is None else None
        # (a normalizer's plan was made without normalized added tokens; this call's vocabulary
        # is looked at too, as another thread may have added some since)
        if spaced_plan is not None and (self.normalizer is None or not vocab.any_normalized):
            return spaced.encode_natively(spaced_plan, text, vocab.split(text),
                                          self.id_to_token)
        return None

    def _encode_in_python(self, text: str, vocab: AddedVocabulary,
                          dropout: tuple[float, int] | None) -> Encoding:
        """_encode_text's Encoding through the pipeline's Python objects."""
        segments = vocab.segments(text, self.normalizer)
        ids = []
        starts = []
        ends = []
        for segment in segments:
            if segment.id is not None:
                ids.append(segment.id)
                starts.append(segment.start)
                ends.append(segment.end)
            else:
                # text segments always carry their normalized text
                pieces = self._pre_tokenize(cast(NormalizedString, segment.normalized))
                if not pieces:
                    continue
                if dropout is None:
                    flat = self.model.encode_pieces([p.text for p in pieces])
                else:  # each segment draws from its own stream of the text's seed
                    flat = self.model.encode_pieces([p.text for p in pieces], dropout=dropout[0],
                                                    seed=_mix_seed(dropout[1], len(ids)))
                ids += flat[0::4]
                for p, s, e in zip(flat[1::4], flat[2::4], flat[3::4]):
                    lo, hi = pieces[p].span(s, e)
                    starts.append(lo)
                    ends.append(hi)
        # As in Hugging Face, special_tokens_mask marks only what a post-processor adds: a
        # special token matched in the text is the user's own token.
        return Encoding(ids, offsets=(starts, ends), id_to_token=self.id_to_token)

    def _word_ids_of(self, text: str, vocab: AddedVocabulary,
                     dropout: tuple[float, int] | None,
                     made_at: int | None = None) -> list[int | None]:
        """The word of each token _encode_text gives ``text``: the pipeline run again, each
        added token met in the text one word and each pre-token one (tokenizers' word ids).
        The core's paths give the ids this path gives, so the lengths agree. ``made_at``: the
        _generation the text was encoded at, if the tokenizer must still be as it was then."""
        if made_at is not None and made_at != self._generation:
            raise InputError("the tokenizer changed (its model, normalizer, pre-tokenizer or "
                             "added tokens) since it encoded this text, so the text's word ids "
                             "cannot be made: encode it again")
        if dropout is None:
            fast = self._native_word_ids(text, vocab)
            if fast is not None:
                return fast
        words: list[int | None] = []
        word = 0
        for segment in vocab.segments(text, self.normalizer):
            if segment.id is not None:
                words.append(word)
                word += 1
                continue
            pieces = self._pre_tokenize(cast(NormalizedString, segment.normalized))
            if not pieces:
                continue
            if dropout is None:
                flat = self.model.encode_pieces([p.text for p in pieces])
            else:  # the draws _encode_in_python made
                flat = self.model.encode_pieces([p.text for p in pieces], dropout=dropout[0],
                                                seed=_mix_seed(dropout[1], len(words)))
            words += [word + p for p in flat[1::4]]
            word += len(pieces)
        return words

    def _native_word_ids(self, text: str, vocab: AddedVocabulary) -> list[int | None] | None:
        """_word_ids_of where the core encodes the pipeline (None elsewhere), without its
        Python objects, which took 5-35 times as long as the encoding (the pre-tokenizer's
        pieces as NormalizedStrings, BERT's normalizer a character at a time):
        - byte-level BPE behind a GPT-family split (no normalizer): the core's pieces of each
          stretch of text, and each token's piece by where it starts;
        - BERT's pipeline: WordPiece begins each word with a token that has no "##", and
          gives that prefix to every other token of the word (a word it cannot spell is one
          unknown token);
        - SentencePiece's (unsplit): each stretch of text between added tokens is one
          pre-token, if its normalized text is not empty."""
        native = self.native_plan()
        bert_plan, spaced_plan = self._core_plans() if native is None else (None, None)
        if spaced_plan is not None and not spaced_plan.split:
            return self._spaced_word_ids(spaced_plan, text, vocab)
        if native is None and (bert_plan is None or vocab.any_normalized):
            return None
        cut = vocab.split(text)
        whole = len(cut) == 1 and cut[0][0] is None  # (no added token in the text)
        if native is not None and whole:
            return cast(list, _core.encode_word_ids(native[0], native[1], text, 0)[0])
        if native is None:  # (BERT's pipeline, the one plan left)
            plan = cast(bert.BertPlan, bert_plan)
            begins = self._word_starts()
            if whole:
                return cast(list, _core.bert_word_ids(*plan, text, begins, 0)[0])
        words: list[int | None] = []
        word = 0
        for token, a, b in cut:
            if token is not None:  # (an added token is a word of its own)
                words.append(word)
                word += 1
            elif native is not None:
                found, pieces = _core.encode_word_ids(native[0], native[1], text[a:b], word)
                words += found
                word += pieces
            else:
                found, word = _core.bert_word_ids(*plan, text[a:b], begins, word)
                words += found
        return words

    def _spaced_word_ids(self, plan: spaced.SpacedPlan, text: str,
                         vocab: AddedVocabulary) -> list[int | None]:
        """_native_word_ids under a SentencePiece plan that does not split: a word a stretch
        of text (its tokens all of it) and one an added token."""
        words: list[int | None] = []
        word = 0
        for token, a, b in vocab.split(text):
            if token is not None:
                words.append(word)
                word += 1
                continue
            ids = _core.encode_spaced(plan.model, plan.normalizer, plan.prefix(a), False,
                                      text[a:b], True)
            if ids:
                words += [word] * len(ids)
                word += 1
            elif self.normalizer is None or self.normalizer.normalize_str(text[a:b]):
                word += 1  # (a word whose characters the model dropped)
        return words

    def _word_starts(self) -> bytes:
        """Which ids of the WordPiece model are tokens that begin a word (without its
        continuing prefix), a byte an id, made once per model (whose core, which gives the
        ids, is made with it)."""
        kept = self._word_starts_kept
        model = self.model
        if kept is None or kept[0] is not model:
            flags = bytearray(max(model.vocab.values()) + 1)
            prefix = model.continuing_subword_prefix
            for token, i in model.vocab.items():
                flags[i] = not (prefix and token.startswith(prefix))
            kept = self._word_starts_kept = (model, bytes(flags))
        return kept[1]

    def _post(self, a: Encoding, b: Encoding | None, add_special_tokens: bool,
              truncation: Truncation | None, padding: Padding | None) -> Encoding:
        """Truncate, lay out with the post-processor, then pad: tokenizers' order."""
        processor = self.post_processor
        if truncation is not None:
            added = processor.added_tokens(b is not None) \
                if processor is not None and add_special_tokens else 0
            a, b = truncate(a, b, truncation, added)
        if b is None and not a._overflowing:
            out = self._lay_out_single(a, add_special_tokens)
        else:
            out = combine(a, b, partial(_lay_out, processor, add_special_tokens),
                          processor is None or processor.first_input == "A")
        if padding is not None:
            out = padding.pad(out, len(out))
        return out

    def _lay_out_single(self, a: Encoding, add_special_tokens: bool) -> Encoding:
        """The post-processor's layout of one input without overflowing windows: combine's,
        without its walk over windows (a line's encoding is cheap, and that walk was a third
        to a fifth of it). Truncation that cut nothing, and padding after, keep this way:
        BERT's files ask for both. (A template lays special tokens around the input at once
        in its own process.)"""
        processor = self.post_processor
        if processor is None:
            return a  # nothing to add: the encoding stays lazy
        if not add_special_tokens and a._ranges is None and a._type_ids is None and \
                getattr(processor, "passes_single", None) and processor.passes_single():
            # (the template would lay it out anew, unchanged)
            a._ranges = _WHOLE
            return a
        return _lay_out(processor, add_special_tokens, a, None, (False, False))

    def encode(self, text: str, pair: str | None = None, *, add_special_tokens: bool = True,
               truncation: Truncation | None = None, allowed_special: Special | None = None,
               disallowed_special: Special | None = None, dropout: float | None = None,
               seed: int | None = None) -> Encoding:
        """Encode one input (or a pair) into ids, tokens, offsets into the original text, and
        masks. ``truncation`` overrides the tokenizer's own setting for this call.

        Special tokens in the text follow tiktoken's rules when either of ``allowed_special``
        (``"all"`` or a set: matched as special tokens) or ``disallowed_special`` (``"all"``, the
        default, or a set: an error if present; ``()``: plain text) is given; otherwise the
        tokenizer's ``special_tokens_in_text`` says ("match" for Hugging Face files, "error" for
        tiktoken's encodings).

        ``dropout`` (BPE models; default: the model's own ``dropout``) encodes with BPE-dropout,
        the draws made reproducible by ``seed`` (default: a fresh random seed per call).

        The tokenizer's own ``padding``, if set, pads the encoding (and its overflowing
        windows), as tokenizers does: to ``length``, or to its own length, rounded up to
        ``pad_to_multiple_of``.
        """
        return self._encode(text, pair, add_special_tokens, truncation or self.truncation,
                            self.padding, allowed_special, disallowed_special, dropout,
                            seed)._settled()

    def _encode(self, text: str, pair: str | None, add_special_tokens: bool,
                truncation: Truncation | None, padding: Padding | None,
                allowed_special: Special | None = None, disallowed_special: Special | None = None,
                dropout: float | None = None, seed: int | None = None) -> Encoding:
        added = self._added_for(allowed_special, disallowed_special, _as_one(text, pair))
        drop = self._dropout(dropout, seed)
        a = self._encode_text(text, added, drop)
        b = self._encode_text(pair, added, drop and (drop[0], _mix_seed(drop[1], 1 << 32))) \
            if pair is not None else None
        return self._post(a, b, add_special_tokens, truncation, padding)

    def _dropout(self, dropout: float | None, seed: int | None) -> tuple[float, int] | None:
        """(probability, seed) when this call uses BPE-dropout, else None."""
        p = dropout if dropout is not None else getattr(self.model, "dropout", None)
        if not p:
            return None
        if not hasattr(self.model, "dropout"):
            raise InputError(f"dropout applies to BPE models; this tokenizer's model is "
                             f"{type(self.model).__name__}")
        return p, random.getrandbits(64) if seed is None else seed

    def encode_ordinary(self, text: str) -> list[int]:
        """The ids of ``text`` with every special token's text encoded as plain text and no
        post-processing (tiktoken's ``encode_ordinary``)."""
        native = self.native_plan()
        plan = self._spaced_ordinary() if native is None else None
        if (native is None and plan is None) or not self._added.all_special:
            # Neither cut nor padded, as on the core's path.
            return self._encode(text, None, False, None, None, disallowed_special=()).ids
        try:
            if plan is not None:  # (the text whole: special tokens are plain text here)
                return _core.encode_spaced(plan.model, plan.normalizer, plan.first,
                                           plan.split, text, True)
            core, scanner = cast(tuple, native)
            return _core.encode_ids(core, scanner, text)
        except (TypeError, UnicodeError):
            check_text(text)  # names the lone surrogate
            raise

    def encode_ordinary_batch(self, texts: Sequence[str], *,
                              num_threads: int | None = None) -> list[list[int]]:
        """:meth:`encode_ordinary` of each text, on ``num_threads`` native threads (default:
        TOKENMILL_NUM_THREADS, else every core this process may use) with the GIL released."""
        checked_threads(num_threads)
        texts = text_batch(texts)
        native = self.native_plan()
        bert_plan = self._core_plans()[0] if native is None else None
        spaced_plan = self._spaced_ordinary() if native is None and bert_plan is None else None
        if (native is None and bert_plan is None and spaced_plan is None) or \
                not self._added.all_special:
            check_texts(texts)  # (a bad text named by its place in the batch)
            return [self.encode_ordinary(t) for t in texts]
        try:
            # (The cyclic GC stays on: pausing it only moved its walk over the new lists to the
            # end of the batch, where nothing overlaps it; measured slower on 1 and 2 threads.)
            if native is not None:
                return _core.encode_ids_batch(native[0], native[1], texts,
                                              thread_count(len(texts), num_threads))
            if spaced_plan is not None:  # (each text whole: its special tokens are plain text)
                return cast(list, _core.encode_spaced_batch(
                    spaced_plan.model, spaced_plan.normalizer, [spaced_plan.first] * len(texts),
                    spaced_plan.split, texts, thread_count(len(texts), num_threads), True))
            plan = cast(tuple, bert_plan)  # one of the two plans, checked above
            return _core.bert_encode_batch(plan[0], plan[1], texts,
                                           thread_count(len(texts), num_threads), False)
        except (TypeError, UnicodeError):
            check_texts(texts)
            raise

    def encode_batch(self, inputs: Sequence[str | tuple[str, str]], *,
                     add_special_tokens: bool = True, padding: Padding | None = None,
                     truncation: Truncation | None = None, dropout: float | None = None,
                     seed: int | None = None, num_threads: int | None = None,
                     allowed_special: Special | None = None,
                     disallowed_special: Special | None = None) -> list[Encoding]:
        """Encode many inputs; pad them to a common length if ``padding`` (or the tokenizer's
        own setting) says so. With BPE-dropout, input i draws from its own stream of ``seed``,
        so its tokens do not depend on the batch it is in. Special tokens in the texts follow
        ``allowed_special`` and ``disallowed_special`` as in :meth:`encode`.

        Where the core encodes the tokenizer's texts (byte-level BPE with a GPT-family split,
        BERT's WordPiece pipeline) and there is no dropout, the texts go through it in one call
        on ``num_threads`` native threads (default: TOKENMILL_NUM_THREADS, else every core this
        process may use) with the GIL released; the Encodings are the same as :meth:`encode`
        gives each input."""
        checked_threads(num_threads)
        refuse_one_text(inputs, "inputs", "a list of strings or of (text, pair) tuples", "encode")
        drop = self._dropout(dropout, seed)
        truncation = truncation or self.truncation
        padding = padding or self.padding  # (read with truncation, before any encoding)
        items = [_batch_item(item, i) for i, item in enumerate(inputs)]
        special = (allowed_special, disallowed_special)
        out = self._encode_batch_natively(items, add_special_tokens, truncation, num_threads,
                                          special) if drop is None else None
        if out is None:
            out = []
            for i, (text, pair) in enumerate(items):
                # Padded once, as a batch: each on its own first would pad to this tokenizer's
                # setting even where ``padding`` overrides it.
                out.append(self._encode(text, pair, add_special_tokens, truncation, None,
                                        *special, dropout=drop[0] if drop else None,
                                        seed=_mix_seed(drop[1], i) if drop else None))
        if padding is not None and out:
            longest = max(len(e) for e in out)
            # (its lists and Encodings made out of the collector's sight, as the batch's: its
            # runs walked every list of the batch again, two thirds of padding MiniLM's)
            with _collector_paused():
                out = [padding.pad(e, longest) for e in out]
        for e in out:  # (what is handed back, once: not what a pad replaced)
            e._settled()
        return out

    def _encode_batch_natively(self, items: list[tuple[str, str | None]],
                               add_special_tokens: bool, truncation: Truncation | None,
                               num_threads: int | None,
                               special: tuple[Special | None, Special | None]
                               ) -> list[Encoding] | None:
        """encode_batch's inputs (not padded) through the core in one call, as
        :meth:`_encode_text` takes each of them there; None where it would not."""
        native = self.native_plan()
        bert_plan = self._core_plans()[0] if native is None else None
        if bert_plan is not None and self._added.any_normalized:
            bert_plan = None
        spaced_plan = self._core_plans()[1] if native is None and bert_plan is None else None
        if native is None and bert_plan is None and spaced_plan is None:
            return None
        if not items:
            return []
        added, disallowed = self._special_rules(*special)
        for i, (text, pair) in enumerate(items):
            for t in (text,) if pair is None else (text, pair):
                if not isinstance(t, str):
                    # The inputs before it are looked through first, as encode would meet
                    # them one by one.
                    for before in items[:i] if disallowed else ():
                        _refuse_disallowed(disallowed, _as_one(*before))
                    check_text(t, f"inputs[{i}]")  # (raises: names the input)
        texts = [t for text, pair in items for t in ((text,) if pair is None else (text, pair))]
        # Special and added tokens are looked for in all the texts at once, joined (a find
        # over one string, not one for each token in each text: a tenth of a call on 37,000
        # paragraphs), then text by text only where one is there. A disallowed one raises for
        # the first input holding it, as encode does.
        every = "\0".join(texts) if disallowed or added.tokens else ""
        if disallowed.found_in(every):
            for i, (text, pair) in enumerate(items):
                _refuse_disallowed(disallowed, _as_one(text, pair))
                # (encode would encode this input next, and meet a lone surrogate in it
                # before the special token of a later input)
                _check_input(i, text, pair)
        # Each text cut at its added tokens (None: none is in it, the text is one stretch; no
        # normalizer on either path: the stretches are the text as it is), and all the
        # stretches, in order, for the core.
        cuts: list[tuple[list[tuple[int | None, int, int]] | None, int]]
        prefixes: list[int] = []  # (the spaced plan's, of each stretch)
        if not added.spelled_in(every):
            pieces = texts
            cuts = [(None, 1)] * len(texts)
            if spaced_plan is not None:
                prefixes = [spaced_plan.first] * len(texts)
        else:
            pieces = []
            cuts = []
            with _collector_paused():
                for t in texts:
                    cut = added.split(t)
                    text_parts = [t[a:b] for token, a, b in cut if token is None]
                    pieces += text_parts
                    cuts.append((cut, len(text_parts)))
                    if spaced_plan is not None:
                        prefixes += [spaced_plan.prefix(a) for token, a, b in cut
                                     if token is None]
        threads = thread_count(len(pieces), num_threads)
        try:
            if native is not None:
                encoded = _core.encode_offsets_batch(native[0], native[1], pieces, threads)
            elif spaced_plan is not None:
                encoded = _core.encode_spaced_batch(
                    spaced_plan.model, spaced_plan.normalizer, prefixes, spaced_plan.split,
                    pieces, threads)
            else:
                model, pipeline = cast(tuple, bert_plan)
                encoded = _core.bert_encode_batch(model, pipeline, pieces, threads, True)
        except (TypeError, UnicodeError):
            for i, (text, pair) in enumerate(items):
                _check_input(i, text, pair)  # names the lone surrogate
            raise
        # A single input comes out of _post as it went in when nothing is truncated and the
        # post-processor adds nothing to it (GPT-2's, tiktoken's encodings): it skips _post.
        processor = self.post_processor
        keeps = getattr(processor, "keeps_single", None)  # (one's own may not say)
        kept = truncation is None and (processor is None or (keeps is not None and keeps()))
        parts = iter(encoded)
        cut_of = iter(cuts)  # each text's cut, pairs' two in a row
        to_token = self.id_to_token
        generation = self._generation
        done: list[Encoding] = []

        def made(text: str) -> Encoding:  # the next text's Encoding
            cut, stretches = next(cut_of)
            if cut is None:
                out = Encoding.whole(next(parts), to_token)
            else:
                out = Encoding.spliced(cut, list(islice(parts, stretches)), to_token)
            if spaced_plan is not None and spaced.one_word(spaced_plan, cut):
                out._words = ONE_WORD
            else:
                out._words = text if added is self._added else \
                    partial(self._word_ids_of, text, added, None, generation)
            out._made_at = generation
            return out

        with _collector_paused():
            for text, pair in items:
                a = made(text)
                if pair is None and kept:
                    if processor is not None:  # (it marks its input, as tokenizers' do)
                        a._ranges = _WHOLE
                    done.append(a)
                    continue
                b = made(pair) if pair is not None else None
                done.append(self._post(a, b, add_special_tokens, truncation, None))
        return done

    def encode_batch_np(self, texts: Sequence[str], *, padded: bool = False, pad_id: int = 0,
                        side: str = "right", num_threads: int | None = None) -> dict[str, Any]:
        """Ids of ``texts`` as numpy arrays, ragged (``ids`` + ``offsets``) or padded
        (``input_ids`` + ``attention_mask``); see :func:`tokenmill.batch.encode_np`."""
        from tokenmill.batch import encode_np

        return encode_np(self, texts, padded=padded, pad_id=pad_id, side=side,
                         num_threads=num_threads)

    def count_tokens(self, texts: Sequence[str], *, num_threads: int | None = None) -> list[int]:
        """How many ids :meth:`encode_ordinary` gives each text, without keeping them."""
        from tokenmill.batch import count_tokens

        return count_tokens(self, texts, num_threads=num_threads)

    # -- decoding --------------------------------------------------------------------------

    def decode_stream(self, *, skip_special_tokens: bool = True) -> DecodeStream:
        """A decoder for ids that arrive one at a time: ``stream.step(id)`` returns text only
        once whole characters are available (what a server streaming a model's output needs)."""
        from tokenmill.streaming import DecodeStream

        return DecodeStream(self, skip_special_tokens=skip_special_tokens)

    def _native_decode(self, ids: Sequence[int], skip_special_tokens: bool,
                       text: bool) -> str | bytes | None:
        """``ids`` decoded by the byte-level core (``text``: as a str, invalid UTF-8 replaced;
        else the bytes), when this is a byte-level pipeline (a BPE model and the ByteLevel
        decoder) and every id is a plain token of its model; else None (the caller takes the
        general path, which also names a bad id)."""
        core = self.model.byte_level_core if isinstance(self.decoder, ByteLevelDecoder) \
            and isinstance(self.model, BPE) else None
        if core is None:
            return None
        skip, stop = self._added.decode_lists[skip_special_tokens]
        try:
            return (core.decode_text if text else core.decode_bytes)(ids, skip, stop)
        except TypeError:  # not a sequence of 32-bit ids
            return None

    def _table_decoder(self) -> TableDecoder | None:
        """The TableDecoder of this model, decoder and added tokens (made at the first decode
        after any of them changes), or None if the decoder has no table plan."""
        # (The generation first: a change while the table is made leaves it a stale key.)
        generation = self._generation
        cached = self._table  # (read once: another thread may replace it)
        if cached and cached[0] == generation:
            return cast("TableDecoder | None", cached[1])
        model, decoder, added = self.model, self.decoder, self._added
        if isinstance(decoder, ByteLevelDecoder):
            table = None
        else:
            from tokenmill.decode_table import table_decoder

            table = table_decoder(model, decoder, added)
        self._table = (generation, table)
        return table

    def _not_an_id(self, position: int, i: object) -> InputError:
        return InputError(f"ids[{position}]: {i!r} is not an id of this tokenizer "
                          f"(vocabulary size {self.get_vocab_size()})")

    def _plain_ids(self, ids: Sequence[object]) -> list[int]:
        """``ids`` as ints, in one pass: any integer, numpy's too (the arrays of
        ``encode_batch_np``, a model's output), as the native path takes them; InputError
        naming the first that is none."""
        try:
            return list(map(operator.index, ids))  # type: ignore[arg-type]
        except TypeError:
            for position, i in enumerate(ids):
                try:
                    operator.index(i)  # type: ignore[arg-type]
                except TypeError:
                    raise self._not_an_id(position, i) from None
            raise

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """Text of ``ids``; special tokens are left out unless ``skip_special_tokens=False``."""
        text = self._native_decode(ids, skip_special_tokens, text=True)
        if text is not None:
            return cast(str, text)
        table = self._table_decoder()
        if table is not None:
            text = table.decode(ids, skip_special_tokens)
            if text is not None:
                return text
        tokens = self._tokens_of(ids, skip_special_tokens)
        if self.decoder is None:
            return " ".join(tokens)
        return self.decoder.decode(tokens)

    def decode_bytes(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> bytes:
        """The raw bytes ``ids`` stand for: ``decode``'s text, but byte tokens (byte-level
        ones, byte fallback's ``<0xNN>``) give their bytes as they are, so a character cut
        between ids is kept whole in neither part (tiktoken's ``decode_bytes``)."""
        data = self._native_decode(ids, skip_special_tokens, text=False)
        if data is not None:
            return cast(bytes, data)
        table = self._table_decoder()
        if table is not None:
            data = table.decode_bytes(ids, skip_special_tokens)
            if data is not None:
                return data
        tokens = self._tokens_of(ids, skip_special_tokens)
        if self.decoder is None:
            return " ".join(tokens).encode("utf-8")
        return decode_raw(self.decoder, tokens)

    def _tokens_of(self, ids: Sequence[int], skip_special_tokens: bool) -> list[str]:
        """The token strings of ``ids`` for the decoder (special ones left out if asked)."""
        plain = self._plain_ids(ids)
        lookup = self.model.vocab_tokens()
        if lookup is not None and self._added.by_id.keys().isdisjoint(plain):
            # No added token among them: the vocabulary's dict, read in one map (a call an id
            # through id_to_token was over half of a long decode); a hole falls through.
            tokens = list(map(lookup.get, plain))
            if None not in tokens:
                return cast(list[str], tokens)
        tokens = []
        special = self._added.special_ids
        # (After a kept token: a leading one must not take the dummy prefix's strip. Asked at
        # the first such token: walking the decoder chain was a third of a short decode.)
        mark_skipped: bool | None = None
        for position, i in enumerate(plain):
            if skip_special_tokens and i in special:
                if tokens:
                    if mark_skipped is None:
                        mark_skipped = skips_end_byte_runs(self.decoder)
                    if mark_skipped:
                        tokens.append("")
                continue
            token = self.id_to_token(i)
            if token is None:
                raise self._not_an_id(position, i)
            tokens.append(token)
        return tokens

    def decode_batch(self, batch: Sequence[Sequence[int]], *,
                     skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(ids, skip_special_tokens=skip_special_tokens) for ids in batch]

    # -- training --------------------------------------------------------------------------

    def count_words(self, texts: Iterable[str]) -> Counter[str]:
        """Pre-token counts of ``texts`` under this tokenizer's normalizer and pre-tokenizer,
        in first-seen order."""
        plan = native_counting(self.pre_tokenizer) if self.normalizer is None else None
        if plan is not None:
            return _count_natively(texts, *plan)
        counts: Counter[str] = Counter()
        normalizer, pre_tokenizer = self.normalizer, self.pre_tokenizer
        for i, text in enumerate(texts):
            check_text(text, f"text {i}")
            # Counting needs the pieces' text only: the alignment-free fast paths.
            if normalizer is not None:
                text = normalizer.normalize_str(text)
            if pre_tokenizer is not None:
                counts.update(pre_tokenizer.split_text(text))
            elif text:
                counts[text] += 1
        return counts

    def train_from_iterator(self, texts: Iterable[str] | Iterable[list[str]],
                            trainer: Trainer[R]) -> R:
        """Learn the model from texts, or batches (lists) of texts, pre-tokenized with this
        tokenizer's own pipeline; the texts are streamed, never held together."""
        from tokenmill.corpus import documents_from

        return self.train_from_counts(self.count_words(documents_from(texts)), trainer)

    def train_from_counts(self, counts: Mapping[str, int], trainer: Trainer[R]) -> R:
        """Learn the model from pre-token counts; special tokens become added tokens."""
        result = trainer.train_from_counts(counts)
        self.model = result.model
        vocab = result.model.vocab
        self._added = AddedVocabulary([AddedToken(t, vocab[t]) for t in trainer.special_tokens])
        return result

    # -- files -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        from tokenmill.formats import hf_json

        return hf_json.to_dict(self)

    @classmethod
    def from_dict(cls, data: Any, source: str = "tokenizer") -> Tokenizer:
        from tokenmill.formats import hf_json

        return hf_json.from_dict(data, source)

    def to_str(self, pretty: bool = False) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2 if pretty else None)

    @classmethod
    def from_str(cls, text: str, source: str = "tokenizer") -> Tokenizer:
        from tokenmill.formats import hf_json

        return hf_json.loads(text, source)

    def save(self, path: str | os.PathLike[str], *, pretty: bool = True,
             hf_compatible: bool = False) -> None:
        """Write ``tokenizer.json`` atomically. With ``hf_compatible=True`` it is an error to
        save what Hugging Face ``tokenizers`` could not read with the same ids."""
        # A component that Hugging Face cannot read says why in its hf_compatible.
        reason = self.model.hf_compatible or getattr(self.normalizer, "hf_compatible", None)
        if hf_compatible and reason is not None:
            raise InputError(f"cannot export to the Hugging Face schema: {reason}")
        atomic_write_text(path, self.to_str(pretty) + "\n")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Tokenizer:
        from tokenmill.formats import hf_json

        return hf_json.load(path)

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        """Pickled as its tokenizer.json and the one setting that file has no field for, as
        Hugging Face's and tiktoken's tokenizers pickle: for process pools and data loaders
        that start their workers by spawning (macOS, Windows)."""
        return _unpickled, (self.to_str(), self.special_tokens_in_text)

    def fingerprint(self) -> str:
        """sha256 of the canonical content: equal fingerprints, equal behaviour. The content
        is the tokenizer.json, and ``special_tokens_in_text`` where it is "error" (a .model
        or a tiktoken encoding refuses a special token's text that its tokenizer.json export
        would match); where it is "match", as in every Hugging Face file, it is left out, so
        that those fingerprints are the file's alone."""
        content = self.to_dict()
        if self.special_tokens_in_text != "match":
            content = {**content, "special_tokens_in_text": self.special_tokens_in_text}
        canonical = json.dumps(content, ensure_ascii=False, sort_keys=True,
                               separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _unpickled(text: str, special_tokens_in_text: Literal["match", "error"],
               source: str = "pickled tokenizer") -> Tokenizer:
    """The tokenizer a tokenizer.json and the one setting it has no field for make (how a
    tokenizer pickles, and how a Dask worker rebuilds one)."""
    tok = Tokenizer.from_str(text, source)
    tok.special_tokens_in_text = special_tokens_in_text
    return tok


# Texts handed to the core per call: large enough to keep its threads busy, small enough that
# a stream is never held in memory.
_COUNT_BATCH = 8192


def _lay_out(processor: Any, add_special_tokens: bool, a: Encoding, b: Encoding | None,
             overflow: tuple[bool, bool]) -> Encoding:
    """``a`` (and ``b``) as the post-processor lays them out; without one, one after the
    other, the second with type id 1."""
    if processor is not None:  # (which marks its inputs' tokens as theirs)
        return processor.process(a, b, add_special_tokens, overflow=overflow)
    if b is None:
        return a
    # Without one, a pair's first windows are marked as inputs 0 and 1 and its overflowing
    # ones are not (tokenizers marks the two inputs, not their windows, before it merges them).
    return Encoding.laid_out([(a, 0, None if overflow[0] else 0),
                              (b, 1, None if overflow[1] else 1)])


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic collector's automatic runs held off, then left as they were (an error
    too): while a batch's cuts and Encodings are made, each run walked all of them again (a
    fifth of encode_batch over 8 MB of English, 37,000 documents, on one thread). They make no
    cycles; their count carries over to the next run. (Not across the core's call: other
    threads run while it has the GIL released. They may run meanwhile too, at the
    interpreter's switches: the pause is the process's, and a gc.disable() made by another
    thread within it is undone at its end.)"""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _check_input(i: int, text: str, pair: str | None) -> None:
    """:func:`check_text` on a batch's input ``i`` (its text, then its pair's), named
    ``inputs[i]``."""
    for t in (text,) if pair is None else (text, pair):
        check_text(t, f"inputs[{i}]")


def _as_one(text: str, pair: str | None) -> str:
    """An input's text, or a pair's two joined by "\\0", as special tokens are looked for in
    it (and the position an error names counts)."""
    return text if pair is None else text + "\0" + pair


def _refuse_disallowed(disallowed: LiteralFinder, text: str) -> None:
    """Raises if ``text`` holds one of the ``disallowed`` special tokens: the first there (the
    longest of those starting at one place), and where."""
    found = disallowed.first(text)
    if found:
        at, token = found
        raise InputError(
            f"text holds the special token {token!r} at character {at}; pass "
            f"allowed_special={{{token!r}}} (or \"all\") to encode it as that token, or "
            "disallowed_special=() to encode it as plain text")


def _mix_seed(seed: int, k: int) -> int:
    """A seed for stream ``k`` of ``seed`` (64 bits, well apart for neighbouring k)."""
    return (seed ^ ((k + 1) * 0x9E3779B97F4A7C15)) & 0xFFFFFFFFFFFFFFFF


def _batch_item(item: str | tuple[str, str], i: int) -> tuple[str, str | None]:
    """An input of encode_batch as (text, pair or None)."""
    if isinstance(item, str):
        return item, None
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return item[0], item[1]
    raise InputError(f"inputs[{i}]: expected a string or a (text, pair) tuple, got "
                     f"{type(item).__name__}")


def _count_natively(texts: Iterable[str], scanner: int, byte_level: bool) -> Counter[str]:
    counter = _core.PieceCounter(scanner, thread_count())
    stream = iter(texts)
    done = 0
    while batch := list(islice(stream, _COUNT_BATCH)):
        try:
            counter.add(batch)
        except (TypeError, UnicodeError):
            for i, text in enumerate(batch):  # find and name the text that is not text
                check_text(text, f"text {done + i}")
            raise
        done += len(batch)
    return Counter(counter.counts(byte_level))
