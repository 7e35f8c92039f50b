// Text from the wire or a file made safe to quote in messages.
#pragma once

#include <string>
#include <string_view>

namespace remex {

// `text` as valid UTF-8 for a message that quotes bytes from the wire or a file (a
// module's function or node names, a client's strings): each byte that is not part of
// a well-formed UTF-8 sequence (RFC 3629: no overlong forms, surrogates or code points
// past U+10FFFF), and each NUL, becomes the four characters \xNN (upper-case hex).
// Valid UTF-8 without NUL comes back unchanged.
std::string EscapeInvalidUtf8(std::string_view text);

}  // namespace remex
