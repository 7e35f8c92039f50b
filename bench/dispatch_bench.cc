// dispatch_bench: shape-bucket dispatch against the generic function, on the CPU VM
// in this process (no network: the figures are the VM's own).
//
//   dispatch_bench [--preset rec|det|both] [--calls 24] [--rounds 2] [--seed 1] [--json]
//
// Needs REMEX_MODELS_DIR (PP-OCRv4 models, as scripts/test.sh sets it).
//
// Part 1, a sequence of varying shapes. The same model is compiled twice: generic
// (no --dispatch) and bucketed (the preset's specs). A seeded sequence of --calls
// input shapes is run once untimed (warm-up: every shape once, so each bucket has
// made its arena and the allocator its cache), then --rounds times timed. Per call:
// wall time of SetInputs + Invoke, and the buffers the VM allocated
// (VirtualMachine::last_invoke_allocations). Outputs are written into buffers bound
// beforehand (SetOutput, as invoke_with_outputs does), so the count is the call's
// own: a bucketed call after warm-up allocates nothing. "dev allocs/call" counts
// those of the allocator's requests its cache could not serve (Device::Allocate). The two executables run on
// separate VMs and allocators and take turns round by round.
//   rec: x [1, 3, 48, W], W uniform in [32, 1024] (multiples of 8);
//        buckets p2o.DynamicDimension.1=log:2:32:2048 (7)
//   det: x [1, 3, H, W], H and W uniform in [256, 640] (multiples of 32);
//        buckets log:2:256:1024 on H and W (3 x 3)
//
// Part 2, compile time and executable size against the bucket count (rec, width
// specs with 1, 2, 4, 7 and 16 buckets): the median of 3 compiles, and the .rmx size.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>

#include "bench/bench_util.h"
#include "host_client/tooling/bench_stats.h"
#include "host_client/compiler/compiler.h"
#include "vm/vm.h"

namespace remex::bench {
namespace {

struct Preset {
  std::string name;
  std::string model;
  std::map<std::string, compiler::DimBounds> bounds;
  std::vector<std::string> specs;
  // The i-th shape of the sequence.
  std::function<Shape(std::mt19937&)> shape;
};

Preset Rec() {
  return {"rec",
          "ch_PP-OCRv4_rec_infer.onnx",
          {{"p2o.DynamicDimension.0", {1, 1}}},
          {"p2o.DynamicDimension.1=log:2:32:2048"},
          [](std::mt19937& rng) {
            return Shape{1, 3, 48, 8 * std::uniform_int_distribution<int64_t>(4, 128)(rng)};
          }};
}

Preset Det() {
  return {"det",
          "ch_PP-OCRv4_det_infer.onnx",
          {{"p2o.DynamicDimension.0", {1, 1}}},
          {"p2o.DynamicDimension.1=log:2:256:1024", "p2o.DynamicDimension.2=log:2:256:1024"},
          [](std::mt19937& rng) {
            std::uniform_int_distribution<int64_t> d(8, 20);
            return Shape{1, 3, 32 * d(rng), 32 * d(rng)};
          }};
}

StatusOr<vm::ExecutableDef> Compile(const std::string& path, const kernels::KernelRegistry& registry,
                                    const Preset& p, const std::vector<std::string>& specs,
                                    compiler::CompileStats* stats = nullptr) {
  compiler::CompileOptions options;
  options.bounds = p.bounds;
  for (const auto& s : specs) {
    REMEX_ASSIGN_OR_RETURN(auto spec, compiler::ParseDispatchSpec(s));
    options.dispatch.push_back(spec);
  }
  return compiler::CompileOnnxFile(path, registry, options, stats);
}

struct SequenceFigures {
  std::vector<double> ms;           // per timed call
  std::vector<double> allocations;  // per timed call
  std::vector<double> misses;       // per timed call: allocations that reached the device (cache misses)
  std::map<std::string, int> served;
};

// One executable on its own CPU VM, with inputs and bound output buffers for every
// shape of the sequence, made before anything is timed.
class Runner {
 public:
  static StatusOr<std::unique_ptr<Runner>> Create(const vm::ExecutableDef& def, const kernels::KernelRegistry& registry,
                                                  const std::vector<Shape>& shapes) {
    auto r = std::unique_ptr<Runner>(new Runner);
    r->def_ = def;
    REMEX_ASSIGN_OR_RETURN(auto exe, vm::Executable::FromDef(def, registry));
    REMEX_ASSIGN_OR_RETURN(r->machine_, vm::VirtualMachine::Create(exe, r->allocator_, registry));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::map<Shape, std::pair<vm::TensorPtr, vm::TensorPtr>> made;
    for (const Shape& s : shapes) {
      auto& io = made[s];
      if (!io.first) {
        REMEX_ASSIGN_OR_RETURN(io.first, vm::AllocateTensor(*r->allocator_, DType::kFloat32, s));
        float* p = static_cast<float*>(io.first->data());
        for (int64_t i = 0; i < *NumElements(s); ++i) p[i] = dist(rng);
        // The output's shape: from an unbound call.
        REMEX_RETURN_IF_ERROR(r->machine_->SetInputs(0, {io.first}));
        REMEX_ASSIGN_OR_RETURN(auto out, r->machine_->Invoke(0));
        REMEX_ASSIGN_OR_RETURN(io.second, vm::AllocateTensor(*r->allocator_, out[0]->dtype, out[0]->shape));
      }
      r->inputs_.push_back(io.first);
      r->outputs_.push_back(io.second);
    }
    return r;
  }

  // One pass over the sequence; recorded in `f` unless null (warm-up).
  Status Pass(SequenceFigures* f) {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      REMEX_RETURN_IF_ERROR(machine_->SetOutput(0, 0, outputs_[i]));
      const uint64_t device_before = allocator_->stats().device_allocations;
      auto start = Clock::now();
      REMEX_RETURN_IF_ERROR(machine_->SetInputs(0, {inputs_[i]}));
      REMEX_RETURN_IF_ERROR(machine_->Invoke(0).status());
      double s = SecondsSince(start);
      if (!f) continue;
      f->ms.push_back(s * 1e3);
      f->allocations.push_back(static_cast<double>(machine_->last_invoke_allocations()));
      f->misses.push_back(static_cast<double>(allocator_->stats().device_allocations - device_before));
      f->served[def_.functions[machine_->last_invoke_function()].name]++;
    }
    return OkStatus();
  }

 private:
  Runner() = default;
  vm::ExecutableDef def_;
  std::unique_ptr<vm::Device> device_ = vm::CreateCpuDevice();
  std::shared_ptr<vm::Allocator> allocator_ = vm::Allocator::Create(*device_);
  std::unique_ptr<vm::VirtualMachine> machine_;
  std::vector<vm::TensorPtr> inputs_, outputs_;
};

int Fail(const Status& st) {
  std::fprintf(stderr, "dispatch_bench: %s\n", st.ToString().c_str());
  return 1;
}

// Generic and bucketed run the same sequence, in alternating order round by round
// (so that drift of the machine falls on both), after one untimed round each.
int RunPreset(const Preset& p, const std::string& models, const kernels::KernelRegistry& registry, int calls,
              int rounds, uint32_t seed, nlohmann::json& report) {
  const std::string path = models + "/" + p.model;
  std::mt19937 rng(seed);
  std::vector<Shape> shapes;
  for (int i = 0; i < calls; ++i) shapes.push_back(p.shape(rng));
  std::printf("== %s: %d calls of varying shape, %d timed rounds after one warm-up round\n", p.name.c_str(), calls,
              rounds);
  std::unique_ptr<Runner> runners[2];
  uint64_t arena[2] = {0, 0};
  for (int b = 0; b < 2; ++b) {
    compiler::CompileStats stats;
    auto def = Compile(path, registry, p, b ? p.specs : std::vector<std::string>{}, &stats);
    if (!def.ok()) return Fail(def.status());
    auto r = Runner::Create(*def, registry, shapes);
    if (!r.ok()) return Fail(r.status());
    runners[b] = std::move(r).value();
    for (const auto& fn : stats.functions) arena[b] += fn.memory.arena_bytes[0] + fn.memory.arena_bytes[1];
    if (Status st = runners[b]->Pass(nullptr); !st.ok()) return Fail(st);
  }
  SequenceFigures figures[2];
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      const int b = (round + k) % 2;
      if (Status st = runners[b]->Pass(&figures[b]); !st.ok()) return Fail(st);
    }
  }
  std::printf("%-10s %10s %10s %10s %12s %14s %10s\n", "function", "mean ms", "median ms", "p90 ms", "allocs/call",
              "dev allocs/call", "arena MiB");
  nlohmann::json out;
  for (int b = 0; b < 2; ++b) {
    SampleStats ms = Summarize(figures[b].ms);
    SampleStats allocs = Summarize(figures[b].allocations);
    SampleStats misses = Summarize(figures[b].misses);
    const char* name = b ? "bucketed" : "generic";
    std::printf("%-10s %10.2f %10.2f %10.2f %12.2f %14.2f %10.1f\n", name, ms.mean, ms.median, ms.p90, allocs.mean,
                misses.mean, arena[b] / 1048576.0);
    out[name] = {{"mean_ms", ms.mean},
                 {"median_ms", ms.median},
                 {"p90_ms", ms.p90},
                 {"allocations_per_call", allocs.mean},
                 {"max_allocations", allocs.max},
                 {"device_allocations_per_call", misses.mean},
                 {"arena_bytes_all_buckets", arena[b]},
                 {"served", figures[b].served}};
  }
  report[p.name] = out;
  return 0;
}

int CompileScaling(const std::string& models, const kernels::KernelRegistry& registry, nlohmann::json& report) {
  const Preset p = Rec();
  const std::string path = models + "/" + p.model;
  const std::string w = "p2o.DynamicDimension.1=";
  const std::vector<std::vector<std::string>> specs = {{},
                                                       {w + "edges:2048"},
                                                       {w + "edges:256,2048"},
                                                       {w + "log:4:32:2048"},
                                                       {w + "log:2:32:2048"},
                                                       {w + "uniform:128:128:2048"}};
  std::printf("== compile time and executable size against the bucket count (rec)\n");
  std::printf("%8s %10s %12s %12s %14s\n", "buckets", "functions", "compile ms", "rmx bytes", "bytecode bytes");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& s : specs) {
    std::vector<double> ms;
    compiler::CompileStats stats;
    uint64_t size = 0;
    for (int i = 0; i < 3; ++i) {
      auto start = Clock::now();
      auto def = Compile(path, registry, p, s, &stats);
      ms.push_back(SecondsSince(start) * 1e3);
      if (!def.ok()) {
        std::fprintf(stderr, "dispatch_bench: %s\n", def.status().ToString().c_str());
        return 1;
      }
      auto bytes = vm::SerializeExecutable(*def);
      if (!bytes.ok()) return 1;
      size = bytes->size();
    }
    uint64_t code = 0;
    for (const auto& f : stats.functions) code += f.code_bytes;
    const double median = Summarize(ms).median;
    std::printf("%8d %10zu %12.1f %12llu %14llu\n", stats.buckets, stats.functions.size(), median,
                static_cast<unsigned long long>(size), static_cast<unsigned long long>(code));
    rows.push_back({{"spec", s.empty() ? "" : s[0]}, {"buckets", stats.buckets}, {"functions", stats.functions.size()},
                    {"compile_ms", median}, {"executable_bytes", size}, {"bytecode_bytes", code},
                    {"constant_bytes", stats.constant_bytes}});
  }
  report["compile_scaling"] = rows;
  return 0;
}

}  // namespace
}  // namespace remex::bench

int main(int argc, char** argv) {
  CLI::App app{"shape-bucket dispatch against the generic function, on the CPU VM"};
  std::string preset = "both";
  int calls = 24, rounds = 2;
  uint32_t seed = 1;
  bool json = false;
  app.add_option("--preset", preset, "rec, det or both")->capture_default_str();
  app.add_option("--calls", calls, "shapes in the sequence")->capture_default_str();
  app.add_option("--rounds", rounds, "timed rounds of the sequence")->capture_default_str();
  app.add_option("--seed", seed, "seed of the shape sequence")->capture_default_str();
  app.add_flag("--json", json, "also print the figures as JSON");
  CLI11_PARSE(app, argc, argv);
  const char* models = std::getenv("REMEX_MODELS_DIR");
  if (!models) {
    std::fprintf(stderr, "dispatch_bench: set REMEX_MODELS_DIR (scripts/fetch-models.sh)\n");
    return 2;
  }
  auto registry = remex::kernels::CreateCpuRegistry();
  if (!registry.ok()) return 1;
  nlohmann::json report;
  if (preset == "rec" || preset == "both") {
    if (remex::bench::RunPreset(remex::bench::Rec(), models, **registry, calls, rounds, seed, report)) return 1;
  }
  if (preset == "det" || preset == "both") {
    if (remex::bench::RunPreset(remex::bench::Det(), models, **registry, calls, rounds, seed, report)) return 1;
  }
  if (remex::bench::CompileScaling(models, **registry, report)) return 1;
  if (json) std::printf("%s\n", report.dump(2).c_str());
  return 0;
}
