/*
 * EdgeAttnBlockifyAttention kernels: softmax attention inside square windows, plus the per-window LePE.
 *
 * Three kernels, picked per launch by kernelPath.h and the arguments: on the tensor-core path (sm_80+, FP16 I/O) the
 * pipelined CTA kernel (blockifyFlashMmaKernel, blockifyFlash.cuh) where head_dim and channels are multiples of 8 and
 * the tensors 16-byte aligned, else (and on the tensor_core_warp path) the one-warp-per-unit kernel
 * (blockifyMmaKernel, below); the scalar kernel (below: every arch and FP32; the sm_53 path and the reference).
 *
 * Scalar kernel: one thread block per (window, head, batch). Each thread owns one query row of the window: its q (pre-scaled
 * by scale * log2e) and its FP32 output accumulator live in registers, and the block streams the window's keys
 * and values through shared memory in tiles of kKeyTile rows (FP32). With head_dim 128 the accumulator is built in
 * two passes of 64 channels (BlockifyConfig::kValueParts), so that q and the accumulator fit the registers. Every thread reads the same key row at a
 * time, so shared-memory reads are broadcasts. The softmax is online (running max, running sum; the max is
 * subtracted before every exp). Windows of any size work (queries are processed in chunks of blockDim.x), and
 * shared memory stays below 48 KB for head_dim <= 128, so the kernel runs on sm_53 unchanged.
 *
 * Padding: windows tile the map padded up to multiples of window_size. Padded keys hold zeros: with "zeros" they
 * take part in the softmax (score 0, value 0); with "masked" they are skipped. Padded query rows are not
 * computed (they are cropped from the output). The LePE reads v from global memory (L1/L2-cached): a 3x3
 * depthwise conv with zero padding at the window border and zeros at padded positions.
 */
#include "blockifyAttention/blockifyCommon.cuh"
#include "common/deviceUtils.cuh"
#include "common/kernelPath.h"
#include "common/kernelStatus.h"
#include "common/mma.cuh"

#include <algorithm>
#include <cmath>

namespace edgeattn
{
namespace kernels
{
namespace
{

using blockify::BlockifyParams;
using blockify::forEachLepeTap;

template <int kMaxHeadDim>
struct BlockifyConfig
{
    // Key rows staged per tile: keys + values take 2 * kKeyTile * kMaxHeadDim * 4 bytes (32 KB at most).
    static constexpr int kKeyTile = kMaxHeadDim <= 64 ? 64 : 32;
    // Output channels accumulated per pass over the window's keys. With head_dim 128, q (128 floats) and a full
    // accumulator (128 floats) do not fit 255 registers and ptxas spilled 144-152 bytes per thread; two passes of
    // 64 channels each recompute the scores (same order, so the same max, sum and bits) and stay in registers.
    static constexpr int kValueParts = kMaxHeadDim > 64 ? 2 : 1;
    static constexpr int kPartDim = kMaxHeadDim / kValueParts;
};

/*
 * kMaxHeadDim: compile-time register budget; kExact: head_dim == kMaxHeadDim, so loops need no bound checks.
 * Launch bounds (256 threads, 1 CTA per SM): with the thread bound alone ptxas capped some head_dim 16-32
 * variants at 64-128 registers and spilled 8 bytes; one CTA per SM lets it use up to 255. The variants that fit
 * twice or more per SM still do (head_dim 16: 70-76 registers, 3 CTAs; head_dim 32: 119-128, 2 CTAs, except FP32
 * with head_dim < 32 on sm_90: 147, 1 CTA).
 */
template <typename T, int kMaxHeadDim, bool kExact>
__global__ void __launch_bounds__(256, 1) blockifyAttentionKernel(BlockifyParams const p)
{
    using Config = BlockifyConfig<kMaxHeadDim>;
    constexpr int kKeyTile = Config::kKeyTile;
    constexpr int kValueParts = Config::kValueParts;
    constexpr int kPartDim = Config::kPartDim;

    __shared__ float4 keysStorage[kKeyTile * kMaxHeadDim / 4];
    __shared__ float4 valuesStorage[kKeyTile * kMaxHeadDim / 4];
    __shared__ int keyInside[kKeyTile];
    float* const keys = reinterpret_cast<float*>(keysStorage);
    float* const values = reinterpret_cast<float*>(valuesStorage);

    int const d = kExact ? kMaxHeadDim : p.headDim;
    int const window = blockIdx.x;
    int const head = blockIdx.y;
    int const batch = blockIdx.z;
    int const ws = p.windowSize;
    int const windowTokens = ws * ws;
    int const y0 = (window / p.windowsX) * ws;
    int const x0 = (window % p.windowsX) * ws;
    int64_t const tokens = static_cast<int64_t>(p.height) * p.width;
    int64_t const batchOffset = static_cast<int64_t>(batch) * tokens * p.channels;
    int const channelOffset = head * d;
    bool const masked = p.padding == EDGEATTN_PADDING_MASKED;

    T const* __restrict__ qPtr = static_cast<T const*>(p.q) + batchOffset + channelOffset;
    T const* __restrict__ kPtr = static_cast<T const*>(p.k) + batchOffset + channelOffset;
    T const* __restrict__ vPtr = static_cast<T const*>(p.v) + batchOffset + channelOffset;
    T* __restrict__ outPtr = static_cast<T*>(p.out) + batchOffset + channelOffset;

    for (int queryBase = 0; queryBase < windowTokens; queryBase += blockDim.x)
    {
        int const query = queryBase + threadIdx.x;
        int const qy = y0 + query / ws;
        int const qx = x0 + query % ws;
        bool const active = query < windowTokens && qy < p.height && qx < p.width;
        int64_t const queryToken = static_cast<int64_t>(qy) * p.width + qx;

        float qReg[kMaxHeadDim];
#pragma unroll
        for (int c = 0; c < kMaxHeadDim; ++c)
        {
            qReg[c] = 0.0F;
            if (active && (kExact || c < d))
            {
                qReg[c] = loadFloat(qPtr, queryToken * p.channels + c) * p.scaleLog2;
            }
        }

#pragma unroll 1
        for (int part = 0; part < kValueParts; ++part)
        {
            // Channels [partBase, partBase + kPartDim) of the output. The part count is the same for every
            // thread of the block, so the barriers below stay uniform.
            int const partBase = part * kPartDim;
            if (!kExact && partBase >= d)
            {
                break;
            }
            float acc[kPartDim];
#pragma unroll
            for (int c = 0; c < kPartDim; ++c)
            {
                acc[c] = 0.0F;
            }
            float runningMax = -INFINITY; // in log2 units
            float runningSum = 0.0F;

            for (int keyBase = 0; keyBase < windowTokens; keyBase += kKeyTile)
            {
                int const keyCount = min(kKeyTile, windowTokens - keyBase);
                __syncthreads(); // the previous tile is no longer read
                // Rows of kMaxHeadDim floats, zero beyond head_dim: the dot products below need no bound checks
                // (q is zero there too, so the extra terms add exact zeros) and read aligned float4s.
                for (int index = threadIdx.x; index < keyCount * kMaxHeadDim; index += blockDim.x)
                {
                    int const j = index / kMaxHeadDim;
                    int const c = index % kMaxHeadDim;
                    int const key = keyBase + j;
                    int const ky = y0 + key / ws;
                    int const kx = x0 + key % ws;
                    bool const inside = ky < p.height && kx < p.width;
                    bool const load = inside && (kExact || c < d);
                    int64_t const offset = (static_cast<int64_t>(ky) * p.width + kx) * p.channels + c;
                    keys[index] = load ? loadFloat(kPtr, offset) : 0.0F;
                    values[index] = load ? loadFloat(vPtr, offset) : 0.0F;
                    if (c == 0)
                    {
                        keyInside[j] = inside ? 1 : 0;
                    }
                }
                __syncthreads();
                if (active)
                {
                    for (int j = 0; j < keyCount; ++j)
                    {
                        if (masked && keyInside[j] == 0)
                        {
                            continue;
                        }
                        float const* keyRow = keys + j * kMaxHeadDim;
                        float score = 0.0F;
#pragma unroll
                        for (int c = 0; c < kMaxHeadDim; ++c)
                        {
                            score = fmaf(qReg[c], keyRow[c], score);
                        }
                        if (score > runningMax)
                        {
                            // exp2(-inf) = 0 on the first key: the empty accumulator stays empty.
                            float const correction = exp2f(runningMax - score);
                            runningSum *= correction;
#pragma unroll
                            for (int c = 0; c < kPartDim; ++c)
                            {
                                acc[c] *= correction;
                            }
                            runningMax = score;
                        }
                        float const weight = exp2f(score - runningMax);
                        runningSum += weight;
                        float const* valueRow = values + j * kMaxHeadDim + partBase;
#pragma unroll
                        for (int c = 0; c < kPartDim; ++c)
                        {
                            acc[c] = fmaf(weight, valueRow[c], acc[c]);
                        }
                    }
                }
            }

            if (active)
            {
                // Every window holds at least one real key (its top-left token), so runningSum >= 1.
                float const inverseSum = 1.0F / runningSum;
#pragma unroll
                for (int c = 0; c < kPartDim; ++c)
                {
                    acc[c] *= inverseSum;
                }
                if (p.lepeWeight != nullptr)
                {
                    T const* __restrict__ weight = static_cast<T const*>(p.lepeWeight) + (channelOffset + partBase) * 9;
                    T const* __restrict__ bias = static_cast<T const*>(p.lepeBias) + channelOffset + partBase;
#pragma unroll
                    for (int c = 0; c < kPartDim; ++c)
                    {
                        if (kExact || partBase + c < d)
                        {
                            acc[c] += loadFloat(bias, c);
                        }
                    }
                    forEachLepeTap(p, qy, qx, y0, x0, [&](int tap, int ny, int nx) {
                        int64_t const neighbour = (static_cast<int64_t>(ny) * p.width + nx) * p.channels + partBase;
#pragma unroll
                        for (int c = 0; c < kPartDim; ++c)
                        {
                            if (kExact || partBase + c < d)
                            {
                                acc[c] = fmaf(
                                    loadFloat(weight, c * 9 + tap), loadFloat(vPtr, neighbour + c), acc[c]);
                            }
                        }
                    });
                }
#pragma unroll
                for (int c = 0; c < kPartDim; ++c)
                {
                    if (kExact || partBase + c < d)
                    {
                        outPtr[queryToken * p.channels + partBase + c] = fromFloat<T>(acc[c]);
                    }
                }
            }
        }
    }
}

#if EDGEATTN_TENSOR_CORES
/*
 * Tensor-core path (sm_80+, FP16 I/O): mma.sync m16n8k16, f16 inputs, FP32 accumulation, the scalar kernel's
 * semantics. One warp per unit = (query-tile group, window, head, batch), four independent warps per block (no block
 * barrier: no warp waits for another, and none idles on a partly empty window). Queries are taken 16 rows at a
 * time (a 7x7 window = 49 queries = 4 row tiles, padded to 64 in registers: one unit; larger windows are split
 * into groups of at most 4 tiles, so a 32x32 window is 16 units). The warp streams the window's keys and values
 * through its own shared-memory slice in chunks of kKeyChunk rows (zero rows for padded keys and for the rounding
 * up to 16), staged once when the window fits one chunk.
 * Per chunk, FlashAttention-2 style: S = Q K^T as C fragments (K fragments by ldmatrix), scaled by scale * log2e in
 * FP32, excluded keys (beyond the window; outside the map with padding "masked") at -inf, the running row max
 * (quad shuffles) subtracted before exp2f, the running sum in FP32, then O += P V with P reused from the S
 * fragments (C layout = A layout) and V fragments by ldmatrix.trans. P is split into f16 hi + lo parts (two
 * products) so that P V keeps FP32-level accuracy: a single f16 rounding of P (2^-11 relative) is as large as the
 * FP16 op tolerance allows (plugins/README.md, "Tensor cores"). The epilogue divides by the row sum and adds the
 * LePE (bias + 3x3 depthwise conv of v inside the window, FP32; v from the staged chunk when the window fits one)
 * before the one rounding to FP16.
 */
// (enumerators, not static constexpr members: the kernel body is compiled out below sm_80, and nvcc warns about
// every unreferenced static member there)
template <int kHeadDimPad>
struct BlockifyMmaConfig
{
    enum : int
    {
        kWarps = 4,
        kThreads = 32 * kWarps,
        //! Keys (and values) staged per chunk: the warp's slice (2 * kKeyChunk * kStride halves) stays <= 10 KB.
        kKeyChunk = kHeadDimPad <= 32 ? 64 : (kHeadDimPad <= 64 ? 32 : 16),
        //! Halves per staged row: 16 bytes more than the row, so the 8 rows of an ldmatrix hit distinct banks.
        kStride = kHeadDimPad + 8,
        kSegments = kHeadDimPad / 8,   // 16-byte segments per row
        kDepthSteps = kHeadDimPad / 16, // k blocks of Q K^T
        kValueTiles = kHeadDimPad / 8,  // n tiles of P V (output columns)
        kKeyTiles = kKeyChunk / 8,      // n tiles of S
        kKeySteps = kKeyChunk / 16,     // k blocks of P V
        kWarpHalves = 2 * kKeyChunk * kStride
    };
    static_assert(kHeadDimPad % 16 == 0 && kKeyChunk % 16 == 0, "mma tiles are 16 deep");
    static_assert(kWarps * kWarpHalves * 2 <= 48 * 1024, "staging must fit the sm_80 default 48 KB");
};

#if EDGEATTN_MMA_AVAILABLE // the helpers of the kernel body below, which exists only in sm_80+ device code
//! Key `key` of the window whose top-left token is (y0, x0): inside the map?
__device__ __forceinline__ bool keyInsideMap(BlockifyParams const& p, int y0, int x0, int key)
{
    return y0 + key / p.windowSize < p.height && x0 + key % p.windowSize < p.width;
}

//! Bit 2 t + e: the key of C-fragment column (tile t, element e) of the chunk at keyBase is excluded from the
//! softmax (beyond the window, or outside the map with padding "masked"). The same for every row and query tile.
template <int kKeyTiles>
__device__ __forceinline__ uint32_t excludedKeys(BlockifyParams const& p, int y0, int x0, int keyBase, int lane)
{
    static_assert(2 * kKeyTiles <= 32, "one bit per key column of the lane");
    int const windowTokens = p.windowSize * p.windowSize;
    bool const masked = p.padding == EDGEATTN_PADDING_MASKED;
    uint32_t bits = 0;
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t)
    {
#pragma unroll
        for (int e = 0; e < 2; ++e)
        {
            int const key = keyBase + t * 8 + mma::cCol(lane, e);
            if (key >= windowTokens || (masked && !keyInsideMap(p, y0, x0, key)))
            {
                bits |= 1U << (2 * t + e);
            }
        }
    }
    return bits;
}

template <int kHeadDimPad>
__device__ __forceinline__ void stageKeyChunk(BlockifyParams const& p, __half const* __restrict__ kPtr,
    __half const* __restrict__ vPtr, __half* keys, __half* values, int y0, int x0, int keyBase, int lane)
{
    using Config = BlockifyMmaConfig<kHeadDimPad>;
    int const windowTokens = p.windowSize * p.windowSize;
    __syncwarp(); // every lane's ldmatrix reads of the previous chunk are done
    for (int index = lane; index < Config::kKeyChunk * Config::kSegments; index += 32)
    {
        int const row = index / Config::kSegments;
        int const column = (index - row * Config::kSegments) * 8;
        int const key = keyBase + row;
        // padded keys (outside the map, or rounding the window up to 16) are zero rows, as the scalar kernel's
        bool const real = key < windowTokens && keyInsideMap(p, y0, x0, key);
        int64_t const offset
            = (static_cast<int64_t>(y0 + key / p.windowSize) * p.width + x0 + key % p.windowSize) * p.channels + column;
        int4 keySegment = make_int4(0, 0, 0, 0);
        int4 valueSegment = make_int4(0, 0, 0, 0);
        if (real && p.vectorLoads && column < p.headDim) // head_dim % 8 == 0: the segment is all inside
        {
            keySegment = *reinterpret_cast<int4 const*>(kPtr + offset);
            valueSegment = *reinterpret_cast<int4 const*>(vPtr + offset);
        }
        else if (real && !p.vectorLoads)
        {
            __half keyHalves[8];
            __half valueHalves[8];
            for (int e = 0; e < 8; ++e)
            {
                bool const inside = column + e < p.headDim;
                keyHalves[e] = inside ? kPtr[offset + e] : __float2half_rn(0.0F);
                valueHalves[e] = inside ? vPtr[offset + e] : __float2half_rn(0.0F);
            }
            memcpy(&keySegment, keyHalves, sizeof(keySegment));
            memcpy(&valueSegment, valueHalves, sizeof(valueSegment));
        }
        *reinterpret_cast<int4*>(keys + row * Config::kStride + column) = keySegment;
        *reinterpret_cast<int4*>(values + row * Config::kStride + column) = valueSegment;
    }
    __syncwarp(); // the chunk is visible to every lane's ldmatrix
}
#endif // EDGEATTN_MMA_AVAILABLE

/*
 * kTilesPerPass: query tiles carried through each staged key chunk together (their accumulators in registers).
 * 4 (a whole unit) when the window needs several chunks and head_dim <= 32, so each chunk is staged once per unit
 * instead of once per tile, at the price of 4 x 16 accumulator floats and 4 x 8 Q registers (241-247 registers);
 * 1 for windows that fit one chunk (staged once anyway; 107-143 registers with head_dim <= 64: more warps per SM).
 * Launch bounds (128 threads, 1 CTA per SM): with the thread bound alone ptxas aimed at more CTAs per SM, capped
 * several variants at 96-128 registers and spilled 8-56 bytes; with one CTA per SM declared it gives each the
 * registers it needs, no spills on sm_80/87/90 (and the variants still fit 2-4 CTAs per SM).
 */
template <int kHeadDimPad, int kTilesPerPass>
__global__ void __launch_bounds__(BlockifyMmaConfig<kHeadDimPad>::kThreads, 1) blockifyMmaKernel(BlockifyParams const p)
{
#if EDGEATTN_MMA_AVAILABLE
    using Config = BlockifyMmaConfig<kHeadDimPad>;
    __shared__ int4 stagingStorage[Config::kWarps * Config::kWarpHalves / 8];

    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    int64_t const unit = static_cast<int64_t>(blockIdx.x) * Config::kWarps + warp;
    if (unit >= p.units)
    {
        return; // the last block's spare warps (no block barrier anywhere in this kernel)
    }
    __half* const keys = reinterpret_cast<__half*>(stagingStorage) + warp * Config::kWarpHalves;
    __half* const values = keys + Config::kKeyChunk * Config::kStride;

    // the tile groups, then the heads, of one window are adjacent units: the warps of a block read the same or
    // neighbouring channels of the same tokens
    int const tileGroup = static_cast<int>(unit % p.tileGroups);
    int64_t const windowHead = unit / p.tileGroups;
    int const head = static_cast<int>(windowHead % p.numHeads);
    int const window = static_cast<int>((windowHead / p.numHeads) % p.windows);
    int const batch = static_cast<int>(windowHead / (static_cast<int64_t>(p.numHeads) * p.windows));
    int const d = p.headDim;
    int const ws = p.windowSize;
    int const windowTokens = ws * ws;
    int const y0 = (window / p.windowsX) * ws;
    int const x0 = (window % p.windowsX) * ws;
    int64_t const batchOffset = static_cast<int64_t>(batch) * p.height * p.width * p.channels;
    int const channelOffset = head * d;
    __half const* __restrict__ qPtr = static_cast<__half const*>(p.q) + batchOffset + channelOffset;
    __half const* __restrict__ kPtr = static_cast<__half const*>(p.k) + batchOffset + channelOffset;
    __half const* __restrict__ vPtr = static_cast<__half const*>(p.v) + batchOffset + channelOffset;
    __half* __restrict__ outPtr = static_cast<__half*>(p.out) + batchOffset + channelOffset;

    int const rowLoad = mma::ldmatrixRow(lane);
    int const matrixLoad = mma::ldmatrixMatrix(lane);
    int const keyChunks = ceilDiv(windowTokens, Config::kKeyChunk);
    int const firstTile = tileGroup * p.tilesPerGroup;
    int const endTile = min(ceilDiv(windowTokens, 16), firstTile + p.tilesPerGroup);

    uint32_t excludedOnce = 0;
    if (keyChunks == 1)
    {
        stageKeyChunk<kHeadDimPad>(p, kPtr, vPtr, keys, values, y0, x0, 0, lane);
        excludedOnce = excludedKeys<Config::kKeyTiles>(p, y0, x0, 0, lane);
    }
    constexpr int kPass = kTilesPerPass;
    for (int passTile = firstTile; passTile < endTile; passTile += kPass)
    {
        // Per tile of the pass: the lane's two rows (fragment rows r and r + 8, r = aRow(lane, 0) = cRow(lane, 0))
        // as token offsets, or -1 for padded rows (beyond the window or the map: zero in Q, never stored); a tile
        // past the group's end has only padded rows and is skipped (warp-uniform).
        int64_t rowToken[kPass][2];
        mma::FragmentA query[kPass][Config::kDepthSteps];
        mma::FragmentC output[kPass][Config::kValueTiles];
        float runningMax[kPass][2]; // log2 units
        float runningSum[kPass][2]; // this lane's columns only; summed over the quad at the end
#pragma unroll
        for (int j = 0; j < kPass; ++j)
        {
            int const tile = passTile + j;
#pragma unroll
            for (int half = 0; half < 2; ++half)
            {
                int const row = tile * 16 + mma::cRow(lane, 2 * half);
                int const qy = y0 + row / ws;
                int const qx = x0 + row % ws;
                rowToken[j][half] = tile < endTile && row < windowTokens && qy < p.height && qx < p.width
                    ? static_cast<int64_t>(qy) * p.width + qx
                    : -1;
                runningMax[j][half] = -INFINITY;
                runningSum[j][half] = 0.0F;
            }
            // Q as A fragments straight from global memory (exact f16 values; padded rows and channels are zero)
#pragma unroll
            for (int step = 0; step < Config::kDepthSteps; ++step)
            {
#pragma unroll
                for (int r = 0; r < 4; ++r)
                {
                    float pair[2];
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                    {
                        int const i = 2 * r + e;
                        int64_t const token = rowToken[j][mma::aRow(lane, i) >= 8 + mma::aRow(lane, 0) ? 1 : 0];
                        int const column = step * 16 + mma::aCol(lane, i);
                        pair[e] = token >= 0 && column < d ? loadFloat(qPtr, token * p.channels + column) : 0.0F;
                    }
                    query[j][step].x[r] = mma::packHalf2(pair[0], pair[1]);
                }
            }
#pragma unroll
            for (int t = 0; t < Config::kValueTiles; ++t)
            {
                output[j][t] = mma::FragmentC{{0.0F, 0.0F, 0.0F, 0.0F}};
            }
        }

        for (int chunk = 0; chunk < keyChunks; ++chunk)
        {
            int const keyBase = chunk * Config::kKeyChunk;
            uint32_t excluded = excludedOnce;
            if (keyChunks > 1)
            {
                stageKeyChunk<kHeadDimPad>(p, kPtr, vPtr, keys, values, y0, x0, keyBase, lane);
                excluded = excludedKeys<Config::kKeyTiles>(p, y0, x0, keyBase, lane);
            }
#pragma unroll
            for (int j = 0; j < kPass; ++j)
            {
                if (passTile + j >= endTile)
                {
                    continue; // the same for every lane
                }
                mma::FragmentC score[Config::kKeyTiles];
                blockify::queryKeyScores<Config::kStride>(score, query[j], keys, rowLoad, matrixLoad);

                float chunkMax[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int t = 0; t < Config::kKeyTiles; ++t)
                {
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                    {
                        bool const out = ((excluded >> (2 * t + (i & 1))) & 1U) != 0;
                        float const value = out ? -INFINITY : score[t].x[i] * p.scaleLog2;
                        score[t].x[i] = value;
                        chunkMax[i >> 1] = fmaxf(chunkMax[i >> 1], value);
                    }
                }
                float rowBase[2];
#pragma unroll
                for (int r = 0; r < 2; ++r)
                {
                    // the four lanes of a quad hold one row's columns
                    chunkMax[r] = fmaxf(chunkMax[r], __shfl_xor_sync(0xffffffffU, chunkMax[r], 1));
                    chunkMax[r] = fmaxf(chunkMax[r], __shfl_xor_sync(0xffffffffU, chunkMax[r], 2));
                    float const newMax = fmaxf(runningMax[j][r], chunkMax[r]);
                    // every key so far excluded: keep the empty accumulator empty (no exp2(-inf - -inf) = NaN)
                    rowBase[r] = newMax == -INFINITY ? 0.0F : newMax;
                    float const correction = exp2f(runningMax[j][r] - rowBase[r]);
                    runningMax[j][r] = newMax;
                    runningSum[j][r] *= correction;
#pragma unroll
                    for (int t = 0; t < Config::kValueTiles; ++t)
                    {
                        output[j][t].x[2 * r] *= correction;
                        output[j][t].x[2 * r + 1] *= correction;
                    }
                }
#pragma unroll
                for (int t = 0; t < Config::kKeyTiles; ++t)
                {
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                    {
                        float const weight = exp2f(score[t].x[i] - rowBase[i >> 1]);
                        score[t].x[i] = weight;
                        runningSum[j][i >> 1] += weight;
                    }
                }

#pragma unroll
                for (int step = 0; step < Config::kKeySteps; ++step)
                {
                    // C tiles 2 step and 2 step + 1 are the A fragment of keys [16 step, 16 step + 16)
                    mma::FragmentC const& left = score[2 * step];
                    mma::FragmentC const& right = score[2 * step + 1];
                    float const weights[8] = {left.x[0], left.x[1], left.x[2], left.x[3], right.x[0], right.x[1],
                        right.x[2], right.x[3]};
                    mma::FragmentA high;
                    mma::FragmentA low;
#pragma unroll
                    for (int r = 0; r < 4; ++r)
                    {
                        __half const hi0 = __float2half_rn(weights[2 * r]);
                        __half const hi1 = __float2half_rn(weights[2 * r + 1]);
                        high.x[r] = mma::packHalf2(__half2float(hi0), __half2float(hi1));
                        low.x[r] = mma::packHalf2(weights[2 * r] - __half2float(hi0),
                            weights[2 * r + 1] - __half2float(hi1));
                    }
#pragma unroll
                    for (int t = 0; t < Config::kValueTiles; t += 2)
                    {
                        uint32_t b[4];
                        blockify::valueFragments<Config::kStride>(b, values, step, t, rowLoad, matrixLoad);
                        mma::FragmentB const first{{b[0], b[1]}};
                        mma::FragmentB const second{{b[2], b[3]}};
                        mma::mmaF16(output[j][t], high, first);
                        mma::mmaF16(output[j][t], low, first);
                        mma::mmaF16(output[j][t + 1], high, second);
                        mma::mmaF16(output[j][t + 1], low, second);
                    }
                }
            }
        }

        // epilogue: normalise, LePE, one rounding to FP16 (the scalar kernel's order of operations)
#pragma unroll
        for (int j = 0; j < kPass; ++j)
        {
            float inverseSum[2];
#pragma unroll
            for (int r = 0; r < 2; ++r)
            {
                // all lanes take part in the quad sums, also for padded rows and tiles
                runningSum[j][r] += __shfl_xor_sync(0xffffffffU, runningSum[j][r], 1);
                runningSum[j][r] += __shfl_xor_sync(0xffffffffU, runningSum[j][r], 2);
                // every window holds at least one real key (its top-left token), so the sum is >= 1
                inverseSum[r] = 1.0F / runningSum[j][r];
            }
            // A loop, not unrolled: unrolled over the value tiles with the LePE taps inside, the head_dim-128 body
            // kept 64-bit addresses of every tile across the key loop and spilled them (264-280 bytes). Each step
            // takes tile 0 and shifts the others down one place, so the fragments stay in registers (an array
            // indexed at run time would live in local memory).
#pragma unroll 1
            for (int t = 0; t < Config::kValueTiles; ++t)
            {
                mma::FragmentC const tile = output[j][0];
#pragma unroll
                for (int u = 0; u + 1 < Config::kValueTiles; ++u)
                {
                    output[j][u] = output[j][u + 1];
                }
#pragma unroll
                for (int r = 0; r < 2; ++r)
                {
                    int64_t const queryToken = rowToken[j][r];
                    if (queryToken < 0)
                    {
                        continue; // padded rows are cropped
                    }
                    int const qy = static_cast<int>(queryToken / p.width);
                    int const qx = static_cast<int>(queryToken - static_cast<int64_t>(qy) * p.width);
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                    {
                        int const c = t * 8 + mma::cCol(lane, 2 * r + e);
                        if (c >= d)
                        {
                            continue;
                        }
                        float acc = tile.x[2 * r + e] * inverseSum[r];
                        if (p.lepeWeight != nullptr)
                        {
                            __half const* __restrict__ weight
                                = static_cast<__half const*>(p.lepeWeight) + channelOffset * 9;
                            acc += loadFloat(static_cast<__half const*>(p.lepeBias) + channelOffset, c);
                            forEachLepeTap(p, qy, qx, y0, x0, [&](int tap, int ny, int nx) {
                                // a window that fits one chunk has all its values staged in shared memory
                                float const value = keyChunks == 1
                                    ? __half2float(values[((ny - y0) * ws + (nx - x0)) * Config::kStride + c])
                                    : loadFloat(vPtr, (static_cast<int64_t>(ny) * p.width + nx) * p.channels + c);
                                acc = fmaf(loadFloat(weight, c * 9 + tap), value, acc);
                            });
                        }
                        outPtr[queryToken * p.channels + c] = fromFloat<__half>(acc);
                    }
                }
            }
        }
    }
#endif // EDGEATTN_MMA_AVAILABLE
}

template <int kHeadDimPad, int kTilesPerPass>
void launchBlockifyMma(BlockifyParams const& params, cudaStream_t stream)
{
    using Config = BlockifyMmaConfig<kHeadDimPad>;
    unsigned const blocks = static_cast<unsigned>((params.units + Config::kWarps - 1) / Config::kWarps);
    blockifyMmaKernel<kHeadDimPad, kTilesPerPass><<<blocks, Config::kThreads, 0, stream>>>(params);
}

//! The whole unit per pass where the window spans several key chunks (head_dim <= 32: the unit is 4 tiles).
template <int kHeadDimPad>
void launchBlockifyMmaPasses(BlockifyParams const& params, cudaStream_t stream)
{
    if (params.windowSize * params.windowSize > BlockifyMmaConfig<kHeadDimPad>::kKeyChunk)
    {
        launchBlockifyMma<kHeadDimPad, 4>(params, stream);
    }
    else
    {
        launchBlockifyMma<kHeadDimPad, 1>(params, stream);
    }
}

int dispatchBlockifyMma(BlockifyParams const& params, cudaStream_t stream, char const* function)
{
    if (params.headDim <= 16)
    {
        launchBlockifyMmaPasses<16>(params, stream);
    }
    else if (params.headDim <= 32)
    {
        launchBlockifyMmaPasses<32>(params, stream);
    }
    else if (params.headDim <= 64)
    {
        launchBlockifyMma<64, 1>(params, stream);
    }
    else
    {
        launchBlockifyMma<128, 1>(params, stream);
    }
    return checkLaunch(function, "blockifyMmaKernel");
}

//! head_dim rounded up to the flash kernel's instantiations.
int flashHeadDimPad(int headDim)
{
    return headDim <= 16 ? 16 : (headDim <= 32 ? 32 : (headDim <= 64 ? 64 : 128));
}

/*
 * The flash kernel's CTA layout (windowsPerBlock, tilesPerBlock, queryBlocks): windows of at most two query tiles
 * share a CTA (and one K/V tile) when that still leaves a CTA per SM; larger windows take ceil(tiles / 4) CTAs with
 * the tiles spread evenly; and while the problem has fewer CTAs than the device has SMs (a batch-1 stage), a CTA
 * takes fewer tiles (down to one warp), so the work reaches every SM instead of a few.
 */
void planBlockifyFlash(BlockifyParams& params, int multiprocessors)
{
    int const queryTiles = ceilDiv(params.windowSize * params.windowSize, 16);
    int const keyTile = blockify::flashKeyTile(flashHeadDimPad(params.headDim));
    params.windowsPerBlock = 1;
    params.queryBlocks = ceilDiv(queryTiles, blockify::kFlashMaxWarps);
    params.tilesPerBlock = ceilDiv(queryTiles, params.queryBlocks);
    int const packable = std::min(blockify::kFlashMaxWarps / queryTiles, keyTile / (queryTiles * 16));
    if (packable > 1 && params.problems / packable >= multiprocessors)
    {
        params.windowsPerBlock = packable;
        params.tilesPerBlock = queryTiles;
        return;
    }
    while (params.tilesPerBlock > 1 && params.problems * params.queryBlocks < multiprocessors)
    {
        params.tilesPerBlock = ceilDiv(params.tilesPerBlock, 2);
        params.queryBlocks = ceilDiv(queryTiles, params.tilesPerBlock);
    }
}

//! CTAs of the flash kernel for a plan.
int64_t flashBlocks(BlockifyParams const& params)
{
    return params.windowsPerBlock > 1 ? (params.problems + params.windowsPerBlock - 1) / params.windowsPerBlock
                                      : params.problems * params.queryBlocks;
}

int dispatchBlockifyFlash(BlockifyParams const& params, cudaStream_t stream, char const* function)
{
    switch (flashHeadDimPad(params.headDim))
    {
    case 16: blockify::launchBlockifyFlash<16>(params, stream); break;
    case 32: blockify::launchBlockifyFlash<32>(params, stream); break;
    case 64: blockify::launchBlockifyFlash<64>(params, stream); break;
    default: blockify::launchBlockifyFlash<128>(params, stream); break;
    }
    return checkLaunch(function, "blockifyFlashMmaKernel");
}

//! SMs of the current device (1 when it cannot be queried: then no CTA split for small problems).
int multiprocessorCount()
{
    int device = 0;
    int count = 1;
    if (cudaGetDevice(&device) != cudaSuccess
        || cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    {
        cudaGetLastError(); // not a launch error
        return 1;
    }
    return count;
}

#else

int dispatchBlockifyMma(BlockifyParams const&, cudaStream_t, char const* function)
{
    return noTensorCoreKernels(function);
}

#endif // EDGEATTN_TENSOR_CORES

template <typename T, int kMaxHeadDim, bool kExact>
void launchBlockify(BlockifyParams const& params, dim3 grid, int threads, cudaStream_t stream)
{
    blockifyAttentionKernel<T, kMaxHeadDim, kExact><<<grid, threads, 0, stream>>>(params);
}

template <typename T>
void dispatchBlockify(BlockifyParams const& params, dim3 grid, int threads, cudaStream_t stream)
{
    switch (params.headDim)
    {
    case 16: launchBlockify<T, 16, true>(params, grid, threads, stream); break;
    case 32: launchBlockify<T, 32, true>(params, grid, threads, stream); break;
    case 64: launchBlockify<T, 64, true>(params, grid, threads, stream); break;
    default:
        if (params.headDim < 32)
        {
            launchBlockify<T, 32, false>(params, grid, threads, stream);
        }
        else if (params.headDim < 64)
        {
            launchBlockify<T, 64, false>(params, grid, threads, stream);
        }
        else
        {
            launchBlockify<T, 128, false>(params, grid, threads, stream);
        }
    }
}

} // namespace
} // namespace kernels
} // namespace edgeattn

using namespace edgeattn::kernels;

extern "C" EDGEATTN_API size_t edgeattn_blockify_attention_workspace_size(
    int /*batch*/, int /*height*/, int /*width*/, int /*channels*/, int /*num_heads*/, int /*window_size*/)
{
    return 0;
}

extern "C" EDGEATTN_API int edgeattn_blockify_attention(const void* q, const void* k, const void* v,
    const void* lepe_weight, const void* lepe_bias, void* out, int batch, int height, int width, int channels,
    int num_heads, int window_size, float scale, int padding, int dtype, void* stream)
{
    EDGEATTN_CHECK_ARG(isValidDtype(dtype), EDGEATTN_STATUS_INVALID_ARGUMENT, "dtype %d is not float32 (0) or float16 (1)", dtype);
    EDGEATTN_CHECK_ARG(batch >= 0 && height > 0 && width > 0 && channels > 0, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "need batch >= 0 and positive height, width, channels (got %d, %d, %d, %d)", batch, height, width, channels);
    EDGEATTN_CHECK_ARG(num_heads > 0 && channels % num_heads == 0, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "channels (%d) must be a positive multiple of num_heads (%d)", channels, num_heads);
    EDGEATTN_CHECK_ARG(window_size > 0, EDGEATTN_STATUS_INVALID_ARGUMENT, "window_size must be positive (got %d)", window_size);
    EDGEATTN_CHECK_ARG(window_size <= 4096, EDGEATTN_STATUS_UNSUPPORTED, "window_size %d > 4096 is not supported", window_size);
    EDGEATTN_CHECK_ARG(padding == EDGEATTN_PADDING_NONE || padding == EDGEATTN_PADDING_ZEROS
            || padding == EDGEATTN_PADDING_MASKED,
        EDGEATTN_STATUS_INVALID_ARGUMENT, "padding %d is not none (0), zeros (1) or masked (2)", padding);
    EDGEATTN_CHECK_ARG(padding != EDGEATTN_PADDING_NONE || (height % window_size == 0 && width % window_size == 0),
        EDGEATTN_STATUS_INVALID_ARGUMENT,
        "padding=none needs height (%d) and width (%d) to be multiples of window_size (%d)", height, width,
        window_size);
    EDGEATTN_CHECK_ARG((lepe_weight == nullptr) == (lepe_bias == nullptr), EDGEATTN_STATUS_INVALID_ARGUMENT,
        "lepe_weight and lepe_bias must both be given or both be null");
    EDGEATTN_CHECK_ARG(std::isfinite(scale), EDGEATTN_STATUS_INVALID_ARGUMENT, "scale must be finite");
    int const headDim = channels / num_heads;
    EDGEATTN_CHECK_ARG(headDim <= 128, EDGEATTN_STATUS_UNSUPPORTED, "head_dim %d > 128 is not supported", headDim);
    int const windowsY = ceilDiv(height, window_size);
    int const windowsX = ceilDiv(width, window_size);
    int64_t const windows = static_cast<int64_t>(windowsY) * windowsX;
    EDGEATTN_CHECK_ARG(windows <= 2147483647LL, EDGEATTN_STATUS_UNSUPPORTED, "too many windows (%lld)", static_cast<long long>(windows));
    EDGEATTN_CHECK_ARG(num_heads <= kMaxGridYZ && batch <= kMaxGridYZ, EDGEATTN_STATUS_UNSUPPORTED,
        "num_heads (%d) and batch (%d) must be <= %d", num_heads, batch, kMaxGridYZ);
    if (batch == 0)
    {
        return succeed();
    }
    EDGEATTN_CHECK_ARG(q != nullptr && k != nullptr && v != nullptr && out != nullptr,
        EDGEATTN_STATUS_INVALID_ARGUMENT, "q, k, v and out must be device pointers");
    size_t const elementBytes = dtypeSize(dtype);
    EDGEATTN_CHECK_ARG(isAligned(q, elementBytes) && isAligned(k, elementBytes) && isAligned(v, elementBytes)
            && isAligned(out, elementBytes) && isAligned(lepe_weight, elementBytes)
            && isAligned(lepe_bias, elementBytes),
        EDGEATTN_STATUS_INVALID_ARGUMENT, "q, k, v, out, lepe_weight and lepe_bias must be aligned to %zu bytes",
        elementBytes);

    BlockifyParams params;
    params.q = q;
    params.k = k;
    params.v = v;
    params.lepeWeight = lepe_weight;
    params.lepeBias = lepe_bias;
    params.out = out;
    params.height = height;
    params.width = width;
    params.channels = channels;
    params.headDim = headDim;
    params.windowSize = window_size;
    params.windowsX = windowsX;
    params.padding = padding;
    float const softmaxScale = scale > 0.0F ? scale : 1.0F / std::sqrt(static_cast<float>(headDim));
    params.scaleLog2 = softmaxScale * kLog2e;

    params.numHeads = num_heads;
    params.windows = static_cast<int>(windows);
    // A warp takes at most kMaxTilesPerUnit query tiles of one window: a 7x7 window (4 tiles) is one unit, a 32x32
    // one (64 tiles) is 16, so a large window does not leave the GPU to a handful of warps. (4 is also the largest
    // kTilesPerPass of blockifyMmaKernel.)
    constexpr int kMaxTilesPerUnit = 4;
    int const queryTiles = ceilDiv(window_size * window_size, 16);
    params.tileGroups = ceilDiv(queryTiles, kMaxTilesPerUnit);
    params.tilesPerGroup = ceilDiv(queryTiles, params.tileGroups);
    params.units = windows * num_heads * batch * params.tileGroups;
    params.vectorLoads = headDim % 8 == 0 && channels % 8 == 0 && isAligned(k, 16) && isAligned(v, 16);

    cudaStream_t const cudaStream = static_cast<cudaStream_t>(stream);
    // FP16 I/O has a tensor-core kernel; FP32 stays on the scalar kernel (TF32 would break the FP32 tolerance:
    // plugins/README.md, "Tensor cores"). A grid of more than 2^31 - 1 blocks of four units would not launch.
    bool const hasTensorCoreKernel = dtype == EDGEATTN_DTYPE_FLOAT16 && (params.units + 3) / 4 <= 2147483647LL;
    int64_t const windowTokens = static_cast<int64_t>(window_size) * window_size;
    int const threads = static_cast<int>(std::min<int64_t>(256, (windowTokens + 31) / 32 * 32));
    dim3 const grid(static_cast<unsigned>(windows), static_cast<unsigned>(num_heads), static_cast<unsigned>(batch));
    params.problems = windows * num_heads * batch;
    KernelPath path = KernelPath::kScalar;
    int status = chooseKernelPath(__func__, KernelCall{EDGEATTN_OP_BLOCKIFY_ATTENTION, batch}, hasTensorCoreKernel, &path);
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    if (path == KernelPath::kScalar)
    {
        if (dtype == EDGEATTN_DTYPE_FLOAT16)
        {
            dispatchBlockify<__half>(params, grid, threads, cudaStream);
        }
        else
        {
            dispatchBlockify<float>(params, grid, threads, cudaStream);
        }
        status = checkLaunch(__func__, "blockifyAttentionKernel");
    }
    else
    {
#if EDGEATTN_TENSOR_CORES
        // the pipelined kernel stages rows with 16-byte cp.async and stores 16-byte segments
        bool const flashEligible = path == KernelPath::kTensorCore && headDim % 8 == 0 && channels % 8 == 0
            && isAligned(q, 16) && isAligned(k, 16) && isAligned(v, 16) && isAligned(out, 16);
        if (flashEligible)
        {
            planBlockifyFlash(params, multiprocessorCount());
        }
        status = flashEligible && flashBlocks(params) <= 2147483647LL ? dispatchBlockifyFlash(params, cudaStream, __func__)
                                                                        : dispatchBlockifyMma(params, cudaStream, __func__);
#else
        status = dispatchBlockifyMma(params, cudaStream, __func__);
#endif
    }
    return status == EDGEATTN_STATUS_SUCCESS ? succeed() : status;
}
