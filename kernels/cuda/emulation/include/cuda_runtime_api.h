// CUDA emulation: the runtime API (kernels/cuda/emulation/runtime.h).
#pragma once
#include "kernels/cuda/emulation/runtime.h"
