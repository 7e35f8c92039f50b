// Transparent huge pages for large host buffers.
//
// Linux maps anonymous memory in 4 KiB pages, and the first touch of each page is a
// page fault. Under a hypervisor that traps them a fault costs far more than the copy
// it precedes (about 13 us a page on the 2-core VM of docs/benchmarks.md: 0.32 GB/s for
// the first touch of a fresh 256 MiB buffer, against 11.6 GB/s with huge pages). A
// range marked MADV_HUGEPAGE is mapped in 2 MiB pages where the kernel's transparent
// huge pages are in "madvise" mode (Debian's default) or "always": 512 times fewer
// faults. See the kernel's admin-guide/mm/transhuge documentation.
#pragma once

#include <cstddef>

namespace remex {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// Buffers below this size are left to 4 KiB pages: too few faults to matter.
inline constexpr size_t kHugePageMinBytes = size_t{4} << 20;

// Asks the kernel to back the whole 2 MiB pages inside [data, data + bytes) with huge
// pages on first touch. Advice only: does nothing for a range under kHugePageMinBytes,
// on a kernel without transparent huge pages or where they are off, and never fails.
// Call it before the range is first written (pages already touched stay small until
// the kernel's background collapse, if ever).
void AdviseHugePages(void* data, size_t bytes);

}  // namespace remex
