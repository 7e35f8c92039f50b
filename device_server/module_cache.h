// The server-wide module cache: parsed and verified executables keyed by content hash
// (base/content_hash.h), shared by every session, so that a client that has loaded an
// executable once (in any session) can skip the upload next time (moduleHas).
//
// Bounded in bytes: an entry costs its .rmx size plus its decompressed constant bytes.
// When an insert goes over the bound, the least recently used entries are dropped.
// Entries are shared_ptrs: a module a session holds by handle stays alive after it
// leaves the cache. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "vm/executable.h"

namespace remex::server {

struct ModuleCacheStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t capacity_bytes = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
};

struct CachedModule {
  std::shared_ptr<const vm::Executable> exe;  // nullptr: not cached
  uint64_t file_bytes = 0;                    // size of its .rmx file
};

class ModuleCache {
 public:
  explicit ModuleCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // The executable with content hash `hash`, marked most recently used; exe is nullptr
  // when it is not cached.
  CachedModule Find(const std::string& hash);

  // Caches `exe` (whose .rmx file had `file_bytes` bytes) under `hash` and returns the
  // cached executable: `exe`, or the one already cached under `hash`. Evicts least
  // recently used entries to stay within the capacity; an executable larger than the
  // whole capacity is returned but not kept.
  std::shared_ptr<const vm::Executable> Insert(const std::string& hash, std::shared_ptr<const vm::Executable> exe,
                                               uint64_t file_bytes);

  ModuleCacheStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const vm::Executable> exe;
    uint64_t file_bytes = 0;
    uint64_t bytes = 0;  // file_bytes + constant bytes
    std::list<std::string>::iterator lru;  // position in lru_
  };

  const uint64_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // most recently used first
  ModuleCacheStats stats_;
};

}  // namespace remex::server
