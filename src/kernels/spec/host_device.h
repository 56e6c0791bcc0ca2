#pragma once
/// MIXPREC_HD marks per-element math that host and device compilers both build: the reference
/// kernels use it on the host, a CUDA backend in its kernels (nvcc defines __CUDACC__).
#if defined(__CUDACC__)
#define MIXPREC_HD __host__ __device__
#else
#define MIXPREC_HD
#endif
