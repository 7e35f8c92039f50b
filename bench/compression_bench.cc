// compression_bench: how well the weights of real models compress on the wire.
//
//   compression_bench [--models-dir DIR] [--models A.onnx,B.onnx] [--levels 1,3] [--repeat 3] [--json]
//
// Reads the weights (initializers and Constant-node tensors) of the PP-OCR models in
// --models-dir (default $REMEX_MODELS_DIR): ch_PP-OCRv4_det_infer.onnx, ch_PP-OCRv4_rec_infer.onnx,
// ch_ppocr_mobile_v2.0_cls_infer.onnx, or the --models named there. Each tensor is coded as the transport codes a
// tensor attachment: cut into chunks of kAttachmentChunkBytes (1 MiB), each chunk a
// zstd frame, optionally after ByteShuffle with the dtype's size; tensors under
// kMinCompressBytes stay raw. For each zstd level, with and without shuffle: the ratio
// raw / compressed and the compression and decompression throughput (MB/s of raw
// bytes, best of --repeat, one thread), and the largest ratio of any one chunk (what the
// server's --max-decompression-ratio, default rpc::kMaxCompressionRatio, checks).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <onnx/onnx_pb.h>

#include <fstream>

#include "bench/bench_util.h"
#include "host_client/compiler/onnx_import.h"
#include "rpc/compression.h"
#include "rpc/frame.h"

namespace remex::bench {
namespace {

// The weights of the ONNX model at `path`: its initializers and the tensors of its
// Constant nodes (the PP-OCR exports keep their weights in Constant nodes), read with
// libonnx's protobuf classes (the model may use ops Remex does not run).
StatusOr<std::vector<vm::ConstantDef>> ReadWeights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return InvalidArgument("'" + path + "' is not an ONNX model");
  std::vector<vm::ConstantDef> tensors;
  auto add = [&](const onnx::TensorProto& t, const std::string& what) -> Status {
    std::string proto = t.SerializeAsString();
    auto constant = compiler::TensorFromProtoBytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(proto.data()), proto.size()));
    if (!constant.ok()) return constant.status().WithContext(what);
    tensors.push_back(std::move(constant).value());
    return OkStatus();
  };
  for (const auto& init : model.graph().initializer()) {
    REMEX_RETURN_IF_ERROR(add(init, "initializer '" + init.name() + "'"));
  }
  for (const auto& node : model.graph().node()) {
    if (node.op_type() != "Constant") continue;
    for (const auto& attr : node.attribute()) {
      if (attr.name() == "value") REMEX_RETURN_IF_ERROR(add(attr.t(), "Constant '" + node.name() + "'"));
    }
  }
  return tensors;
}

struct Coded {
  uint64_t raw = 0, wire = 0;
  double compress_s = 0, decompress_s = 0;
  double max_chunk_ratio = 0;  // of the chunks coded (tensors under kMinCompressBytes stay raw)
};

// Codes every tensor of `tensors` chunk by chunk; checks the round trip.
StatusOr<Coded> Code(const std::vector<vm::ConstantDef>& tensors, int level, bool shuffle) {
  Coded c;
  std::vector<std::byte> shuffled, restored, unshuffled;
  for (const auto& t : tensors) {
    std::span<const std::byte> data(t.data);
    c.raw += data.size();
    if (data.size() < rpc::kMinCompressBytes) {
      c.wire += data.size();
      continue;
    }
    size_t element = DTypeSize(t.dtype);
    bool do_shuffle = shuffle && rpc::IsShuffleElementSize(element);
    for (size_t off = 0; off < data.size(); off += rpc::kAttachmentChunkBytes) {
      auto chunk = data.subspan(off, std::min(rpc::kAttachmentChunkBytes, data.size() - off));
      auto t0 = Clock::now();
      std::span<const std::byte> src = chunk;
      if (do_shuffle) {
        shuffled.resize(chunk.size());
        rpc::ByteShuffle(chunk, shuffled, element);
        src = shuffled;
      }
      REMEX_ASSIGN_OR_RETURN(auto frame, rpc::ZstdCompress(src, level));
      c.compress_s += SecondsSince(t0);
      c.wire += frame.size();
      c.max_chunk_ratio =
          std::max(c.max_chunk_ratio, static_cast<double>(chunk.size()) / static_cast<double>(frame.size()));
      t0 = Clock::now();
      restored.resize(chunk.size());
      REMEX_RETURN_IF_ERROR(rpc::ZstdDecompress(frame, restored));
      if (do_shuffle) {
        unshuffled.resize(chunk.size());
        rpc::ByteUnshuffle(restored, unshuffled, element);
        restored.swap(unshuffled);
      }
      c.decompress_s += SecondsSince(t0);
      if (std::memcmp(restored.data(), chunk.data(), chunk.size()) != 0) {
        return Internal("round trip changed the bytes");
      }
    }
  }
  return c;
}

int Main(int argc, char** argv) {
  CLI::App app{"compression_bench: zstd with and without byte shuffle on the PP-OCR models' weights"};
  const char* env = std::getenv("REMEX_MODELS_DIR");
  std::string dir = env ? env : "";
  std::vector<int> levels = {1, 3};
  int repeat = 3;
  bool json = false;
  std::vector<std::string> models = {"ch_PP-OCRv4_det_infer.onnx", "ch_PP-OCRv4_rec_infer.onnx",
                                     "ch_ppocr_mobile_v2.0_cls_infer.onnx"};
  app.add_option("--models-dir", dir, "folder of the PP-OCR .onnx files (default $REMEX_MODELS_DIR)");
  app.add_option("--levels", levels, "zstd levels")->delimiter(',')->capture_default_str();
  app.add_option("--models", models, "the .onnx files of --models-dir to read")->delimiter(',')->capture_default_str();
  app.add_option("--repeat", repeat, "runs per case (best is reported)")->capture_default_str();
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  if (dir.empty()) {
    std::fprintf(stderr, "compression_bench: give --models-dir or set REMEX_MODELS_DIR (scripts/fetch-models.sh)\n");
    return 2;
  }
  nlohmann::json report = {{"models_dir", dir}, {"chunk_bytes", rpc::kAttachmentChunkBytes}, {"cases", nlohmann::json::array()}};
  if (!json) {
    std::printf("compression_bench: weights coded in %zu KiB chunks, best of %d runs, one thread\n",
                rpc::kAttachmentChunkBytes / 1024, repeat);
    std::printf("  %-38s %10s %5s %7s %8s %10s %12s %12s\n", "model", "raw bytes", "zstd", "shuffle", "ratio",
                "max chunk", "comp MB/s", "decomp MB/s");
  }
  for (const std::string& name : models) {
    std::string path = (std::filesystem::path(dir) / name).string();
    auto tensors = ReadWeights(path);
    if (!tensors.ok()) {
      std::fprintf(stderr, "compression_bench: %s\n", tensors.status().ToString().c_str());
      return 1;
    }
    for (int level : levels) {
      for (bool shuffle : {false, true}) {
        Coded best;
        for (int r = 0; r < repeat; ++r) {
          auto c = Code(*tensors, level, shuffle);
          if (!c.ok()) {
            std::fprintf(stderr, "compression_bench: %s\n", c.status().ToString().c_str());
            return 1;
          }
          if (r == 0) {
            best = *c;
          } else {
            best.compress_s = std::min(best.compress_s, c->compress_s);
            best.decompress_s = std::min(best.decompress_s, c->decompress_s);
          }
        }
        double ratio = static_cast<double>(best.raw) / static_cast<double>(best.wire);
        double comp = best.raw / best.compress_s / 1e6, decomp = best.raw / best.decompress_s / 1e6;
        report["cases"].push_back({{"model", name}, {"tensors", tensors->size()}, {"raw_bytes", best.raw},
                                   {"wire_bytes", best.wire}, {"level", level}, {"shuffle", shuffle},
                                   {"ratio", ratio}, {"max_chunk_ratio", best.max_chunk_ratio},
                                   {"compress_mbps", comp}, {"decompress_mbps", decomp}});
        if (!json) {
          std::printf("  %-38s %10llu %5d %7s %8.3f %10.2f %12.0f %12.0f\n", name.c_str(),
                      static_cast<unsigned long long>(best.raw), level, shuffle ? "yes" : "no", ratio,
                      best.max_chunk_ratio, comp, decomp);
        }
      }
    }
  }
  if (json) std::printf("%s\n", report.dump(2).c_str());
  return 0;
}

}  // namespace
}  // namespace remex::bench

int main(int argc, char** argv) { return remex::bench::Main(argc, argv); }
