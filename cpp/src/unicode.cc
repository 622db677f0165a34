#include "tokenmill/unicode.h"

namespace tokenmill {
namespace uc {

// Defines kUnicodeStage1 and kUnicodeStage2 (declared in the header) and kUnicodeSource.
#include "unicode_tables.inc"

const char* table_source() { return kUnicodeSource; }

const uint32_t* newer_ranges(std::size_t& count) {
  count = kNewerRangeCount;
  return kNewerRanges;
}

}  // namespace uc
}  // namespace tokenmill
