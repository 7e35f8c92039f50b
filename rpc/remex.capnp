# Remex wire protocol: one Request or Reply message per frame (see rpc/frame.h for the
# framing). Tensor payloads never travel inside these messages: they follow the
# message as frame attachments, raw or zstd-compressed.
#
# Handles are 64-bit, issued by the server, and scoped to the session (connection)
# that created them. 0 is never a valid handle.
@0x812cd5c312b0f8a2;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("remex::rpc::wire");

# Canonical status codes (same numbering as remex::StatusCode).
enum ErrorCode {
  ok @0;
  cancelled @1;
  unknown @2;
  invalidArgument @3;
  deadlineExceeded @4;
  notFound @5;
  alreadyExists @6;
  permissionDenied @7;
  resourceExhausted @8;
  failedPrecondition @9;
  aborted @10;
  outOfRange @11;
  unimplemented @12;
  internal @13;
  unavailable @14;
  dataLoss @15;
}

struct Error {
  code @0 :ErrorCode;
  message @1 :Text;
}

# dtype is an ONNX TensorProto.DataType value (1 = float32, 7 = int64, ...).
# In function signatures a dimension of -1 is not known before the call.
struct TensorDesc {
  dtype @0 :Int32;
  shape @1 :List(Int64);
}

struct ValueInfo {
  name @0 :Text;
  desc @1 :TensorDesc;
}

struct FunctionInfo {
  name @0 :Text;
  inputs @1 :List(ValueInfo);
  outputs @2 :List(ValueInfo);
}

struct DeviceInfo {
  name @0 :Text;          # "cpu", "cuda:0"
  description @1 :Text;   # model name, cores, ...
  memoryBytes @2 :UInt64;
  bytesInUse @3 :UInt64;  # device memory held by live tensors of all sessions
  int8ChannelsLast @4 :Bool;  # its int8 convolutions run fastest channels-last (the CPU device with VNNI)
  floatChannelsLast @5 :Bool;  # its float convolutions run fastest channels-last, and its pooling takes NHWC (the CPU device with AVX2 or AVX-512)
}

struct Request {
  union {
    hello @0 :Hello;
    ping @1 :Ping;
    moduleLoad @2 :ModuleLoad;
    vmCreate @3 :VmCreate;
    tensorAlloc @4 :TensorAlloc;
    tensorWrite @5 :TensorWrite;
    tensorRead @6 :TensorRead;
    setInput @7 :SetInput;
    setOutput @8 :SetOutput;
    invoke @9 :Invoke;
    free @10 :Free;
    moduleHas @11 :ModuleHas;
    benchmark @12 :Benchmark;
    profile @13 :Profile;
    tensorStats @14 :TensorStats;
    tensorCompare @15 :TensorCompare;
    authenticate @16 :Authenticate;
    cancel @17 :Cancel;
    listHandles @18 :ListHandles;  # protocol 1.2
    loadTest @19 :LoadTest;        # protocol 1.4
    progress @20 :Progress;        # protocol 1.6
  }
}

# How far the request another session has in progress has got, for a client showing
# progress while its own connection waits for the reply. Sent on a connection of its
# own, with `sessionId` and `cancelKey` from that session's hello reply (as Cancel);
# answered on the I/O thread. NOT_FOUND when no open session has that id and key.
struct Progress {
  sessionId @0 :UInt64;
  cancelKey @1 :Data;
}

struct ProgressReply {
  running @0 :Bool;      # a benchmark, loadTest or profile is in progress
  kind @1 :Text;         # "benchmark", "loadTest", "profile"; empty when not running
  done @2 :UInt64;       # samples (benchmark), queries completed (loadTest), runs (profile)
  total @3 :UInt64;      # what the request asked for; 0: not known ahead (loadTest)
  elapsedNanos @4 :UInt64;
  # The time left, from the pace so far (elapsed / done x what is left); 0: not known.
  remainingNanos @5 :UInt64;
}

# Cancels the request another session has in progress: its queued request is not run,
# and its running invoke, profile or benchmark stops at the next kernel boundary (or
# backward jump, or Loop iteration); either is answered with CANCELLED. Sent on a
# connection of its own, since a session's connection reads nothing while its request
# runs. `sessionId` and `cancelKey` are from that session's hello reply. NOT_FOUND when
# no open session has that id and key. A session with no request in progress is left
# as it is (`cancelled` false).
struct Cancel {
  sessionId @0 :UInt64;
  cancelKey @1 :Data;
}

struct CancelReply {
  cancelled @0 :Bool;  # a request was in progress and is cancelled
}

# Proof of the server's shared token (remex-server --token-file), the second request of
# a session when hello's reply carries an authChallenge; every other request is
# PERMISSION_DENIED until it succeeds. The token itself never crosses the wire:
#   proof = HMAC-SHA256(token, "remex-auth-v1 client" || challenge || clientNonce)
# (rpc/auth.h). A wrong proof is PERMISSION_DENIED, and the session then refuses
# everything: the client must reconnect.
#
# A farm device (remex-server --farm; protocol 1.3) takes instead a signature by the
# private key of its current lease, whose public key it reads from the farm's Redis
# (docs/farm.md, "The lease credential"):
#   signature = Ed25519(lease key, "remex-lease-auth-v1 client" || challenge || clientNonce)
# with `proof` empty. A farm device refuses a session without a signature, a server
# with --token-file one without a proof.
struct Authenticate {
  clientNonce @0 :Data;  # 32 random bytes of the client's
  proof @1 :Data;        # 32 bytes (token servers); empty with a signature
  signature @2 :Data;    # 64 bytes (farm devices, protocol 1.3); else empty
}

# The server's proof that it knows the token too:
#   serverProof = HMAC-SHA256(token, "remex-auth-v1 server" || challenge || clientNonce)
# Empty from a farm device: it holds no secret of the lease to prove (a client relies on
# TLS, --tls-ca, to know it reached the device it leased).
struct AuthenticateReply {
  serverProof @0 :Data;
}

# First request of a session. The frame header carries the protocol version too;
# a major version the server does not speak is refused with FAILED_PRECONDITION.
struct Hello {
  protocolMajor @0 :UInt16;
  protocolMinor @1 :UInt16;
  clientName @2 :Text;
}

struct Ping {
  payload @0 :UInt64;
}

# Attachment 0: the executable file (rmx format, see vm/executable.h), sent raw:
# its constants are already zstd chunks. `hash` (optional, see ModuleHas) is checked
# against the attachment; the module then enters the server's module cache.
struct ModuleLoad {
  name @0 :Text;
  hash @1 :Text;
}

# Is the executable whose content hash is `hash` in the server's module cache? If so
# the reply is a ModuleLoadReply for a new handle to it, and no upload is needed;
# otherwise NOT_FOUND. The hash is the lower-case hex XXH3-128 of the .rmx bytes.
struct ModuleHas {
  hash @0 :Text;
  name @1 :Text;
}

struct VmCreate {
  module @0 :UInt64;
  device @1 :Text;        # "cpu"; empty = the server's default device
}

# A new tensor of `desc`, filled on the server (protocol 1.6; older servers ignore
# `fill` and return zeros, so clients send a fill other than zeros to 1.6 or later only).
struct TensorAlloc {
  desc @0 :TensorDesc;
  device @1 :Text;
  fill @2 :TensorFill;
}

# How tensorAlloc fills its tensor (vm/tensor_ops.h, TensorFill): zeros; uniform in
# [low, high) (ONNX RandomUniform; an integer dtype takes the floor); normal with mean
# and scale (ONNX RandomNormal; floating dtypes). Without `bounded`, uniform uses the
# dtype's default range ([0, 1) floating, [0, 10) integer, [0, 2) bool). Element i is a
# function of (seed, i) alone: one seed, one tensor, on every server and device.
struct TensorFill {
  kind @0 :Kind;
  enum Kind {
    zeros @0;
    uniform @1;
    normal @2;
  }
  bounded @1 :Bool;
  low @2 :Float64;
  high @3 :Float64;
  mean @4 :Float64;
  scale @5 :Float64 = 1;
  seed @6 :UInt64;
}

# Attachment 0: the tensor's bytes, row-major, exactly shape x dtype size.
# tensor = 0 allocates a new tensor of `desc`; otherwise `desc` must match the
# existing tensor's.
struct TensorWrite {
  tensor @0 :UInt64;
  desc @1 :TensorDesc;
  device @2 :Text;
  # With tensor = 0: the handle the new tensor gets, named by the client (see
  # Invoke.resultHandles); 0 lets the server choose.
  resultHandle @3 :UInt64;
}

# The reply carries the bytes as attachment 0.
struct TensorRead {
  tensor @0 :UInt64;
}

# Binds the inputs of `function`, in signature order, to tensor handles.
struct SetInput {
  vm @0 :UInt64;
  function @1 :Text;
  inputs @2 :List(UInt64);
}

# Binds output `index` of `function` to a tensor that later invokes write into
# (set_output / invoke_with_outputs). tensor = 0 unbinds.
struct SetOutput {
  vm @0 :UInt64;
  function @1 :Text;
  index @2 :UInt32;
  tensor @3 :UInt64;
}

# Runs `function` on the bound inputs. Outputs stay on the server; the reply names
# them by handle with their dtypes and shapes, never their data.
#
# resultHandles (optional, one per output) are handles named by the client for the
# outputs, so that requests written behind this one in the same write (tensorRead,
# setInput of the next call) can use them before this reply arrives. Client-named
# handles have bit 63 set; naming one that exists in the session is ALREADY_EXISTS.
# An output bound with setOutput keeps its own handle in the reply; a name given for
# it becomes a second handle to the same tensor.
struct Invoke {
  vm @0 :UInt64;
  function @1 :Text;
  resultHandles @2 :List(UInt64);
  # Longest the run may take, in ms; 0: the server's limit (remex-server
  # --max-invoke-ms), which also caps a larger value. A run past it stops within one
  # kernel with DEADLINE_EXCEEDED.
  deadlineMs @3 :UInt32;
}

# The time evaluator, as TVM's time_evaluator: `warmup` untimed calls, then `repeat`
# samples, each the mean time of `number` calls; with minRepeatMs > 0 `number` grows
# until one sample takes at least that long. `cooldownMs` is slept between samples;
# with l2FlushBytes > 0 a buffer of that size is written on the device before each
# sample. Timed on the device (a steady clock on the CPU, CUDA events on a GPU). Inputs
# are those bound with setInput; outputs stay on the server.
struct Benchmark {
  vm @0 :UInt64;
  function @1 :Text;
  number @2 :UInt32 = 1;
  repeat @3 :UInt32 = 1;
  minRepeatMs @4 :UInt32;
  warmup @5 :UInt32;
  cooldownMs @6 :UInt32;
  l2FlushBytes @7 :UInt64;
  # Cancelled (Cancel, or a kernel boundary that sees the cancel), the reply is a
  # BenchmarkReply with the samples completed so far and `cancelled` set instead of a
  # CANCELLED error. A server older than this field answers CANCELLED.
  partialOnCancel @8 :Bool;
}

# Load scenarios generated on the device (protocol 1.4), after MLPerf LoadGen's
# scenarios (docs/cli.md, "Load scenarios"). The server makes `concurrency` instances
# of the VM's executable (each with its own kernels, inputs bound to the VM's inputs
# and its own planned memory; the constants are the VM's, shared, never copied) and
# drives them with queries; an instance runs one sample (one call of `function`) at a
# time, and the instances take turns between kernels on one thread (on the CPU device
# each kernel has all the compute threads; on a GPU each instance queues its work on a
# CUDA stream of its own, so their kernels run concurrently). Timed on the server's
# steady clock; on a GPU a sample ends when its instance's stream has finished it.
#
#   singleStream: `concurrency` closed-loop streams: each issues its next query when
#                 its previous one completes (1: one query at a time);
#   multiStream:  queries of `samplesPerQuery` samples, the next issued when the
#                 previous completes; a query's latency ends with its last sample;
#   server:       queries arrive at `targetQps` by a Poisson process from a generator
#                 seeded with `seed`, whatever the device's progress; latency counts
#                 from the scheduled arrival, so time spent queued is included;
#   offline:      every query issued at once at the start; throughput.
#
# The run issues queries until both `minQueries` are issued and `minDurationMs` has
# passed, then waits for the issued ones to complete. Before it, `warmup` untimed calls
# per instance; the VM itself runs one untimed reference call first, and the outputs
# of `auditSamples` timed samples chosen with `seed` are compared with its outputs on
# the device as each completes (outside its latency; the instance waits meanwhile):
# |a - ref| <= auditAtol + auditRtol * |ref| (0 and 0: equal values).
# Errors: INVALID_ARGUMENT for an option out of range (named); DEADLINE_EXCEEDED when
# warmup alone outruns the server's benchmark limit. Queries still queued or running at
# that limit are stopped and counted as dropped, not an error.
enum LoadScenario {
  singleStream @0;
  multiStream @1;
  server @2;
  offline @3;
}

struct LoadTest {
  vm @0 :UInt64;
  function @1 :Text;
  scenario @2 :LoadScenario;
  concurrency @3 :UInt32 = 1;     # instances: 1..64
  samplesPerQuery @4 :UInt32 = 1; # multiStream: 1..1024
  targetQps @5 :Float64;          # server: > 0
  minQueries @6 :UInt32;          # up to 1,000,000
  minDurationMs @7 :UInt32;       # within the server's benchmark limit
  warmup @8 :UInt32 = 1;          # untimed calls per instance, up to 10,000
  seed @9 :UInt64;
  auditSamples @10 :UInt32;       # up to 1,000
  auditRtol @11 :Float64;
  auditAtol @12 :Float64;
}

struct LoadTestReply {
  # One entry per issued query, in issue order: when it was issued (scheduled, for
  # server), in ns since the run started, and its latency in ns (0 for a dropped one).
  issueNanos @0 :List(UInt64);
  latencyNanos @1 :List(UInt64);
  completed @2 :UInt64;
  # server: queries that found every instance busy at their arrival and waited.
  late @3 :UInt64;
  dropped @4 :UInt64;            # issued but stopped at the server's limit
  durationNanos @5 :UInt64;      # first issue to last completion
  timer @6 :Text;                # "steady_clock"
  phases @7 :RunPhases;
  memory @8 :MemoryUse;
  auditChecked @9 :UInt32;       # timed samples compared with the reference
  auditMismatches @10 :UInt32;   # of those, samples with an output that differs
  auditFirstMismatch @11 :Text;  # "query 17 (sample 17), output 'y': 3 of 1000 values differ"
  samples @12 :UInt64;           # calls timed (queries x samplesPerQuery, less dropped)
  loadAverage1m @13 :Float64 = -1;  # the server host's 1-minute load average after the run
}

# Cold start against warm (ns, server steady clock); 0 where not measured.
struct RunPhases {
  vmCreateNanos @0 :UInt64;          # vmCreate of the VM (constants uploaded, kernels made)
  firstInvokeNanos @1 :UInt64;       # the VM's first call, whichever request made it
  instancesCreateNanos @2 :UInt64;   # loadTest: making its instances (kernels, no constants)
  instanceFirstInvokeNanos @3 :UInt64;  # loadTest: first call of its first instance
}

# Memory as the server's allocator and the kernel see it (bytes).
struct MemoryUse {
  weightsBytes @0 :UInt64;        # the executable's constants (held once per VM)
  sessionBytesBefore @1 :UInt64;  # the session's live device memory before the run
  invokePeakBytes @2 :UInt64;     # one call's peak above that: activations, workspaces, outputs
  runPeakBytes @3 :UInt64;        # the run's peak above that: every instance at once
  residentBytes @4 :UInt64;       # the server process's resident memory after the run
  residentPeakBytes @5 :UInt64;   # its high-water mark since it started
}

# Invokes with per-instruction timing: see ProfileReply.
struct Profile {
  vm @0 :UInt64;
  function @1 :Text;
  # Since 1.5 (older servers profile one invoke and ignore both). The invokes profiled
  # one after the other, 1 to kMaxProfileRuns (rpc/wire_util.h; INVALID_ARGUMENT
  # outside); 0: one.
  runs @2 :UInt32;
  # Also return one trace event per instruction run (ProfileReply.trace).
  trace @3 :Bool;
}

# min, max, mean, std and NaN/Inf counts of a tensor, computed on the device.
struct TensorStats {
  tensor @0 :UInt64;
}

# Elementwise |a - b| <= atol + rtol * |b| (b is the reference), computed on the device.
# equalNan: a NaN in both at one index is a match (numpy.isclose's equal_nan).
struct TensorCompare {
  a @0 :UInt64;
  b @1 :UInt64;
  rtol @2 :Float64;
  atol @3 :Float64;
  equalNan @4 :Bool;
}

struct Free {
  handles @0 :List(UInt64);
}

# Lists every handle the session holds (modules, VMs and tensors), with their sizes,
# in ascending handle order: what the session keeps on the server, and is charged for.
# Since protocol 1.2.
struct ListHandles {}

struct HandleInfo {
  handle @0 :UInt64;
  kind @1 :Text;        # "module", "vm" or "tensor"
  desc @2 :TensorDesc;  # tensors: dtype and shape
  bytes @3 :UInt64;     # tensors: their memory; modules: their constants
  device @4 :Text;      # the device the object lives on ("cpu", "cuda:0")
  # Protocol 1.6: the bytes of the session's allocator (size classes, what hello's
  # bytesInUse counts) this handle keeps alive and no handle listed before it does:
  # tensors in ascending handle order first, then VMs (their constants' copies,
  # arenas, last inputs and outputs). Modules: 0 (their constants are host memory
  # shared through the module cache). The sum is bytesInUse unless something else
  # holds memory (a request running).
  heldBytes @5 :UInt64;
}

struct ListHandlesReply {
  handles @0 :List(HandleInfo);
}

struct HelloReply {
  protocolMajor @0 :UInt16;
  protocolMinor @1 :UInt16;
  serverName @2 :Text;
  serverVersion @3 :Text;
  sessionId @4 :UInt64;
  devices @5 :List(DeviceInfo);
  activeSessions @6 :UInt32;
  # 32 random bytes when the server requires a token: answer with authenticate.
  # Empty: no authentication. A reply with a challenge carries the protocol version,
  # serverName and the challenge only (a stranger learns nothing else): say hello
  # again once authenticated for the rest.
  authChallenge @7 :Data;
  # 16 random bytes that, with sessionId, let another connection cancel this session's
  # request in progress (Cancel).
  cancelKey @8 :Data;
  # What the server runs on and how it was started, for results to be comparable
  # (docs/cli.md, "Environment"). Authenticated sessions only, like the fields above
  # it; unset in a reply with an authChallenge, and from servers older than this field.
  environment @9 :Environment;
}

# Whether a feature is on, where the server could find out. `unknown`: the server could
# not read it (no such file in /sys, no NVML, a GPU that does not support the query).
enum FeatureState {
  unknown @0;
  disabled @1;
  enabled @2;
}

# The environment fingerprint of a server: its build, its command line, its host and
# its device. Text fields are empty and numbers 0 where unknown, unless noted.
struct Environment {
  remexVersion @0 :Text;     # the server's version ("0.1.0")
  remexCommit @1 :Text;      # git commit it was built from ("1a2b3c4"; "unknown" outside git)
  serverArgs @2 :List(Text); # remex-server's command line (argv; file paths, never their
                             # contents); empty for a server embedded in a client
  os @3 :Text;               # uname: system, release and machine ("Linux 6.1.0-18-amd64 x86_64")
  cpuModel @4 :Text;         # /proc/cpuinfo's model name
  logicalCpus @5 :UInt32;    # logical CPUs online
  physicalCores @6 :UInt32;  # distinct (package, core) pairs
  smt @7 :FeatureState;      # simultaneous multithreading (/sys/devices/system/cpu/smt/active)
  governor @8 :Text;         # cpufreq scaling governor ("performance"; "powersave,performance"
                             # when CPUs differ); empty without cpufreq (many VMs)
  cpuMaxMhz @9 :UInt32;      # highest cpuinfo_max_freq of the CPUs
  computeThreads @10 :UInt32; # the CPU device's compute threads; 0 for a GPU device
  memoryBytes @11 :UInt64;   # the host's physical memory
  loadAverage1m @12 :Float64 = -1; # the host's 1-minute load average at hello; -1: unknown
  gpus @13 :List(GpuEnvironment); # the GPUs the served device uses: one for cuda:N, none for cpu
}

# One GPU: what CUDA says of it and, where the driver's NVML library (libnvidia-ml.so.1)
# is installed, its clocks, power limit and modes.
struct GpuEnvironment {
  name @0 :Text;                # "NVIDIA H200"
  computeCapability @1 :Text;   # "9.0"
  cudaRuntimeVersion @2 :Text;  # the CUDA runtime the server was built with ("12.4")
  driverVersion @3 :Text;       # the NVIDIA driver ("550.54.15"; NVML)
  smClockMhz @4 :UInt32;        # SM clock when read (an idle GPU's may be low)
  memClockMhz @5 :UInt32;       # memory clock when read
  maxSmClockMhz @6 :UInt32;     # highest SM clock the GPU may run at
  maxMemClockMhz @7 :UInt32;
  powerLimitW @8 :Float64;      # enforced power limit in watts
  persistenceMode @9 :FeatureState;
  eccMode @10 :FeatureState;    # current ECC mode
  # The SM clock is held at a set value: applications clocks set away from their
  # default (nvidia-smi -ac), or NVML's clock event reason "applications clocks
  # setting" active. `unknown` without NVML.
  clocksLocked @11 :FeatureState;
  applicationsSmClockMhz @12 :UInt32; # the SM clock applications run at (nvidia-smi -ac)
}

struct ModuleLoadReply {
  module @0 :UInt64;
  functions @1 :List(FunctionInfo);
  executableBytes @2 :UInt64;
  constantBytes @3 :UInt64;
  # Server time to decompress, parse and verify the executable and lay out its
  # constants (0 for moduleHas: the module came from the cache). Since protocol 1.4.
  loadNanos @4 :UInt64;
}

struct TensorReply {
  tensor @0 :UInt64;
  desc @1 :TensorDesc;
}

struct OutputRef {
  tensor @0 :UInt64;
  desc @1 :TensorDesc;
}

struct InvokeReply {
  outputs @0 :List(OutputRef);
  runNanos @1 :UInt64;     # VM time on the server, steady clock
  copies @2 :DeviceCopies; # transfers this call made between device and host memory
  function @3 :Text;       # the function whose body ran the call: the called one, or the
                           # shape bucket its dispatcher chose ("main[W=33..64]")
  allocations @4 :UInt64;  # buffers the VM allocated in this call (planned arena slots and
                           # outputs written into bound buffers are not allocations)
  graph @5 :Bool;          # the call launched a device graph (remex-server --cuda-graphs)
}

# Transfers between the device's memory and host memory made by the VM in one call
# (shape functions' data inputs, explicit copies, If/Loop conditions). Outputs left
# on the server are not copied, so a call that needs no host values counts zero.
struct DeviceCopies {
  hostToDeviceCount @0 :UInt64;
  hostToDeviceBytes @1 :UInt64;
  deviceToHostCount @2 :UInt64;
  deviceToHostBytes @3 :UInt64;
}

struct BenchmarkReply {
  number @0 :UInt32;               # calls per sample, after minRepeatMs adaptation
  samplesSeconds @1 :List(Float64); # mean seconds per call, one per repeat
  timer @2 :Text;                  # "steady_clock", "cuda_event"
  phases @3 :RunPhases;            # since 1.4
  memory @4 :MemoryUse;            # since 1.4; runPeakBytes: the benchmark's peak
  # The server host's 1-minute load average read right after the last sample (-1:
  # unknown, as from servers older than this field).
  loadAverage1m @5 :Float64 = -1;
  # With partialOnCancel: the run was cancelled, and samplesSeconds holds the samples
  # completed before (fewer than repeat, maybe none).
  cancelled @6 :Bool;
}

struct ProfileRow {
  name @0 :Text;        # op name for kernels ("Conv"), instruction kind otherwise
  kind @1 :Text;        # "kernel" or "instruction"
  calls @2 :UInt64;
  totalNanos @3 :UInt64;
  copies @4 :UInt64;    # device copies made by these rows (both directions)
  copyBytes @5 :UInt64;
  # Since 1.4, 0 from older servers. Device memory of the session's allocator, in its
  # size classes: the buffers these rows' instructions allocated (tensors, copies, a
  # planned arena the first time it is needed; a tensor placed in an arena is none)
  # and their bytes, and the most live bytes right after any of the instructions.
  allocations @6 :UInt64;
  allocatedBytes @7 :UInt64;
  peakLiveBytes @8 :UInt64;
}

# One kernel-table entry that ran: one ONNX node, or the nodes of a fused kernel joined
# by "+" ("conv_1+relu_1"). Since 1.5.
struct ProfileNode {
  name @0 :Text;        # the node's name ("copy to output 'y'" for such copies)
  op @1 :Text;          # the kernel's op ("Conv", "FusedConv", "FusedElementwise")
  host @2 :Bool;        # a host kernel (small integer shape computations)
  calls @3 :UInt64;     # calls in the median run (ProfileReply.medianRun)
  runNanos @4 :List(UInt64);  # per run, the time of all its calls in that run
  # The operands of its first call in the first run in which it ran, as they were at
  # run time; an absent optional input has dtype 0 and no shape.
  inputs @5 :List(TensorDesc);
  outputs @6 :List(TensorDesc);
}

# One instruction run. Since 1.5.
struct ProfileTraceEvent {
  startNanos @0 :UInt64;  # since the first profiled invoke started
  nanos @1 :UInt64;       # its duration
  opcode @2 :UInt16;      # index into ProfileReply.opcodeNames
  run @3 :UInt16;         # which run, from 0
  node @4 :Int32;         # index into ProfileReply.nodes for a kernel, else -1
  pc @5 :UInt32;          # its instruction index in its function
  function @6 :UInt16;    # index into ProfileReply.functionNames
}

# Times are host wall time around each instruction; since 1.5 the server waits for the
# device after every instruction (`synchronized`), so on an asynchronous device an
# instruction's time holds its device work. A profile of several runs reports the rows,
# totalNanos and the memory of its median run (by totalNanos; of an even count the
# lower middle), and per node the time of every run.
struct ProfileReply {
  rows @0 :List(ProfileRow);
  totalNanos @1 :UInt64;
  # Since 1.4, 0 from older servers. The session allocator's live bytes right before
  # the invoke and right after it (its outputs still held), and its high-water mark
  # during it (buffers that live inside one instruction included).
  liveBytesBefore @2 :UInt64;
  liveBytesAfter @3 :UInt64;
  peakLiveBytes @4 :UInt64;
  # Since 1.5; 0 and empty from older servers (one run, no nodes).
  runs @5 :UInt32;
  runTotalNanos @6 :List(UInt64);  # per run
  medianRun @7 :UInt32;            # the run the rows and totals above are of
  synchronized @8 :Bool;
  nodes @9 :List(ProfileNode);     # in kernel-table order
  # With Profile.trace: the names of the opcodes and functions, and one event per
  # instruction run of every run in run order, at most kMaxProfileTraceEvents; those past it are counted
  # in traceDropped.
  opcodeNames @10 :List(Text);
  functionNames @11 :List(Text);   # the executable's functions, in order
  trace @12 :List(ProfileTraceEvent);
  traceDropped @13 :UInt64;
}

struct TensorStatsReply {
  count @0 :UInt64;
  min @1 :Float64;
  max @2 :Float64;
  mean @3 :Float64;
  std @4 :Float64;
  nanCount @5 :UInt64;
  infCount @6 :UInt64;
}

struct TensorCompareReply {
  count @0 :UInt64;
  mismatches @1 :UInt64;
  maxAbsError @2 :Float64;
  maxRelError @3 :Float64;
  firstMismatch @4 :Int64;  # flat index, -1 when none
}

struct Reply {
  union {
    error @0 :Error;
    hello @1 :HelloReply;
    pong @2 :Ping;
    moduleLoad @3 :ModuleLoadReply;
    vmCreate @4 :UInt64;
    tensor @5 :TensorReply;    # tensorAlloc, tensorWrite, tensorRead
    setInput @6 :Void;
    setOutput @7 :Void;
    invoke @8 :InvokeReply;
    free @9 :Void;
    benchmark @10 :BenchmarkReply;
    profile @11 :ProfileReply;
    tensorStats @12 :TensorStatsReply;
    tensorCompare @13 :TensorCompareReply;
    authenticate @14 :AuthenticateReply;
    cancel @15 :CancelReply;
    listHandles @16 :ListHandlesReply;
    loadTest @17 :LoadTestReply;
    progress @18 :ProgressReply;
  }
}
