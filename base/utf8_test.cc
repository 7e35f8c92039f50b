// EscapeInvalidUtf8: messages that quote untrusted bytes stay valid UTF-8.
#include "base/utf8.h"

#include <gtest/gtest.h>

namespace remex {
namespace utf8_test {

TEST(EscapeInvalidUtf8Test, ValidUtf8IsUnchanged) {
  const std::string text = "plain ASCII, caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80, \xF4\x8F\xBF\xBF, tab\tnewline\n";
  EXPECT_EQ(EscapeInvalidUtf8(text), text);
  EXPECT_EQ(EscapeInvalidUtf8(""), "");
}

TEST(EscapeInvalidUtf8Test, EachBadByteBecomesHex) {
  // Latin-1, a lone continuation byte, NUL, bytes that never occur.
  EXPECT_EQ(EscapeInvalidUtf8("caf\xE9"), "caf\\xE9");
  EXPECT_EQ(EscapeInvalidUtf8("\x80x"), "\\x80x");
  EXPECT_EQ(EscapeInvalidUtf8(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeInvalidUtf8("\xFE\xFF"), "\\xFE\\xFF");
  // Overlong forms, a surrogate, past U+10FFFF: each byte escaped, then decoding resumes.
  EXPECT_EQ(EscapeInvalidUtf8("\xC0\xAF"), "\\xC0\\xAF");
  EXPECT_EQ(EscapeInvalidUtf8("\xE0\x80\xAF"), "\\xE0\\x80\\xAF");
  EXPECT_EQ(EscapeInvalidUtf8("\xED\xA0\x80"), "\\xED\\xA0\\x80");
  EXPECT_EQ(EscapeInvalidUtf8("\xF4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");
  // A sequence cut short, at the end or by an ASCII byte.
  EXPECT_EQ(EscapeInvalidUtf8("\xE2\x82"), "\\xE2\\x82");
  EXPECT_EQ(EscapeInvalidUtf8("\xE2\x82z\xE2\x82\xAC"), "\\xE2\\x82z\xE2\x82\xAC");
}

}  // namespace utf8_test
}  // namespace remex
