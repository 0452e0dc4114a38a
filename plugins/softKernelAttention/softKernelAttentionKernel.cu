/*
 * EdgeAttnSoftKernelAttention (SOFT / SOFT++): out = P^T (M (P v)) per (batch, head), with
 *   P[i, n] = exp(-max(0, |l_i|^2 + |q_n|^2 - 2 l_i . q_n) / 2)   (landmarks x tokens, never materialised)
 *   A[i, j] = the same kernel between landmarks; X = Newton-Raphson pseudo-inverse of A (fixed iteration count,
 *   per-matrix step X_0 = A / max_rowsum(A)^2); M = diag(s) X diag(s), s = rowsum(A)^-1/2 (SOFT++) or M = X.
 *
 * Four launches, all FP32 inside:
 *   1. softNewtonKernel   grid (heads, batch): A (a GEMM of the landmarks with a Gaussian epilogue), the NR loop
 *      X <- 2X - X A X with A, X and two temporaries resident in shared memory when M is small (M = 49:
 *      ~44 KB), or in the workspace (L2-resident) for large M (M = 144 / 256 at 384^2 / 512^2); writes M.
 *      X stays exactly symmetric (the update is symmetrised), so X serves as its own transpose in the
 *      k-major micro-GEMMs.
 *   2. softPass1Kernel    grid (splits x landmark chunks, heads, batch): partial Y1 = P v over a token range;
 *      the P tile is recomputed on the fly (GEMM of the q tile with the landmark chunk + Gaussian epilogue).
 *   3. softProjectKernel  grid (heads, batch): Y1 = sum of the partials, Y2 = M Y1.
 *   4. softPass2Kernel    grid (token tiles, heads, batch): out = P^T Y2, looping over landmark chunks.
 * The squared distance is clamped at 0 (cancellation), so every kernel value is in (0, 1].
 */
#include "common/deviceUtils.cuh"
#include "common/kernelPath.h"
#include "common/kernelStatus.h"
#include "common/splitTensorCore.cuh"
#include "softKernelAttention/softNewtonGemm.cuh"

#include <algorithm>

namespace edgeattn
{
namespace kernels
{
namespace
{

constexpr int kSoftTokensPerSplit = 256;
constexpr int kSoftMaxSplits = 256;
constexpr int kSoftPassThreads = 256;
constexpr int kSoftTilesPerThread = 2;
constexpr int kNewtonSharedThreads = 256;
constexpr int kNewtonGlobalThreads = 512;
//! Landmark counts up to this run the tensor-core Newton-Raphson in one CTA per problem (softNewtonMmaKernel); above
//! it the tensor_core path runs the batched GEMM tiles of softNewtonGemm.cuh.
constexpr int kSoftNewtonMmaMaxLandmarks = 64;

struct SoftParams
{
    void const* q;
    void const* landmarks;
    void const* v;
    void* out;
    int tokens;
    int numLandmarks; // M
    int channels;
    int heads;
    int headDim;
    int landmarkPad; // M rounded up to 4
    int headPad;     // head_dim rounded up to 4
    int newtonIters;
    int symmetricNorm;
    int tokenTile;
    int landmarkTile;
    int splits;
    int tokensPerSplit;
    int mmaLandmarkWarps; // tensor-core pass 1: warps (16 landmarks each) per landmark chunk
    int mmaChunks;        // tensor-core pass 1: landmark chunks
    int mmaValueTiles;    // head_dim rounded up to 8, over 8
    float* newtonScratch; // global-memory NR buffers (large M only)
    float* mMatrix;       // [problem][Mp][Mp]
    float* partials;      // [problem][splits][Mp][dPad]
    float* y1;            // [problem][Mp][dPad]
    float* y2;            // [problem][Mp][dPad]
};

//! Offset of channel 0 of `head` (d channels) in batch `batch` of a (B, rows, C) input or output: q, v and out have
//! p.tokens rows, the landmarks p.numLandmarks.
__device__ __forceinline__ int64_t headOffset(SoftParams const& p, int batch, int rows, int head, int d)
{
    return static_cast<int64_t>(batch) * rows * p.channels + static_cast<int64_t>(head) * d;
}

struct SoftPlan
{
    int landmarkPad;
    int headPad;
    bool newtonInShared;
    size_t newtonFloats;
    int tokenTile;
    int landmarkTile;
    size_t passSharedBytes;
    int splits;
    int tokensPerSplit;
};

size_t newtonFloats(int landmarkPad, int headDim)
{
    size_t const square = static_cast<size_t>(landmarkPad) * landmarkPad;
    size_t const landmarksT = static_cast<size_t>(headDim) * landmarkPad;
    return 3 * square + std::max(square, landmarksT) + 2 * static_cast<size_t>(landmarkPad) + 32;
}

size_t passSharedFloats(int tokenTile, int landmarkTile, int headDim, int headPad)
{
    size_t const common = static_cast<size_t>(headDim) * (tokenTile + landmarkTile)
        + static_cast<size_t>(tokenTile) * landmarkTile + tokenTile + landmarkTile;
    // pass 1 stages v [tokenTile][dPad]; pass 2 stages Y2 [landmarkTile][dPad]
    return common + static_cast<size_t>(std::max(tokenTile, landmarkTile)) * headPad;
}

int softSplits(int tokens, int* tokensPerSplit)
{
    int perSplit = kSoftTokensPerSplit;
    if (ceilDiv(tokens, kSoftTokensPerSplit) > kSoftMaxSplits)
    {
        perSplit = ceilDiv(ceilDiv(tokens, kSoftMaxSplits), kSoftTokensPerSplit) * kSoftTokensPerSplit;
    }
    *tokensPerSplit = perSplit;
    return ceilDiv(tokens, perSplit);
}

bool planSoft(int tokens, int numLandmarks, int headDim, SoftPlan* plan, char const** reason)
{
    SoftPlan result;
    result.landmarkPad = roundUp4(numLandmarks);
    result.headPad = roundUp4(headDim);
    result.newtonFloats = newtonFloats(result.landmarkPad, headDim);
    result.newtonInShared = result.newtonFloats * sizeof(float) <= kMaxSharedBytes;
    static int const kCandidates[][2] = {{64, 64}, {64, 32}, {32, 32}, {32, 16}, {16, 16}};
    result.tokenTile = 0;
    for (auto const& candidate : kCandidates)
    {
        int const tokenTile = candidate[0];
        int const landmarkTile = candidate[1];
        size_t const bytes = passSharedFloats(tokenTile, landmarkTile, headDim, result.headPad) * sizeof(float);
        int const pass1Tiles = (landmarkTile / 4) * (result.headPad / 4);
        int const pass2Tiles = (tokenTile / 4) * (result.headPad / 4);
        int const maxTiles = kSoftPassThreads * kSoftTilesPerThread;
        if (bytes <= kMaxSharedBytes && pass1Tiles <= maxTiles && pass2Tiles <= maxTiles)
        {
            result.tokenTile = tokenTile;
            result.landmarkTile = landmarkTile;
            result.passSharedBytes = bytes;
            break;
        }
    }
    if (result.tokenTile == 0)
    {
        *reason = "head_dim too large for the 48 KB shared-memory budget of the token passes";
        return false;
    }
    result.splits = softSplits(tokens, &result.tokensPerSplit);
    *plan = result;
    return true;
}

struct SoftWorkspaceLayout
{
    size_t mMatrix;
    size_t y1;
    size_t y2;
    size_t partials;
    size_t newton;
    size_t total;
};

SoftWorkspaceLayout softWorkspaceLayout(int batch, int tokens, int numLandmarks, int heads, int headDim)
{
    SoftWorkspaceLayout layout;
    size_t const problems = static_cast<size_t>(batch) * heads;
    size_t const landmarkPad = static_cast<size_t>(roundUp4(numLandmarks));
    size_t const headPad = static_cast<size_t>(roundUp4(headDim));
    size_t const splits = static_cast<size_t>(std::min(ceilDiv(tokens, kSoftTokensPerSplit), kSoftMaxSplits));
    size_t nrFloats = newtonFloats(static_cast<int>(landmarkPad), headDim);
    bool const newtonInShared = nrFloats * sizeof(float) <= kMaxSharedBytes;
    if (numLandmarks > kSoftNewtonMmaMaxLandmarks)
    {
        // the same region serves the scalar iteration or the tensor-core GEMM tiles, whichever path runs
        nrFloats = std::max(nrFloats, soft::newtonGemmFloats(numLandmarks));
    }
    layout.mMatrix = 0;
    layout.y1 = layout.mMatrix + alignUp(problems * landmarkPad * landmarkPad * sizeof(float));
    layout.y2 = layout.y1 + alignUp(problems * landmarkPad * headPad * sizeof(float));
    layout.partials = layout.y2 + alignUp(problems * landmarkPad * headPad * sizeof(float));
    layout.newton = layout.partials + alignUp(problems * splits * landmarkPad * headPad * sizeof(float));
    layout.total = layout.newton + (newtonInShared ? 0 : alignUp(problems * nrFloats * sizeof(float)));
    return layout;
}

/*
 * out = lhsT^T rhs for mp x mp shared-memory matrices (mp a multiple of 4), lhsT stored k-major (transposed):
 * one 4x4 output tile per thread per step. The caller synchronises before reading out.
 */
__device__ __forceinline__ void squareProduct(float const* lhsT, float const* rhs, float* out, int mp)
{
    int const tilesPerSide = mp / 4;
    int const tiles = tilesPerSide * tilesPerSide;
    for (int tile = threadIdx.x; tile < tiles; tile += blockDim.x)
    {
        int const i0 = (tile / tilesPerSide) * 4;
        int const j0 = (tile % tilesPerSide) * 4;
        float acc[4][4];
        zeroTile4x4(acc);
        mmaTile4x4(acc, lhsT, mp, i0, rhs, mp, j0, mp);
#pragma unroll
        for (int r = 0; r < 4; ++r)
        {
#pragma unroll
            for (int c = 0; c < 4; ++c)
            {
                out[(i0 + r) * mp + j0 + c] = acc[r][c];
            }
        }
    }
}

// Launch bounds (512 threads, 1 CTA per SM): under the thread bound alone ptxas aimed at two CTAs per SM, capped
// the global form at 64 registers and spilled 16 bytes (sm_87). One CTA of 512 threads per SM lets it use up to
// 128 (107-110 on sm_80/87/90, no spill): the global form (the matrices of landmark counts too large for shared
// memory, in the workspace) now runs one CTA per SM; the shared form, launched with 256 threads, goes from 44 to
// 78-80 registers.
template <typename T, bool kShared>
__global__ void __launch_bounds__(kNewtonGlobalThreads, 1) softNewtonKernel(SoftParams const p)
{
    int const head = blockIdx.x;
    int const batch = blockIdx.y;
    int64_t const problem = static_cast<int64_t>(batch) * p.heads + head;
    int const m = p.numLandmarks;
    int const mp = p.landmarkPad;
    int const d = p.headDim;
    size_t const square = static_cast<size_t>(mp) * mp;
    size_t const landmarkFloats = static_cast<size_t>(d) * mp;
    size_t const upperFloats = square > landmarkFloats ? square : landmarkFloats;
    float* const base = kShared ? sharedFloats()
                                : p.newtonScratch
            + problem * (3 * square + upperFloats + 2 * static_cast<size_t>(mp) + 32);
    float* const a = base;
    float* x = a + square;
    float* const t = x + square;
    float* const u = t + square;                 // also holds the transposed landmarks before the loop
    float* const landmarksT = u;                 // [d][mp]
    float* const rowSum = u + upperFloats;       // [mp]
    float* const norms = rowSum + mp;            // [mp]
    float* const scratch = norms + mp;           // [32]

    for (size_t index = threadIdx.x; index < 3 * square + upperFloats; index += blockDim.x)
    {
        base[index] = 0.0F;
    }
    __syncthreads();
    T const* __restrict__ landmarkPtr = static_cast<T const*>(p.landmarks) + headOffset(p, batch, m, head, d);
    for (int index = threadIdx.x; index < m * d; index += blockDim.x)
    {
        int const i = index / d;
        int const c = index - i * d;
        landmarksT[c * mp + i] = loadFloat(landmarkPtr, static_cast<int64_t>(i) * p.channels + c);
    }
    __syncthreads();
    columnNorms(landmarksT, mp, d, norms);
    __syncthreads();

    int const tilesPerSide = mp / 4;
    int const tiles = tilesPerSide * tilesPerSide;
    // A[i][j] = exp(-max(0, |l_i|^2 + |l_j|^2 - 2 l_i.l_j) / 2); the (i, j) and (j, i) entries see identical
    // products in identical order, so A is exactly symmetric.
    for (int tile = threadIdx.x; tile < tiles; tile += blockDim.x)
    {
        int const i0 = (tile / tilesPerSide) * 4;
        int const j0 = (tile % tilesPerSide) * 4;
        float acc[4][4];
        zeroTile4x4(acc);
        mmaTile4x4(acc, landmarksT, mp, i0, landmarksT, mp, j0, d);
#pragma unroll
        for (int r = 0; r < 4; ++r)
        {
#pragma unroll
            for (int c = 0; c < 4; ++c)
            {
                int const i = i0 + r;
                int const j = j0 + c;
                a[i * mp + j] = (i < m && j < m) ? gaussianKernel(norms[i], norms[j], acc[r][c]) : 0.0F;
            }
        }
    }
    __syncthreads();

    float localMax = 0.0F;
    for (int i = threadIdx.x; i < mp; i += blockDim.x)
    {
        float sum = 0.0F;
        for (int j = 0; j < mp; ++j)
        {
            sum += a[i * mp + j];
        }
        rowSum[i] = sum;
        localMax = fmaxf(localMax, sum);
    }
    // Per-matrix step (no batch-wide statistic): X_0 = A / max_rowsum(A)^2. max_rowsum >= 1 (diag is 1).
    float const maxRowSum = blockReduceMax(localMax, scratch);
    float const step = 1.0F / (maxRowSum * maxRowSum);
    for (size_t index = threadIdx.x; index < square; index += blockDim.x)
    {
        x[index] = step * a[index];
    }
    __syncthreads();

    for (int iteration = 0; iteration < p.newtonIters; ++iteration)
    {
        // t = A X  (as t[i][j] = sum_k A[k][i] X[k][j]; A symmetric)
        squareProduct(a, x, t, mp);
        __syncthreads();
        // u = t^T X = X A X  (X, A symmetric)
        squareProduct(t, x, u, mp);
        __syncthreads();
        // X <- 2X - XAX, symmetrised (XAX is symmetric in exact arithmetic).
        for (size_t index = threadIdx.x; index < square; index += blockDim.x)
        {
            int const i = static_cast<int>(index / mp);
            int const j = static_cast<int>(index - static_cast<size_t>(i) * mp);
            x[index] = 2.0F * x[index] - 0.5F * (u[index] + u[j * mp + i]);
        }
        __syncthreads();
    }

    // M = diag(s) X diag(s) with s = rowsum(A)^-1/2 (SOFT++), or X (SOFT). x * (s_i * s_j) keeps M symmetric.
    float* const mMatrix = p.mMatrix + problem * square;
    for (size_t index = threadIdx.x; index < square; index += blockDim.x)
    {
        int const i = static_cast<int>(index / mp);
        int const j = static_cast<int>(index - static_cast<size_t>(i) * mp);
        float value = x[index];
        if (p.symmetricNorm != 0)
        {
            float const si = i < m ? rsqrtf(rowSum[i]) : 0.0F;
            float const sj = j < m ? rsqrtf(rowSum[j]) : 0.0F;
            value *= si * sj;
        }
        mMatrix[index] = value;
    }
}

//! Loads q (tile of tokens) transposed into qT [d][tokenTile] and returns nothing; rows past count are zero.
template <typename T>
__device__ __forceinline__ void loadTokenTileTransposed(
    T const* __restrict__ src, int64_t channels, int tokenBegin, int count, int tokenTile, int d, float* qT)
{
    for (int index = threadIdx.x; index < tokenTile * d; index += blockDim.x)
    {
        int const n = index / d;
        int const c = index - n * d;
        qT[c * tokenTile + n] = n < count ? loadFloat(src, static_cast<int64_t>(tokenBegin + n) * channels + c) : 0.0F;
    }
}

//! Loads landmarks [begin, begin + landmarkTile) transposed into lT [d][landmarkTile]; rows >= M are zero.
template <typename T>
__device__ __forceinline__ void loadLandmarkTileTransposed(
    T const* __restrict__ src, int64_t channels, int begin, int m, int landmarkTile, int d, float* lT)
{
    for (int index = threadIdx.x; index < landmarkTile * d; index += blockDim.x)
    {
        int const i = index / d;
        int const c = index - i * d;
        lT[c * landmarkTile + i]
            = begin + i < m ? loadFloat(src, static_cast<int64_t>(begin + i) * channels + c) : 0.0F;
    }
}

/*
 * P for one token tile and one landmark chunk: a GEMM of the transposed q tile [d][tokenTile] with the transposed
 * landmark chunk [d][landmarkTile], then the Gaussian epilogue. Entries of tokens past `count` and of landmarks
 * past the last one (`landmarksLeft` = M - first landmark of the chunk) are 0. kLandmarkMajor: store P as
 * [landmarkTile][tokenTile] (pass 2 contracts over landmarks) instead of [tokenTile][landmarkTile] (pass 1
 * contracts over tokens). Every thread of the block must call it; the caller synchronises before reading.
 */
template <bool kLandmarkMajor>
__device__ __forceinline__ void gaussianTile(float const* queriesT, float const* landmarksT, float const* queryNorms,
    float const* landmarkNorms, int tokenTile, int landmarkTile, int d, int count, int landmarksLeft, float* kernel)
{
    int const kernelTiles = (tokenTile / 4) * (landmarkTile / 4);
    int const tilesI = landmarkTile / 4;
    for (int tile = threadIdx.x; tile < kernelTiles; tile += blockDim.x)
    {
        int const n0 = (tile / tilesI) * 4;
        int const i0 = (tile % tilesI) * 4;
        float dots[4][4];
        zeroTile4x4(dots);
        mmaTile4x4(dots, queriesT, tokenTile, n0, landmarksT, landmarkTile, i0, d);
#pragma unroll
        for (int r = 0; r < 4; ++r)
        {
#pragma unroll
            for (int c = 0; c < 4; ++c)
            {
                bool const valid = n0 + r < count && i0 + c < landmarksLeft;
                float const value
                    = valid ? gaussianKernel(queryNorms[n0 + r], landmarkNorms[i0 + c], dots[r][c]) : 0.0F;
                if (kLandmarkMajor)
                {
                    kernel[(i0 + c) * tokenTile + n0 + r] = value;
                }
                else
                {
                    kernel[(n0 + r) * landmarkTile + i0 + c] = value;
                }
            }
        }
    }
}

//! Calls visit(s, row0, j0) for each of this thread's kSoftTilesPerThread 4x4 accumulator tiles (tile threadIdx.x +
//! s blockDim.x of `tiles`, tilesJ of them per tile row) with the tile's first row and column.
template <typename Visit>
__device__ __forceinline__ void forEachThreadTile(int tiles, int tilesJ, Visit const& visit)
{
#pragma unroll
    for (int s = 0; s < kSoftTilesPerThread; ++s)
    {
        int const tile = threadIdx.x + s * blockDim.x;
        if (tile < tiles)
        {
            visit(s, (tile / tilesJ) * 4, (tile % tilesJ) * 4);
        }
    }
}

// Launch bounds (256 threads, 3 CTAs per SM): under the thread bound alone ptxas aimed at four CTAs per SM,
// capped pass 1 at 64 registers and spilled 24 bytes; three CTAs per SM (at most 85 registers) keep its 4x4 tiles
// in registers (79-80 with nvcc 13.0 on sm_80/87/90; CUDA 11.8's ptxas for sm_72 still spills 24 bytes at 80).
template <typename T>
__global__ void __launch_bounds__(kSoftPassThreads, 3) softPass1Kernel(SoftParams const p)
{
    float* const shared = sharedFloats();
    int const d = p.headDim;
    int const dPad = p.headPad;
    int const tokenTile = p.tokenTile;
    int const landmarkTile = p.landmarkTile;
    float* const landmarksT = shared;                                 // [d][landmarkTile]
    float* const queriesT = landmarksT + d * landmarkTile;            // [d][tokenTile]
    float* const kernelTile = queriesT + d * tokenTile;               // [tokenTile][landmarkTile]
    float* const values = kernelTile + tokenTile * landmarkTile;      // [tokenTile][dPad]
    float* const landmarkNorms = values + (tokenTile > landmarkTile ? tokenTile : landmarkTile) * dPad;
    float* const queryNorms = landmarkNorms + landmarkTile;

    int const chunks = ceilDiv(p.landmarkPad, landmarkTile);
    int const split = blockIdx.x / chunks;
    int const chunk = blockIdx.x - split * chunks;
    int const landmarkBegin = chunk * landmarkTile;
    int const head = blockIdx.y;
    int const batch = blockIdx.z;
    int64_t const problem = static_cast<int64_t>(batch) * p.heads + head;
    int const begin = split * p.tokensPerSplit;
    int const end = min(p.tokens, begin + p.tokensPerSplit);
    int64_t const tokenBase = headOffset(p, batch, p.tokens, head, d);
    T const* __restrict__ qPtr = static_cast<T const*>(p.q) + tokenBase;
    T const* __restrict__ vPtr = static_cast<T const*>(p.v) + tokenBase;
    T const* __restrict__ lPtr = static_cast<T const*>(p.landmarks) + headOffset(p, batch, p.numLandmarks, head, d);

    for (int index = threadIdx.x; index < tokenTile * dPad; index += blockDim.x)
    {
        values[index] = 0.0F; // padded value columns stay zero
    }
    loadLandmarkTileTransposed(lPtr, p.channels, landmarkBegin, p.numLandmarks, landmarkTile, d, landmarksT);
    __syncthreads();
    columnNorms(landmarksT, landmarkTile, d, landmarkNorms);

    int const tilesJ = dPad / 4;
    int const accumulatorTiles = (landmarkTile / 4) * tilesJ;
    float acc[kSoftTilesPerThread][4][4];
#pragma unroll
    for (int s = 0; s < kSoftTilesPerThread; ++s)
    {
        zeroTile4x4(acc[s]);
    }

    for (int tileBegin = begin; tileBegin < end; tileBegin += tokenTile)
    {
        int const count = min(tokenTile, end - tileBegin);
        __syncthreads();
        loadTokenTileTransposed(qPtr, p.channels, tileBegin, count, tokenTile, d, queriesT);
        for (int index = threadIdx.x; index < tokenTile * d; index += blockDim.x)
        {
            int const n = index / d;
            int const c = index - n * d;
            values[n * dPad + c] = n < count ? loadFloat(vPtr, static_cast<int64_t>(tileBegin + n) * p.channels + c) : 0.0F;
        }
        __syncthreads();
        columnNorms(queriesT, tokenTile, d, queryNorms);
        __syncthreads();
        gaussianTile<false>(queriesT, landmarksT, queryNorms, landmarkNorms, tokenTile, landmarkTile, d, count,
            p.numLandmarks - landmarkBegin, kernelTile);
        __syncthreads();
        forEachThreadTile(accumulatorTiles, tilesJ, [&](int s, int i0, int j0) {
            mmaTile4x4(acc[s], kernelTile, landmarkTile, i0, values, dPad, j0, count);
        });
    }

    float* const partial = p.partials + (problem * p.splits + split) * p.landmarkPad * dPad;
    forEachThreadTile(accumulatorTiles, tilesJ, [&](int s, int i0, int j0) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
        {
            int const row = landmarkBegin + i0 + r;
            if (row < p.landmarkPad)
            {
#pragma unroll
                for (int c = 0; c < 4; ++c)
                {
                    partial[static_cast<int64_t>(row) * dPad + j0 + c] = acc[s][r][c];
                }
            }
        }
    });
}

__global__ void __launch_bounds__(256) softProjectKernel(SoftParams const p)
{
    int const head = blockIdx.x;
    int const batch = blockIdx.y;
    int64_t const problem = static_cast<int64_t>(batch) * p.heads + head;
    int const mp = p.landmarkPad;
    int const dPad = p.headPad;
    int64_t const size = static_cast<int64_t>(mp) * dPad;
    float const* const partials = p.partials + problem * p.splits * size;
    float* const y1 = p.y1 + problem * size;
    float* const y2 = p.y2 + problem * size;
    float const* const mMatrix = p.mMatrix + problem * mp * mp;

    for (int64_t index = threadIdx.x; index < size; index += blockDim.x)
    {
        float sum = 0.0F;
        for (int s = 0; s < p.splits; ++s)
        {
            sum += partials[s * size + index];
        }
        y1[index] = sum;
    }
    __syncthreads(); // makes this block's global writes of y1 visible to the whole block
    int const tilesJ = dPad / 4;
    int const tiles = (mp / 4) * tilesJ;
    for (int tile = threadIdx.x; tile < tiles; tile += blockDim.x)
    {
        int const i0 = (tile / tilesJ) * 4;
        int const j0 = (tile % tilesJ) * 4;
        float acc[4][4];
        zeroTile4x4(acc);
        // y2[i][j] = sum_k M[i][k] y1[k][j] = sum_k M[k][i] y1[k][j]  (M symmetric)
        mmaTile4x4(acc, mMatrix, mp, i0, y1, dPad, j0, mp);
#pragma unroll
        for (int r = 0; r < 4; ++r)
        {
#pragma unroll
            for (int c = 0; c < 4; ++c)
            {
                y2[(i0 + r) * dPad + j0 + c] = acc[r][c];
            }
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(kSoftPassThreads, 1) softPass2Kernel(SoftParams const p)
{
    float* const shared = sharedFloats();
    int const d = p.headDim;
    int const dPad = p.headPad;
    int const tokenTile = p.tokenTile;
    int const landmarkTile = p.landmarkTile;
    float* const landmarksT = shared;                                 // [d][landmarkTile]
    float* const queriesT = landmarksT + d * landmarkTile;            // [d][tokenTile]
    float* const kernelT = queriesT + d * tokenTile;                  // [landmarkTile][tokenTile]
    float* const y2Tile = kernelT + tokenTile * landmarkTile;         // [landmarkTile][dPad]
    float* const landmarkNorms = y2Tile + (tokenTile > landmarkTile ? tokenTile : landmarkTile) * dPad;
    float* const queryNorms = landmarkNorms + landmarkTile;

    int const tileBegin = blockIdx.x * tokenTile;
    int const head = blockIdx.y;
    int const batch = blockIdx.z;
    int const count = min(tokenTile, p.tokens - tileBegin);
    int64_t const problem = static_cast<int64_t>(batch) * p.heads + head;
    int64_t const tokenBase = headOffset(p, batch, p.tokens, head, d);
    T const* __restrict__ qPtr = static_cast<T const*>(p.q) + tokenBase;
    T* __restrict__ outPtr = static_cast<T*>(p.out) + tokenBase;
    T const* __restrict__ lPtr = static_cast<T const*>(p.landmarks) + headOffset(p, batch, p.numLandmarks, head, d);
    float const* const y2 = p.y2 + problem * p.landmarkPad * dPad;

    loadTokenTileTransposed(qPtr, p.channels, tileBegin, count, tokenTile, d, queriesT);
    __syncthreads();
    columnNorms(queriesT, tokenTile, d, queryNorms);

    int const tilesJ = dPad / 4;
    int const outputTiles = (tokenTile / 4) * tilesJ;
    float acc[kSoftTilesPerThread][4][4];
#pragma unroll
    for (int s = 0; s < kSoftTilesPerThread; ++s)
    {
        zeroTile4x4(acc[s]);
    }

    for (int landmarkBegin = 0; landmarkBegin < p.landmarkPad; landmarkBegin += landmarkTile)
    {
        int const chunk = min(landmarkTile, p.landmarkPad - landmarkBegin);
        __syncthreads();
        loadLandmarkTileTransposed(lPtr, p.channels, landmarkBegin, p.numLandmarks, landmarkTile, d, landmarksT);
        for (int index = threadIdx.x; index < landmarkTile * dPad; index += blockDim.x)
        {
            int const row = landmarkBegin + index / dPad;
            y2Tile[index] = row < p.landmarkPad ? y2[static_cast<int64_t>(landmarkBegin) * dPad + index] : 0.0F;
        }
        __syncthreads();
        columnNorms(landmarksT, landmarkTile, d, landmarkNorms);
        __syncthreads();
        gaussianTile<true>(queriesT, landmarksT, queryNorms, landmarkNorms, tokenTile, landmarkTile, d, count,
            p.numLandmarks - landmarkBegin, kernelT);
        __syncthreads();
        forEachThreadTile(outputTiles, tilesJ, [&](int s, int n0, int j0) {
            mmaTile4x4(acc[s], kernelT, tokenTile, n0, y2Tile, dPad, j0, chunk);
        });
    }

    forEachThreadTile(outputTiles, tilesJ, [&](int s, int n0, int j0) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
        {
            if (n0 + r < count)
            {
#pragma unroll
                for (int c = 0; c < 4; ++c)
                {
                    if (j0 + c < d)
                    {
                        outPtr[static_cast<int64_t>(tileBegin + n0 + r) * p.channels + j0 + c]
                            = fromFloat<T>(acc[s][r][c]);
                    }
                }
            }
        }
    });
}

//! The scalar Newton-Raphson launch (its matrices in shared memory when they fit, else in the workspace).
template <typename T>
int launchSoftNewton(SoftParams const& params, SoftPlan const& plan, int batch, cudaStream_t stream,
    char const* function)
{
    dim3 const perProblem(params.heads, batch);
    if (plan.newtonInShared)
    {
        softNewtonKernel<T, true>
            <<<perProblem, kNewtonSharedThreads, plan.newtonFloats * sizeof(float), stream>>>(params);
    }
    else
    {
        softNewtonKernel<T, false><<<perProblem, kNewtonGlobalThreads, 0, stream>>>(params);
    }
    return checkLaunch(function, "softNewtonKernel");
}

//! The projection between either path's pass 1 and pass 2.
int launchSoftProject(SoftParams const& params, int batch, cudaStream_t stream, char const* function)
{
    dim3 const perProblem(params.heads, batch);
    softProjectKernel<<<perProblem, 256, 0, stream>>>(params);
    return checkLaunch(function, "softProjectKernel");
}


/*
 * Tensor-core path (sm_80+, FP16 I/O; head_dim <= 64). The same four launches and workspace as the scalar path:
 *   softNewtonMmaKernel (M <= 64) one block of 8 warps per (batch, head): A = the landmarks' Gram matrix through the
 *      Gaussian epilogue, and both products of every Newton-Raphson step X <- 2X - X (A X) on mma. The iterates stay
 *      FP32 in registers (C fragments, 16 x 32 per warp); only the product inputs are split f16 hi + lo (three mma per
 *      tile product, per-matrix power-of-two scale), which keeps the iteration at FP32 accuracy where one f16
 *      rounding of X and A X would stall it at 2^-11 times cond(A) (plugins/README.md, "Tensor cores"). M > 64 keeps
 *      the scalar Newton kernel (its matrices do not fit 48 KB of shared memory as f16 pairs).
 *   softPass1MmaKernel   Y1 partials = P v: per 64-token tile, S = L Q^T on mma (exact f16 inputs), the Gaussian
 *      epilogue in registers, P (scaled by 2^14, split) reused as the A operand of P V straight from the C fragments.
 *   softProjectKernel    the scalar Y2 = M sum(Y1) (M x M x d per head: negligible).
 *   softPass2MmaKernel   out = P^T Y2: per 64-token tile and 64-landmark chunk, S^T = Q L^T on mma, Gaussian
 *      epilogue, P^T Y2 with Y2 split per chunk and column (power-of-two scales).
 */
constexpr int kSoftMmaMaxHeadDim = 64; // accumulators of 8 value tiles per warp

bool softHasTensorCoreKernel(int headDim)
{
    return headDim <= kSoftMmaMaxHeadDim;
}

#if EDGEATTN_TENSOR_CORES
constexpr int kSoftMmaTokenTile = 64;     // tokens per tile: pass 2 has 4 warps x 16 tokens
constexpr int kSoftMmaChunk = 64;         // landmarks per pass-2 chunk
constexpr int kSoftMmaPassThreads = 128;
constexpr int kSoftNewtonMmaThreads = 256; // 8 warps: 4 row blocks x 2 column halves of a 64 x 64 matrix
constexpr int kSoftNewtonMmaStride = 72;   // halves per staged matrix row (+8: conflict-free ldmatrix rows)

//! Halves per staged q / landmark row (head_dim rounded up to the mma depth 16, +8) and per v / Y2 row.
EDGEATTN_HOST_DEVICE inline int softMmaRowStride(int headDim)
{
    return (headDim + 15) / 16 * 16 + 8;
}

EDGEATTN_HOST_DEVICE inline int softMmaValueStride(int valueTiles)
{
    return valueTiles * 8 + 8;
}

size_t softPass1MmaSharedBytes(int headDim, int valueTiles, int landmarkWarps)
{
    size_t const halves = static_cast<size_t>(16 * landmarkWarps + kSoftMmaTokenTile) * softMmaRowStride(headDim)
        + static_cast<size_t>(kSoftMmaTokenTile) * softMmaValueStride(valueTiles);
    return halves * 2 + static_cast<size_t>(16 * landmarkWarps + kSoftMmaTokenTile) * sizeof(float);
}

size_t softPass2MmaSharedBytes(int headDim, int valueTiles)
{
    size_t const halves = static_cast<size_t>(kSoftMmaTokenTile + kSoftMmaChunk) * softMmaRowStride(headDim)
        + 2 * static_cast<size_t>(kSoftMmaChunk) * softMmaValueStride(valueTiles);
    return halves * 2 + static_cast<size_t>(kSoftMmaTokenTile + kSoftMmaChunk + valueTiles * 8) * sizeof(float);
}

constexpr size_t kSoftNewtonMmaSharedBytes
    = 4 * 64 * kSoftNewtonMmaStride * 2 + (64 + 64 + 32) * sizeof(float);

#if EDGEATTN_MMA_AVAILABLE
//! Zeroes `floats` floats of shared memory from `base`: the staged rows' padding stays zero for the whole kernel.
__device__ __forceinline__ void zeroSharedFloats(void* base, int floats)
{
    for (int index = threadIdx.x; index < floats; index += blockDim.x)
    {
        static_cast<float*>(base)[index] = 0.0F;
    }
}

//! Rows first.. first + rows - 1 of one head's d channels (`sourceStride` halves apart in global memory) as f16 rows
//! `rowStride` halves apart in shared memory; rows from `validRows` on are zero, the channel padding is not written.
__device__ __forceinline__ void stageHeadRows(__half* staged, int rowStride, __half const* __restrict__ source,
    int64_t sourceStride, int first, int rows, int validRows, int d)
{
    __half const zero = __float2half_rn(0.0F);
    for (int index = threadIdx.x; index < rows * d; index += blockDim.x)
    {
        int const i = index / d;
        int const c = index - i * d;
        staged[i * rowStride + c] = i < validRows ? source[static_cast<int64_t>(first + i) * sourceStride + c] : zero;
    }
}

//! FP32 squared norms of `rows` staged f16 rows of d channels: the |q|^2 and |l|^2 of the Gaussian epilogue.
__device__ __forceinline__ void stagedRowNorms(__half const* staged, int rowStride, int rows, int d, float* norms)
{
    for (int i = threadIdx.x; i < rows; i += blockDim.x)
    {
        float sum = 0.0F;
        for (int c = 0; c < d; ++c)
        {
            float const value = __half2float(staged[i * rowStride + c]);
            sum = fmaf(value, value, sum);
        }
        norms[i] = sum;
    }
}

/*
 * dots += R C^T for the 16 staged rows at `rows` and the column tiles (8 staged rows each) at `columns`, both
 * k-contiguous with `stride` halves per row and `depthSteps` 16-deep k blocks; column tiles from `columnCount` on are
 * skipped (exact f16 inputs: the dot products of the Gaussian kernel). A warp collective.
 */
template <int kTiles>
__device__ __forceinline__ void accumulateDots(mma::FragmentC (&dots)[kTiles], __half const* rows,
    __half const* columns, int stride, int depthSteps, int columnCount)
{
    for (int step = 0; step < depthSteps; ++step)
    {
        mma::FragmentA row;
        loadFragmentA<false>(row, rows + step * 16, stride);
#pragma unroll
        for (int t = 0; t < kTiles; ++t)
        {
            if (t * 8 < columnCount)
            {
                mma::FragmentB column;
                loadFragmentB<false>(column, columns + t * 8 * stride + step * 16, stride);
                mma::mmaF16(dots[t], row, column);
            }
        }
    }
}

//! The squared norms of the rows this lane's C-fragment elements lie in (row firstRow + cRow of the warp's 16-row
//! block), and whether each row lies before `validRows`.
__device__ __forceinline__ void fragmentRowNorms(
    float const* norms, int firstRow, int validRows, float (&rowNorms)[4], bool (&rowValid)[4])
{
    int const lane = threadIdx.x & 31;
#pragma unroll
    for (int e = 0; e < 4; ++e)
    {
        int const row = firstRow + mma::cRow(lane, e);
        rowNorms[e] = norms[row];
        rowValid[e] = row < validRows;
    }
}

/*
 * P for k block `block` of a warp's 16 x 64 dot products (C tiles 2 block and 2 block + 1), as the split A fragments
 * of the next product: the Gaussian kernel of each dot product with its row's and column's squared norm, scaled by
 * 2^14 for the split; entries of invalid rows and of columns from `columnCount` on are 0.
 */
__device__ __forceinline__ void gaussianBlockToA(mma::FragmentC const (&dots)[8], int block,
    float const (&rowNorms)[4], bool const (&rowValid)[4], float const* columnNorms, int columnCount,
    mma::FragmentA* high, mma::FragmentA* low)
{
    int const lane = threadIdx.x & 31;
    float kernelValues[2][4];
#pragma unroll
    for (int side = 0; side < 2; ++side)
    {
#pragma unroll
        for (int e = 0; e < 4; ++e)
        {
            int const column = (2 * block + side) * 8 + mma::cCol(lane, e);
            float const columnNorm = columnNorms[column];
            kernelValues[side][e] = rowValid[e] && column < columnCount
                ? gaussianKernel(rowNorms[e], columnNorm, dots[2 * block + side].x[e]) * kSplitUnitScale
                : 0.0F;
        }
    }
    splitCToA(kernelValues[0], kernelValues[1], high, low);
}

/*
 * acc += P B for the warp's 16 rows: P from the dot products (gaussianBlockToA, columns from `columnCount` on 0), B
 * the staged rows 0.. columnCount - 1 of `valueTiles` 8-column tiles (n-contiguous, `stride` halves per row), either
 * exact f16 values (bHigh; pass 1's v) or split into bHigh + bLow (kSplitB; pass 2's Y2).
 */
template <bool kSplitB, int kValueTiles>
__device__ __forceinline__ void accumulateGaussianProduct(mma::FragmentC (&acc)[kValueTiles],
    mma::FragmentC const (&dots)[8], float const (&rowNorms)[4], bool const (&rowValid)[4], float const* columnNorms,
    int columnCount, __half const* bHigh, __half const* bLow, int stride, int valueTiles)
{
#pragma unroll
    for (int block = 0; block < 4; ++block)
    {
        if (block * 16 >= columnCount)
        {
            break;
        }
        mma::FragmentA high;
        mma::FragmentA low;
        gaussianBlockToA(dots, block, rowNorms, rowValid, columnNorms, columnCount, &high, &low);
#pragma unroll
        for (int t = 0; t < kValueTiles; ++t)
        {
            if (t < valueTiles)
            {
                int const at = block * 16 * stride + t * 8;
                mma::FragmentB valueHigh;
                loadFragmentB<true>(valueHigh, bHigh + at, stride);
                if (kSplitB)
                {
                    mma::FragmentB valueLow;
                    loadFragmentB<true>(valueLow, bLow + at, stride);
                    mmaSplitBoth(acc[t], high, low, valueHigh, valueLow);
                }
                else
                {
                    mma::mmaF16(acc[t], low, valueHigh);
                    mma::mmaF16(acc[t], high, valueHigh);
                }
            }
        }
    }
}
#endif

template <int kValueTiles>
__global__ void __launch_bounds__(kSoftMmaPassThreads) softPass1MmaKernel(SoftParams const p)
{
#if EDGEATTN_MMA_AVAILABLE
    int const d = p.headDim;
    int const rowStride = softMmaRowStride(d);
    int const valueStride = softMmaValueStride(kValueTiles);
    int const depthSteps = (rowStride - 8) / 16;
    int const chunkRows = 16 * p.mmaLandmarkWarps;
    __half* const landmarks = reinterpret_cast<__half*>(sharedFloats()); // [chunkRows][rowStride]
    __half* const queries = landmarks + chunkRows * rowStride;           // [64][rowStride]
    __half* const values = queries + kSoftMmaTokenTile * rowStride;      // [64][valueStride]
    float* const landmarkNorms = reinterpret_cast<float*>(values + kSoftMmaTokenTile * valueStride);
    float* const queryNorms = landmarkNorms + chunkRows;

    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    int const split = blockIdx.x / p.mmaChunks;
    int const chunk = blockIdx.x - split * p.mmaChunks;
    int const landmarkBegin = chunk * chunkRows;
    int const head = blockIdx.y;
    int const batch = blockIdx.z;
    int64_t const problem = static_cast<int64_t>(batch) * p.heads + head;
    int const begin = split * p.tokensPerSplit;
    int const end = min(p.tokens, begin + p.tokensPerSplit);
    int64_t const tokenBase = headOffset(p, batch, p.tokens, head, d);
    __half const* __restrict__ qPtr = static_cast<__half const*>(p.q) + tokenBase;
    __half const* __restrict__ vPtr = static_cast<__half const*>(p.v) + tokenBase;
    __half const* __restrict__ lPtr
        = static_cast<__half const*>(p.landmarks) + headOffset(p, batch, p.numLandmarks, head, d);

    int const stagedHalves = (chunkRows + kSoftMmaTokenTile) * rowStride + kSoftMmaTokenTile * valueStride;
    zeroSharedFloats(landmarks, stagedHalves / 2);
    __syncthreads();
    stageHeadRows(landmarks, rowStride, lPtr, p.channels, landmarkBegin, chunkRows, p.numLandmarks - landmarkBegin, d);
    __syncthreads();
    stagedRowNorms(landmarks, rowStride, chunkRows, d, landmarkNorms);

    mma::FragmentC acc[kValueTiles];
    zeroFragments(acc);
    for (int tileBegin = begin; tileBegin < end; tileBegin += kSoftMmaTokenTile)
    {
        int const count = min(kSoftMmaTokenTile, end - tileBegin);
        __syncthreads(); // the previous tile's fragment loads are done (and the landmark norms are visible)
        stageHeadRows(queries, rowStride, qPtr, p.channels, tileBegin, kSoftMmaTokenTile, count, d);
        stageHeadRows(values, valueStride, vPtr, p.channels, tileBegin, kSoftMmaTokenTile, count, d);
        __syncthreads();
        stagedRowNorms(queries, rowStride, kSoftMmaTokenTile, d, queryNorms);
        __syncthreads();
        float rowNorms[4];
        bool rowValid[4];
        fragmentRowNorms(landmarkNorms, warp * 16, p.numLandmarks - landmarkBegin, rowNorms, rowValid);

        // S = L Q^T for this warp's 16 landmarks and the tile's 64 tokens
        mma::FragmentC scores[8];
        zeroFragments(scores);
        accumulateDots(scores, landmarks + warp * 16 * rowStride, queries, rowStride, depthSteps, count);
        // P V with P (Gaussian epilogue, padded landmarks and tokens 0) as the A operand, 16 tokens at a time
        accumulateGaussianProduct<false>(
            acc, scores, rowNorms, rowValid, queryNorms, count, values, nullptr, valueStride, p.mmaValueTiles);
    }

    float* const partial = p.partials + (problem * p.splits + split) * p.landmarkPad * p.headPad;
#pragma unroll
    for (int t = 0; t < kValueTiles; ++t)
    {
#pragma unroll
        for (int e = 0; e < 4; ++e)
        {
            int const row = landmarkBegin + warp * 16 + mma::cRow(lane, e);
            int const column = t * 8 + mma::cCol(lane, e);
            if (row < p.landmarkPad && column < p.headPad)
            {
                partial[static_cast<int64_t>(row) * p.headPad + column] = acc[t].x[e] * kSplitUnitInverse;
            }
        }
    }
#endif // EDGEATTN_MMA_AVAILABLE
}

template <int kValueTiles>
__global__ void __launch_bounds__(kSoftMmaPassThreads) softPass2MmaKernel(SoftParams const p)
{
#if EDGEATTN_MMA_AVAILABLE
    int const d = p.headDim;
    int const rowStride = softMmaRowStride(d);
    int const valueStride = softMmaValueStride(kValueTiles);
    int const depthSteps = (rowStride - 8) / 16;
    int const valueColumns = p.mmaValueTiles * 8;
    __half* const queries = reinterpret_cast<__half*>(sharedFloats()); // [64][rowStride], then the output staging
    __half* const landmarks = queries + kSoftMmaTokenTile * rowStride;  // [64][rowStride]
    __half* const y2High = landmarks + kSoftMmaChunk * rowStride;       // [64][valueStride]
    __half* const y2Low = y2High + kSoftMmaChunk * valueStride;
    float* const queryNorms = reinterpret_cast<float*>(y2Low + kSoftMmaChunk * valueStride);
    float* const landmarkNorms = queryNorms + kSoftMmaTokenTile;
    float* const columnScale = landmarkNorms + kSoftMmaChunk;

    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    int const tileBegin = blockIdx.x * kSoftMmaTokenTile;
    int const head = blockIdx.y;
    int const batch = blockIdx.z;
    int const count = min(kSoftMmaTokenTile, p.tokens - tileBegin);
    int const m = p.numLandmarks;
    int64_t const problem = static_cast<int64_t>(batch) * p.heads + head;
    int64_t const tokenBase = headOffset(p, batch, p.tokens, head, d);
    __half const* __restrict__ qPtr = static_cast<__half const*>(p.q) + tokenBase;
    __half* __restrict__ outPtr = static_cast<__half*>(p.out) + tokenBase;
    __half const* __restrict__ lPtr
        = static_cast<__half const*>(p.landmarks) + headOffset(p, batch, p.numLandmarks, head, d);
    float const* const y2 = p.y2 + problem * p.landmarkPad * p.headPad;
    int const rowBase = warp * 16;
    bool const active = rowBase < count; // uniform per warp

    zeroSharedFloats(queries, (kSoftMmaTokenTile + kSoftMmaChunk) * rowStride / 2);
    __syncthreads();
    stageHeadRows(queries, rowStride, qPtr, p.channels, tileBegin, kSoftMmaTokenTile, count, d);
    __syncthreads();
    stagedRowNorms(queries, rowStride, kSoftMmaTokenTile, d, queryNorms);

    mma::FragmentC acc[kValueTiles];
    zeroFragments(acc);
    for (int chunkBegin = 0; chunkBegin < m; chunkBegin += kSoftMmaChunk)
    {
        int const chunkRows = min(kSoftMmaChunk, m - chunkBegin);
        __syncthreads(); // the previous chunk's fragment loads are done
        stageHeadRows(landmarks, rowStride, lPtr, p.channels, chunkBegin, kSoftMmaChunk, chunkRows, d);
        for (int j = threadIdx.x; j < valueColumns; j += blockDim.x)
        {
            float maxAbs = 0.0F;
            for (int i = 0; j < d && i < chunkRows; ++i)
            {
                maxAbs = fmaxf(maxAbs, fabsf(y2[static_cast<int64_t>(chunkBegin + i) * p.headPad + j]));
            }
            columnScale[j] = splitScale(maxAbs);
        }
        __syncthreads();
        stagedRowNorms(landmarks, rowStride, kSoftMmaChunk, d, landmarkNorms);
        for (int index = threadIdx.x; index < kSoftMmaChunk * valueColumns; index += blockDim.x)
        {
            int const i = index / valueColumns;
            int const j = index - i * valueColumns;
            float const value = i < chunkRows && j < d
                ? y2[static_cast<int64_t>(chunkBegin + i) * p.headPad + j] * columnScale[j]
                : 0.0F;
            splitHalf(value, y2High + i * valueStride + j, y2Low + i * valueStride + j);
        }
        __syncthreads();
        if (!active)
        {
            continue;
        }

        // S^T = Q L^T for this warp's 16 tokens and the chunk's landmarks
        mma::FragmentC scores[8];
        zeroFragments(scores);
        accumulateDots(scores, queries + rowBase * rowStride, landmarks, rowStride, depthSteps, chunkRows);
        float rowNorms[4];
        bool rowValid[4];
        fragmentRowNorms(queryNorms, rowBase, count, rowNorms, rowValid);
        // per-chunk accumulators: each chunk's Y2 split has its own column scales
        mma::FragmentC chunkAcc[kValueTiles];
        zeroFragments(chunkAcc);
        accumulateGaussianProduct<true>(chunkAcc, scores, rowNorms, rowValid, landmarkNorms, chunkRows, y2High, y2Low,
            valueStride, p.mmaValueTiles);
#pragma unroll
        for (int t = 0; t < kValueTiles; ++t)
        {
#pragma unroll
            for (int e = 0; e < 4; ++e)
            {
                int const column = t * 8 + mma::cCol(lane, e);
                if (t < p.mmaValueTiles)
                {
                    acc[t].x[e] += chunkAcc[t].x[e] * (kSplitUnitInverse / columnScale[column]);
                }
            }
        }
    }

    // output staged in this warp's own q rows (no other warp reads them), then stored token-major, coalesced
    __syncwarp();
    if (active)
    {
#pragma unroll
        for (int t = 0; t < kValueTiles; ++t)
        {
#pragma unroll
            for (int e = 0; e < 4; ++e)
            {
                int const column = t * 8 + mma::cCol(lane, e);
                if (t < p.mmaValueTiles && column < d)
                {
                    queries[(rowBase + mma::cRow(lane, e)) * rowStride + column] = __float2half_rn(acc[t].x[e]);
                }
            }
        }
    }
    __syncthreads();
    for (int index = threadIdx.x; index < count * d; index += blockDim.x)
    {
        int const n = index / d;
        int const c = index - n * d;
        outPtr[static_cast<int64_t>(tileBegin + n) * p.channels + c] = queries[n * rowStride + c];
    }
#endif // EDGEATTN_MMA_AVAILABLE
}

#if EDGEATTN_MMA_AVAILABLE
/*
 * The Newton kernel's warp tile: 16 rows (rowBlock) x 4 column tiles from columnBase of a matrix padded to `padded`
 * rows and columns; column tiles from `padded` on are not used. Its staged matrices are kSoftNewtonMmaStride halves
 * per row.
 */
struct NewtonWarpTile
{
    int rowBlock;
    int columnBase;
    int padded;

    __device__ __forceinline__ bool hasColumnTile(int t) const
    {
        return columnBase + t * 8 < padded;
    }
};

//! The warp tile's C fragments, times `scale`, split into hi / lo at their places of the staged matrices.
__device__ __forceinline__ void storeSplitFragments(
    mma::FragmentC const (&c)[4], float scale, NewtonWarpTile const& tile, __half* high, __half* low)
{
    int const lane = threadIdx.x & 31;
#pragma unroll
    for (int t = 0; t < 4; ++t)
    {
#pragma unroll
        for (int e = 0; e < 4; ++e)
        {
            int const at = (tile.rowBlock * 16 + mma::cRow(lane, e)) * kSoftNewtonMmaStride + tile.columnBase + t * 8
                + mma::cCol(lane, e);
            if (tile.hasColumnTile(t))
            {
                splitHalf(c[t].x[e] * scale, high + at, low + at);
            }
        }
    }
}

//! product += (aHigh + aLow) B for k block `block` of the staged split matrix B (bHigh / bLow, n-contiguous), over
//! the warp tile's column tiles (without the lo * lo term).
__device__ __forceinline__ void accumulateSplitBlock(mma::FragmentC (&product)[4], mma::FragmentA const& aHigh,
    mma::FragmentA const& aLow, __half const* bHigh, __half const* bLow, int block, NewtonWarpTile const& tile)
{
#pragma unroll
    for (int t = 0; t < 4; ++t)
    {
        if (tile.hasColumnTile(t))
        {
            int const at = block * 16 * kSoftNewtonMmaStride + tile.columnBase + t * 8;
            mma::FragmentB high;
            mma::FragmentB low;
            loadFragmentB<true>(high, bHigh + at, kSoftNewtonMmaStride);
            loadFragmentB<true>(low, bLow + at, kSoftNewtonMmaStride);
            mmaSplitBoth(product[t], aHigh, aLow, high, low);
        }
    }
}
#endif

__global__ void __launch_bounds__(kSoftNewtonMmaThreads) softNewtonMmaKernel(SoftParams const p)
{
#if EDGEATTN_MMA_AVAILABLE
    constexpr int kStride = kSoftNewtonMmaStride;
    constexpr int kMatrixHalves = 64 * kStride;
    float* const shared = sharedFloats();
    __half* const xHigh = reinterpret_cast<__half*>(shared); // [64][kStride]: X, scaled and split, per step
    __half* const xLow = xHigh + kMatrixHalves;
    __half* const tHigh = xLow + kMatrixHalves; // A (before the loop), then A X, scaled and split, per step
    __half* const tLow = tHigh + kMatrixHalves;
    float* const gram = shared;     // [64][64] FP32 A before the loop (over xHigh / xLow)
    __half* const landmarks = tHigh; // [64][rowStride] before A exists (over tHigh / tLow)
    float* const rowSum = shared + 2 * kMatrixHalves;
    float* const norms = rowSum + 64;
    float* const scratch = norms + 64;

    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    int const head = blockIdx.x;
    int const batch = blockIdx.y;
    int64_t const problem = static_cast<int64_t>(batch) * p.heads + head;
    int const m = p.numLandmarks;
    int const d = p.headDim;
    int const tiles = (m + 15) / 16; // 16-row blocks of the padded matrices
    int const padded = 16 * tiles;
    int const rowStride = softMmaRowStride(d);
    int const depthSteps = (rowStride - 8) / 16;
    int const rowBlock = warp >> 1;
    int const columnBase = (warp & 1) * 32;
    bool const active = rowBlock < tiles; // uniform per warp: this warp owns rows 16 rowBlock.., 32 columns
    NewtonWarpTile const tile = {rowBlock, columnBase, padded};
    __half const* __restrict__ lPtr
        = static_cast<__half const*>(p.landmarks) + headOffset(p, batch, p.numLandmarks, head, d);

    zeroSharedFloats(landmarks, 64 * rowStride / 2);
    __syncthreads();
    stageHeadRows(landmarks, rowStride, lPtr, p.channels, 0, m, m, d);
    __syncthreads();
    stagedRowNorms(landmarks, rowStride, 64, d, norms);
    __syncthreads();

    // X as this warp's C fragments: 16 rows x 4 column tiles (tiles past the padded size unused)
    mma::FragmentC x[4];
    zeroFragments(x);
    if (active)
    {
        accumulateDots(x, landmarks + rowBlock * 16 * rowStride, landmarks + columnBase * rowStride, rowStride,
            depthSteps, padded - columnBase);
#pragma unroll
        for (int t = 0; t < 4; ++t)
        {
#pragma unroll
            for (int e = 0; e < 4; ++e)
            {
                int const i = rowBlock * 16 + mma::cRow(lane, e);
                int const j = columnBase + t * 8 + mma::cCol(lane, e);
                x[t].x[e] = i < m && j < m ? gaussianKernel(norms[i], norms[j], x[t].x[e]) : 0.0F;
                if (j < padded)
                {
                    gram[i * 64 + j] = x[t].x[e];
                }
            }
        }
    }
    __syncthreads();
    float localMax = 0.0F;
    for (int i = threadIdx.x; i < padded; i += blockDim.x)
    {
        float sum = 0.0F;
        for (int j = 0; j < padded; ++j)
        {
            sum += gram[i * 64 + j];
        }
        rowSum[i] = sum;
        localMax = fmaxf(localMax, sum);
    }
    // Per-matrix step (no batch-wide statistic): X_0 = A / max_rowsum(A)^2. max_rowsum >= 1 (diag is 1).
    float const maxRowSum = blockReduceMax(localMax, scratch);
    float const stepSize = 1.0F / (maxRowSum * maxRowSum);
    // A in [0, 1] (diagonal 1): split with the fixed scale 2^14, over the landmarks (no longer read)
    for (int index = threadIdx.x; index < padded * padded; index += blockDim.x)
    {
        int const i = index / padded;
        int const j = index - i * padded;
        splitHalf(gram[i * 64 + j] * kSplitUnitScale, tHigh + i * kStride + j, tLow + i * kStride + j);
    }
    scaleFragments(x, stepSize);
    __syncthreads();
    // this warp's rows of A stay in registers for the whole iteration (A is the left operand of A X)
    mma::FragmentA aHigh[4];
    mma::FragmentA aLow[4];
    if (active)
    {
#pragma unroll
        for (int block = 0; block < 4; ++block)
        {
            if (block < tiles)
            {
                loadFragmentA<false>(aHigh[block], tHigh + rowBlock * 16 * kStride + block * 16, kStride);
                loadFragmentA<false>(aLow[block], tLow + rowBlock * 16 * kStride + block * 16, kStride);
            }
        }
    }

    for (int iteration = 0; iteration < p.newtonIters; ++iteration)
    {
        // (its leading barrier also ends every warp's reads of the previous step's X and A X)
        float const xScale = splitScale(blockReduceMax(fragmentsMaxAbs(x), scratch));
        if (active)
        {
            storeSplitFragments(x, xScale, tile, xHigh, xLow);
        }
        __syncthreads();
        // A X
        mma::FragmentC product[4];
        zeroFragments(product);
        float productMax = 0.0F;
        if (active)
        {
#pragma unroll
            for (int block = 0; block < 4; ++block)
            {
                if (block < tiles)
                {
                    accumulateSplitBlock(product, aHigh[block], aLow[block], xHigh, xLow, block, tile);
                }
            }
            scaleFragments(product, 1.0F / (kSplitUnitScale * xScale));
            productMax = fragmentsMaxAbs(product);
        }
        float const productScale = splitScale(blockReduceMax(productMax, scratch));
        if (active)
        {
            storeSplitFragments(product, productScale, tile, tHigh, tLow);
        }
        __syncthreads();
        // X (A X), then X <- 2 X - X A X in registers
        if (active)
        {
            zeroFragments(product);
#pragma unroll
            for (int block = 0; block < 4; ++block)
            {
                if (block < tiles)
                {
                    mma::FragmentA high;
                    mma::FragmentA low;
                    loadFragmentA<false>(high, xHigh + rowBlock * 16 * kStride + block * 16, kStride);
                    loadFragmentA<false>(low, xLow + rowBlock * 16 * kStride + block * 16, kStride);
                    accumulateSplitBlock(product, high, low, tHigh, tLow, block, tile);
                }
            }
            float const unscale = 1.0F / (xScale * productScale);
#pragma unroll
            for (int t = 0; t < 4; ++t)
            {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                {
                    x[t].x[e] = 2.0F * x[t].x[e] - product[t].x[e] * unscale;
                }
            }
        }
    }

    // M = diag(s) X diag(s) with s = rowsum(A)^-1/2 (SOFT++), or X (SOFT)
    if (active)
    {
        int const mp = p.landmarkPad;
        float* const mMatrix = p.mMatrix + problem * mp * mp;
#pragma unroll
        for (int t = 0; t < 4; ++t)
        {
#pragma unroll
            for (int e = 0; e < 4; ++e)
            {
                int const i = rowBlock * 16 + mma::cRow(lane, e);
                int const j = columnBase + t * 8 + mma::cCol(lane, e);
                if (i < mp && j < mp)
                {
                    float value = x[t].x[e];
                    if (p.symmetricNorm != 0)
                    {
                        float const si = i < m ? rsqrtf(rowSum[i]) : 0.0F;
                        float const sj = j < m ? rsqrtf(rowSum[j]) : 0.0F;
                        value *= si * sj;
                    }
                    mMatrix[static_cast<int64_t>(i) * mp + j] = value;
                }
            }
        }
    }
#endif // EDGEATTN_MMA_AVAILABLE
}

template <int kValueTiles>
int launchSoftMmaPasses(SoftParams const& params, int batch, cudaStream_t stream, char const* function)
{
    dim3 const pass1Grid(params.splits * params.mmaChunks, params.heads, batch);
    softPass1MmaKernel<kValueTiles><<<pass1Grid, 32 * params.mmaLandmarkWarps,
        softPass1MmaSharedBytes(params.headDim, kValueTiles, params.mmaLandmarkWarps), stream>>>(params);
    int status = checkLaunch(function, "softPass1MmaKernel");
    if (status == EDGEATTN_STATUS_SUCCESS)
    {
        status = launchSoftProject(params, batch, stream, function);
    }
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    dim3 const pass2Grid(ceilDiv(params.tokens, kSoftMmaTokenTile), params.heads, batch);
    softPass2MmaKernel<kValueTiles>
        <<<pass2Grid, kSoftMmaPassThreads, softPass2MmaSharedBytes(params.headDim, kValueTiles), stream>>>(params);
    return checkLaunch(function, "softPass2MmaKernel");
}

/*
 * The tensor-core launches (FP16). The caller has validated everything; params carry the scalar plan's splits.
 * gemmNewton (the tensor_core path): M > 64 runs the Newton-Raphson on the batched GEMM tiles of softNewtonGemm.cuh;
 * without it (tensor_core_warp) the scalar iteration, one block per problem, as before those tiles existed.
 */
int launchSoftMma(SoftParams params, SoftPlan const& plan, int batch, bool gemmNewton, cudaStream_t stream,
    char const* function)
{
    int const landmarkTiles = ceilDiv(params.numLandmarks, 16);
    params.mmaChunks = ceilDiv(landmarkTiles, 4);
    params.mmaLandmarkWarps = ceilDiv(landmarkTiles, params.mmaChunks);
    params.mmaValueTiles = ceilDiv(params.headDim, 8);
    int status = EDGEATTN_STATUS_SUCCESS;
    if (params.numLandmarks <= kSoftNewtonMmaMaxLandmarks)
    {
        dim3 const perProblem(params.heads, batch);
        softNewtonMmaKernel<<<perProblem, kSoftNewtonMmaThreads, kSoftNewtonMmaSharedBytes, stream>>>(params);
        status = checkLaunch(function, "softNewtonMmaKernel");
    }
    else if (gemmNewton)
    {
        soft::NewtonGemmParams const gemm = soft::newtonGemmParams(params.landmarks, params.channels,
            params.numLandmarks, params.headDim, params.heads, batch * params.heads, params.newtonIters,
            params.symmetricNorm, params.landmarkPad, params.newtonScratch, params.mMatrix);
        status = soft::launchNewtonGemm(gemm, batch, stream, function);
    }
    else
    {
        status = launchSoftNewton<__half>(params, plan, batch, stream, function);
    }
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    // value tiles as a template argument, so the accumulators stay in registers
    return params.mmaValueTiles <= 4 ? launchSoftMmaPasses<4>(params, batch, stream, function)
                                     : launchSoftMmaPasses<8>(params, batch, stream, function);
}

#else

int launchSoftMma(SoftParams, SoftPlan const&, int, bool, cudaStream_t, char const* function)
{
    return noTensorCoreKernels(function);
}

#endif // EDGEATTN_TENSOR_CORES

template <typename T>
int launchSoft(SoftParams const& params, SoftPlan const& plan, int batch, cudaStream_t stream, char const* function)
{
    int status = launchSoftNewton<T>(params, plan, batch, stream, function);
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    int const chunks = ceilDiv(plan.landmarkPad, plan.landmarkTile);
    dim3 const pass1Grid(plan.splits * chunks, params.heads, batch);
    softPass1Kernel<T><<<pass1Grid, kSoftPassThreads, plan.passSharedBytes, stream>>>(params);
    status = checkLaunch(function, "softPass1Kernel");
    if (status == EDGEATTN_STATUS_SUCCESS)
    {
        status = launchSoftProject(params, batch, stream, function);
    }
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    dim3 const pass2Grid(ceilDiv(params.tokens, plan.tokenTile), params.heads, batch);
    softPass2Kernel<T><<<pass2Grid, kSoftPassThreads, plan.passSharedBytes, stream>>>(params);
    return checkLaunch(function, "softPass2Kernel");
}

} // namespace
} // namespace kernels
} // namespace edgeattn

using namespace edgeattn::kernels;

extern "C" EDGEATTN_API size_t edgeattn_soft_kernel_attention_workspace_size(
    int batch, int tokens, int num_landmarks, int channels, int num_heads)
{
    if (batch <= 0 || tokens <= 0 || num_landmarks <= 0 || num_heads <= 0 || channels <= 0
        || channels % num_heads != 0)
    {
        return 0;
    }
    return softWorkspaceLayout(batch, tokens, num_landmarks, num_heads, channels / num_heads).total;
}

extern "C" EDGEATTN_API int edgeattn_soft_kernel_attention(const void* q, const void* landmarks, const void* v,
    void* out, int batch, int tokens, int num_landmarks, int channels, int num_heads, int newton_iters,
    int symmetric_norm, int dtype, void* workspace, size_t workspace_bytes, void* stream)
{
    EDGEATTN_CHECK_ARG(isValidDtype(dtype), EDGEATTN_STATUS_INVALID_ARGUMENT, "dtype %d is not float32 (0) or float16 (1)", dtype);
    EDGEATTN_CHECK_ARG(batch >= 0 && tokens >= 0 && channels > 0, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "need batch >= 0, tokens >= 0, channels > 0 (got %d, %d, %d)", batch, tokens, channels);
    EDGEATTN_CHECK_ARG(num_landmarks > 0, EDGEATTN_STATUS_INVALID_ARGUMENT, "need at least one landmark (got %d)", num_landmarks);
    EDGEATTN_CHECK_ARG(num_heads > 0 && channels % num_heads == 0, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "channels (%d) must be a positive multiple of num_heads (%d)", channels, num_heads);
    EDGEATTN_CHECK_ARG(newton_iters >= 0, EDGEATTN_STATUS_INVALID_ARGUMENT, "newton_iters must be >= 0 (got %d)", newton_iters);
    EDGEATTN_CHECK_ARG(symmetric_norm == 0 || symmetric_norm == 1, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "symmetric_norm must be 0 or 1 (got %d)", symmetric_norm);
    EDGEATTN_CHECK_ARG(num_landmarks <= 4096, EDGEATTN_STATUS_UNSUPPORTED, "num_landmarks %d > 4096 is not supported", num_landmarks);
    EDGEATTN_CHECK_ARG(num_heads <= kMaxGridYZ && batch <= kMaxGridYZ, EDGEATTN_STATUS_UNSUPPORTED,
        "num_heads (%d) and batch (%d) must be <= %d", num_heads, batch, kMaxGridYZ);
    if (batch == 0 || tokens == 0)
    {
        return succeed();
    }
    EDGEATTN_CHECK_ARG(q != nullptr && landmarks != nullptr && v != nullptr && out != nullptr,
        EDGEATTN_STATUS_INVALID_ARGUMENT, "q, landmarks, v and out must be device pointers");
    size_t const elementBytes = dtypeSize(dtype);
    EDGEATTN_CHECK_ARG(isAligned(q, elementBytes) && isAligned(landmarks, elementBytes) && isAligned(v, elementBytes)
            && isAligned(out, elementBytes),
        EDGEATTN_STATUS_INVALID_ARGUMENT, "q, landmarks, v and out must be aligned to %zu bytes", elementBytes);
    int const headDim = channels / num_heads;
    SoftPlan plan;
    char const* reason = "";
    EDGEATTN_CHECK_ARG(planSoft(tokens, num_landmarks, headDim, &plan, &reason), EDGEATTN_STATUS_UNSUPPORTED,
        "head_dim %d: %s", headDim, reason);
    SoftWorkspaceLayout const layout = softWorkspaceLayout(batch, tokens, num_landmarks, num_heads, headDim);
    EDGEATTN_CHECK_ARG(workspace_bytes >= layout.total && workspace != nullptr, EDGEATTN_STATUS_WORKSPACE_TOO_SMALL,
        "workspace of %zu bytes at %p; need %zu (edgeattn_soft_kernel_attention_workspace_size)", workspace_bytes,
        workspace, layout.total);
    // softProjectKernel reads M and Y1 from the workspace with float4 loads: a misaligned workspace would fault
    // on the GPU (and poison the CUDA context) instead of being reported here.
    EDGEATTN_CHECK_ARG(isAligned(workspace, kWorkspaceAlignment), EDGEATTN_STATUS_INVALID_ARGUMENT,
        "workspace %p is not %zu-byte aligned", workspace, kWorkspaceAlignment);

    char* const ws = static_cast<char*>(workspace);
    SoftParams params;
    params.q = q;
    params.landmarks = landmarks;
    params.v = v;
    params.out = out;
    params.tokens = tokens;
    params.numLandmarks = num_landmarks;
    params.channels = channels;
    params.heads = num_heads;
    params.headDim = headDim;
    params.landmarkPad = plan.landmarkPad;
    params.headPad = plan.headPad;
    params.newtonIters = newton_iters;
    params.symmetricNorm = symmetric_norm;
    params.tokenTile = plan.tokenTile;
    params.landmarkTile = plan.landmarkTile;
    params.splits = plan.splits;
    params.tokensPerSplit = plan.tokensPerSplit;
    params.mMatrix = reinterpret_cast<float*>(ws + layout.mMatrix);
    params.y1 = reinterpret_cast<float*>(ws + layout.y1);
    params.y2 = reinterpret_cast<float*>(ws + layout.y2);
    params.partials = reinterpret_cast<float*>(ws + layout.partials);
    params.newtonScratch = plan.newtonInShared ? nullptr : reinterpret_cast<float*>(ws + layout.newton);

    params.mmaLandmarkWarps = 0;
    params.mmaChunks = 0;
    params.mmaValueTiles = 0;

    cudaStream_t const cudaStream = static_cast<cudaStream_t>(stream);
    // FP16 only: FP32 I/O stays on the scalar kernels (plugins/README.md, "Tensor cores").
    bool const hasTensorCoreKernel
        = EDGEATTN_TENSOR_CORES && dtype == EDGEATTN_DTYPE_FLOAT16 && softHasTensorCoreKernel(headDim);
    KernelPath path = KernelPath::kScalar;
    int status = chooseKernelPath(
        __func__, KernelCall{EDGEATTN_OP_SOFT_KERNEL_ATTENTION, batch}, hasTensorCoreKernel, &path);
    if (status == EDGEATTN_STATUS_SUCCESS)
    {
        if (path == KernelPath::kScalar)
        {
            status = dtype == EDGEATTN_DTYPE_FLOAT16 ? launchSoft<__half>(params, plan, batch, cudaStream, __func__)
                                                     : launchSoft<float>(params, plan, batch, cudaStream, __func__);
        }
        else
        {
            status = launchSoftMma(
                params, plan, batch, path == KernelPath::kTensorCore, cudaStream, __func__);
        }
    }
    return status == EDGEATTN_STATUS_SUCCESS ? succeed() : status;
}
