/*
 * Tensor-core path (sm_80+, FP16 I/O) of the linear-attention passes of common/linearAttention.cuh: the same math,
 * the same launch forms (fused, single launch, or the two passes below) and the same workspace, with both products
 * on mma.sync m16n8k16 (f16 in, FP32 accumulate).
 *
 *   1. linearReduceMmaKernel   grid (splits, heads, batch): per token tile, phi(K)^T [V | 1] as mma tiles. The ones
 *      column appended to V makes the token-axis sum l = sum_n phi(k_n) come out of the same products (column d),
 *      so the reduction that EFFATT's softmax and LiteMLA's normaliser need costs no pass of its own. The online
 *      statistics are fused into the staging of each tile: EFFATT's per-feature running max over tokens (the
 *      accumulator rows rescaled by exp(m_old - m_new), as in the scalar kernel), and for the quadratic-Taylor map a
 *      per-feature power-of-two scale (rows rescaled when a tile brings larger features) so no FP32 feature value can
 *      overflow f16. Writes the scalar kernel's partials (max, sum, context); the last block of a (batch, head) to
 *      arrive merges them into the context [dk][d + 1] (normaliser in column d) with the scalar kernel's
 *      finishReduction, in split order.
 *   2. linearOutputMmaKernel   grid (token-tile groups, heads, batch), 4 warps x 16 tokens per tile: phi(Q) tile
 *      times the context, numerator and denominator from one product (column d), divided in FP32, staged for
 *      coalesced stores. The context is split once per block with a power-of-two scale per column.
 *
 * Token tiles (16-byte aligned tensors, 8-element chunks along the contiguous axis) stream through a cp.async ring
 * of raw tiles in both passes (copyTokenTileAsync / visitStagedTile: 2 or 3 stages, as many as fit the 48 KB budget
 * beside the staging; LinearMmaPlan::reduceRingStages, outputRingStages), so the next tiles' loads are in flight
 * while a tile is transformed and multiplied; otherwise each tile is loaded directly (loadTokenTile).
 *
 * Passes over the token data: K and V are read once (launch 1), Q read and the output written once (launch 2), the
 * minimum for linear attention (the context needs every token of K and V before any output row exists). The merge
 * reads only the per-split partials (splits x dk x (d + 2) floats per head), once, in the last block.
 *
 * Numerics (common/splitTensorCore.cuh): ReLU features and V are exact f16 values, so phi(K)^T V is exact products
 * with FP32 accumulation; softmax numerators (scaled by 2^14), QT features and the FP32 context are split into
 * hi + lo f16 pairs (2 or 3 mma per tile product instead of 1), which keeps FP32-level accuracy: one f16 rounding of
 * them alone would use up the whole FP16 error budget.
 */
#ifndef EDGEATTN_COMMON_LINEAR_ATTENTION_TENSOR_CORE_CUH
#define EDGEATTN_COMMON_LINEAR_ATTENTION_TENSOR_CORE_CUH

#include "common/asyncCopy.cuh"
#include "common/kernelPath.h"
#include "common/linearAttention.cuh"
#include "common/splitTensorCore.cuh"

namespace edgeattn
{
namespace kernels
{

constexpr int kLinearMmaMaxValueTiles = 9; // d + 1 <= 72
constexpr int kLinearMmaOutputTile = 64;   // tokens per output tile: 4 warps x 16 rows
constexpr int kLinearMmaOutputThreads = 128;
constexpr int kLinearMmaMaxReduceThreads = 288;
//! Blocks per multiprocessor the reduction and fused kernels are compiled for: with the thread bound alone nvcc 13
//! aims at 3 blocks (72 registers) and spills the merge's live values; 2 blocks leave them 113.
constexpr int kLinearMmaReduceMinBlocks = 2;
//! Stages of the cp.async rings of raw token tiles (the most that fit the shared-memory budget beside the staging of
//! the largest token tile; 0: the tile is loaded straight from global memory, as without 16-byte alignment).
constexpr int kLinearMmaMaxRingStages = 3;

struct LinearMmaPlan
{
    int featureRows;  // dk rounded up to 16: rows of the reduction's A, depth of the output product
    int valueColumns; // d + 1 rounded up to 8: columns of both products (column d: ones / normaliser)
    int featureTiles;
    int valueTiles;
    int tokenGroups; // warps per feature tile in the reduction, each taking every tokenGroups-th 16-token step
    int reduceThreads;
    int reduceTokenTile;
    int reduceRingStages; // 0, 2 or 3 (kLinearMmaMaxRingStages)
    int outputRingStages;
    size_t reduceSharedBytes;
    size_t outputSharedBytes;
};

//! Offsets (in halves, then floats) of the reduction's shared memory: features hi / lo and [V | 1] staged either
//! token-major ([token][row], EFFATT's (B, N, C) tensors) or row-major ([row][token], LiteMLA's NCHW planes).
struct LinearReduceMmaLayout
{
    int featureStride;
    int valueStride;
    int featureHalves; // each of hi and lo
    int valueHalves;
    int statsOffsetFloats;
    int ringOffsetFloats;
    int ringStageHalves; // one stage: the raw k tile, then the raw v tile, each in the global tensor's order
    int sharedFloats;
};

EDGEATTN_HOST_DEVICE inline LinearReduceMmaLayout linearReduceMmaLayout(bool tokenMajor, int tokenTile,
    int featureRows, int valueColumns, int tokenGroups, int headDim, int ringStages)
{
    LinearReduceMmaLayout layout;
    // +8 halves per row: rows 16 bytes apart in the bank pattern, so the 8 rows of an ldmatrix hit distinct banks
    layout.featureStride = tokenMajor ? featureRows + 8 : tokenTile + 8;
    layout.valueStride = tokenMajor ? valueColumns + 8 : tokenTile + 8;
    layout.featureHalves = (tokenMajor ? tokenTile : featureRows) * layout.featureStride;
    layout.valueHalves = (tokenMajor ? tokenTile : valueColumns) * layout.valueStride;
    int const stagingFloats = layout.featureHalves + layout.valueHalves / 2; // 2 x features + values, in floats
    int const reductionFloats = tokenGroups > 1 ? tokenGroups * featureRows * valueColumns : 0;
    int const regionFloats = stagingFloats > reductionFloats ? stagingFloats : reductionFloats;
    layout.statsOffsetFloats = roundUp4(regionFloats);
    layout.ringOffsetFloats = roundUp4(layout.statsOffsetFloats + 3 * featureRows);
    layout.ringStageHalves = 2 * tokenTile * headDim;
    layout.sharedFloats = layout.ringOffsetFloats + ringStages * layout.ringStageHalves / 2;
    return layout;
}

//! Offsets of the output kernel's shared memory: context hi / lo [feature][column], the phi(Q) tile hi (and lo)
//! staged token-major or row-major like the reduction's, per-column scales, per-token scale and max.
struct LinearOutputMmaLayout
{
    int contextStride;
    int contextHalves; // each of hi and lo
    int queryStride;
    int queryHalves; // each of hi and (split maps only) lo
    int floatsOffset;
    int ringOffsetFloats;
    int ringStageHalves; // one stage: the raw q tile in the global tensor's order
    int sharedFloats;
};

EDGEATTN_HOST_DEVICE inline LinearOutputMmaLayout linearOutputMmaLayout(
    bool tokenMajor, bool splitQuery, int featureRows, int valueColumns, int headDim, int ringStages)
{
    LinearOutputMmaLayout layout;
    layout.contextStride = valueColumns + 8;
    layout.contextHalves = featureRows * layout.contextStride;
    layout.queryStride = tokenMajor ? featureRows + 8 : kLinearMmaOutputTile + 8;
    layout.queryHalves = (tokenMajor ? kLinearMmaOutputTile : featureRows) * layout.queryStride;
    layout.floatsOffset = roundUp4(layout.contextHalves + layout.queryHalves * (splitQuery ? 2 : 1) / 2);
    layout.ringOffsetFloats = roundUp4(layout.floatsOffset + valueColumns + 2 * kLinearMmaOutputTile);
    layout.ringStageHalves = kLinearMmaOutputTile * headDim;
    layout.sharedFloats = layout.ringOffsetFloats + ringStages * layout.ringStageHalves / 2;
    return layout;
}

/*
 * Geometry of the tensor-core path for one problem; false if it has none (head_dim + 1 > 72, or the staging does
 * not fit the 48 KB every sm_80+ GPU gives without opt-in): the launcher then runs the scalar kernels.
 */
inline bool planLinearAttentionMmaWithin(int headDim, int featureDim, bool tokenMajor, FeatureMap map,
    size_t sharedBudget, LinearMmaPlan* plan)
{
    LinearMmaPlan result;
    result.featureRows = (featureDim + 15) / 16 * 16;
    result.valueColumns = (headDim + 1 + 7) / 8 * 8;
    result.featureTiles = result.featureRows / 16;
    result.valueTiles = result.valueColumns / 8;
    if (result.valueTiles > kLinearMmaMaxValueTiles)
    {
        return false;
    }
    int const groups = std::max(1, std::min(4, 8 / result.featureTiles));
    // The ring moves 8-element chunks: head_dim % 8 == 0 (the launcher drops it for misaligned tensors).
    int const maxStages = headDim % 8 == 0 ? kLinearMmaMaxRingStages : 0;
    result.reduceTokenTile = 0;
    for (int tile = 64; tile >= 16 && result.reduceTokenTile == 0; tile /= 2)
    {
        int const tileGroups = std::min(groups, tile / 16);
        for (int stages = maxStages; stages >= 0; stages = stages > 2 ? stages - 1 : stages - 2)
        {
            LinearReduceMmaLayout const layout = linearReduceMmaLayout(
                tokenMajor, tile, result.featureRows, result.valueColumns, tileGroups, headDim, stages);
            size_t const bytes = static_cast<size_t>(layout.sharedFloats) * sizeof(float);
            if (bytes <= sharedBudget)
            {
                result.reduceTokenTile = tile;
                result.tokenGroups = tileGroups;
                result.reduceRingStages = stages;
                result.reduceSharedBytes = bytes;
                break;
            }
        }
    }
    if (result.reduceTokenTile == 0)
    {
        return false;
    }
    result.reduceThreads = 32 * result.featureTiles * result.tokenGroups;
    if (result.reduceThreads > kLinearMmaMaxReduceThreads)
    {
        return false;
    }
    result.outputSharedBytes = 0;
    for (int stages = maxStages; stages >= 0; stages = stages > 2 ? stages - 1 : stages - 2)
    {
        LinearOutputMmaLayout const output = linearOutputMmaLayout(
            tokenMajor, map != FeatureMap::kRelu, result.featureRows, result.valueColumns, headDim, stages);
        size_t const bytes = static_cast<size_t>(output.sharedFloats) * sizeof(float);
        if (bytes <= sharedBudget)
        {
            result.outputRingStages = stages;
            result.outputSharedBytes = bytes;
            break;
        }
    }
    if (result.outputSharedBytes == 0)
    {
        return false;
    }
    *plan = result;
    return true;
}

//! The tensor-core plan of one problem: with one split (the fused kernel) it leaves room for the context in shared
//! memory (linearFusedShared) where it can; otherwise, or if that fails, the two kernels' plan within the 48 KB.
inline bool planLinearAttentionMma(int tokens, int headDim, int featureDim, bool tokenMajor, FeatureMap map,
    LinearMmaPlan* plan)
{
    size_t const context = linearFusedContextBytes(featureDim, headDim);
    return (linearSplits(tokens, headDim, featureDim, nullptr) == 1 && context < kMaxSharedBytes
               && planLinearAttentionMmaWithin(
                   headDim, featureDim, tokenMajor, map, kMaxSharedBytes - context, plan))
        || planLinearAttentionMmaWithin(headDim, featureDim, tokenMajor, map, kMaxSharedBytes, plan);
}

#if EDGEATTN_TENSOR_CORES

//! Element (row, token) of a staged tile: token-major [token][row] or row-major [row][token].
template <bool kTokenMajor>
__device__ __forceinline__ int stagedIndex(int row, int token, int stride)
{
    return kTokenMajor ? token * stride + row : row * stride + token;
}

/*
 * The cp.async ring of raw token tiles: copyTokenTileAsync issues one tile of `kSources` inputs into a stage (the
 * tile's 8-element chunks in the order loadTokenTile reads them, source after source; chunks of tokens from `count` on
 * zero-filled without a read; a ragged NCHW chunk, which only a padded plane has, copied element-wise), and
 * visitStagedTile hands a landed stage to the same visitor as loadTokenTile, with the same values. The caller commits
 * one group per tile (an empty one past the last tile, so the wait count stays the same), waits for the stage with
 * waitRing and a __syncthreads, and only then issues into the stage it read one tile before: 16-byte loads with up
 * to stages - 1 tiles in flight behind the current tile's work.
 */
template <bool kTokenMajor, int kSources>
__device__ __forceinline__ void copyTokenTileAsync(LinearAttentionParams const& p,
    __half const* const (&sources)[kSources], int tileBegin, int tokenTile, int count, __half* stage)
{
    int const d = p.headDim;
    int const tileHalves = tokenTile * d;
    for (int chunk = threadIdx.x; chunk < tileHalves / 8; chunk += blockDim.x)
    {
        int n0;
        int c0;
        int64_t const offset = tileChunk<kTokenMajor, 8>(
            chunk, d, tokenTile, tileBegin, p.inTokenStride, p.inChannelStride, n0, c0);
        bool const full = kTokenMajor ? n0 < count : n0 + 8 <= count;
        bool const ragged = !kTokenMajor && !full && n0 < count;
#pragma unroll
        for (int s = 0; s < kSources; ++s)
        {
            __half* const destination = stage + s * tileHalves + chunk * 8;
            if (ragged)
            {
                for (int e = 0; e < 8; ++e)
                {
                    destination[e] = n0 + e < count ? sources[s][offset + e] : __float2half_rn(0.0F);
                }
            }
            else
            {
                // an empty chunk reads nothing; its source is still an aligned address (the head's base)
                async::copy16(destination, full ? sources[s] + offset : sources[s], full);
            }
        }
    }
}

template <bool kTokenMajor, int kSources, typename Visit>
__device__ __forceinline__ void visitStagedTile(
    LinearAttentionParams const& p, __half const* stage, int tokenTile, int count, Visit const& visit)
{
    int const d = p.headDim;
    int const tileHalves = tokenTile * d;
    for (int chunk = threadIdx.x; chunk < tileHalves / 8; chunk += blockDim.x)
    {
        int n0;
        int c0;
        tileChunk<kTokenMajor, 8>(chunk, d, tokenTile, 0, 0, 0, n0, c0);
        __half x[kSources][8];
#pragma unroll
        for (int s = 0; s < kSources; ++s)
        {
            int4 const raw = *reinterpret_cast<int4 const*>(stage + s * tileHalves + chunk * 8);
            memcpy(x[s], &raw, sizeof(raw));
        }
#pragma unroll
        for (int e = 0; e < 8; ++e)
        {
            int const n = kTokenMajor ? n0 : n0 + e;
            visit(n, kTokenMajor ? c0 + e : c0, n < count, x[0][e], x[kSources - 1][e]);
        }
    }
}

//! cp.async.wait_group stages - 2: this thread's copies of the oldest tile in flight have landed.
__device__ __forceinline__ void waitRing(int stages)
{
    if (stages > 2)
    {
        async::wait<kLinearMmaMaxRingStages - 2>();
    }
    else
    {
        async::wait<0>();
    }
}

/*
 * The quadratic-Taylor features of channel c of staged token n, split into hi and lo at their rows of the staged
 * tile: alpha x^2 at row c, linear x at row d + c and, once per token (c == 0), gamma at row 2d (0 for a token past
 * the tile), each scaled by the power of two of its row.
 */
template <bool kTokenMajor>
__device__ __forceinline__ void splitQtFeatures(float x, int c, int n, int d, bool valid, QtCoefficients const& qt,
    float quadraticScale, float linearScale, float constantScale, __half* high, __half* low, int stride)
{
    int const at = stagedIndex<kTokenMajor>(c, n, stride);
    int const linearAt = stagedIndex<kTokenMajor>(d + c, n, stride);
    splitHalf(qt.alpha * x * x * quadraticScale, high + at, low + at);
    splitHalf(qt.linear * x * linearScale, high + linearAt, low + linearAt);
    if (c == 0)
    {
        int const constantAt = stagedIndex<kTokenMajor>(2 * d, n, stride);
        splitHalf(valid ? qt.gamma * constantScale : 0.0F, high + constantAt, low + constantAt);
    }
}

//! The factor that takes a reduction accumulator row back to the scalar kernel's units: the softmax numerators
//! carry 2^14, a QT row its running scale (0: the row never had a non-zero feature, its sums are 0), ReLU none.
template <FeatureMap kMap>
__device__ __forceinline__ float featureRowUnscale(float rowState)
{
    if (kMap == FeatureMap::kSoftmax)
    {
        return kSplitUnitInverse;
    }
    if (kMap == FeatureMap::kRelu)
    {
        return 1.0F;
    }
    return rowState > 0.0F ? 1.0F / rowState : 0.0F;
}

#if EDGEATTN_MMA_AVAILABLE
//! One reduction block's work on tensor cores: the partial of token split `split` of (batch, head), then
//! finishReduction; kFused: the context in `fusedContext` (shared memory) instead, as reduceSplit does.
template <FeatureMap kMap, bool kTokenMajor, int kValueTiles, bool kFused = false>
__device__ __forceinline__ void reduceSplitMma(
    LinearAttentionParams const& p, int split, int head, int batch, float* fusedContext = nullptr)
{
    constexpr bool kSplit = kMap != FeatureMap::kRelu;
    int const d = p.headDim;
    int const dk = p.featureDim;
    int const tokenTile = p.reduceTokenTile;
    int const featureRows = p.mmaFeatureRows;
    int const valueColumns = p.mmaValueColumns;
    int const tokenGroups = p.reduceGroups;
    int const ringStages = p.reduceRingStages;
    LinearReduceMmaLayout const layout
        = linearReduceMmaLayout(kTokenMajor, tokenTile, featureRows, valueColumns, tokenGroups, d, ringStages);
    float* const shared = sharedFloats();
    __half* const featureHigh = reinterpret_cast<__half*>(shared);
    __half* const featureLow = featureHigh + layout.featureHalves; // raw k before the transform
    __half* const values = featureLow + layout.featureHalves;
    float* const rowState = shared + layout.statsOffsetFloats; // softmax: running max; QT: running scale (0: none)
    float* const correction = rowState + featureRows;
    float* const reduction = shared; // [group][featureRows][valueColumns] after the last tile
    __half* const ring = reinterpret_cast<__half*>(shared + layout.ringOffsetFloats);

    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    int const featureTile = warp % p.mmaFeatureTiles;
    int const group = warp / p.mmaFeatureTiles;
    int const begin = split * p.tokensPerSplit;
    int const end = min(p.tokens, begin + p.tokensPerSplit);

    int64_t const base = inputHeadOffset(p, batch, head);
    __half const* __restrict__ kPtr = static_cast<__half const*>(p.k) + base;
    __half const* __restrict__ vPtr = static_cast<__half const*>(p.v) + base;
    QtCoefficients const qt = qtCoefficients<kMap>(p, head);

    // Padded feature rows, value columns past d and the staging's stride padding stay zero for the whole kernel.
    for (int index = threadIdx.x; index < layout.featureHalves + layout.valueHalves / 2; index += blockDim.x)
    {
        shared[index] = 0.0F;
    }
    for (int i = threadIdx.x; i < featureRows; i += blockDim.x)
    {
        rowState[i] = kMap == FeatureMap::kSoftmax ? -INFINITY : 0.0F;
        correction[i] = 1.0F;
    }
    __half const zero = __float2half_rn(0.0F);
    __half const one = __float2half_rn(1.0F);

    mma::FragmentC acc[kValueTiles];
    zeroFragments(acc);

    __half const* const keysAndValues[2] = {kPtr, vPtr};
    // Ring stages go round without a division: the current tile's, and the one it frees for the tile stages - 1
    // ahead (the previous tile's).
    auto issueTile = [&](int tileBegin, int stage) { // one token tile into a ring stage, one commit group
        if (tileBegin < end)
        {
            copyTokenTileAsync<kTokenMajor>(p, keysAndValues, tileBegin, tokenTile, min(tokenTile, end - tileBegin),
                ring + stage * layout.ringStageHalves);
        }
        async::commit();
    };
    for (int stage = 0; stage < ringStages - 1; ++stage)
    {
        issueTile(begin + stage * tokenTile, stage);
    }

    int stage = 0;
    for (int tileBegin = begin; tileBegin < end; tileBegin += tokenTile)
    {
        int const count = min(tokenTile, end - tileBegin);
        if (ringStages > 0)
        {
            waitRing(ringStages);
        }
        __syncthreads(); // every warp's fragment loads of the previous tile are done (and this tile's stage landed)
        auto stageTile = [&](int n, int c, bool /*valid*/, __half key, __half value) {
                values[stagedIndex<kTokenMajor>(c, n, layout.valueStride)] = value;
                if (kMap == FeatureMap::kRelu)
                {
                    featureHigh[stagedIndex<kTokenMajor>(c, n, layout.featureStride)]
                        = __float2half_rn(fmaxf(__half2float(key), 0.0F)); // exact
                }
                else
                {
                    featureLow[stagedIndex<kTokenMajor>(c, n, layout.featureStride)] = key;
                }
            };
        if (ringStages > 0)
        {
            // into the stage read one tile ago (before the barrier above)
            issueTile(tileBegin + (ringStages - 1) * tokenTile, stage == 0 ? ringStages - 1 : stage - 1);
            visitStagedTile<kTokenMajor, 2>(p, ring + stage * layout.ringStageHalves, tokenTile, count, stageTile);
            stage = stage + 1 == ringStages ? 0 : stage + 1;
        }
        else
        {
            loadTokenTile<__half, kTokenMajor>(p, keysAndValues, tileBegin, tokenTile, count, stageTile);
        }
        for (int n = threadIdx.x; n < tokenTile; n += blockDim.x)
        {
            values[stagedIndex<kTokenMajor>(d, n, layout.valueStride)] = n < count ? one : zero;
        }
        __syncthreads();

        if (kMap != FeatureMap::kRelu)
        {
            // Tile statistics per channel (one warp per channel, lanes over tokens), then the feature rows'
            // rescaling of the accumulators already summed.
            for (int c = warp; c < d; c += blockDim.x >> 5)
            {
                float maximum = -INFINITY;
                float maxAbs = 0.0F;
                for (int n = lane; n < count; n += 32)
                {
                    float const x = __half2float(featureLow[stagedIndex<kTokenMajor>(c, n, layout.featureStride)]);
                    maximum = fmaxf(maximum, x);
                    maxAbs = fmaxf(maxAbs, fabsf(x));
                }
                maximum = warpReduceMax(maximum);
                maxAbs = warpReduceMax(maxAbs);
                if (lane != 0)
                {
                    continue;
                }
                if (kMap == FeatureMap::kSoftmax)
                {
                    float const previous = rowState[c];
                    float const updated = fmaxf(previous, maximum);
                    // previous = -inf on the first tile: the accumulators are still zero
                    correction[c] = previous == -INFINITY ? 1.0F : exp2f((previous - updated) * kLog2e);
                    rowState[c] = updated;
                }
                else
                {
                    float const rowMaxima[3]
                        = {fabsf(qt.alpha) * maxAbs * maxAbs, fabsf(qt.linear) * maxAbs, fabsf(qt.gamma)};
                    int const rows[3] = {c, d + c, 2 * d};
#pragma unroll
                    for (int r = 0; r < 3; ++r)
                    {
                        if (r == 2 && c != 0)
                        {
                            break; // one thread owns the constant row
                        }
                        // the row's scale only ever decreases (a power of two), so the accumulated sums are
                        // rescaled exactly; rows without a non-zero feature yet keep "no scale" (0)
                        float const previous = rowState[rows[r]];
                        float updated = previous;
                        if (rowMaxima[r] > 0.0F)
                        {
                            float const tileScale = splitScale(rowMaxima[r]);
                            updated = previous == 0.0F ? tileScale : fminf(previous, tileScale);
                        }
                        correction[rows[r]] = previous == 0.0F ? 1.0F : updated / previous;
                        rowState[rows[r]] = updated;
                    }
                }
            }
            __syncthreads();
            for (int index = threadIdx.x; index < tokenTile * d; index += blockDim.x)
            {
                int n;
                int c;
                tileCoordinates<kTokenMajor>(index, d, tokenTile, n, c);
                bool const valid = n < count;
                int const at = stagedIndex<kTokenMajor>(c, n, layout.featureStride);
                float const x = __half2float(featureLow[at]);
                if (kMap == FeatureMap::kSoftmax)
                {
                    float const numerator = valid ? exp2f((x - rowState[c]) * kLog2e) * kSplitUnitScale : 0.0F;
                    splitHalf(numerator, featureHigh + at, featureLow + at);
                }
                else
                {
                    splitQtFeatures<kTokenMajor>(x, c, n, d, valid, qt, rowState[c], rowState[d + c], rowState[2 * d],
                        featureHigh, featureLow, layout.featureStride);
                }
            }
            __syncthreads();
#pragma unroll
            for (int t = 0; t < kValueTiles; ++t)
            {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                {
                    acc[t].x[e] *= correction[featureTile * 16 + mma::cRow(lane, e)];
                }
            }
        }

        // phi(K)^T [V | 1]: this warp's 16 feature rows over its token steps of the tile (all lanes together)
        for (int step = group; step * 16 < count; step += tokenGroups)
        {
            int const at = stagedIndex<kTokenMajor>(featureTile * 16, step * 16, layout.featureStride);
            mma::FragmentA high;
            mma::FragmentA low;
            loadFragmentA<kTokenMajor>(high, featureHigh + at, layout.featureStride);
            if (kSplit)
            {
                loadFragmentA<kTokenMajor>(low, featureLow + at, layout.featureStride);
            }
#pragma unroll
            for (int t = 0; t < kValueTiles; ++t)
            {
                if (t < p.mmaValueTiles)
                {
                    mma::FragmentB value;
                    int const valueAt = stagedIndex<kTokenMajor>(t * 8, step * 16, layout.valueStride);
                    loadFragmentB<kTokenMajor>(value, values + valueAt, layout.valueStride);
                    if (kSplit)
                    {
                        mma::mmaF16(acc[t], low, value);
                    }
                    mma::mmaF16(acc[t], high, value);
                }
            }
        }
    }

    // Partials in the scalar kernel's format and units: [max (softmax) | sum | context], the scale undone; fused,
    // the context's rows [numerators | sum] in shared memory instead (finishFusedContext).
    int const contextColumns = roundUp4(d + 1);
    int64_t const partialStride = 2 * static_cast<int64_t>(dk) + static_cast<int64_t>(dk) * d;
    float* const partial = kFused
        ? nullptr
        : p.partials + ((static_cast<int64_t>(batch) * p.heads + head) * p.splits + split) * partialStride;
    auto sumAt = [&](int i, int j) -> float& { // j == d: the token-axis sum
        return kFused ? fusedContext[i * contextColumns + j]
                                       : partial[j < d ? 2 * dk + i * d + j : dk + i];
    };
    if (tokenGroups > 1)
    {
        __syncthreads(); // the staging is no longer read: it becomes the cross-warp reduction buffer
    }
    if (!kFused)
    {
        for (int i = threadIdx.x; i < dk; i += blockDim.x)
        {
            partial[i] = kMap == FeatureMap::kSoftmax ? rowState[i] : 0.0F;
        }
    }
#pragma unroll
    for (int t = 0; t < kValueTiles; ++t)
    {
#pragma unroll
        for (int e = 0; e < 4; ++e)
        {
            int const i = featureTile * 16 + mma::cRow(lane, e);
            int const j = t * 8 + mma::cCol(lane, e);
            if (tokenGroups > 1)
            {
                if (t < p.mmaValueTiles)
                {
                    reduction[(group * featureRows + i) * valueColumns + j] = acc[t].x[e];
                }
            }
            else if (i < dk && j <= d)
            {
                sumAt(i, j) = acc[t].x[e] * featureRowUnscale<kMap>(rowState[i]);
            }
        }
    }
    if (tokenGroups > 1)
    {
        __syncthreads();
        for (int index = threadIdx.x; index < dk * (d + 1); index += blockDim.x)
        {
            int const i = index / (d + 1);
            int const j = index - i * (d + 1);
            float sum = 0.0F;
            for (int g = 0; g < tokenGroups; ++g)
            {
                sum += reduction[(g * featureRows + i) * valueColumns + j];
            }
            sumAt(i, j) = sum * featureRowUnscale<kMap>(rowState[i]);
        }
    }
    if (kFused)
    {
        finishFusedContext<kMap>(fusedContext, dk, d);
        return;
    }
    finishReduction<kMap>(p, batch, head, shared, layout.sharedFloats);
}
#endif // EDGEATTN_MMA_AVAILABLE

template <FeatureMap kMap, bool kTokenMajor, int kValueTiles>
__global__ void __launch_bounds__(kLinearMmaMaxReduceThreads, kLinearMmaReduceMinBlocks)
    linearReduceMmaKernel(LinearAttentionParams const p)
{
#if EDGEATTN_MMA_AVAILABLE
    reduceSplitMma<kMap, kTokenMajor, kValueTiles>(p, blockIdx.x, blockIdx.y, blockIdx.z);
#endif
}

/*
 * Output tiles `first` .. `end` - 1 of the launch (tile t: token tile t % tiles of problem t / tiles), in order, by
 * the first 4 warps of the block (warps beyond take no part in the products; a fused block has more). The context
 * is staged and split once per problem the range touches.
 */
#if EDGEATTN_MMA_AVAILABLE
template <FeatureMap kMap, bool kTokenMajor, int kValueTiles, bool kFused = false>
__device__ __forceinline__ void outputTilesMma(
    LinearAttentionParams const& p, int64_t first, int64_t end, float const* fusedContext = nullptr)
{
    constexpr bool kSplitQuery = kMap != FeatureMap::kRelu;
    constexpr int kTile = kLinearMmaOutputTile;
    int const d = p.headDim;
    int const dk = p.featureDim;
    int const featureRows = p.mmaFeatureRows;
    int const valueColumns = p.mmaValueColumns;
    int const ringStages = p.outputRingStages;
    LinearOutputMmaLayout const layout
        = linearOutputMmaLayout(kTokenMajor, kSplitQuery, featureRows, valueColumns, d, ringStages);
    float* const shared = sharedFloats();
    __half* const contextHigh = reinterpret_cast<__half*>(shared);
    __half* const contextLow = contextHigh + layout.contextHalves;
    __half* const queryHigh = contextLow + layout.contextHalves; // also the output staging
    __half* const queryLow = queryHigh + layout.queryHalves;      // raw q before the transform (split maps)
    float* const columnScale = shared + layout.floatsOffset;
    float* const rowScale = columnScale + valueColumns;
    float* const rowMax = rowScale + kTile;
    __half* const ring = reinterpret_cast<__half*>(shared + layout.ringOffsetFloats);

    int const lane = threadIdx.x & 31;
    int const warp = threadIdx.x >> 5;
    int const contextColumns = roundUp4(d + 1);
    int const tilesPerProblem = ceilDiv(p.tokens, kTile);
    // C-fragment position of the denominator (column d): value tile, element within the row pair, source lane
    int const denominatorTile = d >> 3;
    int const denominatorElement = d & 1;
    int const denominatorLane = (lane & ~3) | ((d & 7) >> 1);

    for (int index = threadIdx.x; index < layout.queryHalves * (kSplitQuery ? 2 : 1) / 2; index += blockDim.x)
    {
        reinterpret_cast<float*>(queryHigh)[index] = 0.0F; // padded feature rows stay zero
    }
    // The ring's copies: the q tile `steps` items after the item at (batch, head, tile), into a ring stage, then one
    // commit group (an empty one past the range). The coordinates advance from a known item (at most stages - 1
    // steps), so no 64-bit division runs per tile.
    auto issueAhead = [&](int64_t item, int batch, int head, int tile, int steps, int stage) {
        if (item + steps < end)
        {
            for (tile += steps; tile >= tilesPerProblem; tile -= tilesPerProblem)
            {
                if (++head == p.heads)
                {
                    head = 0;
                    ++batch;
                }
            }
            __half const* const queries[1] = {static_cast<__half const*>(p.q) + inputHeadOffset(p, batch, head)};
            copyTokenTileAsync<kTokenMajor>(p, queries, tile * kTile, kTile, min(kTile, p.tokens - tile * kTile),
                ring + stage * layout.ringStageHalves);
        }
        async::commit();
    };
    if (ringStages > 0)
    {
        int64_t const problem = first / tilesPerProblem;
        for (int stage = 0; stage < ringStages - 1; ++stage)
        {
            issueAhead(first, static_cast<int>(problem / p.heads), static_cast<int>(problem % p.heads),
                static_cast<int>(first - problem * tilesPerProblem), stage, stage);
        }
    }
    int stage = 0; // the current item's; the previous item's receives the item stages - 1 ahead
    for (int64_t item = first; item < end; ++item)
    {
        if (ringStages > 0)
        {
            waitRing(ringStages); // before any barrier of this item: the q tile is visible after the next one
        }
        int64_t const problem = item / tilesPerProblem;
        int const tileBegin = static_cast<int>(item - problem * tilesPerProblem) * kTile;
        int const head = static_cast<int>(problem % p.heads);
        int const batch = static_cast<int>(problem / p.heads);
        __half const* __restrict__ qPtr = static_cast<__half const*>(p.q) + inputHeadOffset(p, batch, head);
        __half* __restrict__ outPtr = static_cast<__half*>(p.out) + outputHeadOffset(p, batch, head);
        QtCoefficients const qt = qtCoefficients<kMap>(p, head);
        if (item == first || tileBegin == 0) // a new problem (uniform across the block)
        {
            // The context split with a power-of-two scale per column (numerator columns and the normaliser column
            // d have unrelated magnitudes). Column maxima of |x| by atomicMax on the bit patterns (ordered like the
            // values for x >= 0; the maximum does not depend on the order), over coalesced reads.
            float const* const contextGlobal
                = kFused ? fusedContext : p.context + problem * roundUp4(dk) * contextColumns;
            // ld.global.cg from the workspace: the single launch's merge stored it during the launch
            auto const contextAt
                = [&](int index) { return kFused ? contextGlobal[index] : __ldcg(contextGlobal + index); };
            unsigned int* const columnMaxBits = reinterpret_cast<unsigned int*>(columnScale);
            __syncthreads(); // the previous tile is done with the context split and the column scales
            for (int j = threadIdx.x; j < valueColumns; j += blockDim.x)
            {
                columnMaxBits[j] = 0U;
            }
            __syncthreads();
            for (int index = threadIdx.x; index < dk * contextColumns; index += blockDim.x)
            {
                int const j = index % contextColumns;
                if (j <= d)
                {
                    atomicMax(columnMaxBits + j, __float_as_uint(fabsf(contextAt(index))));
                }
            }
            __syncthreads();
            for (int j = threadIdx.x; j < valueColumns; j += blockDim.x)
            {
                columnScale[j] = splitScale(__uint_as_float(columnMaxBits[j]));
            }
            __syncthreads();
            for (int index = threadIdx.x; index < featureRows * valueColumns; index += blockDim.x)
            {
                int const i = index / valueColumns;
                int const j = index - i * valueColumns;
                float const value = i < dk && j <= d ? contextAt(i * contextColumns + j) * columnScale[j] : 0.0F;
                int const at = i * layout.contextStride + j;
                splitHalf(value, contextHigh + at, contextLow + at);
            }
        }
    {
        int const count = min(kTile, p.tokens - tileBegin);
        __syncthreads(); // the previous tile's output staging has been stored (and the context split is visible)
        auto stageQuery = [&](int n, int c, bool, __half x, __half) {
            int const at = stagedIndex<kTokenMajor>(c, n, layout.queryStride);
            if (kMap == FeatureMap::kRelu)
            {
                queryHigh[at] = __float2half_rn(fmaxf(__half2float(x), 0.0F)); // exact
            }
            else
            {
                queryLow[at] = x;
            }
        };
        if (ringStages > 0)
        {
            // item + stages - 1, into the previous item's stage
            issueAhead(item, batch, head, tileBegin / kTile, ringStages - 1, stage == 0 ? ringStages - 1 : stage - 1);
            visitStagedTile<kTokenMajor, 1>(p, ring + stage * layout.ringStageHalves, kTile, count, stageQuery);
            stage = stage + 1 == ringStages ? 0 : stage + 1;
        }
        else
        {
            __half const* const queries[1] = {qPtr};
            loadTokenTile<__half, kTokenMajor>(p, queries, tileBegin, kTile, count, stageQuery);
        }
        __syncthreads();
        if (kSplitQuery)
        {
            for (int n = threadIdx.x; n < kTile; n += blockDim.x)
            {
                float maximum = -INFINITY;
                float maxAbs = 0.0F;
                for (int c = 0; c < d; ++c)
                {
                    float const x = __half2float(queryLow[stagedIndex<kTokenMajor>(c, n, layout.queryStride)]);
                    maximum = fmaxf(maximum, x);
                    maxAbs = fmaxf(maxAbs, fabsf(x));
                }
                rowMax[n] = maximum;
                // Scaling a token's whole feature row scales numerator and denominator alike; eps is scaled with
                // them in the epilogue.
                float const featureMax
                    = fmaxf(fmaxf(fabsf(qt.alpha) * maxAbs * maxAbs, fabsf(qt.linear) * maxAbs), fabsf(qt.gamma));
                rowScale[n] = kMap == FeatureMap::kSoftmax ? kSplitUnitScale : splitScale(featureMax);
            }
            __syncthreads();
            for (int index = threadIdx.x; index < kTile * d; index += blockDim.x)
            {
                int n;
                int c;
                tileCoordinates<kTokenMajor>(index, d, kTile, n, c);
                bool const valid = n < count;
                int const at = stagedIndex<kTokenMajor>(c, n, layout.queryStride);
                float const x = __half2float(queryLow[at]);
                float const scale = rowScale[n];
                if (kMap == FeatureMap::kSoftmax)
                {
                    splitHalf(valid ? exp2f((x - rowMax[n]) * kLog2e) * scale : 0.0F, queryHigh + at, queryLow + at);
                }
                else
                {
                    splitQtFeatures<kTokenMajor>(
                        x, c, n, d, valid, qt, scale, scale, scale, queryHigh, queryLow, layout.queryStride);
                }
            }
            __syncthreads();
        }

        int const rowBase = warp * 16;
        if (rowBase < count) // uniform per warp: a warp whose 16 tokens are all past the end has nothing to do
        {
            mma::FragmentC acc[kValueTiles];
            zeroFragments(acc);
            for (int step = 0; step < featureRows / 16; ++step)
            {
                int const at = stagedIndex<kTokenMajor>(step * 16, rowBase, layout.queryStride);
                mma::FragmentA high;
                mma::FragmentA low;
                loadFragmentA<!kTokenMajor>(high, queryHigh + at, layout.queryStride);
                if (kSplitQuery)
                {
                    loadFragmentA<!kTokenMajor>(low, queryLow + at, layout.queryStride);
                }
#pragma unroll
                for (int t = 0; t < kValueTiles; ++t)
                {
                    if (t < p.mmaValueTiles)
                    {
                        int const contextAt = step * 16 * layout.contextStride + t * 8;
                        mma::FragmentB contextHighFragment;
                        mma::FragmentB contextLowFragment;
                        loadFragmentB<true>(contextHighFragment, contextHigh + contextAt, layout.contextStride);
                        loadFragmentB<true>(contextLowFragment, contextLow + contextAt, layout.contextStride);
                        if (kSplitQuery)
                        {
                            mmaSplitBoth(acc[t], high, low, contextHighFragment, contextLowFragment);
                        }
                        else
                        {
                            mma::mmaF16(acc[t], high, contextLowFragment);
                            mma::mmaF16(acc[t], high, contextHighFragment);
                        }
                    }
                }
            }

            // Denominators of the lane's two rows live in column d, held by one lane of the quad.
            float denominatorOwn[2] = {0.0F, 0.0F};
#pragma unroll
            for (int t = 0; t < kValueTiles; ++t)
            {
                if (t == denominatorTile)
                {
                    // selects, not a runtime register index (which would move acc to local memory)
                    denominatorOwn[0] = denominatorElement == 0 ? acc[t].x[0] : acc[t].x[1];
                    denominatorOwn[1] = denominatorElement == 0 ? acc[t].x[2] : acc[t].x[3];
                }
            }
            __syncwarp(); // every lane's fragment loads of this warp's rows are done before they are overwritten
#pragma unroll
            for (int half = 0; half < 2; ++half)
            {
                float const denominator = __shfl_sync(0xffffffffU, denominatorOwn[half], denominatorLane);
                int const row = rowBase + mma::cRow(lane, 2 * half);
                float const scale = kMap == FeatureMap::kRelu ? 1.0F : rowScale[row];
                float const inverse = 1.0F / (denominator / columnScale[d] + scale * p.eps);
#pragma unroll
                for (int t = 0; t < kValueTiles; ++t)
                {
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                    {
                        int const column = t * 8 + mma::cCol(lane, 2 * half + e);
                        if (t < p.mmaValueTiles && column < d)
                        {
                            float const value = acc[t].x[2 * half + e] / columnScale[column] * inverse;
                            queryHigh[stagedIndex<kTokenMajor>(column, row, layout.queryStride)]
                                = __float2half_rn(value);
                        }
                    }
                }
            }
        }
        __syncthreads();
        if (p.vectorLoads != 0)
        {
            // 16-byte stores of 8 staged elements along the contiguous axis (rows of the staging are 16-byte aligned)
            int const perLine = (kTokenMajor ? d : kTile) / 8;
            for (int chunk = threadIdx.x; chunk < kTile * d / 8; chunk += blockDim.x)
            {
                int const line = chunk / perLine;
                int const first = (chunk - line * perLine) * 8;
                int const n0 = kTokenMajor ? line : first;
                int const c0 = kTokenMajor ? first : line;
                int64_t const offset
                    = static_cast<int64_t>(tileBegin + n0) * p.outTokenStride + c0 * p.outChannelStride;
                __half const* const staged = queryHigh + stagedIndex<kTokenMajor>(c0, n0, layout.queryStride);
                if (kTokenMajor ? n0 < count : n0 + 8 <= count)
                {
                    *reinterpret_cast<int4*>(outPtr + offset) = *reinterpret_cast<int4 const*>(staged);
                }
                else if (!kTokenMajor)
                {
                    for (int e = 0; n0 + e < count; ++e)
                    {
                        outPtr[offset + e] = staged[e];
                    }
                }
            }
        }
        else
        {
            for (int index = threadIdx.x; index < kTile * d; index += blockDim.x)
            {
                int n;
                int c;
                tileCoordinates<kTokenMajor>(index, d, kTile, n, c);
                if (n < count)
                {
                    outPtr[static_cast<int64_t>(tileBegin + n) * p.outTokenStride + c * p.outChannelStride]
                        = queryHigh[stagedIndex<kTokenMajor>(c, n, layout.queryStride)];
                }
            }
        }
    }
    }
}
#endif // EDGEATTN_MMA_AVAILABLE

//! Persistent output pass on tensor cores: one wave of 4-warp blocks over contiguous ranges of the launch's
//! (problem, token tile) items (the context split once per problem a block touches).
template <FeatureMap kMap, bool kTokenMajor, int kValueTiles>
__global__ void __launch_bounds__(kLinearMmaOutputThreads, 1) linearOutputMmaKernel(
    LinearAttentionParams const p, int64_t items)
{
#if EDGEATTN_MMA_AVAILABLE
    outputTilesMma<kMap, kTokenMajor, kValueTiles>(
        p, blockFirstItem(items, blockIdx.x, gridDim.x), blockFirstItem(items, blockIdx.x + 1, gridDim.x));
#endif
}

//! linearFusedKernel on tensor cores: one block per (batch, head) of one token split, the reduction's warps (at
//! least 4) then the output pass's first 4 warps; the context stays in shared memory (linearFusedShared).
template <FeatureMap kMap, bool kTokenMajor, int kValueTiles>
__global__ void __launch_bounds__(kLinearMmaMaxReduceThreads, kLinearMmaReduceMinBlocks)
    linearFusedMmaKernel(LinearAttentionParams const p)
{
#if EDGEATTN_MMA_AVAILABLE
    int const head = blockIdx.x;
    int const batch = blockIdx.y;
    float* const context = sharedFloats() + p.fusedContextOffsetFloats;
    reduceSplitMma<kMap, kTokenMajor, kValueTiles, true>(p, 0, head, batch, context);
    int64_t const problem = static_cast<int64_t>(batch) * p.heads + head;
    int64_t const tiles = ceilDiv(p.tokens, kLinearMmaOutputTile);
    outputTilesMma<kMap, kTokenMajor, kValueTiles, true>(p, problem * tiles, (problem + 1) * tiles, context);
#endif
}

/*
 * The whole pass in one launch when the heads have several token splits: a persistent grid whose blocks claim work
 * items in order from a queue (claimLinearWorkItem): the reductions first (the last block of each head merges its
 * splits and marks the context ready), then the output chunks, each waiting for its head's context
 * (waitForLinearContext). No ticket memset: the queue, tickets and ready counts live in the library's launch state
 * and are zero again when the launch ends.
 */
template <FeatureMap kMap, bool kTokenMajor, int kValueTiles>
__global__ void __launch_bounds__(kLinearMmaMaxReduceThreads, 1)
    linearSingleLaunchMmaKernel(LinearAttentionParams const p)
{
#if EDGEATTN_MMA_AVAILABLE
    __shared__ unsigned int claimSlot[1];
    LinearWorkItem item;
    while (claimLinearWorkItem(p, kLinearMmaOutputTile, claimSlot, item))
    {
        if (item.reduce)
        {
            reduceSplitMma<kMap, kTokenMajor, kValueTiles>(p, item.split, item.head, item.batch);
        }
        else
        {
            waitForLinearContext(p, item.problem);
            outputTilesMma<kMap, kTokenMajor, kValueTiles>(p, item.firstTile, item.endTile);
        }
    }
#endif
}

template <FeatureMap kMap, bool kTokenMajor, int kValueTiles>
int launchLinearAttentionMmaTiles(LinearAttentionParams params, LinearAttentionPlan const& plan,
    LinearMmaPlan const& mmaPlan, int batch, cudaStream_t stream, char const* function)
{
    size_t const fusedBytes = linearFusedShared(mmaPlan.reduceSharedBytes, mmaPlan.outputSharedBytes,
        params.featureDim, params.headDim, &params.fusedContextOffsetFloats);
    if (params.splits == 1 && mmaPlan.reduceThreads >= kLinearMmaOutputThreads && fusedBytes <= kMaxSharedBytes)
    {
        dim3 const fusedGrid(params.heads, batch);
        linearFusedMmaKernel<kMap, kTokenMajor, kValueTiles>
            <<<fusedGrid, mmaPlan.reduceThreads, fusedBytes, stream>>>(params);
        return checkLaunch(function, "linearFusedMmaKernel");
    }
    // the output tiles read the context twice per head a block touches: its column maxima, then its split
    int const contextReads = 2 * plan.featurePad * plan.contextColumns;
    size_t const singleLaunchShared = std::max(mmaPlan.reduceSharedBytes, mmaPlan.outputSharedBytes);
    int64_t queueItems = 0;
    int status = EDGEATTN_STATUS_SUCCESS;
    if (mmaPlan.reduceThreads >= kLinearMmaOutputThreads
        && prepareLinearSingleLaunch(params, batch, kLinearMmaOutputTile,
            linearOutputTilesPerBlock(contextReads, params.headDim, kLinearMmaOutputTile), singleLaunchShared, stream,
            function, &queueItems, &status))
    {
        int const blocks = persistentBlocks(linearSingleLaunchMmaKernel<kMap, kTokenMajor, kValueTiles>,
            mmaPlan.reduceThreads, singleLaunchShared, queueItems);
        linearSingleLaunchMmaKernel<kMap, kTokenMajor, kValueTiles>
            <<<blocks, mmaPlan.reduceThreads, singleLaunchShared, stream>>>(params);
        return checkLaunch(function, "linearSingleLaunchMmaKernel");
    }
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    status = resetLinearTickets(params, batch, stream, function);
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    dim3 const reduceGrid(params.splits, params.heads, batch);
    linearReduceMmaKernel<kMap, kTokenMajor, kValueTiles>
        <<<reduceGrid, mmaPlan.reduceThreads, mmaPlan.reduceSharedBytes, stream>>>(params);
    status = checkLaunch(function, "linearReduceMmaKernel");
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    int64_t const items
        = static_cast<int64_t>(batch) * params.heads * ceilDiv(params.tokens, kLinearMmaOutputTile);
    int const blocks = persistentBlocks(linearOutputMmaKernel<kMap, kTokenMajor, kValueTiles>,
        kLinearMmaOutputThreads, mmaPlan.outputSharedBytes,
        linearOutputBlocksNeeded(items, contextReads, params.headDim, kLinearMmaOutputTile));
    linearOutputMmaKernel<kMap, kTokenMajor, kValueTiles>
        <<<blocks, kLinearMmaOutputThreads, mmaPlan.outputSharedBytes, stream>>>(params, items);
    return checkLaunch(function, "linearOutputMmaKernel");
}

//! Enqueues the tensor-core passes. The caller has validated shapes, both plans and the workspace.
template <FeatureMap kMap, bool kTokenMajor>
int launchLinearAttentionMma(LinearAttentionParams params, LinearAttentionPlan const& plan,
    LinearMmaPlan const& mmaPlan, int batch, void* workspace, cudaStream_t stream, char const* function)
{
    setLinearAttentionWorkspace(params, plan, batch, workspace);
    params.reduceTokenTile = mmaPlan.reduceTokenTile;
    params.reduceGroups = mmaPlan.tokenGroups;
    params.outputTokenTile = kLinearMmaOutputTile;
    params.mmaFeatureRows = mmaPlan.featureRows;
    params.mmaValueColumns = mmaPlan.valueColumns;
    params.mmaFeatureTiles = mmaPlan.featureTiles;
    params.mmaValueTiles = mmaPlan.valueTiles;
    params.vectorLoads = linearVectorLoads<__half>(params, kTokenMajor) ? 1 : 0;
    params.reduceRingStages = params.vectorLoads != 0 ? mmaPlan.reduceRingStages : 0;
    params.outputRingStages = params.vectorLoads != 0 ? mmaPlan.outputRingStages : 0;
    // value tiles as a template argument, so the accumulators stay in registers
    if (mmaPlan.valueTiles <= 3)
    {
        return launchLinearAttentionMmaTiles<kMap, kTokenMajor, 3>(params, plan, mmaPlan, batch, stream, function);
    }
    if (mmaPlan.valueTiles <= 5)
    {
        return launchLinearAttentionMmaTiles<kMap, kTokenMajor, 5>(params, plan, mmaPlan, batch, stream, function);
    }
    return launchLinearAttentionMmaTiles<kMap, kTokenMajor, 9>(params, plan, mmaPlan, batch, stream, function);
}

#else

template <FeatureMap kMap, bool kTokenMajor>
int launchLinearAttentionMma(LinearAttentionParams, LinearAttentionPlan const&, LinearMmaPlan const&, int, void*,
    cudaStream_t, char const* function)
{
    return noTensorCoreKernels(function);
}

#endif // EDGEATTN_TENSOR_CORES

} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_COMMON_LINEAR_ATTENTION_TENSOR_CORE_CUH
