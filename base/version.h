// Remex's version and the git commit it was built from (`git rev-parse --short HEAD`,
// "unknown" outside a git checkout). They are defined in one generated file,
// base/version.cc (CMakeLists.txt writes it from base/version.cc.in at configure time,
// and configures again when the checkout's HEAD moves): a new commit then compiles that
// file alone, not every object that names the version.
#pragma once

namespace remex {

extern const char kRemexVersion[];
extern const char kRemexCommit[];

}  // namespace remex
