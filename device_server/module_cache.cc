#include "device_server/module_cache.h"

namespace remex::server {

CachedModule ModuleCache::Find(const std::string& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(hash);
  if (it == entries_.end()) {
    stats_.misses++;
    return {};
  }
  stats_.hits++;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return {it->second.exe, it->second.file_bytes};
}

std::shared_ptr<const vm::Executable> ModuleCache::Insert(const std::string& hash,
                                                          std::shared_ptr<const vm::Executable> exe,
                                                          uint64_t file_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(hash);
  if (it != entries_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.exe;
  }
  uint64_t bytes = file_bytes + exe->constant_bytes();
  if (bytes > capacity_) return exe;
  while (stats_.bytes + bytes > capacity_ && !lru_.empty()) {
    auto victim = entries_.find(lru_.back());
    stats_.bytes -= victim->second.bytes;
    entries_.erase(victim);
    lru_.pop_back();
    stats_.evictions++;
  }
  lru_.push_front(hash);
  entries_.emplace(hash, Entry{exe, file_bytes, bytes, lru_.begin()});
  stats_.bytes += bytes;
  return exe;
}

ModuleCacheStats ModuleCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ModuleCacheStats s = stats_;
  s.entries = entries_.size();
  s.capacity_bytes = capacity_;
  return s;
}

}  // namespace remex::server
