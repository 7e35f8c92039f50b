// Remote sessions end to end against a real remex-server process: client-named result
// handles and pipelining, and invoke_with_outputs (bound outputs, outputs fed back as
// inputs, several outputs and functions).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <thread>

#include "host_client/client/client.h"
#include "host_client/compiler/compiler.h"
#include "host_client/compiler/onnx_import.h"
#include "host_client/compiler/onnx_test_util.h"
#include "rpc/transport.h"
#include "tests/model_util.h"
#include "tests/process_util.h"
#include "tests/remote_session_test_util.h"
#include "vm/executable.h"

namespace remex {
namespace {

using client::Session;
using remex::testing::AddReluModel;
using remex::testing::Compile;
using remex::testing::Floats;
using remex::testing::OnnxModelBuilder;
using remex::testing::PlusOneModel;
using remex::testing::Registry;
using remex::testing::RemoteSessionTest;
using remex::testing::ServerProcess;
using remex::testing::ToFloats;

// ---------------------------------------------------------------------------------------
// Client-named handles and pipelining.

TEST_F(RemoteSessionTest, PipelineRunsUploadSetInputInvokeAndReadInOneGo) {
  auto s = Connect();
  uint64_t vm = LoadVm(*s, AddReluModel());
  uint64_t x = s->NewResultHandle();
  uint64_t y = s->NewResultHandle();
  EXPECT_NE(x, y);
  EXPECT_TRUE(x >> 63);
  Session::Pipeline p(*s);
  p.Upload(Floats({2, 4}, {1, 1, -3, 3, 0, 0, 0, 0}), x)
      .SetInputs(vm, "main", {x})
      .Invoke(vm, "main", {y})
      .Download(y);
  auto r = p.Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->invokes.size(), 1u);
  EXPECT_EQ(r->invokes[0].outputs[0].handle, y);
  EXPECT_EQ(r->invokes[0].outputs[0].shape, (Shape{2, 4}));
  ASSERT_EQ(r->downloads.size(), 1u);
  EXPECT_EQ(ToFloats(r->downloads[0]), (std::vector<float>{1.5f, 0.5f, 0, 2, 0.5f, 0, 1, 0}));
  // The named handles are ordinary handles afterwards.
  EXPECT_TRUE(s->Download(y).ok());
  EXPECT_TRUE(s->Free({x, y}).ok());
  // An empty pipeline does nothing.
  auto empty = Session::Pipeline(*s).Run();
  EXPECT_TRUE(empty.ok());

  // Several invokes chained by named handles in one pipeline: y2 = f(f(x)).
  uint64_t x2 = s->NewResultHandle(), h1 = s->NewResultHandle(), h2 = s->NewResultHandle();
  Session::Pipeline chain(*s);
  chain.Upload(Floats({1, 4}, {1, 2, 3, 4}), x2)
      .SetInputs(vm, "main", {x2})
      .Invoke(vm, "main", {h1})
      .SetInputs(vm, "main", {h1})
      .Invoke(vm, "main", {h2})
      .Download(h1)
      .Download(h2);
  r = chain.Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->invokes.size(), 2u);
  EXPECT_EQ(ToFloats(r->downloads[0]), (std::vector<float>{1.5f, 1.5f, 4, 3}));
  EXPECT_EQ(ToFloats(r->downloads[1]), (std::vector<float>{2, 1, 5, 2}));
}

TEST_F(RemoteSessionTest, PipelineReportsTheFirstErrorAndStaysInStep) {
  auto s = Connect();
  uint64_t vm = LoadVm(*s, AddReluModel());
  uint64_t x = s->NewResultHandle();
  Session::Pipeline p(*s);
  p.Upload(Floats({1, 5}, {1, 2, 3, 4, 5}), x)  // wrong shape for the model
      .SetInputs(vm, "main", {x})
      .Invoke(vm, "main", {s->NewResultHandle()})
      .Download(x);
  auto r = p.Run();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("setInput: "), std::string::npos) << r.status().message();
  // Every reply was read: the session goes on normally.
  EXPECT_TRUE(s->Ping().ok());
  auto back = s->Download(x);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->shape, (Shape{1, 5}));
}

// An invoke that ran before a later request of the pipeline failed: its outputs, on the
// server under the server's own handles, come back in `answered` for the caller to free.
TEST_F(RemoteSessionTest, PipelineGivesBackWhatRanBeforeAFailure) {
  auto s = Connect();
  uint64_t vm = LoadVm(*s, AddReluModel());
  uint64_t x = s->NewResultHandle();
  ASSERT_TRUE(Session::Pipeline(*s).Upload(Floats({1, 4}, {1, 2, 3, 4}), x).Run().ok());
  Session::Pipeline p(*s);
  p.SetInputs(vm, "main", {x}).Invoke(vm, "main", {}).Download(s->NewResultHandle());  // never made
  Session::Pipeline::Result answered;
  answered.downloads.resize(3);  // cleared by Run
  auto r = p.Run(&answered);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  ASSERT_EQ(answered.invokes.size(), 1u);
  EXPECT_TRUE(answered.downloads.empty());
  const uint64_t y = answered.invokes[0].outputs.at(0).handle;
  EXPECT_FALSE(y >> 63) << "the server named it";
  auto held = s->ListHandles();
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  auto holds = [&](uint64_t h) {
    return std::any_of(held->begin(), held->end(), [&](const client::HandleInfo& i) { return i.handle == h; });
  };
  EXPECT_TRUE(holds(y));
  ASSERT_TRUE(s->Free({y, x}).ok());
  held = s->ListHandles();
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(holds(y));
}

TEST_F(RemoteSessionTest, PipelineWithLargeUploadsAndDownloads) {
  // Large replies early and large requests late: the write and the replies overlap.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {-1}).Output("y", onnx::TensorProto::FLOAT, {-1});
  b.Node("Relu", {"x"}, {"y"});
  auto s = Connect();
  uint64_t vm = LoadVm(*s, b);
  const int64_t n = 4 << 20;  // 16 MiB of float32 per tensor
  std::vector<float> values(n);
  uint32_t state = 12345;
  for (auto& v : values) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int32_t>(state)) / 1e9f;  // incompressible-ish
  }
  npy::Array big = Floats({n}, values);
  Session::Pipeline p(*s);
  std::vector<uint64_t> outs;
  for (int i = 0; i < 3; ++i) {
    uint64_t x = s->NewResultHandle(), y = s->NewResultHandle();
    p.Upload(big, x).SetInputs(vm, "main", {x}).Invoke(vm, "main", {y}).Download(y);
    outs.push_back(y);
  }
  auto r = p.Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->downloads.size(), 3u);
  for (const auto& d : r->downloads) {
    auto got = ToFloats(d);
    ASSERT_EQ(got.size(), values.size());
    for (size_t i = 0; i < got.size(); i += 4099) ASSERT_EQ(got[i], std::max(0.0f, values[i])) << i;
  }
}

TEST_F(RemoteSessionTest, CompressionOptionsAndStats) {
  npy::Array zeros = Floats({1 << 18}, std::vector<float>(1 << 18, 0.0f));  // 1 MiB
  const uint64_t raw = zeros.data.size();
  auto connect = [&](client::CompressionMode mode) {
    client::ConnectOptions o;
    o.compression.mode = mode;
    auto s = Session::Connect("127.0.0.1", server_.port(), o);
    EXPECT_TRUE(s.ok());
    return std::move(s).value();
  };
  auto none = connect(client::CompressionMode::kNone);
  ASSERT_TRUE(none->Upload(zeros).ok());
  auto c = none->compression_stats();
  EXPECT_EQ(c.raw_sent, raw);
  EXPECT_EQ(c.wire_sent, raw);
  auto zstd = connect(client::CompressionMode::kZstd);
  auto t = zstd->Upload(zeros);
  ASSERT_TRUE(t.ok());
  c = zstd->compression_stats();
  EXPECT_EQ(c.raw_sent, raw);
  EXPECT_LT(c.wire_sent, raw / 10);
  EXPECT_LT(zstd->bytes_sent(), raw / 10);
  // Replies are compressed by the server; the client counts what it received.
  auto back = zstd->Download(t->handle);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->data, zeros.data);
  c = zstd->compression_stats();
  EXPECT_EQ(c.raw_received, raw);
  EXPECT_LT(c.wire_received, raw / 10);
  // A client that sends uncompressed gets uncompressed replies, even of zeros.
  auto on_none = none->Upload(zeros);
  ASSERT_TRUE(on_none.ok());
  auto raw_back = none->Download(on_none->handle);
  ASSERT_TRUE(raw_back.ok());
  EXPECT_EQ(raw_back->data, zeros.data);
  c = none->compression_stats();
  EXPECT_EQ(c.raw_received, raw);
  EXPECT_EQ(c.wire_received, raw);
}

TEST_F(RemoteSessionTest, DownloadIntoACallerBufferAndWriteInPlace) {
  auto s = Connect();
  std::vector<float> v(1 << 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f;
  auto t = s->Upload(Floats({1 << 16}, v));
  ASSERT_TRUE(t.ok());
  std::vector<std::byte> buffer(v.size() * 4);
  auto got = s->DownloadInto(t->handle, buffer);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->shape, (Shape{1 << 16}));
  EXPECT_EQ(std::memcmp(buffer.data(), v.data(), buffer.size()), 0);
  // A destination of the wrong size is refused; the session goes on.
  std::vector<std::byte> small(16);
  EXPECT_EQ(s->DownloadInto(t->handle, small).status().code(), StatusCode::kInvalidArgument);
  // tensorWrite into the existing tensor (received in place), then read back.
  for (float& x : v) x = -x;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(v.data()), v.size() * 4);
  ASSERT_TRUE(s->Write(t->handle, DType::kFloat32, {1 << 16}, bytes).ok());
  ASSERT_TRUE(s->DownloadInto(t->handle, buffer).ok());
  EXPECT_EQ(std::memcmp(buffer.data(), v.data(), buffer.size()), 0);
  // A description that does not match the existing tensor is refused.
  EXPECT_EQ(s->Write(t->handle, DType::kFloat32, {2, 1 << 15}, bytes).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(s->Ping().ok());
}

// A decoder's `present = Concat(past, new)` fed back as the next `past` grows in a
// buffer with room (ConcatAppend, vm/README.md "Tensors grown in place"): each present
// is a view of that buffer. tensorWrite into such a view is refused, in place or not, and
// leaves every view and the next append as they were.
TEST_F(RemoteSessionTest, TensorWriteIntoAGrowingCacheIsRefused) {
  OnnxModelBuilder b(13);
  b.Input("past", onnx::TensorProto::FLOAT, {1, 2, -1, 2}).Input("new", onnx::TensorProto::FLOAT, {1, 2, 1, 2});
  b.Output("present", onnx::TensorProto::FLOAT, {1, 2, -1, 2});
  OnnxModelBuilder::IntAttr(b.Node("Concat", {"past", "new"}, {"present"}), "axis", -2);
  auto s = Connect();
  uint64_t vm = LoadVm(*s, b);
  auto past = s->Upload(Floats({1, 2, 1, 2}, {0, 1, 10, 11}));
  ASSERT_TRUE(past.ok()) << past.status().ToString();
  std::vector<uint64_t> presents;
  uint64_t cache = past->handle;
  for (float step = 1; step <= 2; ++step) {
    auto next = s->Upload(Floats({1, 2, 1, 2}, {2 * step, 2 * step + 1, 10 + 2 * step, 11 + 2 * step}));
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_TRUE(s->SetInputs(vm, "main", {cache, next->handle}).ok());
    auto out = s->Invoke(vm, "main");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    cache = out->outputs[0].handle;
    presents.push_back(cache);
  }
  const std::vector<float> second = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15};  // [1, 2, 3, 2]
  ASSERT_EQ(ToFloats(*s->Download(cache)), second);
  const std::vector<float> ones(12, 1.0f);
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(ones.data()), ones.size() * 4);
  for (uint64_t view : presents) {
    const std::vector<int64_t> shape = {1, 2, view == cache ? 3 : 2, 2};
    std::span<const std::byte> exact = bytes.first(static_cast<size_t>(shape[2]) * 4 * 4);
    Status st = s->Write(view, DType::kFloat32, shape, exact);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find("grows in place"), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(ToFloats(*s->Download(presents[0])), (std::vector<float>{0, 1, 2, 3, 10, 11, 12, 13}));
  EXPECT_EQ(ToFloats(*s->Download(cache)), second);
  // The cache grows on from the refused view as before.
  auto next = s->Upload(Floats({1, 2, 1, 2}, {6, 7, 16, 17}));
  ASSERT_TRUE(s->SetInputs(vm, "main", {cache, next->handle}).ok());
  auto out = s->Invoke(vm, "main");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(ToFloats(*s->Download(out->outputs[0].handle)),
            (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16, 17}));
}

TEST_F(RemoteSessionTest, ClientNamedHandlesAreChecked) {
  auto s = Connect();
  uint64_t vm = LoadVm(*s, AddReluModel());
  uint64_t x = s->NewResultHandle();
  auto run = [&](Session::Pipeline& p) { return p.Run().status(); };
  {
    Session::Pipeline p(*s);
    p.Upload(Floats({1, 4}, {1, 2, 3, 4}), x);
    ASSERT_TRUE(run(p).ok());
  }
  {
    Session::Pipeline p(*s);  // the same name again
    p.Upload(Floats({1, 4}, {1, 2, 3, 4}), x);
    EXPECT_EQ(run(p).code(), StatusCode::kAlreadyExists);
  }
  {
    Session::Pipeline p(*s);  // bit 63 clear
    p.Upload(Floats({1, 4}, {1, 2, 3, 4}), 12345);
    Status st = run(p);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("bit 63"), std::string::npos) << st.message();
  }
  ASSERT_TRUE(s->SetInputs(vm, "main", {x}).ok());
  {
    Session::Pipeline p(*s);  // one output, two names
    p.Invoke(vm, "main", {s->NewResultHandle(), s->NewResultHandle()});
    Status st = run(p);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("2 result handles for 1 outputs"), std::string::npos) << st.message();
  }
  {
    Session::Pipeline p(*s);  // an output named like an existing tensor
    p.Invoke(vm, "main", {x});
    EXPECT_EQ(run(p).code(), StatusCode::kAlreadyExists);
  }
  // Server-issued handles never have bit 63 set.
  auto t = s->Upload(Floats({1}, {1}));
  EXPECT_FALSE(t->handle >> 63);
  // Client-named handles are per session: another session may use the same name, and
  // cannot see this one's.
  auto other = Connect();
  EXPECT_EQ(other->Download(x).status().code(), StatusCode::kNotFound);
  Session::Pipeline p(*other);
  p.Upload(Floats({1, 4}, {9, 9, 9, 9}), x).Download(x);
  auto r = p.Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ToFloats(r->downloads[0])[0], 9.0f);
  EXPECT_EQ(ToFloats(*s->Download(x))[0], 1.0f);
}

// ---------------------------------------------------------------------------------------
// invoke_with_outputs.

TEST_F(RemoteSessionTest, BoundOutputPersistsAcrossInvokesUntilUnbound) {
  auto s = Connect();
  uint64_t vm = LoadVm(*s, AddReluModel());
  auto bound = s->Alloc(DType::kFloat32, {1, 4});
  ASSERT_TRUE(s->SetOutput(vm, "main", 0, bound->handle).ok());
  for (float v : {1.0f, 2.0f, 3.0f}) {
    auto x = s->Upload(Floats({1, 4}, std::vector<float>(4, v)));
    ASSERT_TRUE(s->SetInputs(vm, "main", {x->handle}).ok());
    auto out = s->Invoke(vm, "main");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->outputs[0].handle, bound->handle);
    EXPECT_FLOAT_EQ(ToFloats(*s->Download(bound->handle))[0], v + 0.5f);
  }
  // A bound output keeps its handle in the reply; a name given for it is a second
  // handle to the same tensor that a pipelined read can already use.
  uint64_t name = s->NewResultHandle();
  Session::Pipeline p(*s);
  p.Invoke(vm, "main", {name});
  p.Download(name);
  auto r = p.Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->invokes[0].outputs[0].handle, bound->handle);
  EXPECT_FLOAT_EQ(ToFloats(r->downloads.at(0))[0], 3.5f);
  // Unbound: each invoke gets a fresh tensor again, and the old buffer keeps its value.
  ASSERT_TRUE(s->SetOutput(vm, "main", 0, 0).ok());
  auto x = s->Upload(Floats({1, 4}, std::vector<float>(4, 10.0f)));
  ASSERT_TRUE(s->SetInputs(vm, "main", {x->handle}).ok());
  auto out = s->Invoke(vm, "main");
  ASSERT_TRUE(out.ok());
  EXPECT_NE(out->outputs[0].handle, bound->handle);
  EXPECT_FLOAT_EQ(ToFloats(*s->Download(out->outputs[0].handle))[0], 10.5f);
  EXPECT_FLOAT_EQ(ToFloats(*s->Download(bound->handle))[0], 3.5f);
  // A bound buffer of the wrong shape for this call's dynamic output is a clear error.
  auto small = s->Alloc(DType::kFloat32, {2, 4});
  ASSERT_TRUE(s->SetOutput(vm, "main", 0, small->handle).ok());
  auto mismatch = s->Invoke(vm, "main");
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("bound to output 'y' is float32 [2, 4]"), std::string::npos)
      << mismatch.status().message();
  EXPECT_NE(mismatch.status().message().find("[1, 4]"), std::string::npos);
  // A static dim that cannot match is refused at binding.
  auto wrong = s->Alloc(DType::kFloat32, {1, 5});
  EXPECT_EQ(s->SetOutput(vm, "main", 0, wrong->handle).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->SetOutput(vm, "main", 1, small->handle).code(), StatusCode::kInvalidArgument);
}

TEST_F(RemoteSessionTest, RecurrentStateStaysOnTheDevice) {
  auto s = Connect();
  uint64_t vm = LoadVm(*s, PlusOneModel());
  auto x = s->Upload(Floats({4}, {0, 10, 20, 30}));
  ASSERT_TRUE(x.ok());
  uint64_t state = x->handle;
  uint64_t sent = s->bytes_sent(), received = s->bytes_received();
  for (int step = 0; step < 5; ++step) {
    ASSERT_TRUE(s->SetInputs(vm, "main", {state}).ok());
    auto out = s->Invoke(vm, "main");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_TRUE(s->Free({state}).ok());
    state = out->outputs[0].handle;
  }
  // Five steps cost handles and shapes only, no tensor bytes either way.
  EXPECT_LT(s->bytes_sent() - sent, 5 * 400u);
  EXPECT_LT(s->bytes_received() - received, 5 * 400u);  // replies: handles, shapes, copy counts
  EXPECT_EQ(ToFloats(*s->Download(state)), (std::vector<float>{5, 15, 25, 35}));

  // The same with client-named handles, all five steps in one pipeline.
  uint64_t h = s->NewResultHandle();
  Session::Pipeline p(*s);
  p.Upload(Floats({4}, {0, 0, 0, 0}), h);
  for (int step = 0; step < 5; ++step) {
    uint64_t next = s->NewResultHandle();
    p.SetInputs(vm, "main", {h}).Invoke(vm, "main", {next});
    h = next;
  }
  p.Download(h);
  auto r = p.Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ToFloats(r->downloads[0]), (std::vector<float>{5, 5, 5, 5}));
}

TEST_F(RemoteSessionTest, SeveralOutputsOneBoundOneFree) {
  // y1 = x + 1, y2 = Relu(x).
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {4})
      .Output("y1", onnx::TensorProto::FLOAT, {4})
      .Output("y2", onnx::TensorProto::FLOAT, {4});
  b.FloatInit("one", {4}, {1, 1, 1, 1});
  b.Node("Add", {"x", "one"}, {"y1"});
  b.Node("Relu", {"x"}, {"y2"});
  auto s = Connect();
  uint64_t vm = LoadVm(*s, b);
  auto bound = s->Alloc(DType::kFloat32, {4});
  ASSERT_TRUE(s->SetOutput(vm, "main", 1, bound->handle).ok());
  auto x = s->Upload(Floats({4}, {-2, -1, 1, 2}));
  ASSERT_TRUE(s->SetInputs(vm, "main", {x->handle}).ok());
  auto out = s->Invoke(vm, "main");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->outputs.size(), 2u);
  EXPECT_NE(out->outputs[0].handle, bound->handle);
  EXPECT_EQ(out->outputs[1].handle, bound->handle);
  EXPECT_EQ(ToFloats(*s->Download(out->outputs[0].handle)), (std::vector<float>{-1, 0, 2, 3}));
  EXPECT_EQ(ToFloats(*s->Download(bound->handle)), (std::vector<float>{0, 0, 1, 2}));
  // Named results: one name per output; the bound one keeps its handle in the reply.
  uint64_t n0 = s->NewResultHandle(), n1 = s->NewResultHandle();
  Session::Pipeline p(*s);
  p.Invoke(vm, "main", {n0, n1}).Download(n0);
  auto r = p.Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->invokes[0].outputs[0].handle, n0);
  EXPECT_EQ(r->invokes[0].outputs[1].handle, bound->handle);
  EXPECT_EQ(ToFloats(r->downloads[0]), (std::vector<float>{-1, 0, 2, 3}));
  // The name given for the bound output is a second handle to the bound buffer.
  auto via_name = s->Download(n1);
  ASSERT_TRUE(via_name.ok()) << via_name.status().ToString();
  EXPECT_EQ(via_name->data, s->Download(bound->handle)->data);
}

TEST_F(RemoteSessionTest, OutputsThatAliasAnInputOrAConstantAreCopiedIntoTheBoundBuffer) {
  // Outputs: x itself, the initializer c, and x + c.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {2})
      .Output("x", onnx::TensorProto::FLOAT, {2})
      .Output("c", onnx::TensorProto::FLOAT, {2})
      .Output("sum", onnx::TensorProto::FLOAT, {2});
  b.FloatInit("c", {2}, {10, 20});
  b.Node("Add", {"x", "c"}, {"sum"});
  auto s = Connect();
  uint64_t vm = LoadVm(*s, b);
  ASSERT_NE(vm, 0u);
  auto bx = s->Alloc(DType::kFloat32, {2});
  auto bc = s->Alloc(DType::kFloat32, {2});
  ASSERT_TRUE(s->SetOutput(vm, "main", 0, bx->handle).ok());
  ASSERT_TRUE(s->SetOutput(vm, "main", 1, bc->handle).ok());
  auto x = s->Upload(Floats({2}, {1, 2}));
  ASSERT_TRUE(s->SetInputs(vm, "main", {x->handle}).ok());
  auto out = s->Invoke(vm, "main");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->outputs.size(), 3u);
  EXPECT_EQ(out->outputs[0].handle, bx->handle);
  EXPECT_EQ(out->outputs[1].handle, bc->handle);
  EXPECT_EQ(ToFloats(*s->Download(bx->handle)), (std::vector<float>{1, 2}));
  EXPECT_EQ(ToFloats(*s->Download(bc->handle)), (std::vector<float>{10, 20}));
  EXPECT_EQ(ToFloats(*s->Download(out->outputs[2].handle)), (std::vector<float>{11, 22}));
  // The copies are copies: writing the input later does not change the bound buffer.
  std::vector<float> three = {3, 3};
  ASSERT_TRUE(s->Write(x->handle, DType::kFloat32, {2}, std::as_bytes(std::span(three))).ok());
  EXPECT_EQ(ToFloats(*s->Download(bx->handle)), (std::vector<float>{1, 2}));
  // Unbound, each output is still a tensor of its own.
  ASSERT_TRUE(s->SetOutput(vm, "main", 0, 0).ok());
  out = s->Invoke(vm, "main");
  ASSERT_TRUE(out.ok());
  EXPECT_NE(out->outputs[0].handle, x->handle);
  EXPECT_EQ(ToFloats(*s->Download(out->outputs[0].handle)), (std::vector<float>{3, 3}));
}

TEST_F(RemoteSessionTest, OutputThatAliasesADynamicInputIsCopied) {
  // y = x with a dynamic shape: the copy's shape comes from the input at run time.
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {-1, 2})
      .Output("x", onnx::TensorProto::FLOAT, {-1, 2})
      .Output("r", onnx::TensorProto::FLOAT, {-1, 2});
  b.Node("Relu", {"x"}, {"r"});
  auto s = Connect();
  uint64_t vm = LoadVm(*s, b);
  ASSERT_NE(vm, 0u);
  for (int64_t rows : {1, 3}) {
    auto x = s->Upload(Floats({rows, 2}, std::vector<float>(rows * 2, -1.0f)));
    ASSERT_TRUE(s->SetInputs(vm, "main", {x->handle}).ok());
    auto out = s->Invoke(vm, "main");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_NE(out->outputs[0].handle, x->handle);
    EXPECT_EQ(out->outputs[0].shape, (Shape{rows, 2}));
    EXPECT_EQ(ToFloats(*s->Download(out->outputs[0].handle)), std::vector<float>(rows * 2, -1.0f));
  }
  auto bound = s->Alloc(DType::kFloat32, {2, 2});
  ASSERT_TRUE(s->SetOutput(vm, "main", 0, bound->handle).ok());
  auto mismatch = s->Invoke(vm, "main");  // inputs are [3, 2]
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("bound to output 'x'"), std::string::npos) << mismatch.status().message();
}

// An executable built by hand with two functions: main(x) = x + c, double(x) = x + x.
vm::ExecutableDef TwoFunctionDef() {
  vm::ExecutableDef def;
  def.producer = "remote_session_test";
  vm::ConstantDef c;
  c.dtype = DType::kFloat32;
  c.shape = {3};
  std::vector<float> values = {1, 2, 3};
  c.data.resize(12);
  std::memcpy(c.data.data(), values.data(), 12);
  def.constants.push_back(std::move(c));
  def.kernels.push_back({"Add", {}, 2, 1, "add_c"});
  def.kernels.push_back({"Add", {}, 2, 1, "add_self"});
  vm::FunctionDef main;
  main.name = "main";
  main.inputs = {{"x", DType::kFloat32, {3}, {}}};
  main.outputs = {{"y", DType::kFloat32, {3}, {}}};
  main.num_registers = 3;
  main.code = {{vm::Opcode::kLoadConst, {1, 0, 0}, {}},
               {vm::Opcode::kAllocOutput, {2, 0, 1, -1}, {{3}}},
               {vm::Opcode::kInvokeKernel, {0}, {{0, 1}, {2}}},
               {vm::Opcode::kRet, {}, {{2}}}};
  vm::FunctionDef twice;
  twice.name = "double";
  twice.inputs = {{"x", DType::kFloat32, {-1}, {}}};
  twice.outputs = {{"y", DType::kFloat32, {-1}, {}}};
  twice.num_registers = 3;
  twice.code = {{vm::Opcode::kInvokeShapeFunc, {1}, {{0, 0}, {1}}},
                {vm::Opcode::kAllocOutput, {2, 0, 1, 1}, {{}}},
                {vm::Opcode::kInvokeKernel, {1}, {{0, 0}, {2}}},
                {vm::Opcode::kRet, {}, {{2}}}};
  def.functions.push_back(std::move(main));
  def.functions.push_back(std::move(twice));
  return def;
}

TEST_F(RemoteSessionTest, ExecutableWithSeveralFunctions) {
  auto bytes = vm::SerializeExecutable(TwoFunctionDef());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto s = Connect();
  auto module = s->LoadModuleCached(*bytes, "two");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  ASSERT_EQ(module->functions.size(), 2u);
  EXPECT_EQ(module->functions[0].name, "main");
  EXPECT_EQ(module->functions[1].name, "double");
  EXPECT_EQ(module->functions[1].inputs[0].shape, (Shape{-1}));
  auto vm = s->CreateVm(module->handle);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  auto x = s->Upload(Floats({3}, {10, 20, 30}));
  auto y = s->Upload(Floats({5}, {1, 2, 3, 4, 5}));
  ASSERT_TRUE(s->SetInputs(*vm, "main", {x->handle}).ok());
  ASSERT_TRUE(s->SetInputs(*vm, "double", {y->handle}).ok());
  // Inputs are bound per function: invoking one leaves the other's binding alone.
  auto a = s->Invoke(*vm, "main");
  auto b = s->Invoke(*vm, "double");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  EXPECT_EQ(ToFloats(*s->Download(a->outputs[0].handle)), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(ToFloats(*s->Download(b->outputs[0].handle)), (std::vector<float>{2, 4, 6, 8, 10}));
  // Outputs bound per function too; one function's output feeds the other.
  auto bound = s->Alloc(DType::kFloat32, {3});
  ASSERT_TRUE(s->SetOutput(*vm, "double", 0, bound->handle).ok());
  ASSERT_TRUE(s->SetInputs(*vm, "double", {a->outputs[0].handle}).ok());
  auto c = s->Invoke(*vm, "double");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->outputs[0].handle, bound->handle);
  EXPECT_EQ(ToFloats(*s->Download(bound->handle)), (std::vector<float>{22, 44, 66}));
  auto again = s->Invoke(*vm, "main");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->outputs[0].handle, bound->handle);
  auto p = s->Profile(*vm, "double");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->rows.empty());
  EXPECT_EQ(s->Invoke(*vm, "triple").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace remex
