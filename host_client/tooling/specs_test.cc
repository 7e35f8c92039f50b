#include "host_client/tooling/specs.h"

#include <gtest/gtest.h>

#include "host_client/client/client.h"
#include "host_client/tooling/compile.h"

namespace remex::tooling {
namespace specs_test {

TEST(SpecsTest, DimsAndShapes) {
  EXPECT_EQ(*ParseDims("1x3x48x192"), (Shape{1, 3, 48, 192}));
  EXPECT_EQ(*ParseDims("scalar"), Shape{});
  EXPECT_FALSE(ParseDims("1x-3").ok());
  EXPECT_FALSE(ParseDims("1x3x").ok());
  EXPECT_FALSE(ParseDims("1xx3").ok());
  auto twice = ParseShapeSpecs({"x=1x3", "x=1x4"});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos);
}

TEST(SpecsTest, BoundsNameASymbolOrASite) {
  auto b = ParseBoundSpecs({"W=32:2048", "x:3=1:", "p2o.DynamicDimension.1=8:64"});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->at("W").min, 32);
  EXPECT_EQ(b->at("W").max, 2048);
  EXPECT_EQ(b->at("x:3").max, -1);
  EXPECT_EQ(b->at("p2o.DynamicDimension.1").min, 8);
  EXPECT_FALSE(ParseBoundSpecs({"W=64:32"}).ok());
  EXPECT_FALSE(ParseBoundSpecs({"W=-1:32"}).ok());
  EXPECT_FALSE(ParseBoundSpecs({"W=a:b"}).ok());
  EXPECT_FALSE(ParseBoundSpecs({"W"}).ok());
}

// --variant: settings over the command's own, each key as its flag takes it.
TEST(SpecsTest, VariantsApplyOverTheCommandsSettings) {
  CompileSpecs base;
  base.shapes = {"x=1x3x48x192", "y=1x4"};
  base.dispatch = {"x:3=log:2"};
  auto v = ApplyVariant(base, "layout=NHWC,dtype=float16,fuse-epilogues=false,shape=x=1x3x48x320");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->layout, "NHWC");
  EXPECT_EQ(v->dtype, "float16");
  EXPECT_FALSE(v->fuse_epilogues);
  EXPECT_TRUE(v->fold_batchnorm);
  EXPECT_EQ(v->shapes, (std::vector<std::string>{"y=1x4", "x=1x3x48x320"}));  // x replaced
  EXPECT_EQ(v->dispatch, base.dispatch);
  EXPECT_TRUE(ParseCompileSpecs(*v).ok());
  // A comma that starts no KEY= belongs to the value: edges of a dispatch, which
  // replace the command's.
  auto d = ApplyVariant(base, "dispatch=x:3=edges:64,128,256,strict=true");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->dispatch, (std::vector<std::string>{"x:3=edges:64,128,256"}));
  EXPECT_TRUE(d->strict);
  EXPECT_EQ(ApplyVariant(base, "fold-batchnorm=false")->fold_batchnorm, false);
  EXPECT_EQ(ApplyVariant(base, "compute-threads=1")->compute_threads, 1);
  EXPECT_FALSE(ApplyVariant(base, "compute-threads=-1").ok());

  auto message = [&](const std::string& text) {
    auto r = ApplyVariant(base, text);
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    return r.status().message();
  };
  EXPECT_NE(message("colour=red")
                .find("unknown key 'colour' (keys: layout, dtype, fuse-epilogues, "
                      "fold-batchnorm, fuse-elementwise, compute-threads, strict, shape, bound, dispatch, "
                      "tuning-log, tuned-for)"),
            std::string::npos);
  EXPECT_NE(message("NHWC").find("is no KEY=VALUE"), std::string::npos);
  EXPECT_NE(message("strict=yes").find("true or false"), std::string::npos);
  EXPECT_NE(message("layout=NHWC,layout=NCHW").find("given twice"), std::string::npos);
  EXPECT_NE(message("dtype=").find("no value"), std::string::npos);
  // The values are the flags' own, checked where they are parsed.
  auto bad = ApplyVariant(base, "layout=NWHC");
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(ParseCompileSpecs(*bad).ok());
}

TEST(SpecsTest, CompileSpecsFillCompileOptions) {
  CompileSpecs specs;
  EXPECT_FALSE(specs.ChangesCompilation());
  specs.shapes = {"x=1x3x48x320"};
  EXPECT_FALSE(specs.ChangesCompilation()) << "--shape also shapes random inputs of an .rmx";
  specs.layout = "nhwc";
  specs.dtype = "float16";
  specs.bounds = {"x:3=32:2048"};
  specs.dispatch = {"x:3=log:2:32:2048"};
  specs.strict = true;
  specs.fuse_epilogues = false;
  EXPECT_TRUE(specs.ChangesCompilation());
  auto o = ParseCompileSpecs(specs);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->layout, compiler::Layout::kNhwc);
  EXPECT_EQ(o->dtype, DType::kFloat16);
  EXPECT_EQ(o->input_shapes.at("x"), (Shape{1, 3, 48, 320}));
  EXPECT_EQ(o->bounds.at("x:3").max, 2048);
  ASSERT_EQ(o->dispatch.size(), 1u);
  EXPECT_EQ(o->dispatch[0].symbol, "x:3");
  EXPECT_TRUE(o->strict_dispatch);
  EXPECT_FALSE(o->fuse_epilogues);
  EXPECT_TRUE(o->fold_batchnorm);

  CompileSpecs no_fold;
  no_fold.fold_batchnorm = false;
  EXPECT_TRUE(no_fold.ChangesCompilation()) << "--no-fold-batchnorm contradicts an .rmx";
  auto unfolded = ParseCompileSpecs(no_fold);
  ASSERT_TRUE(unfolded.ok());
  EXPECT_FALSE(unfolded->fold_batchnorm);

  // No --layout: the device decides (CompileForDevice); "auto" says so too.
  for (const char* text : {"", "auto", "AUTO"}) {
    CompileSpecs left;
    left.layout = text;
    EXPECT_EQ(left.ChangesCompilation(), *text != '\0') << text;
    auto open = ParseCompileSpecs(left);
    ASSERT_TRUE(open.ok()) << open.status().ToString();
    EXPECT_EQ(open->layout, compiler::Layout::kAuto) << text;
  }

  CompileSpecs bad;
  bad.layout = "NCWH";
  auto layout = ParseCompileSpecs(bad);
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.status().message().find("--layout"), std::string::npos) << layout.status().ToString();
  bad = {};
  bad.dtype = "int8";
  EXPECT_FALSE(ParseCompileSpecs(bad).ok());
  bad = {};
  bad.strict = true;
  EXPECT_FALSE(ParseCompileSpecs(bad).ok()) << "--strict without --dispatch";
}

TEST(SpecsTest, FetchServerAndCompression) {
  EXPECT_TRUE(ParseFetch("all")->all);
  auto none = ParseFetch("none");
  EXPECT_FALSE(none->all);
  EXPECT_TRUE(none->names.empty());
  auto some = ParseFetch("y,z");
  EXPECT_EQ(some->names, (std::set<std::string>{"y", "z"}));
  auto bad = ParseFetch("y,,z");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("all, none or output names"), std::string::npos);

  auto v6 = ParseServerAddress("[::1]:9000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->first, "::1");
  EXPECT_EQ(v6->second, 9000);
  EXPECT_FALSE(ParseServerAddress("host:0").ok());
  EXPECT_FALSE(ParseServerAddress("host:70000").ok());
  EXPECT_FALSE(ParseServerAddress("host").ok());

  EXPECT_EQ(ParseCompression("zstd:7")->level, 7);
  EXPECT_FALSE(ParseCompression("zstd:0").ok());
  EXPECT_FALSE(ParseCompression("lz4").ok());
}

// The choices a user left open, made for the device: a float16 model in float32 on the
// CPU device, int8 convolutions NHWC on a device whose int8 convolutions are
// channels-last, float convolutions NHWC on one whose float convolutions are, pooling
// NHWC on the CPU device only, attention fused on the CPU device only; a choice given is
// kept, and nothing changes elsewhere.
TEST(SpecsTest, CompileForDeviceMakesTheChoicesLeftOpen) {
  client::DeviceInfo cpu{"cpu", "", 0, 0, /*int8_channels_last=*/true, /*float_channels_last=*/true};
  client::DeviceInfo cpu_without_vnni{"cpu", "", 0, 0, false, true};
  client::DeviceInfo cpu_without_avx512{"cpu", "", 0, 0, false, false};
  client::DeviceInfo gpu{"cuda:0", "", 0, 0, false, false};
  compiler::CompileOptions open;
  open.layout = compiler::Layout::kAuto;
  const ModelTraits int8_model{.has_int8_convolutions = true};
  const ModelTraits float_model{.has_float_convolutions = true};
  const ModelTraits f16_model{.has_float16 = true, .has_float_convolutions = true};

  DeviceCompile int8 = CompileForDevice(&cpu, int8_model, open);
  EXPECT_EQ(int8.options.layout, compiler::Layout::kNhwc);
  EXPECT_EQ(int8.options.dtype, DType::kUndefined);
  EXPECT_TRUE(int8.options.nhwc_pooling);
  EXPECT_NE(int8.changes.find("int8 convolutions"), std::string::npos) << int8.changes;
  for (const client::DeviceInfo* d :
       std::initializer_list<const client::DeviceInfo*>{&cpu_without_vnni, &cpu_without_avx512, &gpu, nullptr}) {
    DeviceCompile c = CompileForDevice(d, int8_model, open);
    EXPECT_EQ(c.options.layout, compiler::Layout::kNchw) << (d ? d->name : "no device");
    EXPECT_EQ(c.changes, "") << "the executable compiled with auto is NCHW already";
  }
  EXPECT_TRUE(CompileForDevice(&cpu_without_vnni, int8_model, open).options.nhwc_pooling);
  EXPECT_FALSE(CompileForDevice(&gpu, int8_model, open).options.nhwc_pooling);
  EXPECT_FALSE(CompileForDevice(nullptr, int8_model, open).options.nhwc_pooling);

  DeviceCompile float_nhwc = CompileForDevice(&cpu_without_vnni, float_model, open);
  EXPECT_EQ(float_nhwc.options.layout, compiler::Layout::kNhwc);
  EXPECT_NE(float_nhwc.changes.find("NHWC activations for its convolutions"), std::string::npos) << float_nhwc.changes;
  for (const client::DeviceInfo* d : std::initializer_list<const client::DeviceInfo*>{&cpu_without_avx512, &gpu, nullptr}) {
    DeviceCompile c = CompileForDevice(d, float_model, open);
    EXPECT_EQ(c.options.layout, compiler::Layout::kNchw) << (d ? d->name : "no device");
    EXPECT_EQ(c.changes, "");
  }
  // --layout NHWC given: compiled again on the CPU device, its pooling following (the
  // executable as given has float pools on NCHW, transposed around each).
  compiler::CompileOptions nhwc;
  nhwc.layout = compiler::Layout::kNhwc;
  DeviceCompile given_nhwc = CompileForDevice(&cpu, float_model, nhwc);
  EXPECT_EQ(given_nhwc.options.layout, compiler::Layout::kNhwc);
  EXPECT_TRUE(given_nhwc.options.nhwc_pooling);
  EXPECT_NE(given_nhwc.changes.find("pooling NHWC"), std::string::npos) << given_nhwc.changes;
  EXPECT_EQ(CompileForDevice(&gpu, float_model, nhwc).changes, "");
  EXPECT_EQ(CompileForDevice(&cpu, int8_model, nhwc).changes, "")
      << "int8 MaxPool follows without the option";
  DeviceCompile no_convolutions = CompileForDevice(&cpu, ModelTraits{}, open);
  EXPECT_EQ(no_convolutions.options.layout, compiler::Layout::kNchw);
  EXPECT_EQ(no_convolutions.changes, "");
  EXPECT_FALSE(no_convolutions.options.fuse_attention);

  // Attention fused for the CPU device only (the CUDA device's kernel is not yet measured
  // on a GPU against the unfused graph), and not with --no-fuse-epilogues.
  const ModelTraits transformer{.has_attention = true};
  DeviceCompile attention = CompileForDevice(&cpu_without_avx512, transformer, open);
  EXPECT_TRUE(attention.options.fuse_attention);
  EXPECT_NE(attention.changes.find("attention fused"), std::string::npos) << attention.changes;
  for (const client::DeviceInfo* d : std::initializer_list<const client::DeviceInfo*>{&gpu, nullptr}) {
    DeviceCompile c = CompileForDevice(d, transformer, open);
    EXPECT_FALSE(c.options.fuse_attention) << (d ? d->name : "no device");
    EXPECT_EQ(c.changes, "");
  }
  compiler::CompileOptions unfused = open;
  unfused.fuse_epilogues = false;
  EXPECT_FALSE(CompileForDevice(&cpu, transformer, unfused).options.fuse_attention);

  compiler::CompileOptions nchw;  // --layout NCHW given
  for (const ModelTraits& m : {int8_model, float_model}) {
    DeviceCompile kept = CompileForDevice(&cpu, m, nchw);
    EXPECT_EQ(kept.options.layout, compiler::Layout::kNchw);
    EXPECT_EQ(kept.changes, "");
  }

  DeviceCompile f16 = CompileForDevice(&cpu, f16_model, open);
  EXPECT_EQ(f16.options.dtype, DType::kFloat32);
  EXPECT_EQ(f16.options.layout, compiler::Layout::kNhwc);
  EXPECT_NE(f16.changes.find("float32"), std::string::npos) << f16.changes;
  EXPECT_EQ(CompileForDevice(&gpu, f16_model, open).options.dtype, DType::kUndefined);
  compiler::CompileOptions f16_given = open;
  f16_given.dtype = DType::kFloat16;
  EXPECT_EQ(CompileForDevice(&cpu, f16_model, f16_given).options.dtype, DType::kFloat16);
}

}  // namespace specs_test
}  // namespace remex::tooling
