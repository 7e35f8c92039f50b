# Writes the text of INPUT to OUTPUT as a C++ raw string literal, to be #included as an
# expression: cmake -DINPUT=<file> -DOUTPUT=<file> -P EmbedText.cmake. Lines starting
# with #pragma once or #include are left out, so that the text compiles where it is
# pasted (kernels/scalar_ops.h ahead of an NVRTC kernel, which has no include path).
file(READ "${INPUT}" text)
string(REGEX REPLACE "(^|\n)#(pragma once|include)[^\n]*" "\\1" text "${text}")
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by cmake/EmbedText.cmake; do not edit.\nR\"remex_embedded(${text})remex_embedded\"\n")
