/*
 * EdgeAttnEfficientAttention (EFFATT, the global head of ELFATT): q_hat = softmax over each token's head_dim
 * features, k_hat = softmax over tokens per feature, out = q_hat (k_hat^T v). Runs the shared linear-attention
 * passes (common/linearAttention.cuh) with the online token-axis softmax; tensors are (B, N, C). FP16 on sm_80+
 * runs the tensor-core passes (common/linearAttentionTensorCore.cuh); FP32, and every arch below sm_80, the scalar
 * ones (the reference).
 */
#include "common/kernelPath.h"
#include "common/linearAttention.cuh"
#include "common/linearAttentionTensorCore.cuh"

using namespace edgeattn::kernels;

extern "C" EDGEATTN_API size_t edgeattn_efficient_attention_workspace_size(
    int batch, int tokens, int channels, int num_heads)
{
    if (num_heads <= 0 || channels <= 0 || channels % num_heads != 0)
    {
        return 0;
    }
    int const headDim = channels / num_heads;
    return linearAttentionWorkspaceSize(batch, num_heads, tokens, headDim, headDim);
}

extern "C" EDGEATTN_API int edgeattn_efficient_attention(const void* q, const void* k, const void* v, void* out,
    int batch, int tokens, int channels, int num_heads, int dtype, void* workspace, size_t workspace_bytes,
    void* stream)
{
    EDGEATTN_CHECK_ARG(isValidDtype(dtype), EDGEATTN_STATUS_INVALID_ARGUMENT, "dtype %d is not float32 (0) or float16 (1)", dtype);
    EDGEATTN_CHECK_ARG(batch >= 0 && tokens >= 0 && channels > 0, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "need batch >= 0, tokens >= 0, channels > 0 (got %d, %d, %d)", batch, tokens, channels);
    EDGEATTN_CHECK_ARG(num_heads > 0 && channels % num_heads == 0, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "channels (%d) must be a positive multiple of num_heads (%d)", channels, num_heads);
    EDGEATTN_CHECK_ARG(num_heads <= kMaxGridYZ && batch <= kMaxGridYZ, EDGEATTN_STATUS_UNSUPPORTED,
        "num_heads (%d) and batch (%d) must be <= %d", num_heads, batch, kMaxGridYZ);
    if (batch == 0 || tokens == 0)
    {
        return succeed();
    }
    EDGEATTN_CHECK_ARG(q != nullptr && k != nullptr && v != nullptr && out != nullptr,
        EDGEATTN_STATUS_INVALID_ARGUMENT, "q, k, v and out must be device pointers");
    size_t const elementBytes = dtypeSize(dtype);
    EDGEATTN_CHECK_ARG(isAligned(q, elementBytes) && isAligned(k, elementBytes) && isAligned(v, elementBytes)
            && isAligned(out, elementBytes),
        EDGEATTN_STATUS_INVALID_ARGUMENT, "q, k, v and out must be aligned to %zu bytes", elementBytes);
    int const headDim = channels / num_heads;
    LinearAttentionPlan plan;
    char const* reason = "";
    EDGEATTN_CHECK_ARG(planLinearAttention(tokens, headDim, headDim, &plan, &reason), EDGEATTN_STATUS_UNSUPPORTED,
        "head_dim %d: %s", headDim, reason);
    size_t const needed = linearAttentionWorkspaceSize(batch, num_heads, tokens, headDim, headDim);
    EDGEATTN_CHECK_ARG(workspace_bytes >= needed && workspace != nullptr, EDGEATTN_STATUS_WORKSPACE_TOO_SMALL,
        "workspace of %zu bytes at %p; need %zu (edgeattn_efficient_attention_workspace_size)", workspace_bytes,
        workspace, needed);
    EDGEATTN_CHECK_ARG(isAligned(workspace, kWorkspaceAlignment), EDGEATTN_STATUS_INVALID_ARGUMENT,
        "workspace %p is not %zu-byte aligned", workspace, kWorkspaceAlignment);

    LinearAttentionParams params;
    params.q = q;
    params.k = k;
    params.v = v;
    params.out = out;
    params.tokens = tokens;
    params.heads = num_heads;
    params.headDim = headDim;
    params.featureDim = headDim;
    params.inBatchStride = static_cast<int64_t>(tokens) * channels;
    params.inTokenStride = channels;
    params.inChannelStride = 1;
    params.inHeadStride = headDim;
    params.outBatchStride = params.inBatchStride;
    params.outTokenStride = channels;
    params.outChannelStride = 1;
    params.outHeadStride = headDim;
    params.eps = 0.0F; // the denominator is the feature-softmax sum, >= 1 after max subtraction
    params.qtCount = 0;

    cudaStream_t const cudaStream = static_cast<cudaStream_t>(stream);
    // FP16 only: FP32 I/O stays on the scalar passes, which are already memory-bound on CUDA cores
    // (plugins/README.md, "Tensor cores").
    LinearMmaPlan mmaPlan;
    bool const hasTensorCoreKernel = EDGEATTN_TENSOR_CORES && dtype == EDGEATTN_DTYPE_FLOAT16
        && planLinearAttentionMma(tokens, headDim, headDim, true, FeatureMap::kSoftmax, &mmaPlan);
    return launchOnKernelPath(
        __func__, KernelCall{EDGEATTN_OP_EFFICIENT_ATTENTION, batch}, hasTensorCoreKernel,
        [&](char const* function) {
            return launchLinearAttentionMma<FeatureMap::kSoftmax, true>(
                params, plan, mmaPlan, batch, workspace, cudaStream, function);
        },
        [&](char const* function) {
            return dtype == EDGEATTN_DTYPE_FLOAT16
                ? launchLinearAttention<__half, FeatureMap::kSoftmax, true>(
                    params, plan, batch, workspace, cudaStream, function)
                : launchLinearAttention<float, FeatureMap::kSoftmax, true>(
                    params, plan, batch, workspace, cudaStream, function);
        });
}
