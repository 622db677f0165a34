// C++ tests of WordPiece and the BERT pipeline, built with ASan/UBSan by
// tests/unit/test_native_sanitized.py (and by CMake with -DTOKENMILL_BUILD_TESTS=ON). Hostile
// inputs: invalid UTF-8, empty and very long words, counts near 2^63; and the trainer's heap
// rebuild, which must not change what is learnt.
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "tokenmill/bert.h"
#include "tokenmill/error.h"
#include "tokenmill/wordpiece.h"
#include "tokenmill/wordpiece_trainer.h"

namespace {

using tokenmill_test::check;
using tokenmill_test::failures;

tokenmill::WordPieceModel model(int64_t unk) {
  const std::vector<std::string> tokens = {"[UNK]", "a", "##a", "ab", "##b", "\xC3\xA9"};
  const std::vector<uint32_t> ids = {0, 1, 2, 3, 4, 5};
  tokenmill::WordPieceOptions opt;
  opt.unk_id = unk;
  opt.max_input_chars_per_word = 100;
  return tokenmill::WordPieceModel(tokens, ids, opt);
}

void test_encode_hostile_words() {
  const tokenmill::WordPieceModel m = model(0);
  std::vector<tokenmill::TokenSpan> out;
  check(m.encode_word("", out) && out.empty(), "an empty word gives nothing");
  check(m.encode_word("aba", out) && out.size() == 2 && out[0].id == 3 && out[1].id == 2,
        "longest match first: ab, ##a");
  out.clear();
  check(m.encode_word("\xC3", out) && out.size() == 1 && out[0].id == 0 && out[0].end == 1,
        "a truncated character is one unknown character");
  out.clear();
  check(m.encode_word("\x80\xFF\xC3\xA9", out) && out.size() == 1 && out[0].end == 3,
        "stray bytes count one character each");
  out.clear();
  const std::string longest(100, 'a');
  check(m.encode_word(longest, out) && out.size() == 100, "100 characters are encoded");
  out.clear();
  check(m.encode_word(longest + "a", out) && out.size() == 1 && out[0].id == 0 &&
            out[0].end == 101,
        "101 characters are one unknown token spanning them all");
  out.clear();
  const tokenmill::WordPieceModel no_unk = model(-1);
  check(!no_unk.encode_word("abx", out) && out.empty(), "no unk token: the word fails, empty");
  std::vector<uint32_t> flat;
  check(no_unk.encode_words({"ab", "x", "a"}, flat) == 1, "encode_words names the failing word");
}

void test_bert_pipeline_on_broken_utf8() {
  const tokenmill::WordPieceModel m = model(0);
  const tokenmill::BertPipeline pipeline({{'A', "a"}, {0x07, ""}}, {{0x4E00, 0x9FFF}},
                                         {'!', ','}, {' ', '\t'});
  tokenmill::Encoded e;
  pipeline.encode(m, "A\x07" "b!\xE4\xB8\x80\xF0\x9F", e);
  // "ab" "!" " " "一" " " then two stray bytes: ab(0..3) ! (3..4) 一 unknown (4..5) and the
  // two bytes as one unknown word (5..7)
  check(e.ids.size() == 4, "four tokens");
  check(e.starts.size() == 4 && e.starts[0] == 0 && e.ends[0] == 3 && e.starts[3] == 5 &&
            e.ends[3] == 7,
        "offsets point into the input through dropped characters");
  tokenmill::Encoded empty;
  pipeline.encode(m, "", empty);
  check(empty.ids.empty(), "empty text gives nothing");
}

std::vector<std::string> words_of(std::size_t n) {
  // pseudo-random words over a small alphabet: many pairs, many ties
  std::vector<std::string> words;
  uint64_t x = 88172645463325252ULL;
  for (std::size_t i = 0; i < n; ++i) {
    std::string w;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const std::size_t len = 1 + x % 9;
    for (std::size_t k = 0; k < len; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      w.push_back(static_cast<char>('a' + x % 7));
    }
    words.push_back(w);
  }
  return words;
}

void test_trainer_heap_rebuild_changes_nothing() {
  const std::vector<std::string> words = words_of(3000);
  const std::vector<uint64_t> counts(words.size(), 1);
  tokenmill::WordPieceTrainerOptions opt;
  opt.vocab_size = 800;
  opt.special_tokens = {"[UNK]"};
  const auto lazy = tokenmill::train_wordpiece(words, counts, opt, {});
  opt.heap_slack = 0;
  const auto eager = tokenmill::train_wordpiece(words, counts, opt, {});
  check(lazy.vocab == eager.vocab, "the same vocabulary with and without heap rebuilds");
  check(lazy.merges.size() == eager.merges.size() && lazy.merges.size() > 100,
        "the same number of merges");
}

void test_trainer_large_counts_and_errors() {
  // score(a, ##b) = 2^62 / (2^62 * 2^62) vs score(c, ##d) = 1 / (1 * 2): exact, no overflow
  const uint64_t big = uint64_t{1} << 62;
  tokenmill::WordPieceTrainerOptions opt;
  opt.vocab_size = 10;
  const auto r = tokenmill::train_wordpiece({"ab", "cd", "c"}, {big, 1, 1}, opt, {});
  check(!r.merges.empty() && r.vocab[r.merges[0].result] == "cd",
        "1/2 beats 2^-62 though its pair is far rarer");
  opt.vocab_size = 2;  // "ab" needs a, b and ##b
  bool threw = false;
  try {
    tokenmill::train_wordpiece({"ab"}, {1}, opt, {});
  } catch (const tokenmill::Error&) {
    threw = true;
  }
  check(threw, "vocab_size below the alphabet is an error");
  opt.vocab_size = 50;
  const auto odd = tokenmill::train_wordpiece({"", "\xFF\xFE", "aaaa"}, {1, 2, 3}, opt, {});
  check(!odd.merges.empty(), "empty words and stray bytes train");
}

}  // namespace

int main() {
  test_encode_hostile_words();
  test_bert_pipeline_on_broken_utf8();
  test_trainer_heap_rebuild_changes_nothing();
  test_trainer_large_counts_and_errors();
  if (failures == 0) std::printf("wordpiece tests: all passed\n");
  return failures == 0 ? 0 : 1;
}
