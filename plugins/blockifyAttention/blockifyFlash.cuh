/*
 * Blockify attention, pipelined tensor-core path (sm_80+, FP16 I/O; FlashAttention-2's schedule on windows).
 *
 * A CTA of up to four warps shares the K/V tiles of one window: each warp owns one 16-row query tile (a 7x7 window's
 * 49 queries are the four tiles of one CTA; a 32x32 window's 64 tiles are 16 CTAs of four), or, for windows of at
 * most 32 tokens, the CTA packs several windows side by side in one K/V tile, one warp per query tile of each, so no
 * warp idles. Keys and values stream through shared memory in tiles of kKeyTile keys (64, or 32 for head_dim > 64)
 * in a two-stage ring: cp.async 16-byte copies of tile t + 1 are in flight while the warps compute on tile t. Q is
 * staged once per warp by cp.async and held in registers as mma A fragments (ldmatrix); K fragments by ldmatrix,
 * V fragments by ldmatrix.trans from rows skewed by 16 bytes (the 8 rows of an 8x8 matrix hit distinct banks).
 * Per tile: S = Q K^T (mma.sync m16n8k16, FP32 accumulation), excluded keys at -inf, the running row max over the
 * quad, p = 2^(s * scale * log2 e - max), the scale folded into the one FFMA in front of ex2.approx, running sums in
 * FP32, then O += P V with P rounded once to f16 (plugins/blockifyAttention/README.md, "Numerics"). The LePE's 3x3
 * taps read v from the staged tile that holds the neighbour, with the weights staged once per CTA. The window
 * gather/scatter and padding are the kernel's own addressing: padded keys and rows are cp.async zero-fills, padded
 * rows are never stored. The epilogue stages each warp's 16 output rows in shared memory and writes them with
 * 16-byte stores.
 *
 * Launch planning (planBlockifyFlash, host): several windows per CTA where they fit; otherwise ceil(tiles / 4) CTAs
 * per window with the tiles spread evenly; and while a problem gives fewer CTAs than the GPU has SMs, fewer warps per
 * CTA (down to one 16-row tile) so a batch-1 stage still reaches every SM.
 */
#ifndef EDGEATTN_BLOCKIFY_FLASH_CUH
#define EDGEATTN_BLOCKIFY_FLASH_CUH

#include "blockifyAttention/blockifyCommon.cuh"
#include "common/asyncCopy.cuh"
#include "common/deviceUtils.cuh"
#include "common/kernelStatus.h"
#include "common/mma.cuh"

#include <cuda_fp16.h>

namespace edgeattn
{
namespace kernels
{
namespace blockify
{

// (enumerators, not static constexpr members: the kernel body is compiled out below sm_80, and nvcc warns about
// every unreferenced static member there)
template <int kHeadDimPad>
struct BlockifyFlashConfig
{
    enum : int
    {
        kMaxThreads = 32 * kFlashMaxWarps,
        kKeyTile = flashKeyTile(kHeadDimPad),
        kStages = 2,
        kStride = kHeadDimPad + 8,      // halves per staged row: 16 bytes of skew
        kSegments = kHeadDimPad / 8,    // 16-byte segments per row
        kDepthSteps = kHeadDimPad / 16, // k blocks of Q K^T
        kValueTiles = kHeadDimPad / 8,  // n tiles of P V (output columns)
        kKeyTiles = kKeyTile / 8,       // n tiles of S
        kKeySteps = kKeyTile / 16,      // k blocks of P V
        kTileHalves = kKeyTile * kStride,
        kStageHalves = 2 * kTileHalves, // K then V
        kLepeHalves = 10 * kHeadDimPad, // per window slot: 9 taps x channels (tap-major), then the bias
        kSharedHalves = kStages * kStageHalves + kFlashMaxWarps * kLepeHalves
    };
    static_assert(kHeadDimPad % 16 == 0, "mma tiles are 16 deep");
    static_assert(2 * kKeyTiles <= 32, "one exclusion bit per key column of a lane");
    static_assert(kFlashMaxWarps * 16 * kStride <= kStageHalves, "the warps' query / output rows fit one stage");
    static_assert(kSharedHalves * 2 <= 48 * 1024, "static shared memory within the 48 KB every arch allows");
};

#if EDGEATTN_MMA_AVAILABLE // the kernel body exists only in sm_80+ device code and the CPU emulation
//! Where the (window, head, batch) problem `problem` lives.
struct FlashWindow
{
    int y0;          // top-left token of the window
    int x0;
    int64_t base;    // element offset of (batch, token 0, the head's channel 0)
    int channel0;    // head * head_dim
};

__device__ __forceinline__ FlashWindow flashWindow(BlockifyParams const& p, int64_t problem)
{
    int const head = static_cast<int>(problem % p.numHeads);
    int64_t const windowBatch = problem / p.numHeads;
    int const window = static_cast<int>(windowBatch % p.windows);
    int64_t const batch = windowBatch / p.windows;
    FlashWindow w;
    w.y0 = (window / p.windowsX) * p.windowSize;
    w.x0 = (window % p.windowsX) * p.windowSize;
    w.channel0 = head * p.headDim;
    w.base = batch * p.height * p.width * p.channels + w.channel0;
    return w;
}

//! Token offset (row-major map) of key/query `index` of window w, or -1 when it lies outside the map.
__device__ __forceinline__ int64_t flashToken(BlockifyParams const& p, FlashWindow const& w, int index)
{
    int const y = w.y0 + index / p.windowSize;
    int const x = w.x0 + index % p.windowSize;
    return y < p.height && x < p.width ? static_cast<int64_t>(y) * p.width + x : -1;
}

template <int kHeadDimPad>
__global__ void __launch_bounds__(BlockifyFlashConfig<kHeadDimPad>::kMaxThreads) blockifyFlashMmaKernel(
    BlockifyParams const p)
{
    using Config = BlockifyFlashConfig<kHeadDimPad>;
    __shared__ int4 sharedStorage[Config::kSharedHalves / 8];
    __half* const stages = reinterpret_cast<__half*>(sharedStorage);
    __half* const lepeTable = stages + Config::kStages * Config::kStageHalves;

    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    int const d = p.headDim;
    int const ws = p.windowSize;
    int const windowTokens = ws * ws;
    int const queryTiles = ceilDiv(windowTokens, 16);
    bool const packed = p.windowsPerBlock > 1;
    int const slotKeys = queryTiles * 16; // packed: key rows per window slot in the tile
    bool const masked = p.padding == EDGEATTN_PADDING_MASKED;
    bool const hasLepe = p.lepeWeight != nullptr;

    // this CTA's problems (window slots) and this warp's query tile
    int64_t const firstProblem
        = packed ? static_cast<int64_t>(blockIdx.x) * p.windowsPerBlock : blockIdx.x / p.queryBlocks;
    int64_t const problemsLeft = p.problems - firstProblem;
    int const slots = !packed ? 1 : (problemsLeft < p.windowsPerBlock ? static_cast<int>(problemsLeft) : p.windowsPerBlock);
    int const slot = packed ? warp / queryTiles : 0;
    int const tile = packed ? warp % queryTiles : static_cast<int>(blockIdx.x % p.queryBlocks) * p.tilesPerBlock + warp;
    bool const active = slot < slots && tile < queryTiles; // warp-uniform
    int const keyTiles = packed ? 1 : ceilDiv(windowTokens, Config::kKeyTile);
    FlashWindow const mine = flashWindow(p, firstProblem + min(slot, slots - 1));

    __half const* __restrict__ qAll = static_cast<__half const*>(p.q);
    __half const* __restrict__ kAll = static_cast<__half const*>(p.k);
    __half const* __restrict__ vAll = static_cast<__half const*>(p.v);

    // Stages key tile `keyTile` (packed: every slot's keys) into ring stage `stage`: the CTA's threads each issue
    // 16-byte cp.async of K and V rows; padded keys, channels past head_dim and empty slots are zero-filled.
    auto stageKeys = [&](int keyTile, int stage) {
        __half* const keys = stages + stage * Config::kStageHalves;
        __half* const values = keys + Config::kTileHalves;
        for (int index = threadIdx.x; index < Config::kKeyTile * Config::kSegments; index += blockDim.x)
        {
            int const row = index / Config::kSegments;
            int const column = (index - row * Config::kSegments) * 8;
            int const s = packed ? row / slotKeys : 0;
            int const key = packed ? row - s * slotKeys : keyTile * Config::kKeyTile + row;
            int64_t offset = 0;
            bool real = s < slots && key < windowTokens && column < d;
            if (real)
            {
                FlashWindow const w = packed ? flashWindow(p, firstProblem + s) : mine;
                int64_t const token = flashToken(p, w, key);
                real = token >= 0;
                offset = w.base + token * p.channels + column;
            }
            async::copy16(keys + row * Config::kStride + column, kAll + offset, real);
            async::copy16(values + row * Config::kStride + column, vAll + offset, real);
        }
    };

    // ---- prologue: this warp's Q rows (group 1), the first key tile (group 2), the LePE weights ------------------
    __half* const warpRows = stages + Config::kStageHalves + warp * 16 * Config::kStride; // in stage 1
    if (active)
    {
        for (int index = lane; index < 16 * Config::kSegments; index += 32)
        {
            int const row = index / Config::kSegments;
            int const column = (index - row * Config::kSegments) * 8;
            int const query = tile * 16 + row;
            int64_t const token = query < windowTokens && column < d ? flashToken(p, mine, query) : -1;
            async::copy16(warpRows + row * Config::kStride + column,
                qAll + (token >= 0 ? mine.base + token * p.channels + column : 0), token >= 0);
        }
    }
    async::commit();
    stageKeys(0, 0);
    async::commit();
    if (hasLepe)
    {
        // per slot, tap-major: table[tap * kHeadDimPad + c] (pairs of channels are one 4-byte load), bias after
        __half const* __restrict__ weights = static_cast<__half const*>(p.lepeWeight);
        __half const* __restrict__ biases = static_cast<__half const*>(p.lepeBias);
        for (int index = threadIdx.x; index < slots * 10 * kHeadDimPad; index += blockDim.x)
        {
            int const s = index / (10 * kHeadDimPad);
            int const entry = index - s * 10 * kHeadDimPad;
            int const tap = entry / kHeadDimPad;
            int const c = entry - tap * kHeadDimPad;
            int const channel = flashWindow(p, firstProblem + s).channel0 + c;
            __half value = __float2half_rn(0.0F);
            if (c < d)
            {
                value = tap < 9 ? weights[channel * 9 + tap] : biases[channel];
            }
            lepeTable[s * Config::kLepeHalves + entry] = value;
        }
    }
    async::wait<1>(); // this thread's Q copies have landed (the key tile may still be in flight)
    __syncwarp();     // ... and every lane's, for ldmatrix

    int const rowLoad = mma::ldmatrixRow(lane);
    int const matrixLoad = mma::ldmatrixMatrix(lane);
    mma::FragmentA query[Config::kDepthSteps];
    if (active)
    {
#pragma unroll
        for (int step = 0; step < Config::kDepthSteps; ++step)
        {
            // matrices: rows 0-7 / 8-15 of depth 0-7, then of depth 8-15 (the A fragment's register order)
            mma::ldmatrixX4(query[step].x,
                warpRows + ((matrixLoad & 1) * 8 + rowLoad) * Config::kStride + step * 16 + (matrixLoad >> 1) * 8);
        }
    }
    __syncthreads(); // Q is in registers: stage 1 may be refilled; the LePE table is visible

    // the lane's two rows (fragment rows g and g + 8): token offsets, or -1 for padded rows (cropped)
    int64_t rowToken[2];
    int rowKey[2]; // index of the query inside its window
#pragma unroll
    for (int r = 0; r < 2; ++r)
    {
        rowKey[r] = tile * 16 + mma::cRow(lane, 2 * r);
        rowToken[r] = active && rowKey[r] < windowTokens ? flashToken(p, mine, rowKey[r]) : -1;
    }

    mma::FragmentC output[Config::kValueTiles];
    mma::FragmentC lepe[Config::kValueTiles];
#pragma unroll
    for (int t = 0; t < Config::kValueTiles; ++t)
    {
        output[t] = mma::FragmentC{{0.0F, 0.0F, 0.0F, 0.0F}};
        lepe[t] = mma::FragmentC{{0.0F, 0.0F, 0.0F, 0.0F}};
    }
    float runningMax[2] = {-INFINITY, -INFINITY}; // raw scores (before the scale)
    float runningSum[2] = {0.0F, 0.0F};           // this lane's columns only; summed over the quad at the end

    // ---- main loop: tile t + 1 in flight while the warps compute on tile t ----------------------------------------
    for (int keyTile = 0; keyTile < keyTiles; ++keyTile)
    {
        if (keyTile + 1 < keyTiles)
        {
            stageKeys(keyTile + 1, (keyTile + 1) & 1);
        }
        async::commit();  // (an empty group on the last tile keeps the wait count uniform)
        async::wait<1>(); // this thread's copies of tile t have landed
        __syncthreads();  // ... and every thread's
        if (active)
        {
            __half const* const keys = stages + (keyTile & 1) * Config::kStageHalves;
            __half const* const values = keys + Config::kTileHalves;

            // which key columns of the lane are out of the softmax (bit 2 t + e; the same for both rows)
            uint32_t excluded = 0;
#pragma unroll
            for (int t = 0; t < Config::kKeyTiles; ++t)
            {
#pragma unroll
                for (int e = 0; e < 2; ++e)
                {
                    int const column = t * 8 + mma::cCol(lane, e);
                    int const s = packed ? column / slotKeys : 0;
                    int const key = packed ? column - s * slotKeys : keyTile * Config::kKeyTile + column;
                    if (s != slot || key >= windowTokens || (masked && flashToken(p, mine, key) < 0))
                    {
                        excluded |= 1U << (2 * t + e);
                    }
                }
            }

            mma::FragmentC score[Config::kKeyTiles];
            queryKeyScores<Config::kStride>(score, query, keys, rowLoad, matrixLoad);

            float tileMax[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int t = 0; t < Config::kKeyTiles; ++t)
            {
#pragma unroll
                for (int i = 0; i < 4; ++i)
                {
                    if (((excluded >> (2 * t + (i & 1))) & 1U) != 0)
                    {
                        score[t].x[i] = -INFINITY;
                    }
                    tileMax[i >> 1] = fmaxf(tileMax[i >> 1], score[t].x[i]);
                }
            }
            float base[2]; // the new running max in log2 units (0 while every key so far is excluded)
#pragma unroll
            for (int r = 0; r < 2; ++r)
            {
                // the four lanes of a quad hold one row's columns
                tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffU, tileMax[r], 1));
                tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffU, tileMax[r], 2));
                float const newMax = fmaxf(runningMax[r], tileMax[r]);
                base[r] = newMax == -INFINITY ? 0.0F : newMax * p.scaleLog2;
                // exp2(-inf) = 0 for the first tile with a key: the empty accumulator stays empty
                float const correction = async::exp2Approx(fmaf(runningMax[r], p.scaleLog2, -base[r]));
                runningMax[r] = newMax;
                runningSum[r] *= correction;
#pragma unroll
                for (int t = 0; t < Config::kValueTiles; ++t)
                {
                    output[t].x[2 * r] *= correction;
                    output[t].x[2 * r + 1] *= correction;
                }
            }
#pragma unroll
            for (int t = 0; t < Config::kKeyTiles; ++t)
            {
#pragma unroll
                for (int i = 0; i < 4; ++i)
                {
                    // the softmax scale folded into the one FFMA before ex2 (excluded keys: -inf -> 0)
                    float const weight = async::exp2Approx(fmaf(score[t].x[i], p.scaleLog2, -base[i >> 1]));
                    score[t].x[i] = weight;
                    runningSum[i >> 1] += weight;
                }
            }

#pragma unroll
            for (int step = 0; step < Config::kKeySteps; ++step)
            {
                // C tiles 2 step and 2 step + 1 are the A fragment of keys [16 step, 16 step + 16), rounded once
                mma::FragmentC const& left = score[2 * step];
                mma::FragmentC const& right = score[2 * step + 1];
                mma::FragmentA const weights{{mma::packHalf2(left.x[0], left.x[1]), mma::packHalf2(left.x[2], left.x[3]),
                    mma::packHalf2(right.x[0], right.x[1]), mma::packHalf2(right.x[2], right.x[3])}};
#pragma unroll
                for (int t = 0; t < Config::kValueTiles; t += 2)
                {
                    uint32_t b[4];
                    valueFragments<Config::kStride>(b, values, step, t, rowLoad, matrixLoad);
                    mma::mmaF16(output[t], weights, mma::FragmentB{{b[0], b[1]}});
                    mma::mmaF16(output[t + 1], weights, mma::FragmentB{{b[2], b[3]}});
                }
            }

            if (hasLepe)
            {
                // the taps whose neighbour is a key of this tile, v from the staged tile
                __half const* const table = lepeTable + slot * Config::kLepeHalves;
#pragma unroll
                for (int r = 0; r < 2; ++r)
                {
                    if (rowToken[r] < 0)
                    {
                        continue;
                    }
                    int const qy = mine.y0 + rowKey[r] / ws;
                    int const qx = mine.x0 + rowKey[r] % ws;
                    forEachLepeTap(p, qy, qx, mine.y0, mine.x0, [&](int tap, int ny, int nx) {
                        int const key = (ny - mine.y0) * ws + (nx - mine.x0);
                        int const row = packed ? slot * slotKeys + key : key - keyTile * Config::kKeyTile;
                        if (row < 0 || row >= Config::kKeyTile)
                        {
                            return; // staged with another tile
                        }
#pragma unroll
                        for (int t = 0; t < Config::kValueTiles; ++t)
                        {
                            int const c = t * 8 + mma::cCol(lane, 0); // and c + 1
                            float2 const v = __half22float2(
                                *reinterpret_cast<__half2 const*>(values + row * Config::kStride + c));
                            float2 const w = __half22float2(
                                *reinterpret_cast<__half2 const*>(table + tap * kHeadDimPad + c));
                            lepe[t].x[2 * r] = fmaf(w.x, v.x, lepe[t].x[2 * r]);
                            lepe[t].x[2 * r + 1] = fmaf(w.y, v.y, lepe[t].x[2 * r + 1]);
                        }
                    });
                }
            }
        }
        __syncthreads(); // every warp is done with this stage before the next iteration refills it
    }

    // ---- epilogue: normalise, add the LePE, one rounding to f16, stage the 16 rows, 16-byte stores ---------------
    if (!active)
    {
        return; // no barrier follows
    }
    __half* const rows = stages + warp * 16 * Config::kStride; // stage 0, free after the loop's last barrier
    __half const* const bias = lepeTable + slot * Config::kLepeHalves + 9 * kHeadDimPad;
#pragma unroll
    for (int r = 0; r < 2; ++r)
    {
        runningSum[r] += __shfl_xor_sync(0xffffffffU, runningSum[r], 1);
        runningSum[r] += __shfl_xor_sync(0xffffffffU, runningSum[r], 2);
        // every window holds at least one real key (its top-left token), so a real row's sum is >= 1
        float const inverseSum = rowToken[r] >= 0 ? 1.0F / runningSum[r] : 0.0F;
#pragma unroll
        for (int t = 0; t < Config::kValueTiles; ++t)
        {
            int const c = t * 8 + mma::cCol(lane, 0);
            float2 value = make_float2(output[t].x[2 * r] * inverseSum, output[t].x[2 * r + 1] * inverseSum);
            if (hasLepe)
            {
                float2 const b = __half22float2(*reinterpret_cast<__half2 const*>(bias + c));
                value.x += b.x + lepe[t].x[2 * r];
                value.y += b.y + lepe[t].x[2 * r + 1];
            }
            *reinterpret_cast<__half2*>(rows + mma::cRow(lane, 2 * r) * Config::kStride + c)
                = __floats2half2_rn(value.x, value.y);
        }
    }
    __syncwarp();
    __half* __restrict__ outAll = static_cast<__half*>(p.out);
    for (int index = lane; index < 16 * Config::kSegments; index += 32)
    {
        int const row = index / Config::kSegments;
        int const column = (index - row * Config::kSegments) * 8;
        int const query = tile * 16 + row;
        int64_t const token = query < windowTokens && column < d ? flashToken(p, mine, query) : -1;
        if (token >= 0)
        {
            *reinterpret_cast<int4*>(outAll + mine.base + token * p.channels + column)
                = *reinterpret_cast<int4 const*>(rows + row * Config::kStride + column);
        }
    }
}
#else
template <int kHeadDimPad>
__global__ void __launch_bounds__(BlockifyFlashConfig<kHeadDimPad>::kMaxThreads) blockifyFlashMmaKernel(
    BlockifyParams const)
{
}
#endif // EDGEATTN_MMA_AVAILABLE

template <int kHeadDimPad>
void launchBlockifyFlash(BlockifyParams const& params, cudaStream_t stream)
{
    int const queryTiles = ceilDiv(params.windowSize * params.windowSize, 16);
    bool const packed = params.windowsPerBlock > 1;
    int64_t const blocks = packed ? (params.problems + params.windowsPerBlock - 1) / params.windowsPerBlock
                                  : params.problems * params.queryBlocks;
    int const warps = packed ? params.windowsPerBlock * queryTiles : params.tilesPerBlock;
    blockifyFlashMmaKernel<kHeadDimPad><<<static_cast<unsigned>(blocks), 32 * warps, 0, stream>>>(params);
}

} // namespace blockify
} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_BLOCKIFY_FLASH_CUH
