// Stream capture and CUDA graphs, emulated (runtime.h, capture.h). A capture is a list
// of nodes, each the recorded work of one call on the capturing stream; a graph and an
// executable graph hold copies of that list, and a launch runs it in order.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cuda/emulation/capture.h"

namespace remex::cuda_emulation {
namespace {

struct Node {
  std::string name;
  std::function<cudaError_t()> run;
};

struct Capture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  bool invalidated = false;
  std::vector<Node> nodes;
};

}  // namespace
}  // namespace remex::cuda_emulation

struct CUgraph_st {
  std::vector<remex::cuda_emulation::Node> nodes;
};
struct CUgraphExec_st {
  std::vector<remex::cuda_emulation::Node> nodes;
};

namespace remex::cuda_emulation {
namespace {

struct GraphState {
  std::mutex mu;
  std::map<cudaStream_t, Capture> captures;
  std::set<cudaGraph_t> graphs;
  std::set<cudaGraphExec_t> execs;
};

GraphState& Graphs() {
  static GraphState* state = new GraphState();  // Never destroyed, as the runtime's.
  return *state;
}

std::atomic<int> g_captures{0};  // captures under way (Graphs().captures.size())

// Whether a capture of `mode` begun on thread `thread` forbids unsafe calls made on
// the calling thread.
bool Forbids(const Capture& c) {
  return c.mode == cudaStreamCaptureModeGlobal ||
         (c.mode == cudaStreamCaptureModeThreadLocal && c.thread == std::this_thread::get_id());
}

}  // namespace

bool AnyCapture() { return g_captures.load(std::memory_order_acquire) > 0; }

bool RecordIfCapturing(cudaStream_t stream, const char* name, std::function<cudaError_t()>& work,
                       cudaError_t* result) {
  if (!AnyCapture() || stream == nullptr) return false;
  GraphState& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.captures.find(stream);
  if (it == g.captures.end()) return false;
  if (it->second.invalidated) {
    *result = Fail(cudaErrorStreamCaptureInvalidated, name, "the stream's capture was invalidated before");
    return true;
  }
  it->second.nodes.push_back(Node{name, std::move(work)});
  *result = cudaSuccess;
  return true;
}

cudaError_t RefuseOnCapturingStream(cudaStream_t stream, const char* call, cudaError_t error,
                                    const char* detail) {
  if (!AnyCapture() || stream == nullptr) return cudaSuccess;
  GraphState& g = Graphs();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = g.captures.find(stream);
    if (it == g.captures.end()) return cudaSuccess;
    it->second.invalidated = true;
  }
  return Fail(error, call, detail);
}

cudaError_t RefuseDuringUnsafeCapture(const char* call, cudaError_t error) {
  if (!AnyCapture()) return cudaSuccess;
  GraphState& g = Graphs();
  bool refused = false;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    for (auto& [stream, capture] : g.captures) {
      if (Forbids(capture)) {
        capture.invalidated = true;
        refused = true;
      }
    }
  }
  if (!refused) return cudaSuccess;
  return Fail(error, call,
              "not permitted while a stream captures in mode global (or thread-local, on this thread)");
}

void ForgetCapture(cudaStream_t stream) {
  GraphState& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.captures.erase(stream) > 0) g_captures.fetch_sub(1, std::memory_order_release);
}

void ForgetGraphs() {
  GraphState& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  g_captures.fetch_sub(static_cast<int>(g.captures.size()), std::memory_order_release);
  g.captures.clear();
  for (cudaGraph_t graph : g.graphs) delete graph;
  g.graphs.clear();
  for (cudaGraphExec_t exec : g.execs) delete exec;
  g.execs.clear();
}

cudaError_t Enqueue(cudaStream_t stream, const char* name, std::function<cudaError_t()> work) {
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, name, "stream was destroyed or never created");
  }
  cudaError_t result;
  if (RecordIfCapturing(stream, name, work, &result)) return result;
  return work();
}

}  // namespace remex::cuda_emulation

using namespace remex::cuda_emulation;  // NOLINT: the runtime's C-style API is global.

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  constexpr const char* kCall = "cudaStreamBeginCapture";
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, kCall, "stream was destroyed or never created");
  }
  if (stream == nullptr) {
    return Fail(cudaErrorStreamCaptureUnsupported, kCall, "the legacy default stream cannot be captured");
  }
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed) {
    return Fail(cudaErrorInvalidValue, kCall, "unknown capture mode");
  }
  GraphState& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  Capture capture;
  capture.mode = mode;
  capture.thread = std::this_thread::get_id();
  if (!g.captures.emplace(stream, std::move(capture)).second) {
    return Fail(cudaErrorIllegalState, kCall, "the stream is already capturing");
  }
  g_captures.fetch_add(1, std::memory_order_release);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  constexpr const char* kCall = "cudaStreamEndCapture";
  if (!graph) return Fail(cudaErrorInvalidValue, kCall, "null graph");
  *graph = nullptr;
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, kCall, "stream was destroyed or never created");
  }
  GraphState& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.captures.find(stream);
  if (it == g.captures.end()) {
    return Fail(cudaErrorIllegalState, kCall, "the stream is not capturing");
  }
  if (it->second.mode != cudaStreamCaptureModeRelaxed && it->second.thread != std::this_thread::get_id()) {
    return Fail(cudaErrorStreamCaptureWrongThread, kCall,
                "a capture of mode global or thread-local ends on the thread that began it");
  }
  Capture capture = std::move(it->second);
  g.captures.erase(it);
  g_captures.fetch_sub(1, std::memory_order_release);
  if (capture.invalidated) {
    return Fail(cudaErrorStreamCaptureInvalidated, kCall, "a call during the capture invalidated it");
  }
  *graph = new CUgraph_st{std::move(capture.nodes)};
  g.graphs.insert(*graph);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  constexpr const char* kCall = "cudaStreamIsCapturing";
  if (!status) return Fail(cudaErrorInvalidValue, kCall, "null status");
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, kCall, "stream was destroyed or never created");
  }
  *status = cudaStreamCaptureStatusNone;
  if (!AnyCapture()) return cudaSuccess;
  GraphState& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.captures.find(stream);
  if (it != g.captures.end()) {
    *status = it->second.invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  constexpr const char* kCall = "cudaGraphInstantiate";
  if (!exec) return Fail(cudaErrorInvalidValue, kCall, "null executable graph");
  *exec = nullptr;
  if (flags != 0) return Fail(cudaErrorInvalidValue, kCall, "instantiation flags are not emulated");
  GraphState& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!graph || g.graphs.count(graph) == 0) {
    return Fail(cudaErrorInvalidValue, kCall, "graph was destroyed or never created");
  }
  // The executable graph is independent of the graph from now on, as CUDA's is.
  *exec = new CUgraphExec_st{graph->nodes};
  g.execs.insert(*exec);
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  constexpr const char* kCall = "cudaGraphLaunch";
  if (!IsValidStream(stream)) {
    return Fail(cudaErrorInvalidResourceHandle, kCall, "stream was destroyed or never created");
  }
  std::vector<Node> nodes;
  {
    GraphState& g = Graphs();
    std::lock_guard<std::mutex> lock(g.mu);
    if (!exec || g.execs.count(exec) == 0) {
      return Fail(cudaErrorInvalidResourceHandle, kCall, "executable graph was destroyed or never created");
    }
    nodes = exec->nodes;  // the nodes' work runs without the lock (it launches kernels)
  }
  std::function<cudaError_t()> run = [nodes = std::move(nodes)]() {
    for (const Node& node : nodes) {
      if (cudaError_t e = node.run(); e != cudaSuccess) return e;
    }
    return cudaSuccess;
  };
  cudaError_t result;
  if (RecordIfCapturing(stream, kCall, run, &result)) return result;
  return run();
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  GraphState& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!exec || g.execs.erase(exec) == 0) {
    return Fail(cudaErrorInvalidValue, "cudaGraphExecDestroy",
                "executable graph was destroyed or never created");
  }
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  GraphState& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!graph || g.graphs.erase(graph) == 0) {
    return Fail(cudaErrorInvalidValue, "cudaGraphDestroy", "graph was destroyed or never created");
  }
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  constexpr const char* kCall = "cudaGraphGetNodes";
  if (!count) return Fail(cudaErrorInvalidValue, kCall, "null count");
  GraphState& g = Graphs();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!graph || g.graphs.count(graph) == 0) {
    return Fail(cudaErrorInvalidValue, kCall, "graph was destroyed or never created");
  }
  const size_t n = graph->nodes.size();
  if (nodes) {
    // Opaque handles (the nodes' positions, from 1), as many as `*count` has room for.
    const size_t written = std::min(*count, n);
    for (size_t i = 0; i < written; ++i) nodes[i] = reinterpret_cast<cudaGraphNode_t>(i + 1);
    *count = written;
  } else {
    *count = n;
  }
  return cudaSuccess;
}
