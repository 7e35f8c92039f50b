#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace remex {

void AdviseHugePages(void* data, size_t bytes) {
  if (data == nullptr || bytes < kHugePageMinBytes) return;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t last = (begin + bytes) / kHugePageBytes * kHugePageBytes;
  if (last <= first) return;
#ifdef MADV_HUGEPAGE
  // EINVAL where transparent huge pages are not built in: the pages stay small.
  (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
}

}  // namespace remex
