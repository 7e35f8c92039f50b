// layout_move_bench: the NCHW -> channels-last move of a uint8 or float32 activation,
// by Remex's TransposeMatrices (kernels/ops/tensor/transpose_tiles.h, what the CPU
// convolutions use where oneDNN's primitive is channels-last and the tensor
// channels-first: kernels/ops/nn/conv_common.h) against oneDNN's reorder, side by side.
//
//   layout_move_bench [--shapes 256x3136,64x3136,512x784,2048x49,3x50176] [--dtype uint8|float32]
//                     [--repeat 200] [--rounds 5]
//
// Each shape is C x S (channels x spatial positions, batch 1), the input filled once. In
// each of --rounds rounds, each way runs --repeat moves back to back (the oneDNN way
// waiting for its stream after each), the two ways in turns. Prints, per shape and way,
// the median over rounds of the mean time of one move (us) and the bytes moved per
// second (the tensor's bytes over that time, GB/s), the ratio oneDNN / Remex, and
// whether both ways wrote the same bytes (exit 1 if not). Threads: the compute threads
// of the kernels (OMP_NUM_THREADS, default all the CPU's).
#include <CLI/CLI.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/ops/tensor/transpose_tiles.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the NCHW -> channels-last move of an activation: Remex's transposes against oneDNN's reorder"};
  std::string shapes = "256x3136,64x3136,512x784,2048x49,3x50176";
  std::string dtype = "uint8";
  int repeat = 200, rounds = 5;
  app.add_option("--shapes", shapes, "C x S of each case, comma-separated");
  app.add_option("--dtype", dtype, "uint8 or float32")->check(CLI::IsMember({"uint8", "float32"}));
  app.add_option("--repeat", repeat, "moves per way per round")->check(CLI::Range(1, 100000));
  app.add_option("--rounds", rounds, "rounds, the two ways in turns")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  const bool bytes = dtype == "uint8";
  const size_t es = bytes ? 1 : 4;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  bool all_same = true;
  std::printf("%-12s %-8s %12s %10s %12s %10s %8s %5s\n", "C x S", "dtype", "remex us", "GB/s", "onednn us", "GB/s",
              "ratio", "same");
  std::stringstream list(shapes);
  for (std::string item; std::getline(list, item, ',');) {
    int64_t c = 0, s = 0;
    if (std::sscanf(item.c_str(), "%" SCNd64 "x%" SCNd64, &c, &s) != 2 || c < 1 || s < 1 || c * s > (int64_t{1} << 30)) {
      std::fprintf(stderr, "layout_move_bench: bad shape '%s' (C x S, e.g. 256x3136)\n", item.c_str());
      return 2;
    }
    const size_t n = static_cast<size_t>(c * s) * es;
    std::vector<uint8_t> x(n), ours(n), theirs(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
    const dnnl::memory::dims dims = {1, c, s, 1};
    const auto dt = bytes ? dnnl::memory::data_type::u8 : dnnl::memory::data_type::f32;
    dnnl::memory src({dims, dt, dnnl::memory::format_tag::abcd}, engine, x.data());
    dnnl::memory dst({dims, dt, dnnl::memory::format_tag::acdb}, engine, theirs.data());
    dnnl::reorder reorder(src, dst);
    auto remex_move = [&] {
      if (bytes) {
        remex::kernels::internal::TransposeMatrices(x.data(), ours.data(), 1, c, s);
      } else {
        remex::kernels::internal::TransposeMatrices(reinterpret_cast<const uint32_t*>(x.data()),
                                                    reinterpret_cast<uint32_t*>(ours.data()), 1, c, s);
      }
    };
    auto onednn_move = [&] {
      reorder.execute(stream, src, dst);
      stream.wait();
    };
    remex_move();  // first touches outside the rounds
    onednn_move();
    std::vector<double> remex_us, onednn_us;
    auto time = [&](auto&& move) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < repeat; ++i) move();
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / repeat;
    };
    for (int r = 0; r < rounds; ++r) {
      remex_us.push_back(time(remex_move));
      onednn_us.push_back(time(onednn_move));
    }
    const double a = Median(remex_us), b = Median(onednn_us);
    const bool same = ours == theirs;
    all_same = all_same && same;
    std::printf("%-12s %-8s %12.1f %10.1f %12.1f %10.1f %8.2f %5s\n", item.c_str(), dtype.c_str(), a,
                static_cast<double>(n) / a / 1e3, b, static_cast<double>(n) / b / 1e3, b / a, same ? "yes" : "NO");
  }
  return all_same ? 0 : 1;
}
