/*
 * cuda_syntax_compat.h — lets a host C++ compiler syntax-check
 * euler_step.cu without nvcc (CMake -DTRT_SYNTAX_ONLY=ON). It maps CUDA's
 * execution-space keywords to nothing and declares the built-in index
 * variables. Never used for a real build: nvcc compiles euler_step.cu there.
 */
#ifndef EFX_CUDA_SYNTAX_COMPAT_H
#define EFX_CUDA_SYNTAX_COMPAT_H

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __restrict__ __restrict

struct efx_uint3 {
    unsigned int x, y, z;
};
extern const efx_uint3 threadIdx, blockIdx, blockDim, gridDim;

#endif
