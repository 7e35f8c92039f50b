// The register-machine interpreter (destination-passing style).
//
// A VirtualMachine binds one verified Executable to one Device: it instantiates the
// executable's kernels for the device and uploads its constants once. Calls follow
// the set_input / set_output / invoke protocol of the Relay/Relax VMs:
//   SetInputs(fn, tensors)      bind inputs (dtype and shape checked)
//   SetOutput(fn, k, tensor)    bind output k to a caller buffer; later invokes write
//                               into it until it is unbound (nullptr)
//   Invoke(fn)                  run; returns the output tensors (bound ones included)
// Functions whose inputs or outputs are ONNX sequences or optionals
// (ValueDesc::kind) take and give Values: SetInputValues / InvokeValues.
// A Profiler passed to Invoke records per-instruction and per-kernel times, copies and
// device memory allocated and live (vm/profiler.h).
// Thread-safety: one VM serves one caller at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/kernels.h"
#include "vm/device/allocator.h"
#include "vm/device/cpu_device.h"
#include "vm/executable.h"
#include "vm/profiler.h"

namespace remex::vm {

// Device transfers made by the VM, by direction (count and bytes).
struct CopyStats {
  uint64_t host_to_device_count = 0;
  uint64_t host_to_device_bytes = 0;
  uint64_t device_to_host_count = 0;
  uint64_t device_to_host_bytes = 0;

  CopyStats operator-(const CopyStats& o) const {
    return {host_to_device_count - o.host_to_device_count, host_to_device_bytes - o.host_to_device_bytes,
            device_to_host_count - o.device_to_host_count, device_to_host_bytes - o.device_to_host_bytes};
  }
};

// Bounds on a run, shared by the VM and whoever may stop it (a server session): checked
// between kernels, at every backward jump (so at every Loop iteration) and at least every
// kInstructionsPerCheck instructions, so a run stops within one kernel of being
// cancelled or of its deadline, however the executable loops.
// The run also yields to its scheduler, when it has one: after every kernel, and, when
// it launches none, once `slice` has passed since it last yielded (noticed at its next
// backward jump, or within kInstructionsPerCheck instructions). However an executable
// loops, it thus hands the scheduler back within one kernel, one other instruction (a
// copy between host and device, at most) or about one slice.
struct RunControl {
  // Instructions a run may go without a kernel or a backward jump before it reads the
  // clock to check its bounds and its slice.
  static constexpr uint32_t kInstructionsPerCheck = 32;

  // Set from any thread: the run stops with CANCELLED and `reason`.
  std::atomic<bool> cancelled{false};
  std::string reason = "cancelled";  // written before `cancelled` is set
  // A run past it stops with DEADLINE_EXCEEDED; time_point::max(): none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::chrono::milliseconds budget{0};  // the deadline's duration, for the error message
  // When set and past (steady-clock ticks): the run stops with UNAVAILABLE (the server
  // is shutting down). Not owned.
  const std::atomic<int64_t>* shutdown_at = nullptr;
  // Called after every kernel, and when the run has gone `slice` without calling it (a
  // loop of jumps, a long stretch of instructions without a kernel), after the checks,
  // which are made again when it returns: lets a scheduler run other work (the device
  // server's worker interleaves sessions there), which may cancel this run meanwhile.
  // nullptr: none.
  void (*yield)() = nullptr;
  // Longest a run goes on between calls of `yield` when it launches no kernel (plus
  // what it takes to notice: up to kInstructionsPerCheck instructions). Zero: at every
  // check.
  std::chrono::nanoseconds slice = std::chrono::microseconds(100);

  // OK, or the error that stops the run; `now` is the steady clock's time.
  Status Check() const { return Check(std::chrono::steady_clock::now()); }
  Status Check(std::chrono::steady_clock::time_point now) const;
};

// A function's input or output (ValueDesc::kind says which kind a function takes): a
// tensor, a sequence of tensors (ONNX sequence: every element of the declared dtype),
// or nothing (an ONNX optional without a value). An optional with a value is given
// and returned as that value: a tensor or a sequence.
struct Value {
  enum class Kind : uint8_t { kTensor, kSequence, kNone };
  Kind kind = Kind::kTensor;
  TensorPtr tensor;                 // kTensor
  std::vector<TensorPtr> elements;  // kSequence, in order

  static Value OfTensor(TensorPtr t) { return {Kind::kTensor, std::move(t), {}}; }
  static Value OfSequence(std::vector<TensorPtr> e) { return {Kind::kSequence, nullptr, std::move(e)}; }
  static Value None() { return {Kind::kNone, nullptr, {}}; }
};

class VirtualMachine {
 public:
  // UNIMPLEMENTED when an op has no kernel for `allocator.device()`, INVALID_ARGUMENT
  // for attributes a kernel rejects (naming the node), RESOURCE_EXHAUSTED when the
  // constants do not fit.
  static StatusOr<std::unique_ptr<VirtualMachine>> Create(
      std::shared_ptr<const Executable> executable, std::shared_ptr<Allocator> allocator,
      const kernels::KernelRegistry& registry);

  const Executable& executable() const { return *executable_; }

  // Another instance of this VM's executable, for running calls of one module side by
  // side (loadTest): its own kernels (from `registry`), inputs (none bound), planned
  // memory, run control and counters; the constants are this VM's tensors, shared and
  // never copied (they are read-only: Tensor::constant). Its memory comes from
  // `allocator` (nullptr: this VM's), whose device may be another queue on the same
  // memory (a stream of this VM's device: Allocator::CreateForQueue over
  // Device::CreateStream, with a registry whose kernels queue on that stream), so that
  // instances run concurrently on the device; the constants must then be complete on
  // this VM's queue before the instance runs (Synchronize). Tensors bound to it may
  // live anywhere in that memory. The instance must not outlive this VM's allocator.
  // INVALID_ARGUMENT when `allocator`'s memory is another device's; errors as
  // Create's for the kernels.
  StatusOr<std::unique_ptr<VirtualMachine>> CreateInstance(const kernels::KernelRegistry& registry,
                                                           std::shared_ptr<Allocator> allocator = nullptr) const;
  // The values bound to function `fn`'s inputs; empty before they are set (or for an
  // unknown index).
  const std::vector<Value>& bound_inputs(int fn) const;

  // Binds every input of function `fn` in signature order. INVALID_ARGUMENT naming the
  // input for a wrong count, dtype, rank or static dimension, a tensor on another
  // device, a symbolic dimension outside its bounds, or inputs that give one symbol
  // two values.
  // A function with a sequence or optional input takes SetInputValues instead
  // (INVALID_ARGUMENT naming the input otherwise).
  Status SetInputs(int fn, std::vector<TensorPtr> inputs);
  // Binds every input of `fn` as SetInputs does, each of its declared kind: a
  // sequence's elements are device tensors of the declared dtype (and of the declared
  // element shape, where it is known); an optional input takes Value::None() or a
  // value of its kind. INVALID_ARGUMENT naming the input (and the element) otherwise.
  // Both leave no inputs bound when they refuse some: the next invoke fails
  // (FAILED_PRECONDITION) until inputs are set, instead of running on the old ones.
  Status SetInputValues(int fn, std::vector<Value> inputs);
  // Binds output `index` of `fn` to `tensor` (nullptr unbinds). The dtype is checked
  // now, the shape at each invoke (dynamic outputs).
  Status SetOutput(int fn, int index, TensorPtr tensor);
  // Runs `fn`. FAILED_PRECONDITION when inputs are not set; errors from shape
  // functions and kernels carry the instruction and the node they came from; ABORTED
  // "device fault" when the device faulted (Device::Health), its code kept. With a
  // `profiler` (not owned; nullptr: none), every instruction run is recorded in it.
  // A function with a sequence or optional output is run with InvokeValues
  // (FAILED_PRECONDITION naming the output otherwise).
  StatusOr<std::vector<TensorPtr>> Invoke(int fn, Profiler* profiler = nullptr);
  // Runs `fn` as Invoke does and returns each output as a Value of its declared kind.
  // The elements of a returned sequence or optional are new device tensors (copies),
  // never the function's inputs or constants.
  StatusOr<std::vector<Value>> InvokeValues(int fn, Profiler* profiler = nullptr);

  // Bounds later runs by `control` (not owned, must outlive the VM's runs; nullptr:
  // unbounded). A run it stops returns CANCELLED or DEADLINE_EXCEEDED naming the
  // instruction it stopped at; the VM stays usable.
  void set_run_control(const RunControl* control) { control_ = control; }

  // Every transfer since Create (constants' upload included).
  const CopyStats& copy_stats() const { return copies_; }
  // The transfers of the last Invoke alone.
  const CopyStats& last_invoke_copies() const { return last_copies_; }
  uint64_t invoke_count() const { return invokes_; }

  // Buffers the VM requested from its allocators (device and host memory) since
  // Create, constants included: every tensor it allocates, copy it makes and arena
  // it creates. Tensors placed in a function's planned arena (AllocPlanned) are not
  // allocations, and neither is an output written into a buffer bound by SetOutput.
  uint64_t allocation_count() const { return allocations_; }
  // The allocations of the last Invoke alone.
  uint64_t last_invoke_allocations() const { return last_allocations_; }
  // The function whose body ran the last Invoke: the called function itself, or the
  // one it passed the call to with TailCall (the shape bucket that served it). -1
  // before the first successful Invoke.
  int last_invoke_function() const { return last_function_; }

  // Device graphs (DeviceCapabilities::graphs: CUDA Graphs on a GPU; off by default,
  // and staying off on a device without them). With them on, calls of a function whose
  // inputs and outputs are tensors are served per set of input shapes:
  //   1st call with the shapes: runs as usual, and tells whether the function stays on
  //       the device for them: no transfer with the host (no shape read from data, no
  //       If or Loop deciding on a device value); host kernels on host constants and
  //       shapes may run, they decide the same at every call with the shapes;
  //   2nd call: when it did, the run is recorded into a device graph (DeviceGraph),
  //       then launched;
  //   later calls: the graph is launched, one submission instead of one per kernel.
  // A launch first copies the call's inputs into the graph's own input buffers and
  // afterwards its outputs into the bound output buffers (SetOutput) or new tensors,
  // all on the device: every output handle stays the caller's, as without graphs. A
  // recording that fails (a kernel that waits for the device or reads back data; see
  // Device::BeginCapture) leaves those shapes to plain calls for good; one stopped from
  // outside (cancelled, past its deadline, the server stopping, a device fault) is
  // the call's error, and the next call with those shapes records again. The bucket a
  // dispatcher chose (TailCall) is part of what is recorded, so each bucket's shapes
  // get a graph of their own. At most kMaxGraphShapes sets of shapes are tracked per
  // function; the least recently used goes, with its graph. A graph holds every buffer
  // its work uses (inputs, outputs, intermediates, kernel workspaces), charged to this
  // VM's allocator, until it goes: set_device_graphs(false) drops them all. Calls with
  // a profiler run without graphs.
  static constexpr size_t kMaxGraphShapes = 16;
  void set_device_graphs(bool on);
  bool device_graphs() const { return device_graphs_; }
  struct GraphStats {
    uint64_t launches = 0;    // calls served by a graph
    uint64_t recordings = 0;  // graphs recorded
    uint64_t refusals = 0;    // sets of shapes left to plain calls
    uint64_t live = 0;        // graphs held now
    uint64_t nodes = 0;       // operations recorded, over all recordings
  };
  const GraphStats& graph_stats() const { return graph_stats_; }
  // Told when a set of input shapes of function `fn` gets its device graph (`recorded`
  // true; `detail`: "N operations") or is refused one (false; `detail`: why). The
  // device server logs both. nullptr: nobody.
  using GraphObserver =
      std::function<void(int fn, const std::vector<Shape>& shapes, bool recorded, const std::string& detail)>;
  void set_graph_observer(GraphObserver observer) { graph_observer_ = std::move(observer); }
  // Whether the last Invoke launched a device graph.
  bool last_invoke_graph() const { return last_invoke_graph_; }
  // Why the graph of function `fn` for `input_shapes` was refused; empty when it was
  // not (or those shapes are not tracked).
  std::string graph_refusal(int fn, const std::vector<Shape>& input_shapes) const;

  // Appends every buffer this VM keeps alive: its constants' copies, each function's
  // planned arenas, and the inputs and bound outputs of each function's last
  // SetInputs or Invoke (kept until the next, even after the session freed their
  // handles). A buffer may be appended more than once. listHandles counts the bytes
  // of those from the session's allocator.
  void HeldBuffers(std::vector<const Buffer*>& out) const;

 private:
  // SetInputValues's checks of `inputs` against function `fn`'s signature and symbols.
  Status CheckInputValues(int fn, const std::vector<Value>& inputs) const;
  // A function's calls with one set of input shapes, under device graphs.
  struct GraphEntry {
    int plain_runs = 0;  // 1 once a plain call stayed on the device
    bool refused = false;
    std::string reason;  // why refused
    std::unique_ptr<DeviceGraph> graph;
    std::vector<TensorPtr> inputs;   // the graph's own, copied into before a launch
    std::vector<TensorPtr> outputs;  // where it leaves the outputs, copied out after
    std::vector<std::shared_ptr<Buffer>> held;  // every buffer its work uses
    int body = -1;                              // the function whose body ran (TailCall)
    uint64_t last_used = 0;
  };
  struct FunctionState {
    std::vector<Value> inputs;
    std::vector<TensorPtr> bound_outputs;
    bool inputs_set = false;
    std::shared_ptr<Buffer> arenas[2];  // planned memory, made on first use
    std::map<std::vector<Shape>, GraphEntry> graphs;  // device graphs, by input shapes
  };
  // InvokeValues's run of `fn` under device graphs (see set_device_graphs).
  Status RunWithGraphs(int fn, std::vector<Value>& outputs);
  // Records the call of `fn` on its bound inputs' shapes into `entry`.
  Status RecordGraph(int fn, GraphEntry& entry);
  // Serves the call of `fn` with `entry`'s graph.
  Status LaunchGraph(int fn, GraphEntry& entry, std::vector<Value>& outputs);

  VirtualMachine(std::shared_ptr<const Executable> executable, std::shared_ptr<Allocator> allocator)
      : executable_(std::move(executable)), allocator_(std::move(allocator)) {}
  // Makes one kernel per KernelEntry of the executable (Create, CreateInstance).
  Status CreateKernels(const kernels::KernelRegistry& registry);
  // Runs function `fn` on `inputs`, writing outputs into `bound_outputs` where set.
  Status Run(int fn, const std::vector<Value>& inputs, const std::vector<TensorPtr>& bound_outputs,
             std::vector<Value>& outputs, Profiler* profiler);
  // A new device tensor holding `t`'s values (an element of a returned sequence).
  StatusOr<TensorPtr> CopyOf(const TensorPtr& t);
  // ConcatAppend of `parts` along `axis` for the function's output `output` (`bound`:
  // its bound buffer, or null); see opcodes.def. `dense`: into a new dense tensor (its readers
  // take no view; dense_appends_).
  StatusOr<TensorPtr> ConcatAppend(const std::vector<TensorPtr>& parts, int64_t axis, const TensorPtr& bound,
                                   const ValueDesc& output, bool dense);
  // AllocateTensor, counted (device_allocations_ too when `allocator` is allocator_).
  StatusOr<TensorPtr> Allocate(Allocator& allocator, DType dtype, const Shape& shape);
  // The tensor of AllocPlanned: a view of `fn`'s arena in memory space `space`.
  StatusOr<TensorPtr> PlacedTensor(int fn, int64_t space, DType dtype, const Shape& shape, int64_t offset,
                                   int64_t slot_bytes);
  bool OnHost(const Tensor& t) const { return &t.buffer->device() == &HostDevice(); }
  // A host tensor holding `t`'s values: `t` itself when it is on the host, else a
  // counted device-to-host copy.
  StatusOr<TensorPtr> ToHost(const TensorPtr& t);
  StatusOr<TensorPtr> ToDevice(const TensorPtr& t);
  // Reads a one-element bool or integer tensor (If conditions, Loop counts).
  StatusOr<int64_t> ReadScalar(const TensorPtr& t, const char* what);

  std::shared_ptr<const Executable> executable_;
  std::shared_ptr<Allocator> allocator_;
  std::shared_ptr<Allocator> host_allocator_;  // HostDevice() memory, under allocator_'s quota (HostAllocatorFor)
  const RunControl* control_ = nullptr;
  // The run's turn, for RunControl::slice: when it last yielded (or started), and the
  // instructions since it last checked its bounds.
  std::chrono::steady_clock::time_point turn_started_;
  uint32_t unchecked_ = 0;
  std::vector<const kernels::OpDef*> op_defs_;
  std::vector<std::unique_ptr<kernels::OpKernel>> kernels_;
  std::vector<Device*> kernel_devices_;    // where each kernel runs (the device or the host)
  std::vector<TensorPtr> constants_;       // device copies (null when only the host uses one)
  std::vector<TensorPtr> host_constants_;  // host copies (null when only the device uses one)
  std::vector<FunctionState> functions_;
  CopyStats copies_;
  CopyStats last_copies_;
  uint64_t invokes_ = 0;
  uint64_t allocations_ = 0;
  uint64_t last_allocations_ = 0;
  // Of allocations_, those from the device allocator (allocator_), and their size
  // classes in bytes: the profiler's memory columns.
  uint64_t device_allocations_ = 0;
  uint64_t device_allocated_bytes_ = 0;
  int last_function_ = -1;
  bool device_graphs_ = false;
  bool grows_in_place_ = false;  // some ConcatAppend may give a view: never recorded into a graph
  // Per function and instruction: a ConcatAppend that gives a dense tensor (CreateKernels).
  std::vector<std::vector<bool>> dense_appends_;
  bool recording_ = false;  // a graph is being recorded: the run does not yield
  bool last_invoke_graph_ = false;
  uint64_t graph_clock_ = 0;  // orders GraphEntry::last_used
  GraphStats graph_stats_;
  GraphObserver graph_observer_;
};

}  // namespace remex::vm
