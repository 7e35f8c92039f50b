// CUDA emulation: the runtime API and the device built-ins (kernels/cuda/emulation/).
#pragma once
#include "kernels/cuda/emulation/device.h"
#include "kernels/cuda/emulation/grid.h"
#include "kernels/cuda/emulation/runtime.h"
