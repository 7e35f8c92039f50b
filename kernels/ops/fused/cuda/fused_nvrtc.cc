// FusedElementwise on CUDA: NVRTC compilation and the process-wide PTX cache
// (fused_nvrtc.h).

#include "kernels/ops/fused/cuda/fused_nvrtc.h"

#include <nvrtc.h>

#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace remex::kernels::cuda {
namespace {

Status NvrtcError(std::string_view call, nvrtcResult r) {
  return Internal("FusedElementwise on cuda: " + std::string(call) + " failed: " + nvrtcGetErrorString(r));
}

// Destroys the program on every path.
struct ProgramGuard {
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program) nvrtcDestroyProgram(&program);
  }
};

struct CacheKey {
  std::string source;
  int arch = 0;
  bool operator==(const CacheKey& o) const { return arch == o.arch && source == o.source; }
};

struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const { return std::hash<std::string>()(k.source) ^ static_cast<size_t>(k.arch); }
};

struct PtxCache {
  std::mutex mu;
  std::unordered_map<CacheKey, std::shared_ptr<const std::string>, CacheKeyHash> entries;
};

PtxCache& Cache() {
  static PtxCache* cache = new PtxCache();  // Never destroyed: used until exit.
  return *cache;
}

}  // namespace

StatusOr<int> FusedTargetArch(int arch) {
  int count = 0;
  if (nvrtcResult r = nvrtcGetNumSupportedArchs(&count); r != NVRTC_SUCCESS) {
    return NvrtcError("nvrtcGetNumSupportedArchs", r);
  }
  std::vector<int> archs(static_cast<size_t>(count));
  if (count > 0) {
    if (nvrtcResult r = nvrtcGetSupportedArchs(archs.data()); r != NVRTC_SUCCESS) {
      return NvrtcError("nvrtcGetSupportedArchs", r);
    }
  }
  int best = 0;
  for (int a : archs) {
    if (a <= arch && a > best) best = a;
  }
  if (best == 0) {
    return Unimplemented("FusedElementwise on cuda: NVRTC targets no architecture at or below compute_" +
                         std::to_string(arch));
  }
  return best;
}

StatusOr<std::string> CompileFusedKernelToPtx(const std::string& source, int arch) {
  ProgramGuard guard;
  if (nvrtcResult r = nvrtcCreateProgram(&guard.program, source.c_str(), "remex_fused.cu", 0, nullptr, nullptr);
      r != NVRTC_SUCCESS) {
    return NvrtcError("nvrtcCreateProgram", r);
  }
  const std::string arch_flag = "--gpu-architecture=compute_" + std::to_string(arch);
  const char* options[] = {arch_flag.c_str(), "--std=c++17", "--fmad=false"};
  const nvrtcResult compiled = nvrtcCompileProgram(guard.program, 3, options);
  if (compiled != NVRTC_SUCCESS) {
    size_t size = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(guard.program, &size) == NVRTC_SUCCESS && size > 1) {
      log.resize(size);
      if (nvrtcGetProgramLog(guard.program, log.data()) != NVRTC_SUCCESS) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    return Internal("FusedElementwise on cuda: NVRTC failed to compile the generated kernel for compute_" +
                    std::to_string(arch) + ": " + nvrtcGetErrorString(compiled) + (log.empty() ? "" : ":\n" + log));
  }
  size_t size = 0;
  if (nvrtcResult r = nvrtcGetPTXSize(guard.program, &size); r != NVRTC_SUCCESS) {
    return NvrtcError("nvrtcGetPTXSize", r);
  }
  std::string ptx(size, '\0');
  if (nvrtcResult r = nvrtcGetPTX(guard.program, ptx.data()); r != NVRTC_SUCCESS) return NvrtcError("nvrtcGetPTX", r);
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

StatusOr<std::shared_ptr<const std::string>> CachedFusedKernelPtx(const std::string& source, int arch) {
  PtxCache& cache = Cache();
  CacheKey key{source, arch};
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.entries.find(key);
    if (it != cache.entries.end()) return it->second;
  }
  // Compiled outside the lock; a concurrent compile of the same source wastes time only.
  REMEX_ASSIGN_OR_RETURN(std::string ptx, CompileFusedKernelToPtx(source, arch));
  auto entry = std::make_shared<const std::string>(std::move(ptx));
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.entries.emplace(std::move(key), std::move(entry)).first->second;
}

size_t FusedPtxCacheEntries() {
  PtxCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.entries.size();
}

}  // namespace remex::kernels::cuda
