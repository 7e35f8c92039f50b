# Writes the bytes of INPUT to OUTPUT as a C++ source defining `const unsigned char
# NAME[]` (the bytes, then a terminating NUL) and `const size_t NAMESize` (their count,
# without the NUL) in namespace remex::embedded: cmake -DINPUT=<file> -DOUTPUT=<file> -DNAME=<id>
# -P EmbedBytes.cmake. With -DFORBID=<text>, fails when the bytes contain that text,
# ignoring case (e.g. "</script", for a script inlined into HTML).
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
if(hex_length EQUAL 0)
  message(FATAL_ERROR "EmbedBytes: ${INPUT} is empty")
endif()
if(DEFINED FORBID)
  file(READ "${INPUT}" text)
  string(TOLOWER "${text}" text)
  string(TOLOWER "${FORBID}" forbid)
  string(FIND "${text}" "${forbid}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "EmbedBytes: ${INPUT} contains '${FORBID}' at byte ${at}; it cannot be embedded as is")
  endif()
endif()
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){32})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}"
     "// Generated from ${INPUT} by cmake/EmbedBytes.cmake; do not edit.\n#include <cstddef>\n\n"
     "namespace remex::embedded {\nextern const unsigned char ${NAME}[] = {\n${bytes}0};\n"
     "extern const size_t ${NAME}Size = ${size};\n}  // namespace remex::embedded\n")
