#include "device_server/module_cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "base/content_hash.h"

namespace remex::server {
namespace module_cache_test {

const kernels::KernelRegistry& Registry() {
  static const auto registry = kernels::CreateCpuRegistry();
  return **registry;
}

// An executable with one Relu function and `constant_floats` floats of constants.
std::shared_ptr<const vm::Executable> MakeExecutable(size_t constant_floats) {
  vm::ExecutableDef def;
  def.producer = "module_cache_test";
  vm::ConstantDef c;
  c.dtype = DType::kFloat32;
  c.shape = {static_cast<int64_t>(constant_floats)};
  c.data.resize(constant_floats * 4);
  def.constants.push_back(std::move(c));
  def.kernels.push_back({"Relu", {}, 1, 1, "relu"});
  vm::FunctionDef fn;
  fn.name = "main";
  fn.inputs = {{"x", DType::kFloat32, {4}, {}}};
  fn.outputs = {{"y", DType::kFloat32, {4}, {}}};
  fn.num_registers = 2;
  fn.code = {{vm::Opcode::kAllocOutput, {1, 0, 1, -1}, {{4}}},
             {vm::Opcode::kInvokeKernel, {0}, {{0}, {1}}},
             {vm::Opcode::kRet, {}, {{1}}}};
  def.functions.push_back(std::move(fn));
  auto exe = vm::Executable::FromDef(std::move(def), Registry());
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  return *exe;
}

TEST(ModuleCacheTest, FindsInsertedAndEvictsLeastRecentlyUsed) {
  ModuleCache cache(10000);
  auto a = MakeExecutable(500);  // 2000 constant bytes + 1000 file bytes
  auto b = MakeExecutable(500);
  auto c = MakeExecutable(500);
  EXPECT_EQ(cache.Insert("a", a, 1000), a);
  EXPECT_EQ(cache.Insert("b", b, 1000), b);
  EXPECT_EQ(cache.Find("a").exe, a);  // a is now the most recent
  EXPECT_EQ(cache.Find("a").file_bytes, 1000u);
  EXPECT_EQ(cache.stats().bytes, 6000u);
  EXPECT_EQ(cache.Insert("c", c, 1000), c);  // 9000: still fits
  auto d = MakeExecutable(500);
  cache.Insert("d", d, 1000);                // over: b (least recent) goes
  EXPECT_EQ(cache.Find("b").exe, nullptr);
  EXPECT_EQ(cache.Find("a").exe, a);
  EXPECT_EQ(cache.Find("c").exe, c);
  EXPECT_EQ(cache.Find("d").exe, d);
  auto s = cache.stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_LE(s.bytes, 10000u);
  // An evicted executable still held elsewhere stays alive.
  EXPECT_EQ(b->def().functions[0].name, "main");
  // Inserting a hash that is cached returns the cached executable.
  EXPECT_EQ(cache.Insert("a", MakeExecutable(500), 1000), a);
  // Larger than the whole capacity: returned, not cached.
  auto huge = MakeExecutable(5000);
  EXPECT_EQ(cache.Insert("huge", huge, 1000), huge);
  EXPECT_EQ(cache.Find("huge").exe, nullptr);
  // A zero capacity caches nothing.
  ModuleCache none(0);
  none.Insert("a", a, 1000);
  EXPECT_EQ(none.Find("a").exe, nullptr);
}

TEST(ContentHashTest, IsLowerCaseHexXxh128) {
  std::vector<std::byte> empty;
  // xxh128sum of the empty input.
  EXPECT_EQ(remex::ContentHash(empty), "99aa06d3014798d86001c324468d497f");
  std::string abc = "abc";
  auto h = remex::ContentHash(std::as_bytes(std::span(abc)));
  EXPECT_TRUE(remex::IsContentHash(h));
  EXPECT_NE(h, remex::ContentHash(empty));
  EXPECT_FALSE(remex::IsContentHash("99AA06D3014798D86001C324468D497F"));
  EXPECT_FALSE(remex::IsContentHash("99aa06d3"));
}

}  // namespace module_cache_test
}  // namespace remex::server
