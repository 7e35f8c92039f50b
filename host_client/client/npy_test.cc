#include "host_client/client/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>


namespace remex::npy {
namespace {

Array Floats(Shape shape, std::vector<float> v) {
  Array a;
  a.dtype = DType::kFloat32;
  a.shape = std::move(shape);
  a.data.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

TEST(NpyTest, RoundTripKeepsDtypeShapeAndBytes) {
  for (Shape shape : {Shape{}, Shape{3}, Shape{2, 3}, Shape{0, 4}}) {
    std::vector<float> v(*NumElements(shape));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 0.25f;
    Array a = Floats(shape, v);
    auto bytes = Serialize(a);
    EXPECT_EQ((bytes.size() - a.data.size()) % 64, 0u);  // header padded to 64 bytes
    auto b = Parse(bytes);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(b->dtype, DType::kFloat32);
    EXPECT_EQ(b->shape, shape);
    EXPECT_EQ(b->data, a.data);
  }
}

TEST(NpyTest, RejectsMalformedFiles) {
  auto bytes = Serialize(Floats({2}, {1, 2}));
  std::vector<std::byte> bad_magic = bytes;
  bad_magic[1] = std::byte{'X'};
  EXPECT_EQ(Parse(bad_magic).status().code(), StatusCode::kInvalidArgument);
  std::vector<std::byte> short_payload(bytes.begin(), bytes.end() - 1);
  EXPECT_EQ(Parse(short_payload).status().code(), StatusCode::kInvalidArgument);
  std::string header = std::string("\x93NUMPY\x01\x00", 8);
  std::string dict = "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }";
  header += static_cast<char>(dict.size());
  header += '\0';
  header += dict;
  header += std::string(4, '\0');
  std::vector<std::byte> fortran(header.size());
  std::memcpy(fortran.data(), header.data(), header.size());
  EXPECT_EQ(Parse(fortran).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace remex::npy
