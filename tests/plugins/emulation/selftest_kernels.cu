/*
 * Kernels that exercise the CUDA-on-CPU emulation itself (tests only): each check of the emulator must fire on a
 * kernel that breaks the rule, and correct kernels must give the right answer in both schedules. Written in CUDA
 * and rewritten by build_emulated.py like the real kernels. Every entry point returns cudaGetLastError().
 */
#include "common/asyncCopy.cuh"
#include "common/deviceUtils.cuh"
#include "common/mma.cuh"

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

//! Every lane shuffles its own index: mode 0 __shfl_sync(arg), 1 __shfl_up_sync(arg), 2 __shfl_down_sync(arg),
//! 3 __shfl_xor_sync(arg), each with the given width; full mask.
__global__ void shuffleModesKernel(float* out, int mode, int arg, int width)
{
    float const value = static_cast<float>(threadIdx.x);
    float result = -1.0F;
    switch (mode)
    {
    case 0: result = __shfl_sync(0xffffffffU, value, arg, width); break;
    case 1: result = __shfl_up_sync(0xffffffffU, value, static_cast<unsigned int>(arg), width); break;
    case 2: result = __shfl_down_sync(0xffffffffU, value, static_cast<unsigned int>(arg), width); break;
    default: result = __shfl_xor_sync(0xffffffffU, value, arg, width); break;
    }
    out[threadIdx.x] = result;
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

// ---- tensor-core instructions -------------------------------------------------------------------------------------
uint32_t packPair(float lo, float hi, int bf16)
{
    return bf16 ? mma::packBfloat162(lo, hi) : mma::packHalf2(lo, hi);
}

/*
 * One m16n8k16 product whose fragments are built from full row-major matrices through lane tables the TEST supplies
 * (element (lane, i) -> (row, col)), not through mma.cuh's helpers: a = 16x16, b = 16x8 (k x n), c, d = 16x8; tables
 * are int pairs [32][8][2] (A), [32][4][2] (B), [32][4][2] (C/D). D starts as C and is written back through tableC.
 */
__global__ void mmaTableKernel(float const* a, float const* b, float const* c, float* d, int const* tableA,
    int const* tableB, int const* tableC, int bf16)
{
    int const lane = threadIdx.x & 31;
    mma::FragmentA fa;
    mma::FragmentB fb;
    mma::FragmentC fc;
    for (int r = 0; r < 4; ++r)
    {
        int const* lo = tableA + (lane * 8 + 2 * r) * 2;
        int const* hi = lo + 2;
        fa.x[r] = packPair(a[lo[0] * 16 + lo[1]], a[hi[0] * 16 + hi[1]], bf16);
    }
    for (int r = 0; r < 2; ++r)
    {
        int const* lo = tableB + (lane * 4 + 2 * r) * 2;
        int const* hi = lo + 2;
        fb.x[r] = packPair(b[lo[0] * 8 + lo[1]], b[hi[0] * 8 + hi[1]], bf16);
    }
    for (int i = 0; i < 4; ++i)
    {
        int const* at = tableC + (lane * 4 + i) * 2;
        fc.x[i] = c[at[0] * 8 + at[1]];
    }
    if (bf16)
    {
        mma::mmaBf16(fc, fa, fb);
    }
    else
    {
        mma::mmaF16(fc, fa, fb);
    }
    for (int i = 0; i < 4; ++i)
    {
        int const* at = tableC + (lane * 4 + i) * 2;
        d[at[0] * 8 + at[1]] = fc.x[i];
    }
}

/*
 * ldmatrix of `count` 8x8 b16 matrices stacked in `rows` (count * 8 rows of 8 values) staged in shared memory; lane l
 * addresses row rowOfLane[l] of that stack. out[lane * 4 + j] = register j. withSync = 0 leaves out the __syncwarp
 * between the staging stores and the ldmatrix.
 */
__global__ void ldmatrixKernel(uint16_t const* rows, int const* rowOfLane, uint32_t* out, int count, int trans,
    int withSync)
{
    __shared__ int4 staged[32];
    int const lane = threadIdx.x & 31;
    if (lane < count * 8)
    {
        int4 value;
        memcpy(&value, rows + lane * 8, sizeof(value));
        staged[lane] = value;
    }
    if (withSync)
    {
        __syncwarp();
    }
    uint32_t registers[4] = {0, 0, 0, 0};
    void const* const row = &staged[rowOfLane[lane]];
    if (count == 4)
    {
        uint32_t (&r)[4] = registers;
        if (trans)
        {
            mma::ldmatrixX4Trans(r, row);
        }
        else
        {
            mma::ldmatrixX4(r, row);
        }
    }
    else
    {
        uint32_t r[2];
        if (trans)
        {
            mma::ldmatrixX2Trans(r, row);
        }
        else
        {
            mma::ldmatrixX2(r, row);
        }
        registers[0] = r[0];
        registers[1] = r[1];
    }
    for (int j = 0; j < 4; ++j)
    {
        out[lane * 4 + j] = registers[j];
    }
}

/*
 * The recipes of mma.cuh end to end: A (16x16, row-major f16) by ldmatrix.x4; B given twice, as bT (8 x 16, n rows
 * of k) by ldmatrix.x2 and as b (16 x 8, k rows of n) by ldmatrix.x2.trans. d1 = A bT^T, d2 = A b, through
 * mma.cuh's cRow/cCol. Shared rows are 24 halves apart (48 bytes: 16-byte aligned, not a multiple of 128).
 */
__global__ void mmaFromSharedKernel(uint16_t const* a, uint16_t const* bT, uint16_t const* b, float* d1, float* d2)
{
    constexpr int kStride = 24;
    __shared__ int4 storage[(16 + 8 + 16) * kStride / 8];
    uint16_t* const sa = reinterpret_cast<uint16_t*>(storage);
    uint16_t* const sbT = sa + 16 * kStride;
    uint16_t* const sb = sbT + 8 * kStride;
    int const lane = threadIdx.x & 31;
    for (int index = lane; index < 16 * 16; index += 32)
    {
        sa[(index / 16) * kStride + index % 16] = a[index];
    }
    for (int index = lane; index < 8 * 16; index += 32)
    {
        sbT[(index / 16) * kStride + index % 16] = bT[index];
        sb[(index / 8) * kStride + index % 8] = b[index];
    }
    __syncwarp();
    int const row = mma::ldmatrixRow(lane);
    int const matrix = mma::ldmatrixMatrix(lane);
    mma::FragmentA fa;
    mma::ldmatrixX4(fa.x, sa + (row + (matrix & 1) * 8) * kStride + (matrix >> 1) * 8);
    mma::FragmentB fromNK;
    mma::ldmatrixX2(fromNK.x, sbT + row * kStride + (matrix & 1) * 8);
    mma::FragmentB fromKN;
    mma::ldmatrixX2Trans(fromKN.x, sb + (row + (matrix & 1) * 8) * kStride);
    mma::FragmentC c1 = {{0.0F, 0.0F, 0.0F, 0.0F}};
    mma::FragmentC c2 = {{0.0F, 0.0F, 0.0F, 0.0F}};
    mma::mmaF16(c1, fa, fromNK);
    mma::mmaF16(c2, fa, fromKN);
    for (int i = 0; i < 4; ++i)
    {
        d1[mma::cRow(lane, i) * 8 + mma::cCol(lane, i)] = c1.x[i];
        d2[mma::cRow(lane, i) * 8 + mma::cCol(lane, i)] = c2.x[i];
    }
}

//! Lanes 0-15 run an mma, lanes 16-31 a shuffle: a warp-collective instruction must see all 32 lanes.
__global__ void divergentMmaKernel(float* out)
{
    mma::FragmentA fa = {{0, 0, 0, 0}};
    mma::FragmentB fb = {{0, 0}};
    mma::FragmentC fc = {{0.0F, 0.0F, 0.0F, 0.0F}};
    if ((threadIdx.x & 31) < 16)
    {
        mma::mmaF16(fc, fa, fb);
    }
    else
    {
        fc.x[0] = __shfl_xor_sync(0xffffffffU, 1.0F, 1);
    }
    out[threadIdx.x] = fc.x[0];
}

__global__ void mmaKernel(float* out)
{
    mma::FragmentA fa = {{0, 0, 0, 0}};
    mma::FragmentB fb = {{0, 0}};
    mma::FragmentC fc = {{1.0F, 1.0F, 1.0F, 1.0F}};
    mma::mmaF16(fc, fa, fb);
    out[threadIdx.x] = fc.x[0];
}

//! ldmatrix with a row address in global memory (`misaligned` = 0) or 8 bytes off a 16-byte boundary in shared memory.
__global__ void badLdmatrixKernel(uint32_t* out, int misaligned)
{
    __shared__ int4 staged[32];
    staged[threadIdx.x & 31] = int4{0, 0, 0, 0};
    __syncwarp();
    uint32_t r[4];
    void const* const row = misaligned ? static_cast<void const*>(reinterpret_cast<char const*>(&staged[threadIdx.x & 31]) + 8)
                                       : static_cast<void const*>(out);
    mma::ldmatrixX4(r, row);
    out[threadIdx.x] = r[0];
}

/*
 * Sum of `perBlock` values per block, then of the blocks' partial sums: fixedOrder = 1 is the last-block-to-arrive
 * pattern of the linear-attention reductions (partials stored and fenced, a ticket taken, the last block adds them
 * in block order: the same bits whichever block arrives last); fixedOrder = 0 adds each partial to *out with a float
 * atomicAdd in arrival order (the rounding depends on that order).
 */
__global__ void ticketSumKernel(float const* in, float* partials, unsigned int* ticket, float* out, int perBlock,
    int fixedOrder)
{
    float* const isLast = sharedFloats();
    if (threadIdx.x == 0)
    {
        float sum = 0.0F;
        for (int i = 0; i < perBlock; ++i)
        {
            sum += in[blockIdx.x * perBlock + i];
        }
        if (fixedOrder)
        {
            partials[blockIdx.x] = sum;
            __threadfence();
            isLast[0] = atomicAdd(ticket, 1U) == gridDim.x - 1 ? 1.0F : 0.0F;
        }
        else
        {
            atomicAdd(out, sum);
            isLast[0] = 0.0F;
        }
    }
    __syncthreads();
    if (isLast[0] != 0.0F && threadIdx.x == 0)
    {
        __threadfence();
        float total = 0.0F;
        for (unsigned int b = 0; b < gridDim.x; ++b)
        {
            total += __ldcg(partials + b);
        }
        *out = total;
    }
}

/*
 * cp.async: thread t copies its 16-byte segment of each of kGroups groups (group g, segment g * blockDim + t) into
 * shared memory, committing after each group (a copy with valid = 0 reads nothing and zero-fills), then waits with
 * wait_group `pending` (pending >= kGroups: no wait at all), passes a __syncthreads and writes out the segments of
 * its neighbour t + 1, so every value crosses threads as in a staged tile.
 */
constexpr int kCopyGroups = 3;

__global__ void asyncCopyKernel(float4 const* in, float4* out, int const* valid, int pending)
{
    float4* const staged = reinterpret_cast<float4*>(sharedFloats());
    unsigned int const threads = blockDim.x;
    for (int g = 0; g < kCopyGroups; ++g)
    {
        unsigned int const segment = g * threads + threadIdx.x;
        async::copy16(staged + segment, in + segment, valid[segment] != 0);
        async::commit();
    }
    switch (pending)
    {
    case 0: async::wait<0>(); break;
    case 1: async::wait<1>(); break;
    case 2: async::wait<2>(); break;
    default: break; // planted: no wait_group at all
    }
    __syncthreads();
    unsigned int const neighbour = (threadIdx.x + 1) % threads;
    for (int g = 0; g < kCopyGroups; ++g)
    {
        out[g * threads + threadIdx.x] = staged[g * threads + neighbour];
    }
}

__global__ void exp2ApproxKernel(float const* in, float* out, int count)
{
    for (int i = threadIdx.x; i < count; i += blockDim.x)
    {
        out[i] = async::exp2Approx(in[i]);
    }
}

//! Global traffic: `loads` 4-byte loads (each thread reads in[t], in[t + threads], ...), one float4 load per
//! thread from in4, one 4-byte store per thread, a shared-memory round trip (not global) in between.
__global__ void trafficKernel(float const* in, float4 const* in4, float* out, int loads)
{
    float* const scratch = sharedFloats();
    float sum = 0.0F;
    for (int i = 0; i < loads; ++i)
    {
        sum += in[i * blockDim.x + threadIdx.x];
    }
    float4 const wide = *reinterpret_cast<float4 const*>(in4 + threadIdx.x);
    scratch[threadIdx.x] = sum + wide.x + wide.y + wide.z + wide.w;
    __syncthreads();
    out[threadIdx.x] = scratch[(threadIdx.x + 1) % blockDim.x];
}

} // namespace

SELFTEST_API int edgeattn_emu_selftest_ticket_sum(float const* in, float* partials, unsigned int* ticket, float* out,
    int blocks, int perBlock, int fixedOrder)
{
    ticketSumKernel<<<blocks, 32, sizeof(float)>>>(in, partials, ticket, out, perBlock, fixedOrder);
    return cudaGetLastError();
}


SELFTEST_API int edgeattn_emu_selftest_async_copy(
    float const* in, float* out, int const* valid, int threads, int pending)
{
    asyncCopyKernel<<<1, threads, kCopyGroups * threads * 16>>>(
        reinterpret_cast<float4 const*>(in), reinterpret_cast<float4*>(out), valid, pending);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_exp2_approx(float const* in, float* out, int count)
{
    exp2ApproxKernel<<<1, 64>>>(in, out, count);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_traffic(float const* in, float const* in4, float* out, int threads, int loads)
{
    trafficKernel<<<1, threads, threads * sizeof(float)>>>(in, reinterpret_cast<float4 const*>(in4), out, loads);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_memset(void* destination, int value, size_t bytes)
{
    return cudaMemsetAsync(destination, value, bytes, 0);
}

SELFTEST_API int edgeattn_emu_selftest_mma_table(float const* a, float const* b, float const* c, float* d,
    int const* tableA, int const* tableB, int const* tableC, int bf16)
{
    mmaTableKernel<<<1, 32>>>(a, b, c, d, tableA, tableB, tableC, bf16);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_ldmatrix(
    uint16_t const* rows, int const* rowOfLane, uint32_t* out, int count, int trans, int withSync)
{
    ldmatrixKernel<<<1, 32>>>(rows, rowOfLane, out, count, trans, withSync);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_mma_from_shared(
    uint16_t const* a, uint16_t const* bT, uint16_t const* b, float* d1, float* d2)
{
    mmaFromSharedKernel<<<1, 32>>>(a, bT, b, d1, d2);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_mma_divergent(float* out)
{
    divergentMmaKernel<<<1, 32>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_mma_threads(float* out, int threads)
{
    mmaKernel<<<1, threads>>>(out);
    return cudaGetLastError();
}

SELFTEST_API int edgeattn_emu_selftest_bad_ldmatrix(uint32_t* out, int misaligned)
{
    badLdmatrixKernel<<<1, 32>>>(out, misaligned);
    return cudaGetLastError();
}

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

SELFTEST_API int edgeattn_emu_selftest_shuffle_modes(float* out, int threads, int mode, int arg, int width)
{
    shuffleModesKernel<<<1, threads>>>(out, mode, arg, width);
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
