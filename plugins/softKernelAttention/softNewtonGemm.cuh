/*
 * SOFT's Newton-Raphson pseudo-inverse on batched tensor-core GEMM tiles (sm_80+, FP16 I/O, M > 64 landmarks: the
 * `tensor_core` path; M <= 64 keeps softNewtonMmaKernel, which holds a whole problem in one CTA).
 *
 * Per (batch, head) problem the M x M matrices live in the workspace, padded to P = M rounded up to 16 (zero rows and
 * columns, which every product keeps zero): A, the iterates X_k (two buffers, ping-pong) and T = A X_k, all FP32.
 *   softNewtonGemmSetupKernel  one CTA per problem: A = Gaussian(landmark Gram matrix) tile by tile (FP32 4x4
 *       register tiles, exactly symmetric), rowsum(A), the per-matrix step X_0 = A / max_rowsum(A)^2, max |X_0|.
 *   softNewtonGemmMmaKernel<false>  T = A X_k
 *   softNewtonGemmMmaKernel<true>   X_{k+1} = 2 X_k - X_k T, the update fused into the product's epilogue (C = 2 X_k,
 *       alpha = -1); the last step writes M = diag(s) X diag(s) (SOFT++) or X (SOFT) instead of X_{k+1}.
 * 1 + 2 newton_iters launches; both products are batched over every problem in one grid.
 *
 * A product CTA (4 warps, 2 x 2 warp tiles of 32 x 32) owns a 64 x 64 output tile and walks the depth in chunks of
 * 16: 16-byte cp.async copies bring the FP32 chunk of both operands into a two-stage ring (chunk c + 1 in flight while
 * chunk c is computed), the CTA splits the chunk once into f16 hi + lo (common/splitTensorCore.cuh: per-matrix power
 * of two scale, 3 mma per tile product, FP32 accuracy), and each warp multiplies from ldmatrix fragments. The
 * per-matrix scale comes from the tile maxima the producing epilogue writes ([problem][tile], reduced by every
 * consumer CTA: no atomics, the same bits in every CTA order); A is in [0, 1] (Gaussian values) and takes the fixed
 * scale 2^14.
 *
 * L2 waves: the grid is (tiles of one problem, heads, batch) and CTAs are dispatched in blockIdx order with x
 * fastest, so the CTAs resident at once cover consecutive problems, all tiles of each: a problem's operands are read
 * from DRAM once and then from L2 by its other tiles (each operand row block is read by tilesPerSide CTAs). The
 * working set of a wave is (resident CTAs / tiles per problem) problems of at most 4 P^2 x 4 bytes (two operands, the
 * previous iterate, the output). M = 256 (16 tiles, 1 MB per problem), at the declared 4 CTAs per SM: 33 problems,
 * 33 MB, on an H100/H200's 132 SMs (50 MB L2); 4 problems, 3-4 MB, on an AGX Orin's 16 SMs (4 MB L2: just fits).
 * M = 144 (9 tiles, 0.33 MB per problem): 59 problems, 19 MB (H200); 7 problems, 2.3 MB (Orin).
 */
#ifndef EDGEATTN_SOFT_NEWTON_GEMM_CUH
#define EDGEATTN_SOFT_NEWTON_GEMM_CUH

#include "common/asyncCopy.cuh"
#include "common/deviceUtils.cuh"
#include "common/kernelStatus.h"
#include "common/splitTensorCore.cuh"

#include <cuda_fp16.h>

#include <cstdint>

namespace edgeattn
{
namespace kernels
{
namespace soft
{

enum : int
{
    kGemmTile = 64,     // output rows and columns per CTA
    kGemmDepth = 16,    // depth per pipeline stage (one mma k block)
    kGemmThreads = 128, // 4 warps, 2 x 2 warp tiles of 32 x 32
    kGemmStages = 2,
    kGemmMinBlocks = 4, // declared occupancy: 4 CTAs per SM, so ptxas keeps <= 128 registers (4 x 27 KB shared)
    kGemmLeftStride = kGemmDepth + 8, // halves per split left row (k contiguous; +8: conflict-free ldmatrix rows)
    kGemmRightStride = kGemmTile + 8, // halves per split right row (n contiguous)
    kGemmStageFloats = kGemmTile * kGemmDepth, // one operand's FP32 chunk
    kGemmSharedBytes = 2 * kGemmStages * kGemmStageFloats * 4 + 2 * kGemmTile * kGemmLeftStride * 2
        + 2 * kGemmDepth * kGemmRightStride * 2 + 32 * 4,
    kSetupThreads = 256,
    kSetupTile = 64,
    kSetupMaxHeadDim = 64
};
static_assert(kGemmSharedBytes <= 48 * 1024, "static shared memory within the 48 KB every arch allows");
static_assert(kGemmSharedBytes % 16 == 0, "whole float4s");

//! Where one launch's matrices are (bases of problem 0; problem p at + p * padded^2, its maxima at + p * tiles).
struct NewtonGemmParams
{
    __half const* landmarks;
    int channels;
    int numLandmarks; // M
    int headDim;
    int heads;
    int padded;       // P = M rounded up to 16
    int tilesPerSide; // ceil(P / 64)
    int newtonIters;
    int symmetricNorm;
    int landmarkPad;  // the stride of mMatrix (M rounded up to 4)
    float* a;
    float* x[2];
    float* t;
    float* xMax[2]; // [problem][tile]: max |X| over each output tile
    float* tMax;
    float* rowSum;  // [problem][P]
    float* mMatrix; // [problem][landmarkPad][landmarkPad]
};

//! FP32 floats of the Newton-Raphson buffers per problem (A, two X, T, rowsum, three tile-maxima arrays).
inline size_t newtonGemmFloats(int numLandmarks)
{
    size_t const padded = static_cast<size_t>((numLandmarks + 15) / 16 * 16);
    size_t const tilesPerSide = (padded + kGemmTile - 1) / kGemmTile;
    return 4 * padded * padded + padded + 3 * tilesPerSide * tilesPerSide;
}

//! The parameters for a workspace region `scratch` of newtonGemmFloats(M) x problems floats.
inline NewtonGemmParams newtonGemmParams(void const* landmarks, int channels, int numLandmarks, int headDim,
    int heads, int problems, int newtonIters, int symmetricNorm, int landmarkPad, float* scratch, float* mMatrix)
{
    NewtonGemmParams p;
    p.landmarks = static_cast<__half const*>(landmarks);
    p.channels = channels;
    p.numLandmarks = numLandmarks;
    p.headDim = headDim;
    p.heads = heads;
    p.padded = (numLandmarks + 15) / 16 * 16;
    p.tilesPerSide = (p.padded + kGemmTile - 1) / kGemmTile;
    p.newtonIters = newtonIters;
    p.symmetricNorm = symmetricNorm;
    p.landmarkPad = landmarkPad;
    size_t const square = static_cast<size_t>(p.padded) * p.padded * problems;
    size_t const tiles = static_cast<size_t>(p.tilesPerSide) * p.tilesPerSide * problems;
    p.a = scratch;
    p.x[0] = p.a + square;
    p.x[1] = p.x[0] + square;
    p.t = p.x[1] + square;
    p.rowSum = p.t + square;
    p.xMax[0] = p.rowSum + static_cast<size_t>(p.padded) * problems;
    p.xMax[1] = p.xMax[0] + tiles;
    p.tMax = p.xMax[1] + tiles;
    p.mMatrix = mMatrix;
    return p;
}

#if EDGEATTN_TENSOR_CORES // the kernels exist only in builds with tensor-core kernels (the setup serves only them)
//! Iterate k's buffer and tile maxima (a select, not an index: a dynamically indexed kernel-parameter array would be
//! copied to local memory).
__device__ __forceinline__ float* iterate(NewtonGemmParams const& p, int k)
{
    return (k & 1) != 0 ? p.x[1] : p.x[0];
}

__device__ __forceinline__ float* iterateMax(NewtonGemmParams const& p, int k)
{
    return (k & 1) != 0 ? p.xMax[1] : p.xMax[0];
}

__device__ __forceinline__ int64_t newtonProblem(NewtonGemmParams const& p)
{
    return static_cast<int64_t>(blockIdx.z) * p.heads + blockIdx.y;
}

//! M = diag(s) X diag(s), s = rowsum(A)^-1/2 (SOFT++), or X (SOFT): entry (i, j) < landmarkPad of one problem.
__device__ __forceinline__ void storeProjection(
    NewtonGemmParams const& p, int64_t problem, int i, int j, float value)
{
    if (i < p.landmarkPad && j < p.landmarkPad)
    {
        if (p.symmetricNorm != 0)
        {
            float const* rowSum = p.rowSum + problem * p.padded;
            float const si = i < p.numLandmarks ? rsqrtf(rowSum[i]) : 0.0F;
            float const sj = j < p.numLandmarks ? rsqrtf(rowSum[j]) : 0.0F;
            value *= si * sj;
        }
        p.mMatrix[problem * p.landmarkPad * p.landmarkPad + static_cast<int64_t>(i) * p.landmarkPad + j] = value;
    }
}

//! Landmarks first.. first + 63 of one head, transposed to [d][64] FP32 (rows >= M zero), and their squared norms.
__device__ __forceinline__ void stageLandmarkBlock(NewtonGemmParams const& p, __half const* __restrict__ source,
    int first, float* blockT, float* norms)
{
    int const d = p.headDim;
    for (int index = threadIdx.x; index < kSetupTile * d; index += blockDim.x)
    {
        int const i = index / d;
        int const c = index - i * d;
        blockT[c * kSetupTile + i] = first + i < p.numLandmarks
            ? __half2float(source[static_cast<int64_t>(first + i) * p.channels + c])
            : 0.0F;
    }
    __syncthreads();
    columnNorms(blockT, kSetupTile, d, norms);
}

/*
 * A, rowsum(A), X_0 and max |X_0| of one problem (grid (heads, batch)). A[i][j] sees the same products in the same
 * order as A[j][i] (the two blocks are staged alike), so A is exactly symmetric, as in the scalar kernel. The CTA
 * reads back its own global writes of A after a barrier (visible within the block).
 */
__global__ void __launch_bounds__(kSetupThreads) softNewtonGemmSetupKernel(NewtonGemmParams const p)
{
    __shared__ float4 storage[(2 * kSetupMaxHeadDim * kSetupTile + 2 * kSetupTile + 32) / 4];
    float* const rowsT = reinterpret_cast<float*>(storage); // [d][64]
    float* const columnsT = rowsT + kSetupMaxHeadDim * kSetupTile;
    float* const rowNorms = columnsT + kSetupMaxHeadDim * kSetupTile;
    float* const columnNorms = rowNorms + kSetupTile;
    float* const scratch = columnNorms + kSetupTile;

    int64_t const problem = static_cast<int64_t>(blockIdx.y) * p.heads + blockIdx.x;
    int const m = p.numLandmarks;
    int const padded = p.padded;
    int const tiles = p.tilesPerSide * p.tilesPerSide;
    int64_t const square = static_cast<int64_t>(padded) * padded;
    float* const a = p.a + problem * square;
    __half const* __restrict__ source
        = p.landmarks + static_cast<int64_t>(blockIdx.y) * m * p.channels + static_cast<int64_t>(blockIdx.x) * p.headDim;

    for (int tile = 0; tile < tiles; ++tile)
    {
        int const row0 = (tile / p.tilesPerSide) * kSetupTile;
        int const column0 = (tile % p.tilesPerSide) * kSetupTile;
        __syncthreads(); // the previous tile's reads of the staged blocks are done
        stageLandmarkBlock(p, source, row0, rowsT, rowNorms);
        stageLandmarkBlock(p, source, column0, columnsT, columnNorms);
        __syncthreads();
        // one 4x4 register tile per thread: 16 x 16 = 256 tiles
        int const i0 = (threadIdx.x / (kSetupTile / 4)) * 4;
        int const j0 = (threadIdx.x % (kSetupTile / 4)) * 4;
        float acc[4][4];
        zeroTile4x4(acc);
        mmaTile4x4(acc, rowsT, kSetupTile, i0, columnsT, kSetupTile, j0, p.headDim);
#pragma unroll
        for (int r = 0; r < 4; ++r)
        {
#pragma unroll
            for (int c = 0; c < 4; ++c)
            {
                int const i = row0 + i0 + r;
                int const j = column0 + j0 + c;
                if (i < padded && j < padded)
                {
                    a[static_cast<int64_t>(i) * padded + j]
                        = i < m && j < m ? gaussianKernel(rowNorms[i0 + r], columnNorms[j0 + c], acc[r][c]) : 0.0F;
                }
            }
        }
    }
    __syncthreads();

    float* const rowSum = p.rowSum + problem * padded;
    float localMax = 0.0F;
    for (int i = threadIdx.x; i < padded; i += blockDim.x)
    {
        float sum = 0.0F;
        for (int j = 0; j < padded; ++j)
        {
            sum += a[static_cast<int64_t>(i) * padded + j];
        }
        rowSum[i] = sum;
        localMax = fmaxf(localMax, sum);
    }
    // Per-matrix step (no batch-wide statistic): X_0 = A / max_rowsum(A)^2. max_rowsum >= 1 (diag is 1).
    float const maxRowSum = blockReduceMax(localMax, scratch); // (its barriers publish rowSum to the block)
    float const step = 1.0F / (maxRowSum * maxRowSum);
    float* const x = p.x[0] + problem * square;
    float maxAbs = 0.0F;
    for (int64_t index = threadIdx.x; index < square; index += blockDim.x)
    {
        float const value = step * a[index];
        maxAbs = fmaxf(maxAbs, fabsf(value));
        if (p.newtonIters == 0)
        {
            int const i = static_cast<int>(index / padded);
            storeProjection(p, problem, i, static_cast<int>(index - static_cast<int64_t>(i) * padded), value);
        }
        else
        {
            x[index] = value;
        }
    }
    maxAbs = blockReduceMax(maxAbs, scratch);
    for (int tile = threadIdx.x; tile < tiles; tile += blockDim.x)
    {
        p.xMax[0][problem * tiles + tile] = tile == 0 ? maxAbs : 0.0F; // the max over the tiles is what counts
    }
}

#if EDGEATTN_MMA_AVAILABLE
//! The 16-byte cp.async copies of depth chunk `chunk` of the left rows row0.. and right columns column0.. into one
//! ring stage; rows / columns past the padded size are zero-filled (their source address stays in bounds).
__device__ __forceinline__ void issueGemmChunk(float const* left, float const* right, int padded, int row0,
    int column0, int chunk, float* stageLeft, float* stageRight)
{
    int const k0 = chunk * kGemmDepth;
    // left: 64 rows x 16 floats, 4 copies per row
    for (int segment = threadIdx.x; segment < kGemmTile * kGemmDepth / 4; segment += blockDim.x)
    {
        int const r = segment / (kGemmDepth / 4);
        int const k = (segment % (kGemmDepth / 4)) * 4;
        bool const valid = row0 + r < padded;
        float const* source = left + (valid ? static_cast<int64_t>(row0 + r) * padded + k0 + k : 0);
        async::copy16(stageLeft + r * kGemmDepth + k, source, valid);
    }
    // right: 16 rows x 64 floats, 16 copies per row (P is a multiple of 16: a copy is all inside or all outside)
    for (int segment = threadIdx.x; segment < kGemmDepth * kGemmTile / 4; segment += blockDim.x)
    {
        int const r = segment / (kGemmTile / 4);
        int const n = (segment % (kGemmTile / 4)) * 4;
        bool const valid = column0 + n < padded;
        float const* source = right + (valid ? static_cast<int64_t>(k0 + r) * padded + column0 + n : 0);
        async::copy16(stageRight + r * kGemmTile + n, source, valid);
    }
    async::commit();
}

//! Eight consecutive FP32 values times `scale` as f16 hi / lo halves at `high` / `low` (4-byte aligned).
__device__ __forceinline__ void splitEight(float const* values, float scale, __half* high, __half* low)
{
    float4 const first = *reinterpret_cast<float4 const*>(values);
    float4 const second = *reinterpret_cast<float4 const*>(values + 4);
    uint32_t* const hi = reinterpret_cast<uint32_t*>(high);
    uint32_t* const lo = reinterpret_cast<uint32_t*>(low);
    packSplit(first.x * scale, first.y * scale, &hi[0], &lo[0]);
    packSplit(first.z * scale, first.w * scale, &hi[1], &lo[1]);
    packSplit(second.x * scale, second.y * scale, &hi[2], &lo[2]);
    packSplit(second.z * scale, second.w * scale, &hi[3], &lo[3]);
}

//! The per-matrix split scale from the producer's tile maxima (every thread calls it; every thread gets it).
__device__ __forceinline__ float matrixSplitScale(float const* tileMax, int tiles, float* scratch)
{
    float maxAbs = 0.0F;
    for (int tile = threadIdx.x; tile < tiles; tile += blockDim.x)
    {
        maxAbs = fmaxf(maxAbs, tileMax[tile]);
    }
    return splitScale(blockReduceMax(maxAbs, scratch));
}
#endif // EDGEATTN_MMA_AVAILABLE

/*
 * One Newton-Raphson product for every problem (grid (tiles, heads, batch)), step `step` (0-based):
 *   kUpdate = false: T = A X_step
 *   kUpdate = true:  X_{step+1} = 2 X_step - X_step T, or M from it at the last step
 */
template <bool kUpdate>
__global__ void __launch_bounds__(kGemmThreads, kGemmMinBlocks) softNewtonGemmMmaKernel(NewtonGemmParams const p, int step)
{
#if EDGEATTN_MMA_AVAILABLE
    __shared__ float4 storage[kGemmSharedBytes / 16];
    float* const stageLeft = reinterpret_cast<float*>(storage); // [stage][64][16]
    float* const stageRight = stageLeft + kGemmStages * kGemmStageFloats; // [stage][16][64]
    __half* const leftHigh = reinterpret_cast<__half*>(stageRight + kGemmStages * kGemmStageFloats); // [64][24]
    __half* const leftLow = leftHigh + kGemmTile * kGemmLeftStride;
    __half* const rightHigh = leftLow + kGemmTile * kGemmLeftStride; // [16][72]
    __half* const rightLow = rightHigh + kGemmDepth * kGemmRightStride;
    float* const scratch = reinterpret_cast<float*>(rightLow + kGemmDepth * kGemmRightStride);

    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    int const padded = p.padded;
    int const tiles = p.tilesPerSide * p.tilesPerSide;
    int64_t const problem = newtonProblem(p);
    int64_t const square = static_cast<int64_t>(padded) * padded;
    int const row0 = (blockIdx.x / p.tilesPerSide) * kGemmTile;
    int const column0 = (blockIdx.x % p.tilesPerSide) * kGemmTile;
    float const* const current = iterate(p, step) + problem * square;
    float const* const left = (kUpdate ? current : p.a + problem * square);
    float const* const right = (kUpdate ? p.t + problem * square : current);
    float const leftScale = kUpdate ? matrixSplitScale(iterateMax(p, step) + problem * tiles, tiles, scratch)
                                    : kSplitUnitScale; // A in [0, 1]
    float const rightScale = matrixSplitScale(
        (kUpdate ? p.tMax : iterateMax(p, step)) + problem * tiles, tiles, scratch);

    int const warpRow = (warp >> 1) * 32;
    int const warpColumn = (warp & 1) * 32;
    // uniform per warp: a warp tile wholly in the zero padding past P computes nothing
    bool const active = row0 + warpRow < padded && column0 + warpColumn < padded;
    mma::FragmentC acc[8]; // [row block 0..1][column tile 0..3]
    zeroFragments(acc);

    int const chunks = padded / kGemmDepth;
    issueGemmChunk(left, right, padded, row0, column0, 0, stageLeft, stageRight);
    for (int chunk = 0; chunk < chunks; ++chunk)
    {
        int const stage = chunk & 1;
        if (chunk + 1 < chunks)
        {
            issueGemmChunk(left, right, padded, row0, column0, chunk + 1, stageLeft + (stage ^ 1) * kGemmStageFloats,
                stageRight + (stage ^ 1) * kGemmStageFloats);
            async::wait<1>(); // this thread's copies of chunk `chunk` have landed
        }
        else
        {
            async::wait<0>();
        }
        __syncthreads(); // every thread's copies of this chunk visible; every warp done with the previous split
        {
            // split once per CTA: thread t takes 8 values of left row t / 2 and 8 of right row t / 8
            int const leftRow = threadIdx.x >> 1;
            int const leftDepth = (threadIdx.x & 1) * 8;
            splitEight(stageLeft + stage * kGemmStageFloats + leftRow * kGemmDepth + leftDepth, leftScale,
                leftHigh + leftRow * kGemmLeftStride + leftDepth, leftLow + leftRow * kGemmLeftStride + leftDepth);
            int const rightRow = threadIdx.x >> 3;
            int const rightColumn = (threadIdx.x & 7) * 8;
            splitEight(stageRight + stage * kGemmStageFloats + rightRow * kGemmTile + rightColumn, rightScale,
                rightHigh + rightRow * kGemmRightStride + rightColumn,
                rightLow + rightRow * kGemmRightStride + rightColumn);
        }
        __syncthreads(); // the split chunk visible to every warp
        if (active)
        {
            mma::FragmentA aHigh[2];
            mma::FragmentA aLow[2];
#pragma unroll
            for (int rb = 0; rb < 2; ++rb)
            {
                loadFragmentA<false>(aHigh[rb], leftHigh + (warpRow + rb * 16) * kGemmLeftStride, kGemmLeftStride);
                loadFragmentA<false>(aLow[rb], leftLow + (warpRow + rb * 16) * kGemmLeftStride, kGemmLeftStride);
            }
#pragma unroll
            for (int ct = 0; ct < 4; ++ct)
            {
                mma::FragmentB bHigh;
                mma::FragmentB bLow;
                loadFragmentB<true>(bHigh, rightHigh + warpColumn + ct * 8, kGemmRightStride);
                loadFragmentB<true>(bLow, rightLow + warpColumn + ct * 8, kGemmRightStride);
#pragma unroll
                for (int rb = 0; rb < 2; ++rb)
                {
                    mmaSplitBoth(acc[rb * 4 + ct], aHigh[rb], aLow[rb], bHigh, bLow);
                }
            }
        }
    }

    // Epilogue: unscale (exact powers of two, one factor each so their product cannot overflow), the update, the
    // store (float2: columns 2 threadID_in_group and + 1), the tile max for the next consumer's split scale.
    float const leftInverse = 1.0F / leftScale;
    float const rightInverse = 1.0F / rightScale;
    bool const last = kUpdate && step == p.newtonIters - 1;
    float* const out = kUpdate ? iterate(p, step + 1) + problem * square : p.t + problem * square;
    float localMax = 0.0F;
#pragma unroll
    for (int rb = 0; rb < 2; ++rb)
    {
#pragma unroll
        for (int ct = 0; ct < 4; ++ct)
        {
#pragma unroll
            for (int half = 0; half < 2; ++half)
            {
                int const i = row0 + warpRow + rb * 16 + mma::cRow(lane, 2 * half);
                int const j = column0 + warpColumn + ct * 8 + mma::cCol(lane, 2 * half);
                if (i < padded && j < padded)
                {
                    int64_t const at = static_cast<int64_t>(i) * padded + j;
                    float first = acc[rb * 4 + ct].x[2 * half] * leftInverse * rightInverse;
                    float second = acc[rb * 4 + ct].x[2 * half + 1] * leftInverse * rightInverse;
                    if (kUpdate)
                    {
                        float2 const previous = *reinterpret_cast<float2 const*>(current + at);
                        first = 2.0F * previous.x - first;
                        second = 2.0F * previous.y - second;
                    }
                    if (last)
                    {
                        storeProjection(p, problem, i, j, first);
                        storeProjection(p, problem, i, j + 1, second);
                    }
                    else
                    {
                        *reinterpret_cast<float2*>(out + at) = make_float2(first, second);
                        localMax = fmaxf(localMax, fmaxf(fabsf(first), fabsf(second)));
                    }
                }
            }
        }
    }
    if (!last)
    {
        float const tileMax = blockReduceMax(localMax, scratch);
        if (threadIdx.x == 0)
        {
            (kUpdate ? iterateMax(p, step + 1) : p.tMax)[problem * tiles + blockIdx.x] = tileMax;
        }
    }
#endif // EDGEATTN_MMA_AVAILABLE
}

//! The setup and the 2 newton_iters products of every problem; a status, the failing launch recorded.
inline int launchNewtonGemm(NewtonGemmParams const& p, int batch, cudaStream_t stream, char const* function)
{
    dim3 const perProblem(p.heads, batch);
    softNewtonGemmSetupKernel<<<perProblem, kSetupThreads, 0, stream>>>(p);
    int status = checkLaunch(function, "softNewtonGemmSetupKernel");
    dim3 const grid(p.tilesPerSide * p.tilesPerSide, p.heads, batch);
    for (int step = 0; step < p.newtonIters && status == EDGEATTN_STATUS_SUCCESS; ++step)
    {
        softNewtonGemmMmaKernel<false><<<grid, kGemmThreads, 0, stream>>>(p, step);
        status = checkLaunch(function, "softNewtonGemmMmaKernel");
        if (status == EDGEATTN_STATUS_SUCCESS)
        {
            softNewtonGemmMmaKernel<true><<<grid, kGemmThreads, 0, stream>>>(p, step);
            status = checkLaunch(function, "softNewtonGemmMmaKernel");
        }
    }
    return status;
}
#endif // EDGEATTN_TENSOR_CORES

} // namespace soft
} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_SOFT_NEWTON_GEMM_CUH
