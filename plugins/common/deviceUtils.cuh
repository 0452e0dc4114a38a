/*
 * Device helpers shared by every kernel: FP16 <-> FP32 conversion (the only half-precision operations we use,
 * so the kernels run on sm_53 with CUDA 10.2: all arithmetic is FP32), a register-tiled FP32 micro-GEMM over
 * shared (or L2-resident global) memory, squared column norms of a transposed matrix, and block reductions.
 *
 * Nothing here needs more than sm_53: no cp.async, no tensor-core MMA, no half arithmetic.
 */
#ifndef EDGEATTN_COMMON_DEVICE_UTILS_CUH
#define EDGEATTN_COMMON_DEVICE_UTILS_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace edgeattn
{
namespace kernels
{

// log2(e): softmax and Gaussian kernels evaluate exp(x) as exp2f(x * log2e), folding the constant into a scale.
constexpr float kLog2e = 1.4426950408889634F;

__device__ __forceinline__ float toFloat(float x)
{
    return x;
}

__device__ __forceinline__ float toFloat(__half x)
{
    return __half2float(x);
}

template <typename T>
__device__ __forceinline__ T fromFloat(float x);

template <>
__device__ __forceinline__ float fromFloat<float>(float x)
{
    return x;
}

template <>
__device__ __forceinline__ __half fromFloat<__half>(float x)
{
    return __float2half_rn(x);
}

//! Read-only global load converted to FP32.
template <typename T>
__device__ __forceinline__ float loadFloat(T const* __restrict__ p, int64_t index)
{
    return toFloat(p[index]);
}

//! The dynamic shared memory of a block as floats, 16-byte aligned so float4 accesses are legal.
__device__ __forceinline__ float* sharedFloats()
{
    extern __shared__ float4 edgeattnSharedMemory[];
    return reinterpret_cast<float*>(edgeattnSharedMemory);
}

/*
 * acc[r][c] += sum_{k < K} A[k * lda + a0 + r] * B[k * ldb + b0 + c]   (r < 4, c < 4)
 *
 * Both operands are "k-major": row k holds consecutive a (resp. b) indices, so one float4 load fetches the
 * 4 values a thread needs per k. Threads of a warp read the same row k at different offsets (no bank
 * conflicts) or the same address (broadcast). Requires lda, ldb, a0, b0 multiples of 4 and 16-byte aligned
 * bases; 2 x LDS.128 per 16 FMAs keeps the loop FMA-bound rather than shared-memory-bound.
 */
__device__ __forceinline__ void mmaTile4x4(
    float (&acc)[4][4], float const* A, int lda, int a0, float const* B, int ldb, int b0, int K)
{
#pragma unroll 4
    for (int k = 0; k < K; ++k)
    {
        float4 const a = *reinterpret_cast<float4 const*>(A + static_cast<int64_t>(k) * lda + a0);
        float4 const b = *reinterpret_cast<float4 const*>(B + static_cast<int64_t>(k) * ldb + b0);
        float const av[4] = {a.x, a.y, a.z, a.w};
        float const bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int r = 0; r < 4; ++r)
        {
#pragma unroll
            for (int c = 0; c < 4; ++c)
            {
                acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
            }
        }
    }
}

__device__ __forceinline__ void zeroTile4x4(float (&acc)[4][4])
{
#pragma unroll
    for (int r = 0; r < 4; ++r)
    {
#pragma unroll
        for (int c = 0; c < 4; ++c)
        {
            acc[r][c] = 0.0F;
        }
    }
}

//! norms[column] = sum_{row < rows} matrixT[row * columns + column]^2 for every column < columns: the squared norms
//! of the vectors a transposed (row-major [rows][columns]) matrix holds in its columns, summed by FMA in row order.
//! Block-strided over the columns; the caller synchronises before reading norms.
__device__ __forceinline__ void columnNorms(float const* matrixT, int columns, int rows, float* norms)
{
    for (int column = threadIdx.x; column < columns; column += blockDim.x)
    {
        float sum = 0.0F;
        for (int row = 0; row < rows; ++row)
        {
            float const value = matrixT[row * columns + column];
            sum = fmaf(value, value, sum);
        }
        norms[column] = sum;
    }
}

__device__ __forceinline__ float warpReduceMax(float value)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
    {
        value = fmaxf(value, __shfl_xor_sync(0xffffffffU, value, offset));
    }
    return value;
}

//! Block-wide max; every thread must call it and every thread gets the result. scratch: >= 32 floats.
__device__ __forceinline__ float blockReduceMax(float value, float* scratch)
{
    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    int const nbWarps = (blockDim.x + 31) >> 5;
    value = warpReduceMax(value);
    __syncthreads(); // scratch may still be read by a previous reduction
    if (lane == 0)
    {
        scratch[warp] = value;
    }
    __syncthreads();
    // Only warp 0 reads the partials: another warp reading scratch[0] would race with lane 0's write below
    // (compute-sanitizer racecheck on an H200 reported exactly that, harmless only because those reads were unused).
    if (warp == 0)
    {
        value = lane < nbWarps ? scratch[lane] : -INFINITY;
        value = warpReduceMax(value);
        if (lane == 0)
        {
            scratch[0] = value;
        }
    }
    __syncthreads();
    return scratch[0];
}

//! Gaussian kernel exp(-max(0, |x|^2 + |y|^2 - 2 x.y) / 2), with the clamp the SOFT contract prescribes.
__device__ __forceinline__ float gaussianKernel(float normX, float normY, float dot)
{
    float const squaredDistance = fmaxf(0.0F, normX + normY - 2.0F * dot);
    return exp2f(-0.5F * kLog2e * squaredDistance);
}

} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_COMMON_DEVICE_UTILS_CUH
