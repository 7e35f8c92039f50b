# The Remex executable (".rmx"): the metadata message of the file format described in
# vm/executable.h. Constant payloads are not in this message: they follow it in the
# file as zstd chunks, located by ConstantEntry.offset/wireSize.
@0xf6c9ab6da10129d9;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("remex::vm::format");

struct Attribute {
  name @0 :Text;
  union {
    int @1 :Int64;
    float @2 :Float32;
    string @3 :Text;
    ints @4 :List(Int64);
    floats @5 :List(Float32);
    strings @6 :List(Text);
  }
}

# One entry of the kernel table: an ONNX op and its (normalised) attributes.
struct KernelEntry {
  op @0 :Text;
  attributes @1 :List(Attribute);
  numInputs @2 :UInt32;
  numOutputs @3 :UInt32;
  nodeName @4 :Text;   # the ONNX node it came from, for error messages
  host @5 :Bool;       # runs on the host (CPU kernel, host memory), not on the device
  version @6 :Int32;   # the op's registry entry: an opset its version range covers
}

struct ConstantEntry {
  dtype @0 :Int32;          # ONNX TensorProto.DataType value
  shape @1 :List(Int64);
  offset @2 :UInt64;        # into the payload section
  wireSize @3 :UInt64;
  rawSize @4 :UInt64;
  compressed @5 :Bool;      # zstd frame, else raw bytes
}

struct ValueDesc {
  name @0 :Text;
  dtype @1 :Int32;
  shape @2 :List(Int64);    # -1: not known before the call
  dims @3 :List(Text);      # per dimension: "" (static), a symbol ("W") or an expression ("W/4")
  kind @4 :UInt8;           # vm::ValueKind: 0 tensor, 1 sequence, 2 optional tensor, 3 optional sequence
  rankUnknown @5 :Bool;     # a sequence's or optional's elements have no fixed rank (shape empty)
}

# A symbolic input dimension (ONNX dim_param) and its bounds, inclusive.
struct Symbol {
  name @0 :Text;
  min @1 :Int64;
  max @2 :Int64;            # -1: unbounded
}

struct Function {
  name @0 :Text;
  inputs @1 :List(ValueDesc);
  outputs @2 :List(ValueDesc);
  numRegisters @3 :UInt32;
  code @4 :List(Int64);     # encoded instructions (vm/bytecode.h)
  arenaBytes @5 :List(UInt64);  # planned memory per memory space: [device, host]
  computeThreads @6 :UInt32;    # CPU compute threads at most while it runs; 0: the device's
}

struct Executable {
  version @0 :UInt32;
  producer @1 :Text;
  target @2 :Text;          # "any": runs on every device
  functions @3 :List(Function);
  kernels @4 :List(KernelEntry);
  constants @5 :List(ConstantEntry);
  symbols @6 :List(Symbol);
}
