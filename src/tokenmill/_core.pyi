"""tokenmill's native core (private: use the tokenmill package).

Generated: python -m nanobind.stubgen -m tokenmill._core -o src/tokenmill/_core.pyi
"""

from collections.abc import Sequence


class BPEModel:
    def __init__(self, tokens: Sequence[str], ids: Sequence[int], merges: Sequence[int], unk_id: int, continuing_subword_prefix: str, end_of_word_suffix: str, end_of_word_marker_id: int, byte_fallback: bool, fuse_unk: bool, ignore_merges: bool, cache_capacity: int) -> None: ...

    def encode_words(self, words: Sequence[str]) -> list[int]: ...

    def merge_ids(self, ids: Sequence[int]) -> list[int]: ...

def pretokenize(pattern: int, text: str) -> list[int]: ...

def train_bpe(words: Sequence[str], counts: Sequence[int], vocab_size: int, num_merges: int, min_frequency: int, special_tokens: Sequence[str], initial_alphabet: Sequence[str], limit_alphabet: int, continuing_subword_prefix: str, end_of_word_suffix: str, end_of_word_marker: str, max_token_length: int, first_seen: bool, progress: object | None) -> tuple: ...
