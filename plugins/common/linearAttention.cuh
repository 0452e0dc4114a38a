/*
 * Linear attention as a reduction pass plus an output pass, shared by EFFATT (EdgeAttnEfficientAttention) and
 * LiteMLA (ReLU and quadratic-Taylor kernels). Per (batch, head):
 *
 *   reduction  G = sum_n phi_k(k_n)^T v_n   (dk x d)    l = sum_n phi_k(k_n)   (dk)        FP32
 *   output     out_n = (phi_q(q_n) G') / (phi_q(q_n) . c + eps)
 *
 * EFFATT (FeatureMap::kSoftmax): phi_k is the token-axis softmax numerator exp(k - max_n k); the max is kept
 * online per feature (running max, rescaled partial sums, max subtracted before every exp). G' = G / l (the
 * normalised context), c = 1 and eps = 0, so out = softmax(q) G' with softmax(q) = exp(q - max) / sum.
 * LiteMLA: phi = relu or [a x^2, b sqrt(4/d) x, g]; G' = G, c = l (the padded-V trick), eps from the attribute.
 *
 * Kernels (one launch: linearFusedKernel for one split, linearSingleLaunchKernel's work queue over the two passes
 * for several; without launch state, a memset of the tickets and these two launches):
 *   1. linearReduceKernel   grid (splits, heads, batch): FP32 partial (max, sum, G) over a token range. The
 *      tokens of a tile are staged in shared memory (phi(k) and v, FP32); each thread owns a 4x4 register tile
 *      of G and several thread groups split the tile's tokens, reduced through shared memory at the end. The last
 *      block of a (batch, head) to finish (a ticket counter) merges the splits (rescaling by exp(m_s - M) for
 *      softmax) into the context [dk rows][d + 1 columns, padded]; column d holds c (finishReduction).
 *   2. linearOutputKernel   grid (token tiles, heads, batch): phi(q) tile transposed in shared memory, context
 *      in shared memory, 4 tokens x 4 channels per thread, output staged for coalesced stores.
 * The split count depends only on the token count and head dims (linearSplits: <= 256 splits of >= 256 tokens,
 * long enough that the partials cost at most 1/8 of the tokens' bytes), so the workspace (sized for splits of 256)
 * is monotone in every dimension. One split per head: one launch (linearFusedKernel), the context in shared memory.
 * The output pass takes enough tiles per block that re-reading a head's context costs at most 1/8 of them
 * (linearOutputBlocksNeeded). Deterministic: the splits are merged in split order whichever block arrives last
 * (the only atomic is the ticket). Shared memory stays below 48 KB (sm_53 limit).
 * Token tiles move in 16-byte loads and stores where the tensors allow it (loadTokenTile / storeTokenTile,
 * linearVectorLoads), else element by element.
 * These scalar kernels are the sm_53 path and the reference; FP16 on sm_80+ runs the tensor-core reduction and
 * output passes of common/linearAttentionTensorCore.cuh around the same combine, with the same workspace.
 */
#ifndef EDGEATTN_COMMON_LINEAR_ATTENTION_CUH
#define EDGEATTN_COMMON_LINEAR_ATTENTION_CUH

#include "common/deviceUtils.cuh"
#include "common/kernelStatus.h"
#include "common/launchState.h"

#include <algorithm>
#include <cmath>

namespace edgeattn
{
namespace kernels
{

enum class FeatureMap : int
{
    kSoftmax = 0,
    kRelu = 1,
    kQuadraticTaylor = 2
};

//! QT coefficients travel in the kernel parameters (no host-to-device copy inside a launch).
constexpr int kMaxQtGroups = 128;
constexpr int kTokensPerSplit = 256;
constexpr int kMaxSplits = 256;

struct LinearAttentionParams
{
    void const* q; // pointers already offset to channel 0 of head 0 of q, k and v
    void const* k;
    void const* v;
    void* out;
    int tokens;
    int heads;
    int headDim;    // d (value width and q/k width)
    int featureDim; // dk: d, or 2d + 1 for the quadratic-Taylor kernel
    // element (b, head h, token n, channel c): base + b * batchStride + (h * headStride + c) * channelStride
    //                                                + n * tokenStride
    int64_t inBatchStride;
    int64_t inTokenStride;
    int64_t inChannelStride;
    int64_t inHeadStride;
    int64_t outBatchStride;
    int64_t outTokenStride;
    int64_t outChannelStride;
    int64_t outHeadStride;
    int splits;
    int tokensPerSplit;
    int reduceTokenTile;
    int reduceGroups;
    int outputTokenTile;
    // tensor-core path only (common/linearAttentionTensorCore.cuh)
    int mmaFeatureRows;
    int mmaValueColumns;
    int mmaFeatureTiles;
    int mmaValueTiles;
    int reduceRingStages; // cp.async ring stages of the token tiles (0: none; needs vectorLoads)
    int outputRingStages;
    int vectorLoads; // 16-byte token-tile loads and stores (linearVectorLoads)
    float eps;
    int qtCount;
    float qtLinearScale; // sqrt(4 / d), set by the launchers (no sqrt call in the kernels' tile loops)
    float qtAlpha[kMaxQtGroups];
    float qtBeta[kMaxQtGroups];
    float qtGamma[kMaxQtGroups];
    float* partials;       // [batch][heads][splits][2 * dk + dk * d]
    float* context;        // [batch][heads][dkPad][contextColumns]
    unsigned int* tickets; // [batch][heads]: reduction blocks done so far (splits > 1; wraps to 0 after the last)
    int fusedContextOffsetFloats; // fused kernels: where the context sits in shared memory (linearFusedShared)
    // single launch (claimLinearWorkItem): the work queue's counter and per-(batch, head) context-ready counts, in
    // the library's launch state (common/launchState.h: zero between launches); null for the other kernels
    unsigned int* queue;
    unsigned int* ready;
    int problems;              // batch x heads
    int outputChunksPerProblem; // output items per (batch, head), each of up to tilesPerOutputChunk token tiles
    int tilesPerOutputChunk;
};

struct LinearAttentionPlan
{
    int featurePad;     // dk rounded up to 4
    int valuePad;       // d rounded up to 4
    int contextColumns; // d + 1 rounded up to 4
    int tilesPerGroup;
    int reduceGroups;
    int reduceThreads;
    int reduceTokenTile;
    size_t reduceSharedBytes;
    int outputTokenTile;
    int outputThreads;
    size_t outputSharedBytes;
    int splits;
    int tokensPerSplit;
};

inline size_t linearReduceSharedFloats(int tokenTile, int featurePad, int valuePad, int groups)
{
    size_t const tile = static_cast<size_t>(tokenTile) * (featurePad + valuePad);
    size_t const reduction = groups > 1 ? static_cast<size_t>(groups) * featurePad * valuePad : 0;
    return std::max(tile, reduction) + 3 * static_cast<size_t>(featurePad);
}

inline size_t linearOutputSharedFloats(int tokenTile, int featurePad, int valuePad, int contextColumns)
{
    return static_cast<size_t>(featurePad) * tokenTile + static_cast<size_t>(featurePad) * contextColumns
        + static_cast<size_t>(tokenTile) * valuePad;
}

/*
 * Token splits of one head, as even as 8-token steps allow (16-byte chunks of a token-contiguous plane start at a
 * split's first token): each of at least kTokensPerSplit tokens, and of enough tokens that its partial (2 dk + dk d
 * FP32, written once, read once by the merge) is at most 1/8 of the bytes of its tokens (q, k and v read, out
 * written, d FP16 channels each), so the partials add at most 12.5 % to the compulsory bytes (FP32 I/O: half
 * that). Fewer than two such lengths: one split (the fused kernel). At most kMaxSplits splits.
 */
inline int linearSplits(int tokens, int headDim, int featureDim, int* tokensPerSplit)
{
    size_t const partialTraffic = 2 * (2 * static_cast<size_t>(featureDim) + static_cast<size_t>(featureDim) * headDim)
        * sizeof(float);
    size_t const tokenBytes = 4 * static_cast<size_t>(headDim) * 2;
    int const forTraffic = static_cast<int>((8 * partialTraffic + tokenBytes - 1) / tokenBytes);
    int const shortest = std::max(kTokensPerSplit, forTraffic);
    int const splits = std::max(1, std::min(kMaxSplits, tokens / shortest));
    int const perSplit = (ceilDiv(std::max(tokens, 1), splits) + 7) / 8 * 8;
    if (tokensPerSplit != nullptr)
    {
        *tokensPerSplit = perSplit;
    }
    return ceilDiv(std::max(tokens, 1), perSplit);
}

//! Shared memory the fused kernels add for the context (finishFusedContext), alignment of its offset included.
inline size_t linearFusedContextBytes(int featureDim, int headDim)
{
    return (static_cast<size_t>(roundUp4(featureDim)) * roundUp4(headDim + 1) + 4) * sizeof(float);
}

//! Launch geometry for one problem within `sharedBudget` bytes per phase; false (with *reason set) if none fits.
inline bool planLinearAttentionWithin(
    int tokens, int headDim, int featureDim, size_t sharedBudget, LinearAttentionPlan* plan, char const** reason)
{
    LinearAttentionPlan result;
    result.featurePad = roundUp4(featureDim);
    result.valuePad = roundUp4(headDim);
    result.contextColumns = roundUp4(headDim + 1);
    result.tilesPerGroup = (result.featurePad / 4) * (result.valuePad / 4);
    if (result.tilesPerGroup > 1024)
    {
        *reason = "the context is too large for one thread block (feature_dim x head_dim > 128 x 128)";
        return false;
    }
    result.reduceGroups = std::max(1, std::min(8, 256 / result.tilesPerGroup));
    result.reduceThreads = (result.reduceGroups * result.tilesPerGroup + 31) / 32 * 32;
    result.reduceTokenTile = 0;
    for (int tile = 64; tile >= 8; tile /= 2)
    {
        size_t const bytes = linearReduceSharedFloats(tile, result.featurePad, result.valuePad, result.reduceGroups)
            * sizeof(float);
        if (bytes <= sharedBudget)
        {
            result.reduceTokenTile = tile;
            result.reduceSharedBytes = bytes;
            break;
        }
    }
    result.outputTokenTile = 0;
    for (int tile = 64; tile >= 8; tile /= 2)
    {
        size_t const bytes
            = linearOutputSharedFloats(tile, result.featurePad, result.valuePad, result.contextColumns) * sizeof(float);
        if (bytes <= sharedBudget)
        {
            result.outputTokenTile = tile;
            result.outputSharedBytes = bytes;
            break;
        }
    }
    if (result.reduceTokenTile == 0 || result.outputTokenTile == 0)
    {
        *reason = "head_dim / feature_dim too large for the 48 KB shared-memory budget";
        return false;
    }
    result.outputThreads = 256;
    result.splits = linearSplits(tokens, headDim, featureDim, &result.tokensPerSplit);
    *plan = result;
    return true;
}

//! Launch geometry for one problem; false (with *reason set) if this build cannot run it. With one split (the fused
//! kernel) the phases leave room for the context in shared memory (linearFusedShared) where they can.
inline bool planLinearAttention(int tokens, int headDim, int featureDim, LinearAttentionPlan* plan, char const** reason)
{
    size_t const context = linearFusedContextBytes(featureDim, headDim);
    return (linearSplits(tokens, headDim, featureDim, nullptr) == 1 && context < kMaxSharedBytes
               && planLinearAttentionWithin(tokens, headDim, featureDim, kMaxSharedBytes - context, plan, reason))
        || planLinearAttentionWithin(tokens, headDim, featureDim, kMaxSharedBytes, plan, reason);
}

//! Workspace: context, partials, then the reduction's tickets, each 256-byte aligned. Monotone in batch, heads,
//! tokens and dims.
inline size_t linearAttentionWorkspaceSize(int batch, int heads, int tokens, int headDim, int featureDim)
{
    if (batch <= 0 || heads <= 0 || tokens <= 0 || headDim <= 0 || featureDim <= 0)
    {
        return 0;
    }
    int const splits = std::min(ceilDiv(tokens, kTokensPerSplit), kMaxSplits); // >= linearSplits'
    size_t const problems = static_cast<size_t>(batch) * heads;
    size_t const contextFloats = problems * roundUp4(featureDim) * roundUp4(headDim + 1);
    size_t const partialFloats
        = problems * splits * (2 * static_cast<size_t>(featureDim) + static_cast<size_t>(featureDim) * headDim);
    return alignUp(contextFloats * sizeof(float)) + alignUp(partialFloats * sizeof(float))
        + alignUp(problems * sizeof(unsigned int));
}

//! The quadratic-Taylor map [alpha x^2, linear x, gamma] of one head.
struct QtCoefficients
{
    float alpha;
    float linear; // beta sqrt(4 / d)
    float gamma;
};

//! The coefficients of `head` (one set for every head when qtCount is 1); all 0 for the other feature maps.
template <FeatureMap kMap>
__device__ __forceinline__ QtCoefficients qtCoefficients(LinearAttentionParams const& p, int head)
{
    QtCoefficients qt = {0.0F, 0.0F, 0.0F};
    if (kMap == FeatureMap::kQuadraticTaylor)
    {
        int const index = p.qtCount == p.heads ? head : 0;
        qt.alpha = p.qtAlpha[index];
        qt.linear = p.qtBeta[index] * p.qtLinearScale;
        qt.gamma = p.qtGamma[index];
    }
    return qt;
}

//! Offset of channel 0 of `head` in batch `batch` of q, k and v, and of the output.
__device__ __forceinline__ int64_t inputHeadOffset(LinearAttentionParams const& p, int batch, int head)
{
    return static_cast<int64_t>(batch) * p.inBatchStride + head * p.inHeadStride * p.inChannelStride;
}

__device__ __forceinline__ int64_t outputHeadOffset(LinearAttentionParams const& p, int batch, int head)
{
    return static_cast<int64_t>(batch) * p.outBatchStride + head * p.outHeadStride * p.outChannelStride;
}

/*
 * Token n and channel c of element `index` of a tokenTile x d tile, enumerated so consecutive threads touch
 * consecutive input addresses: channels fastest for token-major (B, N, C) tensors (kTokenMajor), tokens fastest
 * for channel-planar (B, C, H, W) tensors.
 */
template <bool kTokenMajor>
__device__ __forceinline__ void tileCoordinates(int index, int d, int tokenTile, int& n, int& c)
{
    if (kTokenMajor)
    {
        n = index / d;
        c = index - n * d;
    }
    else
    {
        c = index / tokenTile;
        n = index - c * tokenTile;
    }
}

template <typename T>
struct TokenVector
{
    static constexpr int kElements = 16 / static_cast<int>(sizeof(T)); // elements per 16-byte access
};

//! Chunk `chunk` of a tile cut into 16-byte pieces along the contiguous axis: its first token and channel, and
//! its offset from the head base under (tokenStride, channelStride).
template <bool kTokenMajor, int kVector>
__device__ __forceinline__ int64_t tileChunk(
    int chunk, int d, int tokenTile, int tileBegin, int64_t tokenStride, int64_t channelStride, int& n0, int& c0)
{
    int const perLine = (kTokenMajor ? d : tokenTile) / kVector; // chunks per token row / channel plane
    int const line = chunk / perLine;
    int const first = (chunk - line * perLine) * kVector;
    n0 = kTokenMajor ? line : first;
    c0 = kTokenMajor ? first : line;
    return static_cast<int64_t>(tileBegin + n0) * tokenStride + c0 * channelStride;
}

/*
 * The walk over a token tile that loadTokenTile and storeTokenTile share, block-strided and coalesced across the
 * block: with kWide and p.vectorLoads, chunk(offset, n0, c0) for each 16-byte piece (TokenVector<T>::kElements
 * elements along the contiguous axis, tileChunk), else element(offset, n, c) for each element (tileCoordinates).
 * offset: from the head base under (tokenStride, channelStride).
 */
template <typename T, bool kTokenMajor, bool kWide, typename Element, typename Chunk>
__device__ __forceinline__ void forEachTileAccess(LinearAttentionParams const& p, int tileBegin, int tokenTile,
    int64_t tokenStride, int64_t channelStride, Element const& element, Chunk const& chunk)
{
    constexpr int kVector = TokenVector<T>::kElements;
    int const d = p.headDim;
    if (!kWide || p.vectorLoads == 0)
    {
        for (int index = threadIdx.x; index < tokenTile * d; index += blockDim.x)
        {
            int n;
            int c;
            tileCoordinates<kTokenMajor>(index, d, tokenTile, n, c);
            element(static_cast<int64_t>(tileBegin + n) * tokenStride + c * channelStride, n, c);
        }
        return;
    }
    for (int index = threadIdx.x; index < tokenTile * d / kVector; index += blockDim.x)
    {
        int n0;
        int c0;
        int64_t const offset
            = tileChunk<kTokenMajor, kVector>(index, d, tokenTile, tileBegin, tokenStride, channelStride, n0, c0);
        chunk(offset, n0, c0);
    }
}

/*
 * Reads the elements (token n < tokenTile, channel c < d) of a token tile of `kSources` same-shaped inputs (offsets
 * as LinearAttentionParams' strides from each source's head base) and hands each element to
 * visit(n, c, valid, x[0], x[kSources - 1]); elements of tokens from `count` on are 0 and not valid. With p.vectorLoads
 * every load is 16 bytes (kVector elements along the contiguous axis: channels of a (B, N, C) row, tokens of an NCHW
 * plane; the launcher checked the alignment, linearVectorLoads) unless !kWide, else one element wide. Both are
 * coalesced across the block. Shared by the scalar (T = float or __half) and tensor-core (__half) passes.
 */
template <typename T, bool kTokenMajor, bool kWide = true, int kSources, typename Visit>
__device__ __forceinline__ void loadTokenTile(LinearAttentionParams const& p, T const* const (&sources)[kSources],
    int tileBegin, int tokenTile, int count, Visit const& visit)
{
    constexpr int kVector = TokenVector<T>::kElements;
    T const zero = fromFloat<T>(0.0F);
    auto const element = [&](int64_t offset, int n, int c) {
        bool const valid = n < count;
        visit(n, c, valid, valid ? sources[0][offset] : zero, valid ? sources[kSources - 1][offset] : zero);
    };
    auto const chunk = [&](int64_t offset, int n0, int c0) {
        bool const full = kTokenMajor ? n0 < count : n0 + kVector <= count;
        T x[kSources][kVector];
#pragma unroll
        for (int s = 0; s < kSources; ++s)
        {
            if (full)
            {
                int4 const raw = *reinterpret_cast<int4 const*>(sources[s] + offset);
                memcpy(x[s], &raw, sizeof(raw));
            }
            else
            {
#pragma unroll
                for (int e = 0; e < kVector; ++e)
                {
                    x[s][e] = (kTokenMajor ? n0 : n0 + e) < count ? sources[s][offset + e] : zero;
                }
            }
        }
#pragma unroll
        for (int e = 0; e < kVector; ++e)
        {
            int const n = kTokenMajor ? n0 : n0 + e;
            visit(n, kTokenMajor ? c0 + e : c0, n < count, x[0][e], x[kSources - 1][e]);
        }
    };
    forEachTileAccess<T, kTokenMajor, kWide>(
        p, tileBegin, tokenTile, p.inTokenStride, p.inChannelStride, element, chunk);
}

/*
 * Stores the tokens n < count of a token tile of the output, element (n, c) = staged(n, c) (a T), 16 bytes at a time
 * along the contiguous axis with kWide and p.vectorLoads (a ragged NCHW chunk element-wise), else one element at a
 * time.
 */
template <typename T, bool kTokenMajor, bool kWide, typename Staged>
__device__ __forceinline__ void storeTokenTile(
    LinearAttentionParams const& p, T* outPtr, int tileBegin, int tokenTile, int count, Staged const& staged)
{
    constexpr int kVector = TokenVector<T>::kElements;
    auto const element = [&](int64_t offset, int n, int c) {
        if (n < count)
        {
            outPtr[offset] = staged(n, c);
        }
    };
    auto const chunk = [&](int64_t offset, int n0, int c0) {
        if (kTokenMajor ? n0 < count : n0 + kVector <= count)
        {
            T x[kVector];
#pragma unroll
            for (int e = 0; e < kVector; ++e)
            {
                x[e] = kTokenMajor ? staged(n0, c0 + e) : staged(n0 + e, c0);
            }
            int4 raw;
            memcpy(&raw, x, sizeof(raw));
            *reinterpret_cast<int4*>(outPtr + offset) = raw;
        }
        else if (!kTokenMajor)
        {
            for (int e = 0; n0 + e < count; ++e)
            {
                outPtr[offset + e] = staged(n0 + e, c0);
            }
        }
    };
    forEachTileAccess<T, kTokenMajor, kWide>(
        p, tileBegin, tokenTile, p.outTokenStride, p.outChannelStride, element, chunk);
}

/*
 * Whether the token tiles of T elements can move in 16-byte loads and stores: kElements along the contiguous axis
 * (a (B, N, C) row's channels: head_dim and C multiples of it; an NCHW plane's tokens: H x W a multiple of it) and
 * q, k, v, out 16-byte aligned. Otherwise one element per access (the same results).
 */
template <typename T>
inline bool linearVectorLoads(LinearAttentionParams const& p, bool tokenMajor)
{
    int64_t const vector = TokenVector<T>::kElements;
    auto aligned = [](void const* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; };
    bool const pointers = aligned(p.q) && aligned(p.k) && aligned(p.v) && aligned(p.out);
    bool const strides = tokenMajor
        ? p.headDim % vector == 0 && p.inChannelStride == 1 && p.outChannelStride == 1 && p.inTokenStride % vector == 0
            && p.outTokenStride % vector == 0 && p.inBatchStride % vector == 0 && p.outBatchStride % vector == 0
        : p.inTokenStride == 1 && p.outTokenStride == 1 && p.inChannelStride % vector == 0
            && p.outChannelStride % vector == 0 && p.inBatchStride % vector == 0 && p.outBatchStride % vector == 0;
    return pointers && strides;
}

/*
 * Merges the splits' partials of (batch, head) into its context [dk rows][d + 1 columns, padded]; column d holds c
 * (softmax: the partials rescaled by exp(m_s - M), the context divided by the normaliser once). Splits are added
 * in split order, so the context has the same bits whichever block runs this. `shared`: `sharedFloats` >= 2 dk + 4
 * floats, free; where the splits' softmax weights fit beside (splits x dk more) they are computed once and kept
 * there, else recomputed from the partials per context entry (same bits either way). The partials are read with
 * ld.global.cg: other blocks stored them (and fenced) during this launch.
 */
template <FeatureMap kMap>
__device__ void combineSplits(LinearAttentionParams const& p, int batch, int head, float* shared, int sharedFloats)
{
    int const d = p.headDim;
    int const dk = p.featureDim;
    int const featurePad = roundUp4(dk);
    int const contextColumns = roundUp4(d + 1);
    float* const finalMax = shared;
    float* const finalSum = shared + dk;
    float* const weights = shared + 2 * dk + 4; // [split][dk], past finishReduction's flag
    bool const keepWeights
        = kMap == FeatureMap::kSoftmax && 2 * dk + 4 + static_cast<int64_t>(p.splits) * dk <= sharedFloats;
    int64_t const problem = static_cast<int64_t>(batch) * p.heads + head;
    int64_t const partialStride = 2 * static_cast<int64_t>(dk) + static_cast<int64_t>(dk) * d;
    float const* const partials = p.partials + problem * p.splits * partialStride;
    float* const context = p.context + problem * featurePad * contextColumns;

    for (int i = threadIdx.x; i < dk; i += blockDim.x)
    {
        float maximum = 0.0F;
        if (kMap == FeatureMap::kSoftmax)
        {
            maximum = -INFINITY;
#pragma unroll 1 // (unrolled, the loads in flight cost the reduction kernels spills)
            for (int s = 0; s < p.splits; ++s)
            {
                maximum = fmaxf(maximum, __ldcg(partials + s * partialStride + i));
            }
        }
        float sum = 0.0F;
#pragma unroll 1
        for (int s = 0; s < p.splits; ++s)
        {
            float const weight = kMap == FeatureMap::kSoftmax
                ? exp2f((__ldcg(partials + s * partialStride + i) - maximum) * kLog2e)
                : 1.0F;
            if (keepWeights)
            {
                weights[s * dk + i] = weight;
            }
            sum += __ldcg(partials + s * partialStride + dk + i) * weight;
        }
        finalMax[i] = maximum;
        finalSum[i] = sum;
    }
    __syncthreads();
    for (int index = threadIdx.x; index < featurePad * contextColumns; index += blockDim.x)
    {
        int const i = index / contextColumns;
        int const j = index - i * contextColumns;
        float value = 0.0F;
        if (i < dk && j == d)
        {
            value = kMap == FeatureMap::kSoftmax ? 1.0F : finalSum[i];
        }
        else if (i < dk && j < d)
        {
            float sum = 0.0F;
#pragma unroll 1 // (unrolled, the loads in flight cost the reduction kernels spills)
            for (int s = 0; s < p.splits; ++s)
            {
                float const* const split = partials + s * partialStride;
                float const weight = kMap != FeatureMap::kSoftmax ? 1.0F
                    : keepWeights                               ? weights[s * dk + i]
                                                                : exp2f((__ldcg(split + i) - finalMax[i]) * kLog2e);
                sum = fmaf(__ldcg(split + 2 * dk + i * d + j), weight, sum);
            }
            // softmax over tokens: divide by the normaliser once (it is >= 1 after max subtraction).
            value = kMap == FeatureMap::kSoftmax ? sum / finalSum[i] : sum;
        }
        context[index] = value;
    }
}

/*
 * The end of every reduction block, after it stored its partial: the last block of (batch, head) to arrive merges
 * all splits into the context (combineSplits, in split order: deterministic bit for bit whatever the arrival
 * order), so no combine launch sits between the reduction and the output pass. Every thread fences its partial
 * stores before thread 0 takes the ticket (release), and the last block fences again before it reads the other
 * blocks' partials (acquire), the pattern of the CUDA programming guide's __threadfence() example. `shared`: the
 * block's dynamic shared memory (`sharedFloats` >= 2 dk + 4 floats), no longer read by the caller. With one split
 * the block is the last without a ticket (the launcher then leaves the tickets unset).
 */
template <FeatureMap kMap>
__device__ void finishReduction(LinearAttentionParams const& p, int batch, int head, float* shared, int sharedFloats)
{
    if (p.splits > 1)
    {
        float* const isLast = shared + 2 * p.featureDim; // outside combineSplits' scratch
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0)
        {
            // wraps back to 0 on the last arrival, so the tickets are zero again after the launch
            unsigned int const last = static_cast<unsigned int>(p.splits - 1);
            unsigned int const ticket = atomicInc(p.tickets + static_cast<int64_t>(batch) * p.heads + head, last);
            isLast[0] = ticket == last ? 1.0F : 0.0F;
        }
        __syncthreads();
        if (isLast[0] == 0.0F)
        {
            return; // uniform across the block
        }
        __threadfence();
    }
    else
    {
        __syncthreads(); // the caller's shared memory is free
    }
    combineSplits<kMap>(p, batch, head, shared, sharedFloats);
    if (p.ready != nullptr) // single launch: the problem's output chunks may start (waitForLinearContext)
    {
        __threadfence(); // release: every thread's context stores before the count
        __syncthreads();
        if (threadIdx.x == 0)
        {
            atomicExch(p.ready + static_cast<int64_t>(batch) * p.heads + head,
                static_cast<unsigned int>(p.outputChunksPerProblem));
        }
    }
}

//! One item of the single-launch pass: the reduction of token split `split` of (batch, head), or its output tiles
//! firstTile .. endTile - 1 (numbered over the launch as in outputTiles).
struct LinearWorkItem
{
    bool reduce;
    int batch;
    int head;
    int split;
    int64_t problem;
    int64_t firstTile;
    int64_t endTile;
};

/*
 * The next item of the single-launch pass, claimed by thread 0 from the queue and shared through `slot` (static
 * shared memory); false once the queue is exhausted. Claim order: every reduction item, then every output chunk,
 * both problem-major. The counter wraps to 0 with its last claim (the items plus one failed claim per block), so it
 * needs no reset. Deadlock-free for any grid: an output chunk waits only on reduction items, which come before it
 * in the queue, so blocks that are running hold them, and reduction items wait on nothing.
 */
__device__ __forceinline__ bool claimLinearWorkItem(
    LinearAttentionParams const& p, int tokenTile, unsigned int* slot, LinearWorkItem& item)
{
    unsigned int const reduceItems = static_cast<unsigned int>(p.problems) * p.splits;
    unsigned int const items = reduceItems + static_cast<unsigned int>(p.problems) * p.outputChunksPerProblem;
    unsigned int const lastClaim = items + gridDim.x - 1;
    __syncthreads(); // the previous item is done with shared memory and the slot
    if (threadIdx.x == 0)
    {
        slot[0] = atomicInc(p.queue, lastClaim);
    }
    __syncthreads();
    unsigned int const index = slot[0];
    if (index >= items)
    {
#if defined(EDGEATTN_CUDA_EMULATION)
        // Blocks run one after the other here, so the final claim comes after every other block has ended: the
        // launch state must be zero again (the queue, every ticket and every ready count).
        if (index == lastClaim && threadIdx.x == 0)
        {
            for (int problem = 0; problem < p.problems; ++problem)
            {
                if (p.tickets[problem] != 0U || p.ready[problem] != 0U || p.queue[0] != 0U)
                {
                    ::cuda_emu::detail::deviceFault(cudaErrorLaunchFailure,
                        "the single launch left its counters set (queue %u, problem %d: ticket %u, ready %u)",
                        p.queue[0], problem, p.tickets[problem], p.ready[problem]);
                }
            }
        }
#endif
        return false;
    }
    item.reduce = index < reduceItems;
    unsigned int const problemIndex
        = item.reduce ? index / p.splits : (index - reduceItems) / p.outputChunksPerProblem;
    item.problem = problemIndex;
    item.head = static_cast<int>(problemIndex % p.heads);
    item.batch = static_cast<int>(problemIndex / p.heads);
    item.split = item.reduce ? static_cast<int>(index - problemIndex * p.splits) : 0;
    int64_t const tilesPerProblem = ceilDiv(p.tokens, tokenTile);
    int const chunk = item.reduce ? 0 : static_cast<int>(index - reduceItems - problemIndex * p.outputChunksPerProblem);
    item.firstTile = item.problem * tilesPerProblem + static_cast<int64_t>(chunk) * p.tilesPerOutputChunk;
    item.endTile = min(item.firstTile + p.tilesPerOutputChunk, (item.problem + 1) * tilesPerProblem);
    return true;
}

/*
 * An output chunk of the single launch waits here until the last reduction block of its problem has merged the
 * context (finishReduction sets the problem's count of chunks; each chunk takes one back, so it is zero again after
 * the last): thread 0 polls the count with an atomic (L2), then fences (acquire) before the block reads the
 * context with ld.global.cg.
 */
__device__ __forceinline__ void waitForLinearContext(LinearAttentionParams const& p, int64_t problem)
{
    if (threadIdx.x == 0)
    {
        unsigned int* const ready = p.ready + problem;
#if defined(EDGEATTN_CUDA_EMULATION)
        // blocks run one after the other: a count not set yet would never be (a GPU would spin forever)
        if (*ready == 0U)
        {
            ::cuda_emu::detail::deviceFault(cudaErrorLaunchFailure,
                "an output chunk waits for problem %lld's context, which no earlier block merged", (long long)problem);
        }
#else
        while (atomicAdd(ready, 0U) == 0U)
        {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
            __nanosleep(128);
#endif
        }
#endif
        atomicSub(ready, 1U);
        __threadfence();
    }
    __syncthreads();
}

/*
 * The fused kernels' context stays in the block's shared memory (no partial, no workspace: nothing but q, k, v and
 * out crosses global memory). Their reduction leaves in `context` [roundUp4(dk)][roundUp4(d + 1)], for each feature
 * row i < dk, the token sums of the numerators in columns j < d and the token-axis sum in column d; this turns it
 * into what combineSplits makes of a single split: softmax divides the numerators by the sum once and puts 1 in
 * column d, the other maps keep the sum there; every other entry is zero. The same bits as combineSplits (the one
 * split's weight is exp2(0) = 1 and its sums start from 0).
 */
template <FeatureMap kMap>
__device__ void finishFusedContext(float* context, int dk, int d)
{
    int const featurePad = roundUp4(dk);
    int const contextColumns = roundUp4(d + 1);
    __syncthreads(); // every numerator and sum is stored
    if (kMap == FeatureMap::kSoftmax)
    {
        for (int index = threadIdx.x; index < dk * d; index += blockDim.x)
        {
            int const i = index / d;
            float* const row = context + i * contextColumns;
            int const j = index - i * d;
            row[j] = row[j] / row[d];
        }
        __syncthreads(); // column d is read no more
    }
    for (int index = threadIdx.x; index < featurePad * contextColumns; index += blockDim.x)
    {
        int const i = index / contextColumns;
        int const j = index - i * contextColumns;
        if (i >= dk || j > d)
        {
            context[index] = 0.0F;
        }
        else if (kMap == FeatureMap::kSoftmax && j == d)
        {
            context[index] = 1.0F;
        }
    }
    __syncthreads(); // the context is complete for the output phase
}

/*
 * One reduction block's work: the partial of token split `split` of (batch, head), then finishReduction; kFused
 * (the fused kernel, one split): the context itself in `fusedContext`, shared memory, instead. (A template flag,
 * not a null test: the fused kernel's pointer is not known to be non-null, and both branches cost it spills.)
 */
template <typename T, FeatureMap kMap, bool kTokenMajor, bool kWide, bool kFused = false>
__device__ __forceinline__ void reduceSplit(
    LinearAttentionParams const& p, int split, int head, int batch, float* fusedContext = nullptr)
{
    float* const shared = sharedFloats();
    int const d = p.headDim;
    int const dk = p.featureDim;
    int const featurePad = roundUp4(dk);
    int const valuePad = roundUp4(d);
    int const tokenTile = p.reduceTokenTile;
    int const groups = p.reduceGroups;
    size_t const tileFloats = static_cast<size_t>(tokenTile) * (featurePad + valuePad);
    size_t const reductionFloats = groups > 1 ? static_cast<size_t>(groups) * featurePad * valuePad : 0;
    size_t const regionFloats = tileFloats > reductionFloats ? tileFloats : reductionFloats;
    float* const features = shared;                          // [tokenTile][featurePad]
    float* const values = shared + tokenTile * featurePad;   // [tokenTile][valuePad]
    float* const runningMax = shared + regionFloats;         // [featurePad]
    float* const runningSum = runningMax + featurePad;       // [featurePad]
    float* const correction = runningSum + featurePad;       // [featurePad]

    int const begin = split * p.tokensPerSplit;
    int const end = min(p.tokens, begin + p.tokensPerSplit);

    int64_t const base = inputHeadOffset(p, batch, head);
    T const* __restrict__ kPtr = static_cast<T const*>(p.k) + base;
    T const* __restrict__ vPtr = static_cast<T const*>(p.v) + base;
    QtCoefficients const qt = qtCoefficients<kMap>(p, head);

    for (int index = threadIdx.x; index < tokenTile * (featurePad + valuePad); index += blockDim.x)
    {
        shared[index] = 0.0F; // padded columns stay zero for the whole kernel
    }
    for (int i = threadIdx.x; i < featurePad; i += blockDim.x)
    {
        runningMax[i] = kMap == FeatureMap::kSoftmax ? -INFINITY : 0.0F;
        runningSum[i] = 0.0F;
        correction[i] = 1.0F;
    }

    int const tilesJ = valuePad / 4;
    int const tilesPerGroup = (featurePad / 4) * tilesJ;
    int const myTile = threadIdx.x % tilesPerGroup;
    int const myGroup = threadIdx.x / tilesPerGroup;
    bool const gemmThread = myGroup < groups;
    int const i0 = (myTile / tilesJ) * 4;
    int const j0 = (myTile % tilesJ) * 4;
    float acc[4][4];
    zeroTile4x4(acc);
    __syncthreads();

    for (int tileBegin = begin; tileBegin < end; tileBegin += tokenTile)
    {
        int const count = min(tokenTile, end - tileBegin);
        T const* const keysAndValues[2] = {kPtr, vPtr};
        loadTokenTile<T, kTokenMajor, kWide>(p, keysAndValues, tileBegin, tokenTile, count,
            [&](int n, int c, bool valid, T key, T value) {
            float const kValue = toFloat(key);
            values[n * valuePad + c] = toFloat(value);
            float* const row = features + n * featurePad;
            if (kMap == FeatureMap::kSoftmax)
            {
                row[c] = valid ? kValue : -INFINITY;
            }
            else if (kMap == FeatureMap::kRelu)
            {
                row[c] = fmaxf(kValue, 0.0F);
            }
            else
            {
                row[c] = qt.alpha * kValue * kValue;
                row[d + c] = qt.linear * kValue;
                if (c == 0)
                {
                    row[2 * d] = valid ? qt.gamma : 0.0F;
                }
            }
            });
        __syncthreads();

        if (kMap == FeatureMap::kSoftmax)
        {
            for (int i = threadIdx.x; i < dk; i += blockDim.x)
            {
                float const previous = runningMax[i];
                float tileMax = previous;
                for (int n = 0; n < count; ++n)
                {
                    tileMax = fmaxf(tileMax, features[n * featurePad + i]);
                }
                // previous = -inf on the first tile: correction 0 rescales the (empty) sums.
                correction[i] = tileMax == -INFINITY ? 1.0F : exp2f((previous - tileMax) * kLog2e);
                runningMax[i] = tileMax;
            }
            __syncthreads();
            for (int index = threadIdx.x; index < tokenTile * dk; index += blockDim.x)
            {
                int const n = index / dk;
                int const i = index - n * dk;
                float* const entry = features + n * featurePad + i;
                *entry = n < count ? exp2f((*entry - runningMax[i]) * kLog2e) : 0.0F;
            }
            __syncthreads();
            if (gemmThread)
            {
#pragma unroll
                for (int r = 0; r < 4; ++r)
                {
                    float const scale = i0 + r < dk ? correction[i0 + r] : 1.0F;
#pragma unroll
                    for (int c = 0; c < 4; ++c)
                    {
                        acc[r][c] *= scale;
                    }
                }
            }
            for (int i = threadIdx.x; i < dk; i += blockDim.x)
            {
                float sum = runningSum[i] * correction[i];
                for (int n = 0; n < count; ++n)
                {
                    sum += features[n * featurePad + i];
                }
                runningSum[i] = sum;
            }
        }
        else
        {
            for (int i = threadIdx.x; i < dk; i += blockDim.x)
            {
                float sum = runningSum[i];
                for (int n = 0; n < count; ++n)
                {
                    sum += features[n * featurePad + i];
                }
                runningSum[i] = sum;
            }
        }

        if (gemmThread && myGroup < count)
        {
            // Group g takes tokens g, g + groups, ...: a row stride of groups * pad in the k-major operands.
            int const rows = (count - myGroup + groups - 1) / groups;
            mmaTile4x4(acc, features + myGroup * featurePad, groups * featurePad, i0, values + myGroup * valuePad,
                groups * valuePad, j0, rows);
        }
        __syncthreads();
    }

    // Where each sum goes: the split's partial [max | sum | numerators dk x d] in the workspace, or (fused) the
    // context's rows [numerators | sum] in shared memory.
    int const contextColumns = roundUp4(d + 1);
    int64_t const partialStride = 2 * static_cast<int64_t>(dk) + static_cast<int64_t>(dk) * d;
    float* const partial = kFused
        ? nullptr
        : p.partials + ((static_cast<int64_t>(batch) * p.heads + head) * p.splits + split) * partialStride;
    auto numerator = [&](int i, int j) -> float& {
        return kFused ? fusedContext[i * contextColumns + j] : partial[2 * dk + i * d + j];
    };
    for (int i = threadIdx.x; i < dk; i += blockDim.x)
    {
        if (kFused)
        {
            fusedContext[i * contextColumns + d] = runningSum[i];
        }
        else
        {
            partial[i] = kMap == FeatureMap::kSoftmax ? runningMax[i] : 0.0F;
            partial[dk + i] = runningSum[i];
        }
    }
    if (groups == 1)
    {
        if (gemmThread)
        {
#pragma unroll
            for (int r = 0; r < 4; ++r)
            {
#pragma unroll
                for (int c = 0; c < 4; ++c)
                {
                    if (i0 + r < dk && j0 + c < d)
                    {
                        numerator(i0 + r, j0 + c) = acc[r][c];
                    }
                }
            }
        }
    }
    else
    {
        float* const reduction = shared; // the token tile is no longer read (loop ended with a barrier)
        if (gemmThread)
        {
#pragma unroll
            for (int r = 0; r < 4; ++r)
            {
#pragma unroll
                for (int c = 0; c < 4; ++c)
                {
                    reduction[(myGroup * featurePad + i0 + r) * valuePad + j0 + c] = acc[r][c];
                }
            }
        }
        __syncthreads();
        for (int index = threadIdx.x; index < dk * d; index += blockDim.x)
        {
            int const i = index / d;
            int const j = index - i * d;
            float sum = 0.0F;
            for (int g = 0; g < groups; ++g)
            {
                sum += reduction[(g * featurePad + i) * valuePad + j];
            }
            numerator(i, j) = sum;
        }
    }
    if (kFused)
    {
        finishFusedContext<kMap>(fusedContext, dk, d);
        return;
    }
    finishReduction<kMap>(p, batch, head, shared, static_cast<int>(regionFloats) + 3 * featurePad);
}

template <typename T, FeatureMap kMap, bool kTokenMajor>
__global__ void __launch_bounds__(1024) linearReduceKernel(LinearAttentionParams const p)
{
    reduceSplit<T, kMap, kTokenMajor, true>(p, blockIdx.x, blockIdx.y, blockIdx.z);
}

/*
 * Output tiles `first` .. `end` - 1 of the whole launch (tile t: token tile t % tiles of problem t / tiles, problem =
 * batch * heads + head), in order: the context is staged from the workspace once per problem the range touches, or
 * (kFused) read in place from the fused block's `fusedContext` in shared memory.
 */
template <typename T, FeatureMap kMap, bool kTokenMajor, bool kWide, bool kFused = false>
__device__ __forceinline__ void outputTiles(
    LinearAttentionParams const& p, int64_t first, int64_t end, float const* fusedContext = nullptr)
{
    float* const shared = sharedFloats();
    int const d = p.headDim;
    int const dk = p.featureDim;
    int const featurePad = roundUp4(dk);
    int const valuePad = roundUp4(d);
    int const contextColumns = roundUp4(d + 1);
    int const tokenTile = p.outputTokenTile;
    float* const phiT = shared;                                         // [featurePad][tokenTile]
    float* const stagedContext = phiT + featurePad * tokenTile;         // [featurePad][contextColumns]
    float* const staged = stagedContext + featurePad * contextColumns;  // [tokenTile][valuePad]
    // the fused block reads its context where its reduction left it (shared memory already): no staging
    float const* const context = kFused ? fusedContext : stagedContext;

    int const tilesPerProblem = ceilDiv(p.tokens, tokenTile);

    for (int index = threadIdx.x; index < (featurePad - dk) * tokenTile; index += blockDim.x)
    {
        phiT[dk * tokenTile + index] = 0.0F; // padded feature rows stay zero
    }
    for (int64_t item = first; item < end; ++item)
    {
    int64_t const problem = item / tilesPerProblem;
    int const tileBegin = static_cast<int>(item - problem * tilesPerProblem) * tokenTile;
    int const head = static_cast<int>(problem % p.heads);
    int const batch = static_cast<int>(problem / p.heads);
    int const count = min(tokenTile, p.tokens - tileBegin);
    T const* __restrict__ qPtr = static_cast<T const*>(p.q) + inputHeadOffset(p, batch, head);
    T* __restrict__ outPtr = static_cast<T*>(p.out) + outputHeadOffset(p, batch, head);
    QtCoefficients const qt = qtCoefficients<kMap>(p, head);

    __syncthreads(); // the previous tile's staged output has been stored
    if (!kFused && (item == first || tileBegin == 0)) // a new problem (uniform across the block)
    {
        float const* const contextGlobal = p.context + problem * featurePad * contextColumns;
        for (int index = threadIdx.x; index < featurePad * contextColumns; index += blockDim.x)
        {
            // ld.global.cg: the single launch's merge stored it during the launch
            stagedContext[index] = __ldcg(contextGlobal + index);
        }
    }
    T const* const queries[1] = {qPtr};
    loadTokenTile<T, kTokenMajor, kWide>(p, queries, tileBegin, tokenTile, count,
        [&](int n, int c, bool valid, T query, T) {
        float const x = toFloat(query);
        if (kMap == FeatureMap::kSoftmax)
        {
            phiT[c * tokenTile + n] = x;
        }
        else if (kMap == FeatureMap::kRelu)
        {
            phiT[c * tokenTile + n] = fmaxf(x, 0.0F);
        }
        else
        {
            phiT[c * tokenTile + n] = qt.alpha * x * x;
            phiT[(d + c) * tokenTile + n] = qt.linear * x;
            if (c == 0)
            {
                phiT[2 * d * tokenTile + n] = valid ? qt.gamma : 0.0F;
            }
        }
    });
    __syncthreads();
    if (kMap == FeatureMap::kSoftmax)
    {
        // Feature softmax numerator per token; the denominator comes out of the context's ones column.
        for (int n = threadIdx.x; n < tokenTile; n += blockDim.x)
        {
            float maximum = -INFINITY;
            for (int c = 0; c < d; ++c)
            {
                maximum = fmaxf(maximum, phiT[c * tokenTile + n]);
            }
            for (int c = 0; c < d; ++c)
            {
                float* const entry = phiT + c * tokenTile + n;
                *entry = n < count ? exp2f((*entry - maximum) * kLog2e) : 0.0F;
            }
        }
        __syncthreads();
    }

    int const tilesJ = valuePad / 4;
    int const tiles = (tokenTile / 4) * tilesJ;
    for (int tile = threadIdx.x; tile < tiles; tile += blockDim.x)
    {
        int const n0 = (tile / tilesJ) * 4;
        int const j0 = (tile % tilesJ) * 4;
        float acc[4][4];
        zeroTile4x4(acc);
        float denominator[4] = {0.0F, 0.0F, 0.0F, 0.0F};
#pragma unroll 4
        for (int i = 0; i < dk; ++i)
        {
            float4 const a = *reinterpret_cast<float4 const*>(phiT + i * tokenTile + n0);
            float4 const b = *reinterpret_cast<float4 const*>(context + i * contextColumns + j0);
            float const normaliser = context[i * contextColumns + d];
            float const av[4] = {a.x, a.y, a.z, a.w};
            float const bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int r = 0; r < 4; ++r)
            {
                denominator[r] = fmaf(av[r], normaliser, denominator[r]);
#pragma unroll
                for (int c = 0; c < 4; ++c)
                {
                    acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
                }
            }
        }
#pragma unroll
        for (int r = 0; r < 4; ++r)
        {
            float const inverse = 1.0F / (denominator[r] + p.eps);
#pragma unroll
            for (int c = 0; c < 4; ++c)
            {
                staged[(n0 + r) * valuePad + j0 + c] = acc[r][c] * inverse;
            }
        }
    }
    __syncthreads();
    storeTokenTile<T, kTokenMajor, kWide>(p, outPtr, tileBegin, tokenTile, count,
        [&](int n, int c) { return fromFloat<T>(staged[n * valuePad + c]); });
    }
}

//! The first output tile of block `block` of `blocks` over `items` tiles: contiguous, balanced ranges.
__device__ __forceinline__ int64_t blockFirstItem(int64_t items, int block, int blocks)
{
    return items * block / blocks;
}

/*
 * Persistent output pass: a 1-D grid of at most one wave of blocks (linearOutputBlocks), each taking a contiguous
 * range of the launch's (problem, token tile) items, so a block stages a problem's context once for all its tiles
 * of that problem instead of once per tile.
 */
template <typename T, FeatureMap kMap, bool kTokenMajor>
__global__ void __launch_bounds__(256) linearOutputKernel(LinearAttentionParams const p, int64_t items)
{
    outputTiles<T, kMap, kTokenMajor, true>(
        p, blockFirstItem(items, blockIdx.x, gridDim.x), blockFirstItem(items, blockIdx.x + 1, gridDim.x));
}

/*
 * One block per (batch, head) when the head's tokens are one split (linearSplits: under two of its shortest splits,
 * e.g. N < 544 at head_dim 32, which covers 224's stages 3 and 4 and 384's and 512's stage 4): the reduction,
 * the context and every output tile of the head in one launch. The context stays in shared memory, after both
 * phases' layouts (linearFusedShared), so the launch reads q, k and v once and writes out once, and nothing else.
 */
template <typename T, FeatureMap kMap, bool kTokenMajor>
__global__ void __launch_bounds__(1024) linearFusedKernel(LinearAttentionParams const p)
{
    int const head = blockIdx.x;
    int const batch = blockIdx.y;
    float* const context = sharedFloats() + p.fusedContextOffsetFloats;
    reduceSplit<T, kMap, kTokenMajor, false, true>(p, 0, head, batch, context);
    int64_t const problem = static_cast<int64_t>(batch) * p.heads + head;
    int64_t const tiles = ceilDiv(p.tokens, p.outputTokenTile);
    // element-wise loads and stores (kWide false): the 16-byte ones cost this 1024-thread bound (64 registers per
    // thread) spills
    outputTiles<T, kMap, kTokenMajor, false, true>(p, problem * tiles, (problem + 1) * tiles, context);
}

//! Shared memory of a fused kernel whose phases need `reduceBytes` and `outputBytes`: the larger of the two, then
//! the context (roundUp4(dk) x roundUp4(d + 1) floats) at `*contextOffsetFloats`.
inline size_t linearFusedShared(
    size_t reduceBytes, size_t outputBytes, int featureDim, int headDim, int* contextOffsetFloats)
{
    size_t const phases = (std::max(reduceBytes, outputBytes) + 4 * sizeof(float) - 1) / (4 * sizeof(float)) * 4;
    *contextOffsetFloats = static_cast<int>(phases);
    return (phases + static_cast<size_t>(roundUp4(featureDim)) * roundUp4(headDim + 1)) * sizeof(float);
}

//! The workspace (the context, then the per-split partials), the token splits of `plan` and the QT map's linear
//! scale, shared by both paths.
inline void setLinearAttentionWorkspace(
    LinearAttentionParams& params, LinearAttentionPlan const& plan, int batch, void* workspace)
{
    size_t const contextBytes = alignUp(static_cast<size_t>(batch) * params.heads * plan.featurePad
        * plan.contextColumns * sizeof(float));
    size_t const partialBytes = alignUp(static_cast<size_t>(batch) * params.heads * plan.splits
        * (2 * static_cast<size_t>(params.featureDim) + static_cast<size_t>(params.featureDim) * params.headDim)
        * sizeof(float));
    params.context = static_cast<float*>(workspace);
    params.partials = reinterpret_cast<float*>(static_cast<char*>(workspace) + contextBytes);
    params.tickets = reinterpret_cast<unsigned int*>(static_cast<char*>(workspace) + contextBytes + partialBytes);
    params.fusedContextOffsetFloats = 0;
    params.queue = nullptr;
    params.ready = nullptr;
    params.problems = batch * params.heads;
    params.outputChunksPerProblem = 0;
    params.tilesPerOutputChunk = 0;
    params.splits = plan.splits;
    params.tokensPerSplit = plan.tokensPerSplit;
    params.qtLinearScale = std::sqrt(4.0F / static_cast<float>(params.headDim)); // IEEE sqrt, as sqrtf on the device
    params.vectorLoads = 0;
    params.reduceRingStages = 0;
    params.outputRingStages = 0;
}

//! Zeroes the reduction's tickets (the workspace holds garbage between enqueues) when it has several splits: a
//! memset node on the stream, capturable in a CUDA graph like the kernels.
inline int resetLinearTickets(LinearAttentionParams const& params, int batch, cudaStream_t stream, char const* function)
{
    if (params.splits <= 1)
    {
        return EDGEATTN_STATUS_SUCCESS;
    }
    cudaError_t const error
        = cudaMemsetAsync(params.tickets, 0, static_cast<size_t>(batch) * params.heads * sizeof(unsigned int), stream);
    if (error != cudaSuccess)
    {
        cudaGetLastError();
        return fail(EDGEATTN_STATUS_CUDA_ERROR, function, "cudaMemsetAsync of the reduction tickets failed: %s",
            cudaGetErrorString(error));
    }
    return EDGEATTN_STATUS_SUCCESS;
}

/*
 * Blocks the persistent output pass needs at most for `items` token tiles of `tokenTile` tokens: each block reads
 * the context of every head it touches (`contextFloatsRead` FP32 reads per head), so a block takes at least enough
 * tiles that this costs at most 1/8 of the bytes its tiles move (q read, out written, d FP16 channels). With few
 * tiles (small maps at small batch) the pass runs on fewer, longer blocks; with many, one wave decides.
 */
inline int linearOutputTilesPerBlock(int contextFloatsRead, int headDim, int tokenTile)
{
    size_t const tileBytes = 2 * static_cast<size_t>(tokenTile) * headDim * 2;
    return static_cast<int>(
        std::max<size_t>(1, (8 * sizeof(float) * contextFloatsRead + tileBytes - 1) / tileBytes));
}

inline int64_t linearOutputBlocksNeeded(int64_t items, int contextFloatsRead, int headDim, int tokenTile)
{
    int64_t const minItems = linearOutputTilesPerBlock(contextFloatsRead, headDim, tokenTile);
    return (items + minItems - 1) / minItems;
}

/*
 * Blocks of a persistent pass of `kernel` over `items` work items: one wave (the blocks of `threads` threads and
 * `sharedBytes` of dynamic shared memory that are resident on the device at once, by the occupancy calculator), at
 * most one block per item. A failed query counts one block per multiprocessor (and 1024 multiprocessors without a
 * device: the launch then reports the real error).
 */
template <typename Kernel>
int persistentBlocks(Kernel* kernel, int threads, size_t sharedBytes, int64_t items)
{
    int device = 0;
    int multiprocessors = 0;
    int perMultiprocessor = 0;
    if (cudaGetDevice(&device) != cudaSuccess
        || cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) != cudaSuccess
        || multiprocessors <= 0)
    {
        cudaGetLastError();
        multiprocessors = 1024;
    }
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perMultiprocessor, kernel, threads, sharedBytes)
            != cudaSuccess
        || perMultiprocessor <= 0)
    {
        cudaGetLastError();
        perMultiprocessor = 1;
    }
    int64_t const wave = static_cast<int64_t>(multiprocessors) * perMultiprocessor;
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(items, wave)));
}

//! Block size of the scalar single launch: the output pass's, and the reduction's up to head_dim 64.
constexpr int kLinearSingleLaunchThreads = 256;

/*
 * The scalar path's single launch (several splits, the reduction's block within kLinearSingleLaunchThreads): the
 * work queue of linearSingleLaunchMmaKernel (claimLinearWorkItem, waitForLinearContext) over reduceSplit and
 * outputTiles.
 */
template <typename T, FeatureMap kMap, bool kTokenMajor>
__global__ void __launch_bounds__(kLinearSingleLaunchThreads, 1) linearSingleLaunchKernel(LinearAttentionParams const p)
{
    __shared__ unsigned int claimSlot[1];
    LinearWorkItem item;
    while (claimLinearWorkItem(p, p.outputTokenTile, claimSlot, item))
    {
        if (item.reduce)
        {
            reduceSplit<T, kMap, kTokenMajor, true>(p, item.split, item.head, item.batch);
        }
        else
        {
            waitForLinearContext(p, item.problem);
            outputTiles<T, kMap, kTokenMajor, true>(p, item.firstTile, item.endTile);
        }
    }
}

/*
 * Sets `params` up for a single launch over `batch` x heads problems of token tiles of `tokenTile` tokens, output
 * chunks of `tilesPerChunk` tiles, `sharedBytes` of dynamic shared memory: the queue, tickets and ready counts in the
 * stream's launch state. False (params unchanged, *status success) where it does not apply (one split, a queue too
 * long, no room for the claim slot) or the stream has no state now (being captured): the caller's
 * memset-and-two-kernels path; *status is an error only if the state's query failed.
 */
inline bool prepareLinearSingleLaunch(LinearAttentionParams& params, int batch, int tokenTile, int tilesPerChunk,
    size_t sharedBytes, cudaStream_t stream, char const* function, int64_t* queueItems, int* status)
{
    *status = EDGEATTN_STATUS_SUCCESS;
    int64_t const problems = static_cast<int64_t>(batch) * params.heads;
    int64_t const chunks = (ceilDiv(params.tokens, tokenTile) + tilesPerChunk - 1) / tilesPerChunk;
    *queueItems = problems * (params.splits + chunks);
    // + the kernels' claim slot: static shared memory, 16 bytes as ptxas places it
    if (params.splits <= 1 || *queueItems >= (int64_t{1} << 30) || sharedBytes + 16 > kMaxSharedBytes)
    {
        return false;
    }
    unsigned int* state = nullptr;
    *status = launchState(stream, 1 + 2 * static_cast<size_t>(problems), &state, function);
    if (*status != EDGEATTN_STATUS_SUCCESS || state == nullptr)
    {
        return false;
    }
    params.queue = state;
    params.tickets = state + 1;
    params.ready = state + 1 + problems;
    params.outputChunksPerProblem = static_cast<int>(chunks);
    params.tilesPerOutputChunk = tilesPerChunk;
    return true;
}

//! One launch (linearFusedKernel) when every head is one split and its shared memory fits; with several splits one
//! launch of the work queue (linearSingleLaunchKernel) where the stream has launch state and the blocks fit, else
//! the tickets' memset, the reduction and the persistent output pass (also for one split that does not fit the
//! fused kernel, without the memset). The caller has validated shapes, the plan and the workspace.
template <typename T, FeatureMap kMap, bool kTokenMajor>
int launchLinearAttention(LinearAttentionParams params, LinearAttentionPlan const& plan, int batch, void* workspace,
    cudaStream_t stream, char const* function)
{
    setLinearAttentionWorkspace(params, plan, batch, workspace);
    params.reduceTokenTile = plan.reduceTokenTile;
    params.reduceGroups = plan.reduceGroups;
    params.outputTokenTile = plan.outputTokenTile;
    params.vectorLoads = linearVectorLoads<T>(params, kTokenMajor) ? 1 : 0;

    size_t const fusedBytes = linearFusedShared(plan.reduceSharedBytes, plan.outputSharedBytes, params.featureDim,
        params.headDim, &params.fusedContextOffsetFloats);
    if (plan.splits == 1 && fusedBytes <= kMaxSharedBytes)
    {
        dim3 const fusedGrid(params.heads, batch);
        linearFusedKernel<T, kMap, kTokenMajor><<<fusedGrid, plan.reduceThreads, fusedBytes, stream>>>(params);
        return checkLaunch(function, "linearFusedKernel");
    }
    size_t const singleLaunchShared = std::max(plan.reduceSharedBytes, plan.outputSharedBytes);
    int64_t queueItems = 0;
    int status = EDGEATTN_STATUS_SUCCESS;
    if (plan.reduceThreads <= kLinearSingleLaunchThreads && plan.outputThreads == kLinearSingleLaunchThreads
        && prepareLinearSingleLaunch(params, batch, plan.outputTokenTile,
            linearOutputTilesPerBlock(plan.featurePad * plan.contextColumns, params.headDim, plan.outputTokenTile),
            singleLaunchShared, stream, function, &queueItems, &status))
    {
        int const blocks = persistentBlocks(linearSingleLaunchKernel<T, kMap, kTokenMajor>,
            kLinearSingleLaunchThreads, singleLaunchShared, queueItems);
        linearSingleLaunchKernel<T, kMap, kTokenMajor>
            <<<blocks, kLinearSingleLaunchThreads, singleLaunchShared, stream>>>(params);
        return checkLaunch(function, "linearSingleLaunchKernel");
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
    dim3 const reduceGrid(plan.splits, params.heads, batch);
    linearReduceKernel<T, kMap, kTokenMajor>
        <<<reduceGrid, plan.reduceThreads, plan.reduceSharedBytes, stream>>>(params);
    status = checkLaunch(function, "linearReduceKernel");
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    int64_t const items = static_cast<int64_t>(batch) * params.heads * ceilDiv(params.tokens, plan.outputTokenTile);
    int const blocks = persistentBlocks(linearOutputKernel<T, kMap, kTokenMajor>, plan.outputThreads,
        plan.outputSharedBytes,
        linearOutputBlocksNeeded(items, plan.featurePad * plan.contextColumns, params.headDim, plan.outputTokenTile));
    linearOutputKernel<T, kMap, kTokenMajor>
        <<<blocks, plan.outputThreads, plan.outputSharedBytes, stream>>>(params, items);
    return checkLaunch(function, "linearOutputKernel");
}

} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_COMMON_LINEAR_ATTENTION_CUH
