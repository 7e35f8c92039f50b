// Differential tests of the NonMaxSuppression, RoiAlign and MaxUnpool CUDA kernels
// (kernels/ops/image/cuda/detection.cc, kernels/ops/nn/cuda/unpool.cc) against the CPU
// kernels: NonMaxSuppression (both box formats, thresholds, ties, several batches and
// classes, nothing selected), RoiAlign (both
// entries and coordinate modes, avg and max, sampling ratios, rois past the image,
// several batches) and MaxUnpool (both entries, 1-D to 3-D, output_shape equal to or
// padding the unpooled shape, repeated indices, float16 / float32 / float64). Outputs
// must match bit for bit; the CUDA-only behaviour of out-of-range indices (zeros,
// skipped) is checked on its own.
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration runs
// everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace {

using testing::Attrs;
using testing::CudaRegistry;
using testing::HostTensor;

TEST(DetCudaRegistration, RegistersEveryEntry) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  for (int v : {10, 11}) EXPECT_TRUE(registry->FindKernel("NonMaxSuppression", v, DeviceKind::kCuda)) << v;
  for (int v : {10, 16}) EXPECT_TRUE(registry->FindKernel("RoiAlign", v, DeviceKind::kCuda)) << v;
  for (int v : {9, 11}) EXPECT_TRUE(registry->FindKernel("MaxUnpool", v, DeviceKind::kCuda)) << v;
}

class DetCudaTest : public testing::CudaStreamTest {
 protected:
  void Check(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs) {
    auto out = testing::RunOnCpuAndCuda(*registry_, op, attrs, inputs, std::nullopt, stream_, 0xCD);
    ASSERT_TRUE(out.ok()) << op << " on cuda: " << out.status().ToString();
    for (size_t i = 0; i < out->cpu.size(); ++i)
      testing::ExpectSameElements(op, out->cpu[i], out->cuda[i].bytes, i, 0);
  }

  // The CUDA kernel's outputs alone (for inputs the CPU kernel refuses).
  std::vector<HostTensor> RunCuda(const std::string& op, const Attributes& attrs,
                                  std::vector<HostTensor> inputs) {
    const OpDef* def = testing::FindVersionedOp(*registry_, op);
    EXPECT_TRUE(def);
    if (!def) return {};
    auto infos = InferShapes(*def, attrs, testing::ShapeArgs(*def, inputs));
    EXPECT_TRUE(infos.ok()) << infos.status().ToString();
    auto kernel = testing::CreateCudaKernel(*registry_, op, attrs);
    if (!infos.ok() || !kernel) return {};
    auto out = testing::RunOnDevice(*kernel, def, inputs, *infos, stream_, 0xCD);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? *std::move(out) : std::vector<HostTensor>{};
  }

  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  HostTensor Floats(Shape shape, float lo, float hi) {
    HostTensor t = HostTensor::Zeros(DType::kFloat32, std::move(shape));
    auto* p = reinterpret_cast<float*>(t.bytes.data());
    std::uniform_real_distribution<float> d(lo, hi);
    for (size_t i = 0; i < t.bytes.size() / 4; ++i) p[i] = d(rng_);
    return t;
  }

  std::mt19937 rng_{20261126};
};

TEST_F(DetCudaTest, NonMaxSuppression) {
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t b = Uniform(1, 3), c = Uniform(1, 4), n = iter == 0 ? 0 : Uniform(1, 40);
    const int64_t center = iter % 2;
    SCOPED_TRACE(std::to_string(iter));
    // Boxes of size 1-4 in a 10x10 field (corners in either order), so that many overlap.
    HostTensor boxes = Floats({b, n, 4}, 0.0f, 10.0f);
    auto* bp = reinterpret_cast<float*>(boxes.bytes.data());
    for (int64_t i = 0; i < b * n; ++i) {
      if (center) {
        bp[4 * i + 2] = 1.0f + bp[4 * i + 2] * 0.3f;
        bp[4 * i + 3] = 1.0f + bp[4 * i + 3] * 0.3f;
      } else {
        bp[4 * i + 2] = bp[4 * i] + (iter % 3 == 0 ? -1.0f : 1.0f) * (1.0f + bp[4 * i + 2] * 0.3f);
        bp[4 * i + 3] = bp[4 * i + 1] + 1.0f + bp[4 * i + 3] * 0.3f;
      }
    }
    HostTensor scores = Floats({b, c, n}, 0.0f, 1.0f);
    if (iter % 5 == 0) {  // Ties.
      auto* sp = reinterpret_cast<float*>(scores.bytes.data());
      for (int64_t i = 0; i < b * c * n; ++i) sp[i] = static_cast<float>(i % 3) * 0.25f;
    }
    const HostTensor max_boxes = HostTensor::Of<int64_t>({1}, {iter % 7 == 0 ? 0 : Uniform(1, 20)});
    const HostTensor iou = HostTensor::Of<float>({1}, {static_cast<float>(Uniform(0, 10)) / 10.0f});
    const std::string op = iter % 4 == 0 ? "NonMaxSuppression-10" : "NonMaxSuppression";
    const Attributes attrs = Attrs({{"center_point_box", center}});
    if (iter % 3 == 1) {
      Check(op, attrs, {boxes, scores, max_boxes, iou});
    } else {
      Check(op, attrs, {boxes, scores, max_boxes, iou, HostTensor::Of<float>({1}, {0.3f})});
    }
  }
}

TEST_F(DetCudaTest, RoiAlign) {
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t n = Uniform(1, 3), c = Uniform(1, 4), h = Uniform(1, 12), w = Uniform(1, 12);
    const int64_t rois = Uniform(1, 6);
    SCOPED_TRACE(std::to_string(iter));
    HostTensor r = Floats({rois, 4}, -2.0f, 14.0f);
    HostTensor batch = HostTensor::Zeros(DType::kInt64, {rois});
    for (int64_t i = 0; i < rois; ++i) {
      const int64_t v = Uniform(0, n - 1);
      std::memcpy(batch.bytes.data() + i * 8, &v, 8);
    }
    Attributes attrs = Attrs({{"output_height", Uniform(1, 4)},
                              {"output_width", Uniform(1, 4)},
                              {"sampling_ratio", Uniform(0, 3)},
                              {"spatial_scale", iter % 3 == 0 ? 0.5f : 1.0f},
                              {"mode", std::string(iter % 2 ? "max" : "avg")}});
    const bool opset10 = iter % 4 == 0;
    if (!opset10 && iter % 3 == 1)
      attrs.Set("coordinate_transformation_mode", std::string("output_half_pixel"));
    Check(opset10 ? "RoiAlign-10" : "RoiAlign", attrs, {Floats({n, c, h, w}, -5.0f, 5.0f), r, batch});
  }
}

TEST_F(DetCudaTest, RoiAlignBatchIndexOutOfRangeGivesZeros) {
  const HostTensor x = HostTensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const HostTensor rois = HostTensor::Of<float>({2, 4}, {0, 0, 1, 1, 0, 0, 1, 1});
  auto out = RunCuda("RoiAlign", {}, {x, rois, HostTensor::Of<int64_t>({2}, {5, -1})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].Values<float>(), (std::vector<float>{0, 0}));
}

TEST_F(DetCudaTest, MaxUnpool) {
  struct Case {
    Shape x;
    std::vector<int64_t> kernel, strides, pads;
  };
  const Case cases[] = {
      {{1, 1, 2, 2}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
      {{2, 3, 5}, {3}, {2}, {1, 0}},
      {{1, 2, 3, 4}, {3, 3}, {1, 2}, {1, 1, 0, 1}},
      {{1, 1, 2, 3, 2}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0, 0, 0, 0}},
      {{2, 4, 16, 16}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
  };
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64};
  int iter = 0;
  for (const Case& c : cases) {
    for (DType dt : dtypes) {
      ++iter;
      SCOPED_TRACE(ShapeToString(c.x) + " " + std::string(DTypeName(dt)));
      const Attributes attrs = Attrs({{"kernel_shape", c.kernel}, {"strides", c.strides}, {"pads", c.pads}});
      Shape out = c.x;
      for (size_t d = 0; d < c.kernel.size(); ++d) {
        out[d + 2] = (c.x[d + 2] - 1) * c.strides[d] - c.pads[d] - c.pads[c.kernel.size() + d] + c.kernel[d];
      }
      const int64_t y_count = *NumElements(out), x_count = *NumElements(c.x);
      // output_shape: the unpooled shape, or larger (padded at the end of each dim).
      const bool given = iter % 2 == 0;
      if (given && iter % 4 == 0) {
        for (size_t d = 1; d < out.size(); ++d) out[d] += static_cast<int64_t>(d % 2);
      }
      HostTensor x = HostTensor::Zeros(dt, c.x);
      for (uint8_t& byte : x.bytes) byte = static_cast<uint8_t>(Uniform(0, 255));
      if (dt == DType::kFloat16) {  // No NaN patterns, so that equal bits are expected.
        for (size_t i = 1; i < x.bytes.size(); i += 2) x.bytes[i] &= 0x3f;
      }
      // Indices: a few repeats (iter odd: many), every one in range.
      HostTensor indices = HostTensor::Zeros(DType::kInt64, c.x);
      for (int64_t i = 0; i < x_count; ++i) {
        const int64_t v = iter % 2 ? Uniform(0, std::min<int64_t>(y_count - 1, 3)) : Uniform(0, y_count - 1);
        std::memcpy(indices.bytes.data() + i * 8, &v, 8);
      }
      std::vector<HostTensor> in = {x, indices};
      if (given) in.push_back(HostTensor::Of<int64_t>({static_cast<int64_t>(out.size())}, out));
      Check(iter % 3 == 0 ? "MaxUnpool-9" : "MaxUnpool", attrs, in);
    }
  }
}

TEST_F(DetCudaTest, MaxUnpoolSkipsIndicesOutOfRange) {
  const HostTensor x = HostTensor::Of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const HostTensor i = HostTensor::Of<int64_t>({1, 1, 2, 2}, {-1, 3, 16, 0});
  const Attributes attrs =
      Attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  auto out = RunCuda("MaxUnpool", attrs, {x, i});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want(16, 0.0f);
  want[3] = 2;
  want[0] = 4;
  EXPECT_EQ(out[0].Values<float>(), want);
}

}  // namespace
}  // namespace remex::kernels
