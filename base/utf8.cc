#include "base/utf8.h"

namespace remex {

std::string EscapeInvalidUtf8(std::string_view text) {
  // Length of the well-formed sequence starting at text[i], or 0 (RFC 3629, table 3-7 of
  // the Unicode standard: the second byte's range depends on the first).
  auto sequence_at = [&](size_t i) -> size_t {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = b(i);
    if (c >= 0x01 && c <= 0x7F) return 1;
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return 0;  // NUL, a continuation byte, C0, C1, F5..FF
    }
    if (i + n > text.size()) return 0;
    if (b(i + 1) < lo || b(i + 1) > hi) return 0;
    for (size_t k = 2; k < n; ++k) {
      if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
    }
    return n;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (const size_t n = sequence_at(i)) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    static constexpr char kHex[] = "0123456789ABCDEF";
    const auto c = static_cast<unsigned char>(text[i++]);
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xF];
  }
  return out;
}

}  // namespace remex
