"""The pipeline with a hand-made model: encode, decode, added tokens, padding, truncation."""

import pytest

from tokenmill import BPE, Encoding, FormatError, InputError, Padding, Tokenizer, Truncation
from tokenmill.processors import TemplateProcessing

VOCAB = {"<s>": 0, "</s>": 1, "<pad>": 2, "h": 3, "i": 4, "o": 5, "hi": 6, "ho": 7, "hih": 8}
MERGES = [("h", "i"), ("h", "o"), ("hi", "h")]


def make(**kw) -> Tokenizer:
    tok = Tokenizer(BPE(VOCAB, MERGES), **kw)
    tok.add_special_tokens(["<s>", "</s>", "<pad>"])
    return tok


def test_encode_ids_tokens_offsets():
    enc = make().encode("hiho")
    assert enc.ids == [6, 7]
    assert enc.tokens == ["hi", "ho"]
    assert enc.offsets == [(0, 2), (2, 4)]
    assert enc.attention_mask == [1, 1]
    assert enc.special_tokens_mask == [0, 0]


def test_special_tokens_in_text_are_matched_whole():
    enc = make().encode("hi</s>ho")
    assert enc.ids == [6, 1, 7]
    assert enc.offsets == [(0, 2), (2, 6), (6, 8)]
    # as in Hugging Face, only tokens a post-processor adds count as special in the mask
    assert enc.special_tokens_mask == [0, 0, 0]


def test_template_single_and_pair():
    post = TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                              special_tokens=[("<s>", 0), ("</s>", 1)])
    tok = make(post_processor=post)
    enc = tok.encode("hi", "ho")
    assert enc.ids == [0, 6, 1, 7, 1]
    assert enc.type_ids == [0, 0, 0, 1, 1]
    assert enc.special_tokens_mask == [1, 0, 1, 0, 1]
    assert enc.offsets == [(0, 0), (0, 2), (0, 0), (0, 2), (0, 0)]
    assert tok.encode("hi", add_special_tokens=False).ids == [6]
    assert tok.decode(enc.ids) == "hi ho"
    assert tok.decode(enc.ids, skip_special_tokens=False) == "<s> hi </s> ho </s>"


def test_truncation_with_stride_and_overflow():
    enc = make().encode("hohohohoho", truncation=Truncation(max_length=2, stride=1))
    assert enc.tokens == ["ho", "ho"]
    assert [o.offsets for o in enc.overflowing] == [
        [(2, 4), (4, 6)], [(4, 6), (6, 8)], [(6, 8), (8, 10)]]
    left = make().encode("hihoo", truncation=Truncation(max_length=2, side="left"))
    assert left.tokens == ["ho", "o"]


def test_truncation_leaves_room_for_template():
    post = TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 1)])
    enc = make(post_processor=post).encode("hohoho", truncation=Truncation(max_length=4))
    assert enc.ids == [0, 7, 7, 1]


def test_batch_padding_to_multiple():
    batch = make().encode_batch(["hi", "hohoho"], padding=Padding(pad_id=2, pad_token="<pad>",
                                                                  pad_to_multiple_of=4))
    assert [e.ids for e in batch] == [[6, 2, 2, 2], [7, 7, 7, 2]]
    assert [e.attention_mask for e in batch] == [[1, 0, 0, 0], [1, 1, 1, 0]]
    left = make().encode_batch(["hi", "hoho"], padding=Padding(pad_id=2, side="left"))
    assert left[0].ids == [2, 6] and left[0].attention_mask == [0, 1]


def test_batch_truncation_padding_and_decode_batch():
    post = TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 1)])
    tok = make(post_processor=post)
    batch = tok.encode_batch(["hihoho", "hi"], truncation=Truncation(max_length=4, stride=1),
                             padding=Padding(pad_id=2, pad_token="<pad>"))
    assert [e.ids for e in batch] == [[0, 6, 7, 1], [0, 6, 1, 2]]
    assert [e.attention_mask for e in batch] == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert [[o.ids for o in e.overflowing] for e in batch] == [[[0, 7, 7, 1]], []]
    left = tok.encode_batch(["hihoho", "hi"], truncation=Truncation(max_length=4, side="left"))
    assert [e.ids for e in left] == [[0, 7, 7, 1], [0, 6, 1]]
    ids = [e.ids for e in batch]
    assert tok.decode_batch(ids) == ["hi ho", "hi"]
    assert tok.decode_batch(ids, skip_special_tokens=False) == [
        "<s> hi ho </s>", "<s> hi </s> <pad>"]


def test_a_failed_save_keeps_the_old_file(tmp_path, monkeypatch):
    import errno
    import os

    path = tmp_path / "tok.json"
    path.write_text("OLD", encoding="utf-8")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(InputError, match=r"tok\.json: cannot write \(No space left on device\)"):
        make().save(path)
    assert path.read_text("utf-8") == "OLD"
    assert [p.name for p in tmp_path.iterdir()] == ["tok.json"]  # no temporary file left
    with pytest.raises(InputError, match=r"not a regular file \(a device, a pipe or a directory\)"):
        make().save(tmp_path)  # a directory is where the file should go


@pytest.mark.parametrize("text, message", [
    ("{}", r"bad.json: model: missing \(expected an object\)"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0}}}',
     r"bad.json: model.merges: missing \(expected a list\)"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]}}',
     r"bad.json: model.merges\[0\]: expected"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "added_tokens": {}}',
     "bad.json: added_tokens: expected a list"),
])
def test_malformed_files_name_the_field(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError, match=message):
        Tokenizer.from_file(path)


def test_decode_unknown_id_names_position():
    with pytest.raises(InputError, match=r"ids\[1\]: 99 is not an id"):
        make().decode([6, 99])


def test_lone_surrogate_is_a_clear_error():
    with pytest.raises(InputError, match="lone surrogate U\\+D800 at character 2"):
        make().encode("hi\ud800")


def test_save_load_round_trip_and_fingerprint(tmp_path):
    post = TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 1)])
    tok = make(post_processor=post, truncation=Truncation(max_length=8),
               padding=Padding(pad_id=2, pad_token="<pad>"))
    path = tmp_path / "tok.json"
    tok.save(path)
    again = Tokenizer.from_file(path)
    assert again.fingerprint() == tok.fingerprint()
    assert again.encode("hihoh").ids == tok.encode("hihoh").ids
    assert again.truncation == tok.truncation and again.padding == tok.padding
    other = Tokenizer(BPE(VOCAB, list(reversed(MERGES))))
    assert other.fingerprint() != Tokenizer(BPE(VOCAB, MERGES)).fingerprint()


def test_fingerprint_tells_apart_a_tokenizer_that_refuses_special_tokens_in_text():
    # A .model or tiktoken encoding refuses "<s>" in text; its tokenizer.json export matches
    # it: the same file, different ids, so different fingerprints. A Hugging Face file's
    # fingerprint ("match") is its content's alone, as before.
    tok = make()
    tok.add_special_tokens(["<s>"])
    matching = tok.fingerprint()
    assert matching == Tokenizer.from_str(tok.to_str()).fingerprint()
    tok.special_tokens_in_text = "error"
    with pytest.raises(InputError):
        tok.encode("hi<s>")
    assert tok.fingerprint() != matching
    tok.special_tokens_in_text = "match"
    assert tok.fingerprint() == matching


def test_encoding_concat_and_pad_keep_masks():
    a = Encoding([1], ["a"], [(0, 1)])
    padded = a.padded(3, pad_id=0, pad_token="<pad>")
    assert padded.special_tokens_mask == [0, 1, 1]
    assert padded.offsets == [(0, 1), (0, 0), (0, 0)]


def test_marker_model_cannot_be_exported_to_hf(tmp_path):
    from tokenmill import BPETrainer

    tok = Tokenizer(BPE({}, []))
    tok.train_from_counts({"low": 2, "lower": 1},
                          BPETrainer(num_merges=3, end_of_word_marker="</w>"))
    with pytest.raises(InputError, match="separate symbol after every word"):
        tok.save(tmp_path / "hf.json", hf_compatible=True)
    assert not (tmp_path / "hf.json").exists()
    tok.save(tmp_path / "ours.json")  # our schema keeps it, under its own model type
    assert Tokenizer.from_file(tmp_path / "ours.json").model.merges == tok.model.merges
    assert '"type": "tokenmill.BPE"' in (tmp_path / "ours.json").read_text("utf-8")


def test_vocab_size_follows_the_vocab_it_is_kept_for():
    # The highest id is kept with the vocab dict it came from: a replaced or grown vocab is
    # measured again, and added tokens count.
    tok = Tokenizer(BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    assert tok.get_vocab_size() == 3
    tok.model.vocab["c"] = 7
    assert tok.get_vocab_size() == 8
    tok.model.vocab = {"a": 0, "b": 4}
    assert tok.get_vocab_size() == 5
    tok.add_special_tokens(["<s>"])
    assert tok.get_vocab_size() == 6
    assert tok.get_vocab_size(with_added_tokens=False) == 5
