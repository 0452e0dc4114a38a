/*
 * EdgeAttnBlockifyAttention kernel: softmax attention inside square windows, plus the per-window LePE.
 *
 * One thread block per (window, head, batch). Each thread owns one query row of the window: its q (pre-scaled
 * by scale * log2e) and its FP32 output accumulator live in registers, and the block streams the window's keys
 * and values through shared memory in tiles of kKeyTile rows (FP32). Every thread reads the same key row at a
 * time, so shared-memory reads are broadcasts. The softmax is online (running max, running sum; the max is
 * subtracted before every exp). Windows of any size work (queries are processed in chunks of blockDim.x), and
 * shared memory stays below 48 KB for head_dim <= 128, so the kernel runs on sm_53 unchanged.
 *
 * Padding: windows tile the map padded up to multiples of window_size. Padded keys hold zeros: with "zeros" they
 * take part in the softmax (score 0, value 0); with "masked" they are skipped. Padded query rows are not
 * computed (they are cropped from the output). The LePE reads v from global memory (L1/L2-cached): a 3x3
 * depthwise conv with zero padding at the window border and zeros at padded positions.
 */
#include "common/deviceUtils.cuh"
#include "common/kernelStatus.h"

#include <algorithm>
#include <cmath>

namespace edgeattn
{
namespace kernels
{
namespace
{

struct BlockifyParams
{
    void const* q;
    void const* k;
    void const* v;
    void const* lepeWeight; // (C, 1, 3, 3) or null
    void const* lepeBias;   // (C) or null
    void* out;
    int height;
    int width;
    int channels;
    int headDim;
    int windowSize;
    int windowsX; // windows per row of the padded map
    int padding;
    float scaleLog2; // softmax scale * log2(e)
};

template <int kMaxHeadDim>
struct BlockifyConfig
{
    // Key rows staged per tile: keys + values take 2 * kKeyTile * kMaxHeadDim * 4 bytes (32 KB at most).
    static constexpr int kKeyTile = kMaxHeadDim <= 64 ? 64 : 32;
};

/*
 * kMaxHeadDim: compile-time register budget; kExact: head_dim == kMaxHeadDim, so loops need no bound checks.
 */
template <typename T, int kMaxHeadDim, bool kExact>
__global__ void __launch_bounds__(256) blockifyAttentionKernel(BlockifyParams const p)
{
    using Config = BlockifyConfig<kMaxHeadDim>;
    constexpr int kKeyTile = Config::kKeyTile;

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
        float acc[kMaxHeadDim];
#pragma unroll
        for (int c = 0; c < kMaxHeadDim; ++c)
        {
            qReg[c] = 0.0F;
            acc[c] = 0.0F;
            if (active && (kExact || c < d))
            {
                qReg[c] = loadFloat(qPtr, queryToken * p.channels + c) * p.scaleLog2;
            }
        }
        float runningMax = -INFINITY; // in log2 units
        float runningSum = 0.0F;

        for (int keyBase = 0; keyBase < windowTokens; keyBase += kKeyTile)
        {
            int const keyCount = min(kKeyTile, windowTokens - keyBase);
            __syncthreads(); // the previous tile is no longer read
            for (int index = threadIdx.x; index < keyCount * d; index += blockDim.x)
            {
                int const j = index / d;
                int const c = index - j * d;
                int const key = keyBase + j;
                int const ky = y0 + key / ws;
                int const kx = x0 + key % ws;
                bool const inside = ky < p.height && kx < p.width;
                int64_t const offset = (static_cast<int64_t>(ky) * p.width + kx) * p.channels + c;
                keys[j * d + c] = inside ? loadFloat(kPtr, offset) : 0.0F;
                values[j * d + c] = inside ? loadFloat(vPtr, offset) : 0.0F;
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
                    float const* keyRow = keys + j * d;
                    float score = 0.0F;
#pragma unroll
                    for (int c = 0; c < kMaxHeadDim; ++c)
                    {
                        if (kExact || c < d)
                        {
                            score = fmaf(qReg[c], keyRow[c], score);
                        }
                    }
                    if (score > runningMax)
                    {
                        // exp2(-inf) = 0 on the first key: the empty accumulator stays empty.
                        float const correction = exp2f(runningMax - score);
                        runningSum *= correction;
#pragma unroll
                        for (int c = 0; c < kMaxHeadDim; ++c)
                        {
                            acc[c] *= correction;
                        }
                        runningMax = score;
                    }
                    float const weight = exp2f(score - runningMax);
                    runningSum += weight;
                    float const* valueRow = values + j * d;
#pragma unroll
                    for (int c = 0; c < kMaxHeadDim; ++c)
                    {
                        if (kExact || c < d)
                        {
                            acc[c] = fmaf(weight, valueRow[c], acc[c]);
                        }
                    }
                }
            }
        }

        if (active)
        {
            // Every window holds at least one real key (its top-left token), so runningSum >= 1.
            float const inverseSum = 1.0F / runningSum;
#pragma unroll
            for (int c = 0; c < kMaxHeadDim; ++c)
            {
                acc[c] *= inverseSum;
            }
            if (p.lepeWeight != nullptr)
            {
                T const* __restrict__ weight = static_cast<T const*>(p.lepeWeight) + channelOffset * 9;
                T const* __restrict__ bias = static_cast<T const*>(p.lepeBias) + channelOffset;
#pragma unroll
                for (int c = 0; c < kMaxHeadDim; ++c)
                {
                    if (kExact || c < d)
                    {
                        acc[c] += loadFloat(bias, c);
                    }
                }
                for (int dy = -1; dy <= 1; ++dy)
                {
                    int const ny = qy + dy;
                    // Zero padding at the window border and at padded (outside-the-map) positions.
                    if (ny < y0 || ny >= y0 + ws || ny >= p.height)
                    {
                        continue;
                    }
                    for (int dx = -1; dx <= 1; ++dx)
                    {
                        int const nx = qx + dx;
                        if (nx < x0 || nx >= x0 + ws || nx >= p.width)
                        {
                            continue;
                        }
                        int const tap = (dy + 1) * 3 + (dx + 1);
                        int64_t const neighbour = (static_cast<int64_t>(ny) * p.width + nx) * p.channels;
#pragma unroll
                        for (int c = 0; c < kMaxHeadDim; ++c)
                        {
                            if (kExact || c < d)
                            {
                                acc[c] = fmaf(loadFloat(weight, c * 9 + tap), loadFloat(vPtr, neighbour + c), acc[c]);
                            }
                        }
                    }
                }
            }
#pragma unroll
            for (int c = 0; c < kMaxHeadDim; ++c)
            {
                if (kExact || c < d)
                {
                    outPtr[queryToken * p.channels + c] = fromFloat<T>(acc[c]);
                }
            }
        }
    }
}

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

    int64_t const windowTokens = static_cast<int64_t>(window_size) * window_size;
    int const threads = static_cast<int>(std::min<int64_t>(256, (windowTokens + 31) / 32 * 32));
    dim3 const grid(static_cast<unsigned>(windows), static_cast<unsigned>(num_heads), static_cast<unsigned>(batch));
    cudaStream_t const cudaStream = static_cast<cudaStream_t>(stream);
    if (dtype == EDGEATTN_DTYPE_FLOAT16)
    {
        dispatchBlockify<__half>(params, grid, threads, cudaStream);
    }
    else
    {
        dispatchBlockify<float>(params, grid, threads, cudaStream);
    }
    EDGEATTN_CHECK_LAUNCH("blockifyAttentionKernel");
    return succeed();
}
