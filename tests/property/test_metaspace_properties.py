"""Properties of the SentencePiece-style components and of added-token matching: alignment
stays inside the original and monotone through Prepend and Metaspace, the pieces and offsets
are those of `tokenizers`, the decoder undoes the pre-tokenizer, and added-token segments
cover the text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tokenizers import pre_tokenizers as hf_pre_tokenizers

from tokenmill import AddedToken
from tokenmill import decoders as d
from tokenmill import normalizers as n
from tokenmill import pre_tokenizers as p
from tokenmill.added_tokens import AddedVocabulary
from tokenmill.normalized import NormalizedString

TRICKY = list(" ▁\t\n\u3000\u00a0ﬁ²\u0301İΣ日a ")
TEXT = st.text(st.one_of(st.characters(exclude_categories=("Cs", "Cn")),
                         st.sampled_from(TRICKY)), max_size=40)
SCHEMES = st.sampled_from(["always", "first", "never"])


def assert_aligned(s: NormalizedString, size: int) -> None:
    starts, ends = s.alignment()
    assert len(starts) == len(ends) == len(s.text)
    assert all(0 <= a <= b <= size for a, b in zip(starts, ends, strict=True))
    assert starts == sorted(starts)
    assert ends == sorted(ends)


@given(text=TEXT, prefix=st.sampled_from(["▁", "", "ab"]), base=st.integers(0, 3))
def test_prepend_alignment(text: str, prefix: str, base: int) -> None:
    for source in (NormalizedString(text), n.NFKC().normalize(NormalizedString(text))):
        out = n.Prepend(prefix).normalize(source)
        assert out.text == (prefix + source.text if source.text else "")
        assert_aligned(out, len(text))
    shifted = n.Prepend(prefix).normalize(NormalizedString(text, base))
    assert_aligned(shifted, len(text) + base)


@given(text=TEXT, scheme=SCHEMES, split=st.booleans())
def test_metaspace_alignment(text: str, scheme: str, split: bool) -> None:
    pre_tokenizer = p.Metaspace(prepend_scheme=scheme, split=split)
    for source in (NormalizedString(text), n.NFKC().normalize(NormalizedString(text)),
                   n.Prepend("▁").normalize(NormalizedString(text))):
        pieces = pre_tokenizer.split(source)
        assert all(piece.text for piece in pieces)
        for piece in pieces:
            assert_aligned(piece, len(text))
        spans = [piece.span(0, len(piece)) for piece in pieces]
        assert [a for a, _ in spans] == sorted(a for a, _ in spans)
        assert [b for _, b in spans] == sorted(b for _, b in spans)


@given(text=TEXT, scheme=SCHEMES, split=st.booleans())
def test_metaspace_same_as_tokenizers(text: str, scheme: str, split: bool) -> None:
    theirs = hf_pre_tokenizers.Metaspace(prepend_scheme=scheme, split=split)
    ours = p.Metaspace(prepend_scheme=scheme, split=split)
    assert ours.pre_tokenize_str(text) == theirs.pre_tokenize_str(text)


@given(text=TEXT.filter(lambda t: "▁" not in t and not t.startswith(" ")),
       scheme=st.sampled_from(["always", "first"]))
def test_metaspace_decoder_undoes_the_pre_tokenizer(text: str, scheme: str) -> None:
    pieces = [piece for piece, _ in p.Metaspace(prepend_scheme=scheme).pre_tokenize_str(text)]
    assert d.Metaspace(prepend_scheme=scheme).decode(pieces) == text


CONTENTS = ["ab", "a", "<s>", " b", "ab\u3000", "ﬁ"]
TOKENS = st.lists(st.tuples(st.sampled_from(CONTENTS), st.booleans(), st.booleans(),
                            st.booleans()), max_size=4)
ADDED_TEXT = st.text(st.sampled_from(list("ab<s>ﬁx \t\u3000_")), max_size=30)


@given(flags=TOKENS, text=ADDED_TEXT)
def test_segments_cover_the_text_without_rstrip(flags: list[tuple[str, bool, bool, bool]],
                                                text: str) -> None:
    """Without rstrip (whose stretch may run over the next token, as in Hugging Face) the
    segments tile the text, and every token segment holds its token."""
    tokens = [AddedToken(c, k, single_word=w, lstrip=ls, normalized=norm)
              for k, (c, w, ls, norm) in enumerate(dict(
                  (c, (c, w, ls, norm)) for c, w, ls, norm in flags).values())]
    vocab = AddedVocabulary(tokens)
    segments = vocab.split(text)
    ends = [0] + [b for _, _, b in segments]
    assert [a for _, a, _ in segments] == ends[:-1]
    assert ends[-1] == len(text)
    for token_id, a, b in segments:
        assert b > a
        if token_id is not None:
            assert tokens[token_id].content in text[a:b]
