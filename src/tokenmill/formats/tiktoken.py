"""tiktoken's files (``*.tiktoken``: base64 token bytes and a rank per line) and the presets of
OpenAI's encodings, read into a byte-level BPE Tokenizer, and written back.

tiktoken keeps no merges: encoding merges the adjacent pair whose concatenation has the lowest
rank. The merges are derived here (in the core) by running that rule on each token's own bytes
with the lower ranks only; with ``ignore_merges`` (a whole piece found in the vocabulary is one
token, as tiktoken does) encoding by merge rank then gives tiktoken's ids, which the tests check
on every line of every corpus.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill import _core
from tokenmill._io import atomic_write_text, read_file
from tokenmill.added_tokens import AddedToken
from tokenmill.errors import FormatError, InputError
from tokenmill.models.bpe import CACHE_CAPACITY

if TYPE_CHECKING:
    from tokenmill.tokenizer import Tokenizer

_GPT2_PATTERN = (r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|"""
                 r"""\s+(?!\S)|\s""")
# The pattern of GPT-2's release (and of the Hugging Face ByteLevel pre-tokenizer); tiktoken's
# spelling above splits identically.
_GPT2_ORIGINAL_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|"""
                          r"""\s+(?!\S)|\s+""")
_CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
                   r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
_O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


@dataclass(frozen=True)
class Preset:
    """One of OpenAI's encodings: its split pattern and special tokens (as tiktoken 0.14.0
    defines them), the name of its ranks file and how many ranks that holds."""

    name: str
    pattern: str
    special_tokens: dict[str, int]
    file: str
    ranks: int


PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("r50k_base", _GPT2_PATTERN, {"<|endoftext|>": 50256}, "r50k_base.tiktoken", 50256),
    Preset("p50k_base", _GPT2_PATTERN, {"<|endoftext|>": 50256}, "p50k_base.tiktoken", 50280),
    Preset("cl100k_base", _CL100K_PATTERN,
           {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}, "cl100k_base.tiktoken",
           100256),
    Preset("o200k_base", _O200K_PATTERN, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
           "o200k_base.tiktoken", 199998),
]}
PRESETS["gpt2"] = Preset("gpt2", _GPT2_PATTERN, {"<|endoftext|>": 50256}, "r50k_base.tiktoken",
                         50256)


def read_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """A ``*.tiktoken`` file: token bytes -> rank. Errors name the file and line."""
    path = Path(path)
    raw = read_file(path, "a .tiktoken file")
    ranks: dict[bytes, int] = {}
    seen_ranks: dict[int, int] = {}
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise FormatError(f"{path}:{n}: expected 'BASE64 RANK', got "
                              f"{line[:60].decode('utf-8', 'replace')!r}")
        try:
            token = base64.b64decode(parts[0], validate=True)
        except (binascii.Error, ValueError):
            bad = parts[0][:40].decode("ascii", "replace")
            raise FormatError(f"{path}:{n}: {bad!r} is not valid base64") from None
        rank = int(parts[1])
        if rank in seen_ranks:
            raise FormatError(f"{path}:{n}: rank {rank} appears twice (first on line "
                              f"{seen_ranks[rank]})")
        if token in ranks:
            raise FormatError(f"{path}:{n}: token {token!r} appears twice")
        seen_ranks[rank] = n
        ranks[token] = rank
    if not ranks:
        raise FormatError(f"{path}: no ranks in the file")
    return ranks


def from_ranks(ranks: dict[bytes, int], pattern: str, special_tokens: dict[str, int],
               source: str = "ranks") -> Tokenizer:
    """A byte-level BPE Tokenizer that encodes as tiktoken does with these ranks."""
    from tokenmill.pre_tokenizers import spell_bytes

    spelled = {spell_bytes(t): r for t, r in ranks.items()}
    flat, unreachable = _core.derive_merges(list(ranks), list(ranks.values()))
    return _tokenizer(spelled, flat, unreachable, pattern, special_tokens, source)


def _tokenizer(vocab: dict[str, int], triples: Sequence[int], unreachable: list[int],
               pattern: str,
               special_tokens: dict[str, int], source: str,
               core: _core.BPEModel | None = None) -> Tokenizer:
    from tokenmill.decoders import ByteLevel as ByteLevelDecoder
    from tokenmill.models.bpe import BPE
    from tokenmill.pre_tokenizers import ByteLevel, Sequence, Split, bytes_to_unicode
    from tokenmill.tokenizer import Tokenizer

    missing = [b for b, c in bytes_to_unicode().items() if c not in vocab]
    if missing:
        raise FormatError(f"{source}: byte 0x{missing[0]:02x} has no rank; every single byte "
                          "must be a token")
    if unreachable:
        raise FormatError(f"{source}: the token of rank {unreachable[0]} cannot be made by "
                          "merging lower-ranked tokens")
    clash = [t for t, i in special_tokens.items() if i in vocab.values()]
    if clash:
        raise FormatError(f"{source}: special token {clash[0]!r} has id "
                          f"{special_tokens[clash[0]]}, which is a rank of the file")
    model = BPE.from_id_merges(vocab, triples, ignore_merges=True, byte_level_core=core)
    return Tokenizer(
        model,
        pre_tokenizer=Sequence([Split(pattern, "isolated"),
                                ByteLevel(add_prefix_space=False, use_regex=False)]),
        decoder=ByteLevelDecoder(),
        added_tokens=[AddedToken(t, i, special=True) for t, i in special_tokens.items()],
        special_tokens_in_text="error",
    )


def load(name: str, path: str | os.PathLike[str] | None = None) -> Tokenizer:
    """The preset ``name`` (``gpt2``, ``r50k_base``, ``p50k_base``, ``cl100k_base``,
    ``o200k_base``), its ranks read from ``path`` (a ``.tiktoken`` file, or a folder holding
    it); nothing is downloaded."""
    preset = PRESETS.get(name)
    if preset is None:
        raise InputError(f"unknown preset {name!r}; expected one of {', '.join(sorted(PRESETS))}")
    if path is None:
        raise InputError(f"preset {name!r} needs path= to its {preset.file} (tokenmill never "
                         "downloads files)")
    p = Path(path)
    if p.is_dir():
        p = p / preset.file
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    try:
        spelled, ranks, packed, unreachable, core = _core.load_ranks(data, CACHE_CAPACITY)
    except InputError as e:  # "line N: ..." from the core's parser
        line, _, message = str(e).partition(": ")
        raise FormatError(f"{p}:{line.removeprefix('line ')}: {message}") from None
    if len(ranks) != preset.ranks:
        # (another encoding's file, given by its path: its ranks under this one's pattern and
        # special tokens are no encoding at all)
        raise FormatError(f"{p}: {len(ranks):,} ranks, where {name}'s {preset.file} has "
                          f"{preset.ranks:,}: the ranks of another encoding?")
    triples = array("I")
    triples.frombytes(packed)
    return _tokenizer(dict(zip(spelled, ranks)), triples, unreachable, preset.pattern,
                      preset.special_tokens, str(p), core)


def save(tok: Tokenizer, path: str | os.PathLike[str]) -> None:
    """Write a byte-level BPE tokenizer as ``PATH`` (tiktoken ranks: base64 bytes and id) and
    ``PATH.json`` (its split pattern, special tokens and vocabulary size), atomically.

    tiktoken merges by the rank of the concatenation, so a model is exported only if that rule
    gives its own ids: byte-level, a pattern that a Split names, merges in id order."""
    from tokenmill.pre_tokenizers import unicode_to_bytes

    pattern = _pattern_of(tok.pre_tokenizer)
    model = tok.model
    if tok.normalizer is not None or pattern is None or model.byte_level_core is None:
        raise InputError("only a byte-level BPE without a normalizer, behind ByteLevel or "
                         "Split + ByteLevel, can be written as a tiktoken file")
    to_bytes = unicode_to_bytes()
    lines = []
    ranks: dict[int, bytes] = {}
    for token, i in sorted(model.vocab.items(), key=lambda kv: kv[1]):
        if all(c in to_bytes for c in token):
            ranks[i] = bytes(to_bytes[c] for c in token)
            lines.append(f"{base64.b64encode(ranks[i]).decode('ascii')} {i}")
    for left, right in model.merges:
        new = model.vocab[model.merged_token(left, right)]
        if new < max(model.vocab[left], model.vocab[right]):
            raise InputError(f"cannot write a tiktoken file: merge ({left!r}, {right!r}) makes "
                             f"id {new}, below the ids it merges; tiktoken's rule would differ")
    specials = {t.content: t.id for t in tok.added_tokens}
    meta = {"pat_str": pattern, "special_tokens": specials,
            "explicit_n_vocab": tok.get_vocab_size()}
    atomic_write_text(path, "\n".join(lines) + "\n")
    atomic_write_text(f"{os.fspath(path)}.json", json.dumps(meta, ensure_ascii=False, indent=2))


def _pattern_of(pre_tokenizer: object) -> str | None:
    from tokenmill.pre_tokenizers import ByteLevel, Sequence, Split

    if isinstance(pre_tokenizer, ByteLevel) and pre_tokenizer.use_regex \
            and not pre_tokenizer.add_prefix_space:
        return _GPT2_ORIGINAL_PATTERN
    if isinstance(pre_tokenizer, Sequence) and len(pre_tokenizer.pre_tokenizers) == 2:
        split, byte_level = pre_tokenizer.pre_tokenizers
        if isinstance(split, Split) and split.behavior == "isolated" and not split.invert \
                and isinstance(byte_level, ByteLevel) and not byte_level.use_regex \
                and not byte_level.add_prefix_space:
            return split.pattern
    return None
