// The CPU device: the host's processors and memory as a Device.
//
// Its memory is host memory (aligned_alloc; blocks of 4 MiB or more on a 2 MiB boundary
// with transparent huge pages advised) and its kernels, the CPU kernels, run on the
// calling thread, done when the call returns. Capabilities: host_addressable,
// inline_execution, fault_recovery (it has only injected faults, which Reset clears),
// compute_threads; no streams, no timer of its own (a steady clock times it).
#pragma once

#include <memory>

#include "vm/device/device.h"

namespace remex::vm {

// The host CPU as a device (kernels::DeviceKind::kCpu), named "cpu". `compute_threads`: the team
// size of its oneDNN kernels on the thread PrepareKernelThread is called on, 1 to
// kernels::kMaxCpuComputeThreads; 0 leaves OpenMP's default (OMP_NUM_THREADS, else one
// per CPU this process may run on). The description names the count.
std::unique_ptr<Device> CreateCpuDevice(int compute_threads = 0);

// Host memory, as the VM's second memory space: a process-wide CPU device named
// "host". Tensors the VM keeps on the host (host kernels' values, copies of kData
// inputs) live here, distinct from any device's memory, the CPU device's included.
Device& HostDevice();

}  // namespace remex::vm
