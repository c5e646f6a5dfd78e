#pragma once
// The spin kernel before a timed run (the rule and why: launch_spin.h).
#include <cuda_runtime.h>

#include "kernels/cuda/detail/launch_spin.h"

namespace brickdl::cuda::detail {

// Enqueues on `stream` one single-thread kernel that returns once `us` microseconds have passed
// on the GPU's global timer (%globaltimer, nanoseconds; it touches no memory, so whatever the
// flush left in L2 stays).
void enqueue_launch_spin(cudaStream_t stream, double us);

} // namespace brickdl::cuda::detail
