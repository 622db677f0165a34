#include "tokenmill/sp_encode.h"

#include <algorithm>
#include <string>

#include "tokenmill/error.h"
#include "tokenmill/utf8.h"

namespace tokenmill {

namespace {

constexpr std::string_view kMark = "\xE2\x96\x81";  // "▁"

// A thread's buffers, kept from text to text (threads live on in the encoding pool).
struct Scratch {
  std::string text;              // the text as the model reads it
  std::vector<uint32_t> starts;  // for each of its characters, the characters of the input
  std::vector<uint32_t> ends;    // it came from: [starts[i], ends[i])
  std::vector<TokenSpan> spans;  // the model's tokens, in characters of `text`
  void trim() {
    // (a text's buffers are kept by its length: without offsets, starts stays empty)
    if (starts.capacity() > kScratchKept || text.capacity() > kScratchKept) {
      std::string().swap(text);
      std::vector<uint32_t>().swap(starts);
      std::vector<uint32_t>().swap(ends);
    }
    if (spans.capacity() > kScratchKept) std::vector<TokenSpan>().swap(spans);
  }
};

thread_local Scratch scratch;

// Each " " spelled "▁", one character for one, and the prefix the plan asks for.
void spell_spaces(std::string_view text, SpacePrefix prefix, Scratch& s, bool offsets) {
  s.text.clear();
  s.starts.clear();
  s.ends.clear();
  if (text.empty()) return;
  s.text.reserve(text.size() + 2 * std::count(text.begin(), text.end(), ' ') + kMark.size());
  const bool spaced = text.front() == ' ' || text.substr(0, kMark.size()) == kMark;
  const bool prefixed =
      prefix == SpacePrefix::kAlways || (prefix == SpacePrefix::kUnlessSpaced && !spaced);
  if (prefixed) s.text.append(kMark.data(), kMark.size());
  for (char c : text) {  // (a space is one byte: no character holds one inside it)
    if (c == ' ') {
      s.text.append(kMark.data(), kMark.size());
    } else {
      s.text.push_back(c);
    }
  }
  if (!offsets) return;
  // Each spelled character comes from one character of text (the prefix from the first).
  const std::size_t chars = utf8_count(text);
  s.starts.reserve(chars + 1);
  s.ends.reserve(chars + 1);
  if (prefixed) {
    s.starts.push_back(0);
    s.ends.push_back(1);
  }
  for (uint32_t c = 0; c < chars; ++c) {
    s.starts.push_back(c);
    s.ends.push_back(c + 1);
  }
}

// The model's tokens of s.text: whole, or cut before every "▁".
template <class Model>
void merge(const Model& model, bool split, Scratch& s) {
  s.spans.clear();
  if (!split) {
    model.encode_word(s.text, s.spans);
    return;
  }
  const std::string_view text = s.text;
  auto at_mark = [text](std::size_t i) { return text.compare(i, kMark.size(), kMark) == 0; };
  encode_in_parts(text, at_mark, [&model](std::string_view part, std::vector<TokenSpan>& spans) {
    model.encode_word(part, spans);
  }, s.spans);
}

}  // namespace

template <class Model>
void encode_spaced(const Model& model, const SpacePlan& plan, std::string_view text,
                   Encoded& out, bool offsets) {
  Scratch& s = scratch;
  struct Trimmed {  // (a huge text's buffers given back, an exception too)
    Scratch& s;
    ~Trimmed() { s.trim(); }
  } trimmed{s};
  if (plan.normalizer != nullptr) {
    plan.normalizer->normalize(text, s.text, s.starts, s.ends, offsets);
  } else {
    spell_spaces(text, plan.prefix, s, offsets);
  }
  // (the models count a word's bytes and characters in 32 bits)
  if (s.text.size() >= (uint64_t{1} << 32)) throw Error("text is 4 GiB or longer as spelled");
  merge(model, plan.split, s);
  if (!offsets) {
    out.ids.resize(s.spans.size());
    for (std::size_t k = 0; k < s.spans.size(); ++k) out.ids[k] = s.spans[k].id;
    out.starts.clear();
    out.ends.clear();
    return;
  }
  const std::size_t n = s.starts.size();
  out.ids.resize(s.spans.size());
  out.starts.resize(s.spans.size());
  out.ends.resize(s.spans.size());
  for (std::size_t k = 0; k < s.spans.size(); ++k) {
    const TokenSpan& t = s.spans[k];
    if (t.start > t.end || t.end > n) throw Error("a token's span runs past its text");
    uint32_t start = 0;
    uint32_t end = 0;
    if (t.end > t.start) {
      start = s.starts[t.start];
      end = s.ends[t.end - 1];
    } else if (t.start < n) {  // an empty token sits where the next character starts
      start = s.starts[t.start];
      end = t.start > 0 ? std::max(start, s.ends[t.start - 1]) : start;
    } else {  // (or where the last one ends)
      start = end = n > 0 ? s.ends[n - 1] : 0;
    }
    out.ids[k] = t.id;
    out.starts[k] = start;
    out.ends[k] = end;
  }
}

template <class Model>
std::vector<Encoded> encode_spaced_texts(const Model& model,
                                         const SentencePieceNormalizer* normalizer, bool split,
                                         const std::vector<TextRef>& texts,
                                         const std::vector<uint8_t>& prefixes,
                                         std::size_t threads, bool offsets) {
  if (prefixes.size() != texts.size()) throw Error("one prefix a text is needed");
  for (uint8_t p : prefixes) {
    if (p > static_cast<uint8_t>(SpacePrefix::kUnlessSpaced)) throw Error("unknown prefix");
  }
  std::vector<Encoded> out(texts.size());
  for_text_blocks(texts.size(), threads, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      const SpacePlan plan{normalizer, static_cast<SpacePrefix>(prefixes[t]), split};
      encode_spaced(model, plan, utf8_of(texts[t]), out[t], offsets);
    }
    release_utf8_scratch();
  });
  return out;
}

template void encode_spaced(const BPEModel&, const SpacePlan&, std::string_view, Encoded&,
                            bool);
template void encode_spaced(const UnigramModel&, const SpacePlan&, std::string_view, Encoded&,
                            bool);
template std::vector<Encoded> encode_spaced_texts(const BPEModel&, const SentencePieceNormalizer*,
                                                  bool, const std::vector<TextRef>&,
                                                  const std::vector<uint8_t>&, std::size_t,
                                                  bool);
template std::vector<Encoded> encode_spaced_texts(const UnigramModel&,
                                                  const SentencePieceNormalizer*, bool,
                                                  const std::vector<TextRef>&,
                                                  const std::vector<uint8_t>&, std::size_t,
                                                  bool);

}  // namespace tokenmill
