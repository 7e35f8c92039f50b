// Whether this translation unit is built with AddressSanitizer: REMEX_ASAN is 1 under
// gcc (which defines __SANITIZE_ADDRESS__) and clang (which reports it through
// __has_feature only), 0 otherwise. Code that switches stacks by hand (fibers) must
// tell ASan, or it reports errors that are not there.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define REMEX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REMEX_ASAN 1
#endif
#endif
#ifndef REMEX_ASAN
#define REMEX_ASAN 0
#endif
