// C++ tests of the core, built with ASan/UBSan by tests/unit/test_native_sanitized.py (and by
// CMake with -DTOKENMILL_BUILD_TESTS=ON). Hostile inputs: invalid UTF-8, empty words, very long
// words, pairs that overlap, counts near 2^40.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "tokenmill/bpe.h"
#include "tokenmill/bpe_trainer.h"
#include "tokenmill/error.h"
#include "tokenmill/flat_map.h"
#include "tokenmill/pretokenize.h"
#include "tokenmill/sp_encode.h"
#include "tokenmill/sp_normalizer.h"
#include "tokenmill/text.h"
#include "tokenmill/unigram.h"
#include "tokenmill/utf8.h"
#include "tokenmill/word_cache.h"

namespace {

using tokenmill_test::check;
using tokenmill_test::failures;

void test_utf8_never_reads_past_the_end() {
  const std::string cut = "a\xE8\xAF";  // a 3-byte character cut after 2 bytes
  check(tokenmill::utf8_count(cut) == 3, "a truncated character counts byte by byte");
  const std::string lone = "\x80\xFF\xC0";
  check(tokenmill::utf8_count(lone) == 3, "stray continuation and invalid lead bytes");
  check(tokenmill::utf8_count("\xF0\x9F\x98\x80") == 1, "an astral character is one");
}

tokenmill::BPEModel small_model() {
  // a=0 b=1 ab=2 aa=3 <0x80>..: byte fallback tokens for a few bytes only
  std::vector<std::string> tokens = {"a", "b", "ab", "aa", "<unk>"};
  std::vector<uint32_t> ids = {0, 1, 2, 3, 4};
  std::vector<tokenmill::Merge> merges = {{0, 1, 2}, {0, 0, 3}};
  tokenmill::BPEOptions opt;
  opt.unk_id = 4;
  opt.fuse_unk = true;
  return tokenmill::BPEModel(tokens, ids, merges, opt);
}

void test_encode_hostile_words() {
  const tokenmill::BPEModel model = small_model();
  std::vector<tokenmill::TokenSpan> out;
  model.encode_word("", out);
  check(out.empty(), "empty word gives nothing");
  // a, U+8BC0 (valid, unknown), a stray 0xFF byte, z, z: four unknown characters in a row
  model.encode_word("a\xE8\xAF\x80\xFFzz", out);
  check(out.size() == 2 && out[1].id == 4 && out[1].start == 1 && out[1].end == 5,
        "unknown and invalid bytes fuse into one unk with a bounded span");
  out.clear();
  std::string longword(100000, 'a');
  longword += "b";
  model.encode_word(longword, out);
  // a+b has rank 0, so the final "ab" forms first; the 99,999 a's before it pair up.
  check(out.size() == 50001, "100k symbols take the heap path and merge aa pairs");
  check(out.back().id == 2 && out.back().end == 100001, "the word ends with ab");
  check(out[49999].id == 0, "one a is left over before ab");
  out.clear();
  model.encode_word("aaa", out);
  check(out.size() == 2 && out[0].id == 3 && out[1].id == 0, "equal rank merges the leftmost");
}

// A byte-level model whose every byte is a token, with merges that build up (as backtracking
// needs): ab, cd, abcd, aa, aaaa, aaaaaaaa, aaaaaaaaab (a head of eight bytes and two past
// it), bc, and \x01\x02, \x01\x02\x03 (bytes that do not print: the three-byte table skips
// them, and the prefix filter is asked about three bytes, not four).
tokenmill::BPEModel byte_model() {
  std::vector<std::string> tokens;
  std::vector<uint32_t> ids;
  for (int b = 0; b < 256; ++b) {
    tokens.emplace_back(1, static_cast<char>(b));
    ids.push_back(static_cast<uint32_t>(b));
  }
  const char* made[] = {"ab",         "cd", "abcd",     "aa",        "aaaa",
                        "aaaaaaaa",   "aaaaaaaaab",   "bc", "\x01\x02", "\x01\x02\x03"};
  for (uint32_t k = 0; k < 10; ++k) {
    tokens.emplace_back(made[k]);
    ids.push_back(256 + k);
  }
  const uint32_t a = 'a', b = 'b', c = 'c', d = 'd';
  std::vector<tokenmill::Merge> merges = {{a, b, 256},   {c, d, 257},   {256, 257, 258},
                                          {a, a, 259},   {259, 259, 260}, {260, 260, 261},
                                          {261, 256, 262}, {b, c, 263},  {1, 2, 264},
                                          {264, 3, 265}};
  tokenmill::BPEOptions opt;
  opt.byte_symbols = true;
  opt.ignore_merges = true;
  return tokenmill::BPEModel(tokens, ids, merges, opt);
}

void test_backtracking_reads_inside_the_piece() {
  // Each piece in a buffer of exactly its size (ASan sees a read past it): the search reads a
  // word of eight bytes where it can and fewer at the end; its ids must be the merges' ids.
  const tokenmill::BPEModel model = byte_model();
  uint64_t state = 7;
  std::vector<uint32_t> none;
  check(model.encode_backtrack_ids(std::string_view{}, none) && none.empty(),
        "an empty piece has no tokens (and no byte is read)");
  const char alphabet[] = "aabcd\x01\x02\x03";
  for (int round = 0; round < 3000; ++round) {
    const std::size_t n = 1 + tokenmill::splitmix64(state) % (round < 2900 ? 24 : 700);
    // Half the pieces from the letters only, half with the three bytes that do not print.
    const uint64_t letters = round % 2 == 0 ? 5 : 8;
    std::vector<char> buffer(n);
    for (char& ch : buffer) ch = alphabet[tokenmill::splitmix64(state) % letters];
    const std::string_view piece(buffer.data(), n);
    std::vector<uint32_t> bytes;
    for (char ch : buffer) bytes.push_back(static_cast<unsigned char>(ch));
    std::vector<uint32_t> found;
    const bool same = model.encode_backtrack_ids(piece, found) && found == model.merge_ids(bytes);
    check(same, "backtracking gives the merges' ids");
    if (!same) {
      std::printf("  piece: %.*s\n", static_cast<int>(n), buffer.data());
      return;
    }
  }
}

// The word cache on its own: words found as kept (spans or none), words of one hash told apart
// by their bytes, the length and capacity limits, and two threads keeping and finding at once.
void test_word_cache() {
  using tokenmill::TokenSpan;
  using tokenmill::WordCache;
  WordCache cache(6);
  WordCache::Found found{};
  check(!cache.find("abc", 1, found) && cache.size() == 0, "an empty cache finds nothing");
  const TokenSpan end_to_end[] = {{7, 0, 1}, {8, 1, 3}};
  const TokenSpan gapped[] = {{9, 0, 1}, {10, 2, 3}};
  check(cache.keep("abc", 42, end_to_end, 2, true), "a word is kept");
  check(cache.keep("abd", 42, gapped, 2, true), "a word of the same hash is kept beside it");
  check(cache.find("abc", 42, found) && found.count == 2 && found.ids[0] == 7 &&
            found.ids[1] == 8 && found.spans == nullptr,
        "tokens end to end over a byte-level word: ids only");
  check(cache.find("abd", 42, found) && found.count == 2 && found.ids[1] == 10 &&
            found.spans != nullptr && found.spans[1] == (2u | 3u << 16),
        "tokens with a gap keep their spans");
  check(!cache.find("abe", 42, found) && !cache.find("ab", 42, found),
        "a word of the same hash but other bytes is not found");
  check(cache.keep("abc", 42, gapped, 2, true) && cache.find("abc", 42, found) &&
            found.ids[0] == 7 && cache.size() == 2,
        "keeping a word again keeps the first tokens");
  check(cache.keep("xyz", 43, end_to_end, 2, false) && cache.find("xyz", 43, found) &&
            found.spans != nullptr && found.spans[1] == (1u | 3u << 16),
        "a model that is not byte-level keeps spans");
  check(cache.keep("", 5, nullptr, 0, true) && cache.find("", 5, found) && found.count == 0,
        "the empty word");
  const std::string longest(WordCache::kMaxWordBytes, 'x');
  const std::string too_long(WordCache::kMaxWordBytes + 1, 'x');
  const TokenSpan whole[] = {{11, 0, static_cast<uint32_t>(longest.size())}};
  check(cache.keep(longest, 6, whole, 1, true) && cache.find(longest, 6, found) &&
            found.ids[0] == 11,
        "a word of the longest length kept is kept");
  check(!cache.keep(too_long, 7, whole, 1, true) && !cache.find(too_long, 7, found) &&
            !cache.full(),
        "a longer word is not kept, and the cache is not full for it");
  const TokenSpan far[] = {{12, 0, 70000}};
  check(!cache.keep("far", 8, far, 1, false), "a span past 65535 is not kept");
  check(cache.size() == 5 && cache.keep("w6", 10, end_to_end, 1, true) && !cache.full(),
        "a sixth word fills it");
  check(!cache.keep("w7", 11, end_to_end, 1, true) && cache.full() && cache.size() == 6 &&
            !cache.find("w7", 11, found) && cache.find("abd", 42, found),
        "a full cache keeps nothing more and still finds what it has");
  WordCache tight(3);  // records of 192 words of 4 bytes at most
  check(tight.keep("abc", 1, end_to_end, 2, true) && !tight.keep(longest, 6, whole, 1, true) &&
            tight.full() && tight.find("abc", 1, found),
        "a record past the cache's budget fills it");
  WordCache roomy(16);  // records of 1024 words at most
  std::vector<TokenSpan> many;
  for (uint32_t k = 0; k < 300; ++k) many.push_back({k, k, k + 1});
  const std::string other_longest(WordCache::kMaxWordBytes, 'y');
  check(roomy.keep(longest, 1, whole, 1, true) && roomy.keep(other_longest, 2, whole, 1, true) &&
            !roomy.keep(std::string(WordCache::kMaxWordBytes, 'z'), 3, many.data(), many.size(),
                        false) &&
            !roomy.full() &&
            roomy.keep("abc", 4, end_to_end, 2, true),
        "a record larger than the room left is turned away, and smaller ones still kept");
  WordCache off(0);
  check(!off.keep("abc", 42, end_to_end, 2, true) && !off.find("abc", 42, found),
        "a cache of capacity 0 keeps nothing");

  // Two threads keep and find the same words (hashes chosen to collide in pairs); each word's
  // single token is its number, whoever kept it.
  WordCache shared(3000);
  bool agreed[2] = {true, true};
  auto work = [&](int who) {
    WordCache::Found f{};
    for (uint32_t round = 0; round < 3; ++round) {
      for (uint32_t k = 0; k < 2000; ++k) {
        const uint32_t w = who == 0 ? k : 1999 - k;
        const std::string word = "word" + std::to_string(w);
        const TokenSpan token[] = {{w, 0, static_cast<uint32_t>(word.size())}};
        const uint64_t hash = uint64_t{w / 2} * 0x9E3779B97F4A7C15ULL;
        if (shared.find(word, hash, f)) {
          agreed[who] = agreed[who] && f.count == 1 && f.ids[0] == w && f.spans == nullptr;
        } else {
          agreed[who] = agreed[who] && round == 0 && shared.keep(word, hash, token, 1, true);
        }
      }
    }
  };
  std::thread other(work, 1);
  work(0);
  other.join();
  check(agreed[0] && agreed[1] && shared.size() == 2000,
        "threads keeping and finding at once agree on every word");
}

// Words merged once and then found in the word cache give the same spans: a byte-level model's
// long piece (ids kept, spans from the tokens' lengths) and a word with an unknown character in
// a model over characters (spans kept).
void test_models_find_what_they_kept() {
  const tokenmill::BPEModel bytes = byte_model();
  const std::string piece = "xabcdaaaaaaaaab\x01\x02\x03 abcd bc aaaa zz aab cd";  // 41 bytes
  std::vector<tokenmill::TokenSpan> first, again;
  bytes.encode_word(piece, first);
  bytes.encode_word(piece, again);
  bool same = first.size() == again.size() && first.back().end == piece.size();
  for (std::size_t k = 0; same && k < first.size(); ++k) {
    same = first[k].id == again[k].id && first[k].start == again[k].start &&
           first[k].end == again[k].end;
  }
  check(same, "a long piece found in the word cache has its merged spans");
  // Short pieces of 4, 5, 8 and 9 tokens (bytes that merge with nothing), met twice: the ids
  // path and the spans path give the merged tokens both times (5-8 from an entry of packed ids,
  // 9 merged again).
  const std::string text = "zzzz" "zzzzz" "zzzzzzzz" "zzzzzzzzz";
  const uint32_t bounds[] = {0, 4, 4, 9, 9, 17, 17, 26};
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<uint32_t> ids;
    bytes.encode_pieces_ids(text, bounds, 4, ids);
    bool ok = ids.size() == 26;
    for (std::size_t k = 0; ok && k < ids.size(); ++k) ok = ids[k] == uint32_t{'z'};
    check(ok, "short pieces of 4-9 tokens give their ids, new and found");
    for (std::size_t p = 0; p < 4; ++p) {
      std::vector<tokenmill::TokenSpan> spans;
      bytes.encode_word(std::string_view(text).substr(bounds[2 * p], bounds[2 * p + 1] - bounds[2 * p]), spans);
      ok = spans.size() == bounds[2 * p + 1] - bounds[2 * p];
      for (std::size_t k = 0; ok && k < spans.size(); ++k) {
        ok = spans[k].id == uint32_t{'z'} && spans[k].start == k && spans[k].end == k + 1;
      }
      check(ok, "short pieces of 4-9 tokens give their spans, new and found");
    }
  }
  const tokenmill::BPEModel chars = small_model();
  first.clear();
  again.clear();
  chars.encode_word("ab\xE8\xAF\x80" "aab", first);
  chars.encode_word("ab\xE8\xAF\x80" "aab", again);
  same = first.size() == 4 && first.size() == again.size();
  for (std::size_t k = 0; same && k < first.size(); ++k) {
    same = first[k].id == again[k].id && first[k].start == again[k].start &&
           first[k].end == again[k].end;
  }
  check(same && again[1].id == 4 && again[1].start == 2 && again[1].end == 3,
        "a word with an unknown character found in the word cache has its spans");
}

void test_trainer_large_counts_and_errors() {
  tokenmill::BPETrainerOptions opt;
  opt.num_merges = 3;
  opt.end_of_word_marker = "</w>";
  const uint64_t big = uint64_t{1} << 40;
  auto result = tokenmill::train_bpe({"ab", "abc", "\xFF\xFE"}, {big + 1, big, 3}, opt, {});
  check(result.merges.size() == 3, "three merges");
  check(result.merges[0].count == 2 * big + 1, "pair counts do not wrap at 2^32");
  tokenmill::BPETrainerOptions tiny;
  tiny.vocab_size = 2;
  bool threw = false;
  try {
    tokenmill::train_bpe({"abc"}, {1}, tiny, {});
  } catch (const tokenmill::Error&) {
    threw = true;
  }
  check(threw, "vocab_size below the alphabet is an error");
  tokenmill::BPETrainerOptions first;
  first.num_merges = 50;
  first.tie_break = tokenmill::TieBreak::kFirstSeen;
  auto r2 = tokenmill::train_bpe({"", "aaaaaaa", "abababab", "x"}, {1, 2, 3, 4}, first, {});
  check(!r2.merges.empty(), "first-seen training runs over empty and repetitive words");
}

void test_scanners_on_broken_utf8() {
  // Truncated and invalid sequences at every position: pieces stay contiguous and in bounds.
  const std::string samples[] = {"ab \xE4\xB8", "\xF0\x9F\x98", "'\xC5", " \x80\x80 x",
                                 "\r\n \xFF", "a'\xC5\xBF", "\xCC\x81\xCC\x81"};
  for (int p = 0; p < 3; ++p) {
    for (const std::string& s : samples) {
      std::vector<uint32_t> ends;
      tokenmill::pretokenize(static_cast<tokenmill::SplitPattern>(p), s, ends);
      uint32_t prev = 0;
      bool ok = !ends.empty() && ends.back() == s.size();
      for (uint32_t e : ends) {
        ok = ok && e > prev;
        prev = e;
      }
      check(ok, "scanner pieces are contiguous, non-empty and end at the text's end");
    }
  }
}

// Code units in runs of ASCII of every length around the 16- and 32-unit steps, between other
// characters, at each width: the converter against one written a unit at a time.
void test_code_unit_runs_to_utf8() {
  // (bytes after the lead one, each 6 bits of the code point, the highest first)
  auto reference = [](const std::vector<uint32_t>& cps) {
    constexpr unsigned char kLead[4] = {0x00, 0xC0, 0xE0, 0xF0};
    std::string out;
    for (uint32_t c : cps) {
      const int extra = c < 0x80 ? 0 : c < 0x800 ? 1 : c < 0x10000 ? 2 : 3;
      out += static_cast<char>(kLead[extra] | (c >> (6 * extra)));
      for (int k = extra - 1; k >= 0; --k) {
        out += static_cast<char>(0x80 | ((c >> (6 * k)) & 0x3F));
      }
    }
    return out;
  };
  std::mt19937 rng(11);
  const uint32_t others[3][3] = {
      {0xE9, 0xFF, 0x80}, {0xE9, 0x2019, 0x4E2D}, {0xE9, 0x4E2D, 0x1F600}};
  for (int w = 0; w < 3; ++w) {
    const int width = w == 0 ? 1 : w == 1 ? 2 : 4;
    for (int round = 0; round < 300; ++round) {
      std::vector<uint32_t> cps;
      while (cps.size() < 200) {
        const std::size_t run = rng() % 70;
        for (std::size_t k = 0; k < run; ++k) {
          cps.push_back(static_cast<uint32_t>('a' + rng() % 26));
        }
        cps.push_back(others[w][rng() % 3]);
      }
      cps.resize(rng() % cps.size());
      std::string buffer;
      std::string got;
      if (width == 1) {
        std::vector<uint8_t> units(cps.begin(), cps.end());
        got = std::string(tokenmill::utf8_view({units.data(), units.size(), 1}, buffer));
      } else if (width == 2) {
        std::vector<uint16_t> units(cps.begin(), cps.end());
        got = std::string(tokenmill::utf8_view({units.data(), units.size(), 2}, buffer));
      } else {
        got = std::string(tokenmill::utf8_view({cps.data(), cps.size(), 4}, buffer));
      }
      check(got == reference(cps), "runs of ASCII between other characters");
    }
  }
}

// Code units of each width -> UTF-8, exactly: ASCII blocks of 16 and the characters between
// them, a text ending inside a block, and a lone surrogate refused with its position.
void test_code_units_to_utf8() {
  // A fresh buffer for each case, so the sanitizers see any write past what a case needs.
  auto convert = [](const tokenmill::TextRef& text) {
    std::string buffer;
    return std::string(tokenmill::utf8_view(text, buffer));
  };
  std::string ascii = "0123456789abcdef0123456789abcdefXYZ";  // two blocks and a tail
  std::vector<uint8_t> latin(ascii.begin(), ascii.end());
  latin[20] = 0xE9;  // é inside the second block
  std::string expected = ascii.substr(0, 20) + "\xC3\xA9" + ascii.substr(21);
  check(convert({latin.data(), latin.size(), 1}) == expected, "Latin-1");
  std::vector<uint16_t> ucs2(ascii.begin(), ascii.end());
  ucs2[3] = 0x4E2D;   // 中
  ucs2[33] = 0x07FF;  // the last two-byte character, in the tail
  expected = ascii.substr(0, 3) + "\xE4\xB8\xAD" + ascii.substr(4, 29) + "\xDF\xBF" +
             ascii.substr(34);
  check(convert({ucs2.data(), ucs2.size(), 2}) == expected, "UCS-2");
  std::vector<uint32_t> ucs4(ascii.begin(), ascii.end());
  ucs4[16] = 0x1F600;  // 😀, first of the second block
  ucs4[34] = 0x80;
  expected = ascii.substr(0, 16) + "\xF0\x9F\x98\x80" + ascii.substr(17, 17) + "\xC2\x80";
  check(convert({ucs4.data(), ucs4.size(), 4}) == expected, "UCS-4");
  std::string kept;
  check(tokenmill::utf8_view({ascii.data(), ascii.size(), 0}, kept).data() == ascii.data(),
        "UTF-8 is read in place");
  // Blocks of other characters only (16, then 17: one more in the tail), after an ASCII unit:
  // nothing read or written past them.
  for (std::size_t n : {std::size_t{16}, std::size_t{17}, std::size_t{33}}) {
    std::vector<uint16_t> cjk(n, 0x4E2D);
    cjk[0] = 'a';
    std::string chinese = "a";
    for (std::size_t k = 1; k < n; ++k) chinese += "\xE4\xB8\xAD";
    check(convert({cjk.data(), cjk.size(), 2}) == chinese, "blocks of CJK");
  }
  // A lone surrogate is refused at its position: in a block with a few other characters, in a
  // block of many, in the tail, in UCS-4.
  auto refused_at = [&](const tokenmill::TextRef& text, std::size_t at) {
    try {
      convert(text);
    } catch (const tokenmill::SurrogateError& e) {
      return std::string(e.what()).find("character " + std::to_string(at) + " ") !=
             std::string::npos;
    }
    return false;
  };
  std::vector<uint16_t> few(ucs2);
  few[30] = 0xDC00;
  check(refused_at({few.data(), few.size(), 2}, 30), "a surrogate among ASCII");
  std::vector<uint16_t> many(40, 0x4E2D);
  many[7] = 0xD800;
  check(refused_at({many.data(), many.size(), 2}, 7), "a surrogate among CJK");
  std::vector<uint16_t> tail(ucs2);
  tail[34] = 0xDBFF;
  check(refused_at({tail.data(), tail.size(), 2}, 34), "a surrogate in the tail");
  std::vector<uint32_t> wide(ucs4);
  wide[5] = 0xDFFF;
  check(refused_at({wide.data(), wide.size(), 4}, 5), "a surrogate in UCS-4");
}

// StringMap against std::map: keys of every length around the 8 bytes that sit in a slot, with
// zero bytes inside and at the end (a key and the same key with a zero after it are two keys),
// bytes of 0x80 and over, a table grown from empty, lookups of keys never inserted.
void test_string_map_matches_a_map() {
  std::mt19937 rng(7);
  auto random_key = [&](std::size_t len) {
    std::string key(len, '\0');
    for (char& c : key) {
      const auto r = rng() % 6;
      c = r == 0 ? '\0' : r == 1 ? static_cast<char>(0x80 + rng() % 128)
                                  : static_cast<char>('a' + rng() % 3);
    }
    return key;
  };
  tokenmill::StringMap map;  // no reserve: grows from empty
  std::map<std::string, uint32_t> want;
  std::vector<std::string> keys;
  for (uint32_t v = 0; v < 3000; ++v) {
    const std::string key = random_key(rng() % 21);
    const bool fresh = want.emplace(key, v).second;
    check(map.insert(key, v) == fresh, "insert says whether the key is new");
    keys.push_back(key);
    if (key.size() < 20) keys.push_back(key + std::string(1, '\0'));
    if (!key.empty()) keys.push_back(key.substr(0, key.size() - 1));
  }
  check(map.size() == want.size(), "one entry a distinct key");
  for (std::size_t k = 0; k < 2000; ++k) keys.push_back(random_key(rng() % 21));
  for (const std::string& key : keys) {
    uint32_t got = ~uint32_t{0};
    const auto it = want.find(key);
    const bool found = map.find(key, got);
    check(found == (it != want.end()), "found exactly the keys inserted");
    if (found && it != want.end()) check(got == it->second, "the first value given is kept");
  }
  std::size_t seen = 0;
  map.for_each([&](std::string_view key, uint32_t value) {
    const auto it = want.find(std::string(key));
    check(it != want.end() && it->second == value, "for_each gives each key and its value");
    ++seen;
  });
  check(seen == want.size(), "for_each visits every entry once");
}

}  // namespace

// Random bytes (broken UTF-8, halves of "▁", spaces) through every SentencePiece plan, with a
// BPE that cuts at "▁" and a Unigram: every token's span lies inside the text's characters.
void test_spaced_pipelines_on_random_bytes() {
  const std::string mark = "\xE2\x96\x81";
  std::vector<std::string> tokens = {mark, "a", "b", mark + "a", mark + "ab", "<unk>", mark + mark};
  std::vector<uint32_t> ids = {0, 1, 2, 3, 4, 5, 6};
  tokenmill::BPEOptions opt;
  opt.unk_id = 5;
  opt.fuse_unk = true;
  opt.word_mark = mark;
  const tokenmill::BPEModel bpe(tokens, ids, {{0, 1, 3}, {3, 2, 4}, {0, 0, 6}}, opt);
  const tokenmill::UnigramModel unigram(tokens, {-1.0, -2.0, -2.0, -1.5, -1.0, 0.0, -0.5},
                                        {1, 1, 1, 1, 1, 2, 4}, tokenmill::UnigramOptions{5});
  const tokenmill::SentencePieceNormalizer normalizer("", {"ab"}, {});
  std::mt19937 rng(11);
  const char pieces[][4] = {" ", "a", "b", "\xE2", "\x96", "\x81", "\xE2\x96\x81", "\xFF", "z",
                            "\xE8\xAF\x80"};
  bool inside = true;
  bool same = true;
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    for (std::size_t n = rng() % 24; n > 0; --n) text += pieces[rng() % 10];
    const auto chars = static_cast<uint32_t>(tokenmill::utf8_count(text));
    for (int kind = 0; kind < 8; ++kind) {
      tokenmill::SpacePlan plan;
      plan.normalizer = kind >= 6 ? &normalizer : nullptr;
      plan.prefix = static_cast<tokenmill::SpacePrefix>(kind % 3);
      plan.split = kind % 2 == 1;
      tokenmill::Encoded out;
      tokenmill::Encoded alone;  // ids without offsets
      if (kind % 4 < 2) {
        tokenmill::encode_spaced(bpe, plan, text, out);
        tokenmill::encode_spaced(bpe, plan, text, alone, false);
      } else {
        tokenmill::encode_spaced(unigram, plan, text, out);
        tokenmill::encode_spaced(unigram, plan, text, alone, false);
      }
      for (std::size_t k = 0; k < out.ids.size(); ++k) {
        inside = inside && out.starts[k] <= out.ends[k] && out.ends[k] <= chars;
      }
      same = same && alone.ids == out.ids && alone.starts.empty() && alone.ends.empty();
    }
  }
  check(inside, "spaced pipelines' spans lie inside the text");
  check(same, "spaced pipelines give the same ids without offsets");
}

int main() {
  test_scanners_on_broken_utf8();
  test_utf8_never_reads_past_the_end();
  test_code_units_to_utf8();
  test_code_unit_runs_to_utf8();
  test_encode_hostile_words();
  test_backtracking_reads_inside_the_piece();
  test_word_cache();
  test_models_find_what_they_kept();
  test_trainer_large_counts_and_errors();
  test_string_map_matches_a_map();
  test_spaced_pipelines_on_random_bytes();
  if (failures == 0) std::printf("core tests: all passed\n");
  return failures == 0 ? 0 : 1;
}
