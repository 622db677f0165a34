"""SentencePiece's pipelines in the core, in one call a text.

Three ways of spelling spaces "▁" before a character-level BPE (or a .model's Unigram) are run
by the core end to end (``_core.encode_spaced``), each token given its characters of the input
as the Python pipeline gives them:

- a SentencePiece ``.model``: its own normalizer (character map and whitespace rules), no
  pre-tokenizer;
- Hugging Face's Metaspace pre-tokenizer (Mistral v0.3's tokenizer.json), no normalizer;
- Llama's normalizers, ``Prepend("▁")`` and ``Replace(" ", "▁")`` (or the Replace alone), no
  pre-tokenizer.

The Python pipeline paid for a NormalizedString and a span call a token: on Mistral's model,
a line of English took 4-5 times as long as the merging; on ALBERT's Unigram, 6 times as long
as sentencepiece took for the whole line.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tokenmill import _core
from tokenmill.encoding import ONE_WORD, Encoding
from tokenmill.models.bpe import BPE, SPACE_MARK
from tokenmill.models.unigram import Unigram
from tokenmill.normalizers import Prepend, Replace
from tokenmill.normalizers import Sequence as NormalizerSequence
from tokenmill.pre_tokenizers import Metaspace

# What the core puts before a text (sp_encode.h's SpacePrefix).
NO_PREFIX, PREFIX, PREFIX_UNLESS_SPACED = 0, 1, 2


class SpacedPlan(NamedTuple):
    """How the core runs a tokenizer's pipeline: its model's core, the .model normalizer's core
    (or None: spaces spelled "▁"), the prefix of a text that starts the input and of one after
    an added token, and whether the text is cut before every "▁"."""

    model: _core.BPEModel | _core.UnigramModel
    normalizer: Any  # _core.SentencePieceNormalizer | None
    first: int
    rest: int
    split: bool

    def prefix(self, start: int) -> int:
        """The prefix of the stretch of text that starts at character ``start``."""
        return self.first if start == 0 else self.rest


def native_plan(tok: Any) -> SpacedPlan | None:
    """The core's plan for ``tok``'s normalizer, pre-tokenizer and model, or None where it
    has none (or an added token is matched in the normalized text, which the core does not
    see)."""
    from tokenmill.formats.sentencepiece import Precompiled, SentencePieceNormalizer

    model, normalizer, pre_tokenizer = tok.model, tok.normalizer, tok.pre_tokenizer
    if type(model) is not BPE and type(model) is not Unigram:
        return None
    # (the shape first: a byte-level BPE must not build a character core it never uses)
    if pre_tokenizer is None:
        if normalizer is not None and tok._added.any_normalized:
            return None
        if type(normalizer) in (SentencePieceNormalizer, Precompiled):
            return SpacedPlan(_model_core(model), normalizer._core, NO_PREFIX, NO_PREFIX, False)
        prefix = _llama_prefix(normalizer)
        if prefix is None:
            return None
        return SpacedPlan(_model_core(model), None, prefix, prefix, False)
    if normalizer is None and type(pre_tokenizer) is Metaspace and \
            pre_tokenizer.replacement == SPACE_MARK:
        scheme = pre_tokenizer.prepend_scheme
        first = NO_PREFIX if scheme == "never" else PREFIX_UNLESS_SPACED
        rest = PREFIX_UNLESS_SPACED if scheme == "always" else NO_PREFIX
        return SpacedPlan(_model_core(model), None, first, rest, pre_tokenizer.splits)
    return None


def _model_core(model: Any) -> _core.BPEModel | _core.UnigramModel:
    """The core of a BPE (over characters) or Unigram model."""
    return model._char_core if type(model) is BPE else model._core


def _llama_prefix(normalizer: Any) -> int | None:
    """The prefix of Llama's normalizers (Prepend("▁") beside Replace(" ", "▁"), in either
    order, or that Replace alone), else None."""
    steps = normalizer.normalizers if type(normalizer) is NormalizerSequence else (normalizer,)
    spaces = [s for s in steps if type(s) is Replace and not s.regex and s.pattern == " "
              and s.content == SPACE_MARK]
    prepends = [s for s in steps if type(s) is Prepend and s.prepend == SPACE_MARK]
    if len(spaces) != 1 or len(prepends) > 1 or len(spaces) + len(prepends) != len(steps):
        return None
    return PREFIX if prepends else NO_PREFIX


def encode_natively(plan: SpacedPlan, text: str, cut: list[tuple[int | None, int, int]],
                    id_to_token: Any) -> Encoding:
    """The Encoding of ``text``, cut into ``(added token id or None, start, end)``: each
    stretch of text through the core. A text of one stretch, not split, is one word."""
    encoding = Encoding.spliced(cut, [
        _core.encode_spaced(plan.model, plan.normalizer, plan.prefix(a), plan.split, text[a:b])
        for token, a, b in cut if token is None], id_to_token)
    if one_word(plan, cut):
        encoding._words = ONE_WORD
    return encoding


def one_word(plan: SpacedPlan, cut: list[tuple[int | None, int, int]] | None) -> bool:
    """Whether a text cut so (None: one stretch) is one word under ``plan``: one stretch of
    text and no added token, not split (Tokenizer._spaced_word_ids' words)."""
    return not plan.split and (cut is None or (len(cut) == 1 and cut[0][0] is None))
