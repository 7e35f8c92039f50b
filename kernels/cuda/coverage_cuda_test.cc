// Which ops of the CPU device have a CUDA kernel: registration needs no GPU, so this
// runs everywhere. The op table (kernels/ops/ops.def) says it per entry (kCpuCuda or
// kCpuOnly, with why in a comment), and RegisterCudaKernels fails when the kernels
// differ from it: a new op without a CUDA kernel fails until it is given one or its row
// says kCpuOnly.
//
// In an emulation build (REMEX_CUDA_EMULATION) it also checks that every __global__
// kernel of kernels/cuda/*.cu and kernels/ops/*/cuda/*.cu ran at least once in the suite: the other cuda-emu
// tests append the kernels they launched to REMEX_CUDA_EMULATION_TRACE (CTest runs them first: they are this
// test's fixture setup, after a reset of the file).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "kernels/op_table.h"
#include "tests/built_path.h"

namespace remex::kernels {
namespace {

// Per versioned entry (kernels are keyed by (op, entry, device)): "Resize-10", ...
TEST(CudaCoverage, EveryCpuOpHasACudaKernelExceptTheTablesCpuOnlyRows) {
  auto registry = CreateCpuRegistry();
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  const Status registered = RegisterCudaKernels(**registry);
  ASSERT_TRUE(registered.ok()) << registered.ToString();
  std::set<std::string> cpu_only_rows;
  for (const internal::OpRow& row : internal::OpTable()) {
    if (row.devices == internal::OpDevices::kCpuOnly) {
      cpu_only_rows.insert(std::string(row.op) + "-" + std::to_string(row.since_version));
    }
  }
  std::set<std::string> missing;
  int entries = 0;
  for (const std::string& op : (*registry)->OpNames()) {
    for (const OpDef* def : (*registry)->OpVersions(op)) {
      ++entries;
      const int v = def->since_version;
      if ((*registry)->FindKernel(op, v, DeviceKind::kCpu) && !(*registry)->FindKernel(op, v, DeviceKind::kCuda)) {
        missing.insert(op + "-" + std::to_string(v));
      }
    }
  }
  EXPECT_GT(entries, static_cast<int>((*registry)->OpNames().size()));
  EXPECT_EQ(missing, cpu_only_rows);
  // Every op has a CUDA kernel (FusedAttention, the last without one, since 2026-12-07).
  EXPECT_EQ(cpu_only_rows, std::set<std::string>{});
}

#if defined(REMEX_CUDA_EMULATION)
TEST(CudaCoverage, EveryCudaKernelRanUnderEmulation) {
  const char* trace_path = std::getenv("REMEX_CUDA_EMULATION_TRACE");
  ASSERT_TRUE(trace_path && *trace_path)
      << "REMEX_CUDA_EMULATION_TRACE is not set: run this test through ctest";
  std::set<std::string> ran;
  std::ifstream trace(trace_path);
  for (std::string line; std::getline(trace, line);) {
    if (!line.empty()) ran.insert(line);
  }
  std::set<std::string> kernels;
  const std::regex global(R"(__global__\s+void\s+(\w+)\s*\()");
  const std::string source_dir = ::remex::testing::BuiltPath(REMEX_CUDA_SOURCE_DIR_BUILT);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(source_dir)) {
    if (entry.path().extension() != ".cu") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string source = text.str();
    for (std::sregex_iterator it(source.begin(), source.end(), global), end; it != end; ++it) {
      kernels.insert((*it)[1].str());
    }
  }
  ASSERT_GT(kernels.size(), 30u) << "found too few kernels in " << source_dir;
  std::set<std::string> never;
  for (const std::string& k : kernels) {
    if (!ran.count(k)) never.insert(k);
  }
  std::string list;
  for (const std::string& k : never) list += " " + k;
  EXPECT_TRUE(never.empty()) << never.size() << " of " << kernels.size()
                             << " CUDA kernels never ran:" << list;
}
#endif

}  // namespace
}  // namespace remex::kernels
