/*
 * EdgeAttnLiteMLA: EfficientViT's LiteMLA linear attention on NCHW qkv, with the ReLU kernel or QT-ViT's
 * compact quadratic Taylor kernel phi(x) = [a x^2, b sqrt(4/d) x, g]. Runs the shared linear-attention passes
 * (common/linearAttention.cuh): feature maps, both reductions and the division num / (den + eps) are FP32,
 * so eps (1e-15 by default) is never rounded to zero in half precision.
 *
 * Layout: G = channels_in / (3 * head_dim) groups, each contiguous as [q | k | v] (head_dim channels each);
 * a channel is an H*W plane, so loads and stores walk the token axis (stride 1). FP16 on sm_80+ runs the
 * tensor-core passes (common/linearAttentionTensorCore.cuh); FP32, and every arch below sm_80, the scalar ones.
 */
#include "common/kernelPath.h"
#include "common/linearAttention.cuh"
#include "common/linearAttentionTensorCore.cuh"

using namespace edgeattn::kernels;

namespace
{

int featureDimFor(int kernel, int headDim)
{
    return kernel == EDGEATTN_LITE_MLA_QUADRATIC_TAYLOR ? 2 * headDim + 1 : headDim;
}

} // namespace

extern "C" EDGEATTN_API size_t edgeattn_lite_mla_workspace_size(
    int batch, int channels_in, int height, int width, int head_dim, int kernel)
{
    if (head_dim <= 0 || channels_in <= 0 || channels_in % (3 * head_dim) != 0 || height <= 0 || width <= 0
        || (kernel != EDGEATTN_LITE_MLA_RELU && kernel != EDGEATTN_LITE_MLA_QUADRATIC_TAYLOR))
    {
        return 0;
    }
    int64_t const tokens = static_cast<int64_t>(height) * width;
    if (tokens > 2147483647LL)
    {
        return 0;
    }
    int const groups = channels_in / (3 * head_dim);
    return linearAttentionWorkspaceSize(batch, groups, static_cast<int>(tokens), head_dim, featureDimFor(kernel, head_dim));
}

extern "C" EDGEATTN_API int edgeattn_lite_mla(const void* qkv, void* out, int batch, int channels_in, int height,
    int width, int head_dim, int kernel, float eps, const float* qt_alpha, const float* qt_beta,
    const float* qt_gamma, int qt_count, int dtype, void* workspace, size_t workspace_bytes, void* stream)
{
    EDGEATTN_CHECK_ARG(isValidDtype(dtype), EDGEATTN_STATUS_INVALID_ARGUMENT, "dtype %d is not float32 (0) or float16 (1)", dtype);
    EDGEATTN_CHECK_ARG(kernel == EDGEATTN_LITE_MLA_RELU || kernel == EDGEATTN_LITE_MLA_QUADRATIC_TAYLOR,
        EDGEATTN_STATUS_INVALID_ARGUMENT, "kernel %d is not relu (0) or quadratic_taylor (1)", kernel);
    EDGEATTN_CHECK_ARG(batch >= 0 && height > 0 && width > 0, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "need batch >= 0 and positive height, width (got %d, %d, %d)", batch, height, width);
    EDGEATTN_CHECK_ARG(head_dim > 0 && channels_in > 0 && channels_in % (3 * head_dim) == 0,
        EDGEATTN_STATUS_INVALID_ARGUMENT, "qkv channels (%d) must be a positive multiple of 3 * head_dim (3 * %d)",
        channels_in, head_dim);
    EDGEATTN_CHECK_ARG(std::isfinite(eps) && eps >= 0.0F, EDGEATTN_STATUS_INVALID_ARGUMENT, "eps must be finite and >= 0");
    int64_t const tokens = static_cast<int64_t>(height) * width;
    EDGEATTN_CHECK_ARG(tokens <= 2147483647LL, EDGEATTN_STATUS_UNSUPPORTED, "height * width overflows int32");
    int const groups = channels_in / (3 * head_dim);
    bool const quadratic = kernel == EDGEATTN_LITE_MLA_QUADRATIC_TAYLOR;
    if (quadratic)
    {
        EDGEATTN_CHECK_ARG(qt_count == 1 || qt_count == groups, EDGEATTN_STATUS_INVALID_ARGUMENT,
            "qt_alpha/qt_beta/qt_gamma need 1 or G = %d entries (got %d)", groups, qt_count);
        EDGEATTN_CHECK_ARG(qt_alpha != nullptr && qt_beta != nullptr && qt_gamma != nullptr,
            EDGEATTN_STATUS_INVALID_ARGUMENT, "quadratic_taylor needs qt_alpha, qt_beta and qt_gamma");
        EDGEATTN_CHECK_ARG(qt_count <= kMaxQtGroups, EDGEATTN_STATUS_UNSUPPORTED,
            "at most %d QT coefficient groups are supported (got %d)", kMaxQtGroups, qt_count);
    }
    EDGEATTN_CHECK_ARG(groups <= kMaxGridYZ && batch <= kMaxGridYZ, EDGEATTN_STATUS_UNSUPPORTED,
        "groups (%d) and batch (%d) must be <= %d", groups, batch, kMaxGridYZ);
    if (batch == 0)
    {
        return succeed();
    }
    EDGEATTN_CHECK_ARG(qkv != nullptr && out != nullptr, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "qkv and out must be device pointers");
    EDGEATTN_CHECK_ARG(isAligned(qkv, dtypeSize(dtype)) && isAligned(out, dtypeSize(dtype)),
        EDGEATTN_STATUS_INVALID_ARGUMENT, "qkv and out must be aligned to %zu bytes", dtypeSize(dtype));
    int const featureDim = featureDimFor(kernel, head_dim);
    LinearAttentionPlan plan;
    char const* reason = "";
    EDGEATTN_CHECK_ARG(planLinearAttention(static_cast<int>(tokens), head_dim, featureDim, &plan, &reason),
        EDGEATTN_STATUS_UNSUPPORTED, "head_dim %d: %s", head_dim, reason);
    size_t const needed = linearAttentionWorkspaceSize(batch, groups, static_cast<int>(tokens), head_dim, featureDim);
    EDGEATTN_CHECK_ARG(workspace_bytes >= needed && workspace != nullptr, EDGEATTN_STATUS_WORKSPACE_TOO_SMALL,
        "workspace of %zu bytes at %p; need %zu (edgeattn_lite_mla_workspace_size)", workspace_bytes, workspace,
        needed);
    EDGEATTN_CHECK_ARG(isAligned(workspace, kWorkspaceAlignment), EDGEATTN_STATUS_INVALID_ARGUMENT,
        "workspace %p is not %zu-byte aligned", workspace, kWorkspaceAlignment);

    LinearAttentionParams params;
    int64_t const plane = tokens;
    params.q = qkv;
    params.k = static_cast<char const*>(qkv) + static_cast<int64_t>(head_dim) * plane * dtypeSize(dtype);
    params.v = static_cast<char const*>(qkv) + 2 * static_cast<int64_t>(head_dim) * plane * dtypeSize(dtype);
    params.out = out;
    params.tokens = static_cast<int>(tokens);
    params.heads = groups;
    params.headDim = head_dim;
    params.featureDim = featureDim;
    params.inBatchStride = static_cast<int64_t>(channels_in) * plane;
    params.inTokenStride = 1;
    params.inChannelStride = plane;
    params.inHeadStride = 3 * static_cast<int64_t>(head_dim);
    params.outBatchStride = static_cast<int64_t>(groups) * head_dim * plane;
    params.outTokenStride = 1;
    params.outChannelStride = plane;
    params.outHeadStride = head_dim;
    params.eps = eps;
    params.qtCount = quadratic ? qt_count : 0;
    for (int i = 0; i < kMaxQtGroups; ++i)
    {
        bool const set = quadratic && i < qt_count;
        params.qtAlpha[i] = set ? qt_alpha[i] : 0.0F;
        params.qtBeta[i] = set ? qt_beta[i] : 0.0F;
        params.qtGamma[i] = set ? qt_gamma[i] : 0.0F;
    }

    cudaStream_t const cudaStream = static_cast<cudaStream_t>(stream);
    // FP16 only: FP32 I/O stays on the scalar passes (plugins/README.md, "Tensor cores").
    LinearMmaPlan mmaPlan;
    bool const hasTensorCoreKernel = EDGEATTN_TENSOR_CORES && dtype == EDGEATTN_DTYPE_FLOAT16
        && planLinearAttentionMma(static_cast<int>(tokens), head_dim, featureDim, false,
            quadratic ? FeatureMap::kQuadraticTaylor : FeatureMap::kRelu, &mmaPlan);
    return launchOnKernelPath(
        __func__, KernelCall{quadratic ? EDGEATTN_OP_LITE_MLA_QUADRATIC_TAYLOR : EDGEATTN_OP_LITE_MLA_RELU, batch},
        hasTensorCoreKernel,
        [&](char const* function) {
            return quadratic ? launchLinearAttentionMma<FeatureMap::kQuadraticTaylor, false>(
                       params, plan, mmaPlan, batch, workspace, cudaStream, function)
                             : launchLinearAttentionMma<FeatureMap::kRelu, false>(
                                 params, plan, mmaPlan, batch, workspace, cudaStream, function);
        },
        [&](char const* function) {
            if (dtype == EDGEATTN_DTYPE_FLOAT16)
            {
                return quadratic ? launchLinearAttention<__half, FeatureMap::kQuadraticTaylor, false>(
                           params, plan, batch, workspace, cudaStream, function)
                                 : launchLinearAttention<__half, FeatureMap::kRelu, false>(
                                     params, plan, batch, workspace, cudaStream, function);
            }
            return quadratic ? launchLinearAttention<float, FeatureMap::kQuadraticTaylor, false>(
                       params, plan, batch, workspace, cudaStream, function)
                             : launchLinearAttention<float, FeatureMap::kRelu, false>(
                                 params, plan, batch, workspace, cudaStream, function);
        });
}
