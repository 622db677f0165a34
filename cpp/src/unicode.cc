#include "tokenmill/unicode.h"

namespace tokenmill {
namespace uc {

// Defines kUnicodeStage1 and kUnicodeStage2 (declared in the header) and kUnicodeSource.
#include "unicode_tables.inc"

const char* table_source() { return kUnicodeSource; }

}  // namespace uc
}  // namespace tokenmill
