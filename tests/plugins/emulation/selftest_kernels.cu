/*
 * Kernels that exercise the CUDA-on-CPU emulation itself (tests only): each check of the emulator must fire on a
 * kernel that breaks the rule, and correct kernels must give the right answer in both schedules. Written in CUDA
 * and rewritten by build_emulated.py like the real kernels. Every entry point returns cudaGetLastError().
 */
#include "common/deviceUtils.cuh"

#include <cstdint>

#define SELFTEST_API extern "C" __attribute__((visibility("default")))

using namespace edgeattn::kernels;

namespace
{

//! Tree reduction through static shared memory, one barrier per level.
__global__ void blockSumKernel(float const* in, float* out)
{
    __shared__ float partial[1024];
    partial[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2)
    {
        if (threadIdx.x < stride)
        {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
    {
        out[blockIdx.x] = partial[0];
    }
}

//! Reads a neighbour's shared-memory slot with (withBarrier = 1) or without the barrier in between.
__global__ void neighbourKernel(float* out, int withBarrier)
{
    float* const slots = sharedFloats();
    slots[threadIdx.x] = static_cast<float>(threadIdx.x);
    if (withBarrier)
    {
        __syncthreads();
    }
    out[threadIdx.x] = slots[(threadIdx.x + 1) % blockDim.x];
}

//! blockReduceMax without its leading barrier: correct for one call, racy for two in a row (warp 0 can overwrite
//! scratch[0] with its next partial before a lagging warp has read the previous result).
__device__ float blockReduceMaxWithoutLeadingBarrier(float value, float* scratch)
{
    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    int const nbWarps = (blockDim.x + 31) >> 5;
    value = warpReduceMax(value);
    if (lane == 0)
    {
        scratch[warp] = value;
    }
    __syncthreads();
    value = lane < nbWarps ? scratch[lane] : -INFINITY;
    if (warp == 0)
    {
        value = warpReduceMax(value);
        if (lane == 0)
        {
            scratch[0] = value;
        }
    }
    __syncthreads();
    return scratch[0];
}

//! Two block reductions in a row, with the project's blockReduceMax (racy = 0) or without its leading barrier.
__global__ void twoReductionsKernel(float const* in, float* first, float* second, int racy)
{
    float* const scratch = sharedFloats();
    float const value = in[threadIdx.x];
    first[threadIdx.x] = racy ? blockReduceMaxWithoutLeadingBarrier(value, scratch) : blockReduceMax(value, scratch);
    second[threadIdx.x]
        = racy ? blockReduceMaxWithoutLeadingBarrier(-value, scratch) : blockReduceMax(-value, scratch);
}

//! Warp shuffles and ballots, plus the project's blockReduceMax (used by the SOFT Newton kernel).
__global__ void warpKernel(float const* in, float* maxOut, float* sumOut, unsigned int* ballotOut, float* blockMax)
{
    float* const scratch = sharedFloats();
    float const value = in[threadIdx.x];
    maxOut[threadIdx.x] = warpReduceMax(value);
    float sum = value;
    for (int offset = 16; offset > 0; offset >>= 1)
    {
        sum += __shfl_down_sync(0xffffffffU, sum, offset);
    }
    sumOut[threadIdx.x] = __shfl_sync(0xffffffffU, sum, 0);
    ballotOut[threadIdx.x] = __ballot_sync(0xffffffffU, value > 0.0F);
    float const maximum = blockReduceMax(value, scratch);
    blockMax[threadIdx.x] = maximum;
}

__global__ void divergentBarrierKernel(float* out)
{
    if (threadIdx.x < 16)
    {
        __syncthreads();
    }
    else
    {
        __syncthreads();
    }
    out[threadIdx.x] = 1.0F;
}

__global__ void barrierAfterExitKernel(float* out)
{
    if (threadIdx.x == 0)
    {
        return;
    }
    __syncthreads();
    out[threadIdx.x] = 1.0F;
}

__global__ void shuffleKernel(float* out)
{
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffU, static_cast<float>(threadIdx.x), 1);
}

__global__ void mixedBarrierKernel(float* out)
{
    if (threadIdx.x < 16) // half a warp in a full-mask shuffle: the other half never joins it
    {
        out[threadIdx.x] = __shfl_xor_sync(0xffffffffU, 1.0F, 1);
    }
    __syncthreads();
}

__global__ void vectorLoadKernel(float const* in, float* out)
{
    float4 const v = *reinterpret_cast<float4 const*>(in);
    out[0] = v.x + v.y + v.z + v.w;
}

__global__ void sharedOverrunKernel(int floats)
{
    float* const shared = sharedFloats();
    if (threadIdx.x == 0)
    {
        shared[floats] = 1.0F; // one past the end
    }
}

__global__ void staticOverrunKernel(int index)
{
    __shared__ float small[10];
    if (threadIdx.x == 0)
    {
        small[index] = 1.0F;
    }
}

__global__ void __launch_bounds__(128) boundedKernel(float* out)
{
    out[threadIdx.x] = 1.0F;
}

__global__ void sharedSizeKernel(float* out)
{
    out[threadIdx.x] = sharedFloats()[0] * 0.0F + 1.0F;
}

__global__ void staticPlusDynamicKernel(float* out)
{
    __shared__ float big[8192]; // 32 KiB static
    big[threadIdx.x] = 1.0F;
    __syncthreads();
    out[threadIdx.x] = big[0] + sharedFloats()[0] * 0.0F;
}

__global__ void wildPointerKernel(float* out)
{
    float* const wild = reinterpret_cast<float*>(static_cast<uintptr_t>(16));
    out[threadIdx.x] = wild[threadIdx.x];
}

__global__ void uninitialisedSharedKernel(float* out)
{
    out[threadIdx.x] = sharedFloats()[threadIdx.x];
}

__global__ void indexKernel(unsigned int* out)
{
    unsigned int const block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned int const thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned int const threads = blockDim.x * blockDim.y * blockDim.z;
    out[block * threads + thread] = block * 100000U + thread;
}

} // namespace

SELFTEST_API int edgeattn_emu_selftest_block_sum(float const* in, float* out, int blocks, int threads)
{
    blockSumKernel<<<blocks, threads>>>(in, out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_neighbour(float* out, int threads, int withBarrier)
{
    neighbourKernel<<<1, threads, threads * sizeof(float)>>>(out, withBarrier);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_warp(float const* in, float* maxOut, float* sumOut, unsigned int* ballotOut,
    float* blockMax, int threads)
{
    warpKernel<<<1, threads, 32 * sizeof(float)>>>(in, maxOut, sumOut, ballotOut, blockMax);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_two_reductions(
    float const* in, float* first, float* second, int threads, int racy)
{
    twoReductionsKernel<<<1, threads, 32 * sizeof(float)>>>(in, first, second, racy);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_divergent_barrier(float* out)
{
    divergentBarrierKernel<<<1, 64>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_barrier_after_exit(float* out)
{
    barrierAfterExitKernel<<<1, 64>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_shuffle(float* out, int threads)
{
    shuffleKernel<<<1, threads>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_deadlock(float* out)
{
    mixedBarrierKernel<<<1, 64>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_vector_load(float const* in, float* out)
{
    vectorLoadKernel<<<1, 1>>>(in, out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_shared_overrun(int floats)
{
    sharedOverrunKernel<<<1, 32, floats * sizeof(float)>>>(floats);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_static_overrun(int index)
{
    staticOverrunKernel<<<1, 32>>>(index);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_launch_bounds(float* out, int threads)
{
    boundedKernel<<<1, threads>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_dynamic_shared(float* out, size_t bytes, int optIn)
{
    if (optIn)
    {
        cudaError_t const error
            = cudaFuncSetAttribute(sharedSizeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
        if (error != cudaSuccess)
        {
            return error;
        }
    }
    sharedSizeKernel<<<1, 32, bytes>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_static_plus_dynamic(float* out, size_t dynamicBytes)
{
    staticPlusDynamicKernel<<<1, 32, dynamicBytes>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_wild_pointer(float* out)
{
    wildPointerKernel<<<1, 32>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_uninitialised_shared(float* out, int threads)
{
    uninitialisedSharedKernel<<<1, threads, threads * sizeof(float)>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_indices(unsigned int* out, unsigned int gx, unsigned int gy, unsigned int gz,
    unsigned int bx, unsigned int by, unsigned int bz)
{
    indexKernel<<<dim3(gx, gy, gz), dim3(bx, by, bz)>>>(out);
    return cudaGetLastError();
}
