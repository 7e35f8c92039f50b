// CUDA emulation: __half (kernels/cuda/emulation/half.h).
#pragma once
#include "kernels/cuda/emulation/half.h"
