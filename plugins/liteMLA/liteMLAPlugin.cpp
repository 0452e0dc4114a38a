#include "liteMLA/liteMLAPlugin.h"

#include "common/generated/fieldTables.h"
#include "common/pluginError.h"
#include "common/pluginRegistration.h"
#include "common/pluginTemplates.h"
#include "edgeattn/kernels.h"

#include <cmath>

namespace edgeattn
{

OpSpec const& LiteMLAOp::spec()
{
    return generated::kLiteMLASpec;
}

LiteMLAOp::LiteMLAOp(AttributeValues values)
    : OpBase(std::move(values))
    , mHeadDim(mAttributes.getInt("head_dim"))
    , mKernel(mAttributes.getString("kernel") == "quadratic_taylor" ? EDGEATTN_LITE_MLA_QUADRATIC_TAYLOR
                                                                      : EDGEATTN_LITE_MLA_RELU)
    , mEps(mAttributes.getFloat("eps"))
    , mAlpha(mAttributes.getFloats("qt_alpha"))
    , mBeta(mAttributes.getFloats("qt_beta"))
    , mGamma(mAttributes.getFloats("qt_gamma"))
{
    char const* name = spec().name;
    PLUGIN_CHECK(mHeadDim > 0, name << ": head_dim must be positive, got " << mHeadDim);
    PLUGIN_CHECK(mEps >= 0.0F, name << ": eps must be >= 0, got " << mEps);
    if (mKernel == EDGEATTN_LITE_MLA_QUADRATIC_TAYLOR)
    {
        PLUGIN_CHECK(!mAlpha.empty() && mAlpha.size() == mBeta.size() && mAlpha.size() == mGamma.size(),
            name << ": qt_alpha, qt_beta and qt_gamma must have the same non-zero length, got " << mAlpha.size()
                 << ", " << mBeta.size() << ", " << mGamma.size());
    }
}

std::string LiteMLAOp::checkShapes(TensorShape const* inputs, int32_t nbInputs) const
{
    ShapeChecker check(spec().name);
    check.require(nbInputs == 1, "expected 1 input (qkv), got " + std::to_string(nbInputs));
    if (!check.ok())
    {
        return check.error();
    }
    TensorShape const& qkv = inputs[0];
    check.rank(qkv, 4, "qkv (B, G*3*head_dim, H, W)");
    if (!check.ok())
    {
        return check.error();
    }
    check.dimDivisible(qkv.d[1], 3 * static_cast<int64_t>(mHeadDim), "qkv.shape[1] vs 3 * head_dim");
    if (check.ok() && mKernel == EDGEATTN_LITE_MLA_QUADRATIC_TAYLOR && qkv.d[1] >= 0)
    {
        int64_t const groups = qkv.d[1] / (3 * static_cast<int64_t>(mHeadDim));
        size_t const count = mAlpha.size();
        check.require(count == 1 || static_cast<int64_t>(count) == groups,
            "qt_alpha/qt_beta/qt_gamma need 1 or G = " + std::to_string(groups) + " entries, got "
                + std::to_string(count));
    }
    return check.error();
}

size_t LiteMLAOp::workspaceSize(TensorShape const* inputs, int32_t /*nbInputs*/) const
{
    TensorShape const& qkv = inputs[0];
    return edgeattn_lite_mla_workspace_size(static_cast<int>(qkv.d[0]), static_cast<int>(qkv.d[1]),
        static_cast<int>(qkv.d[2]), static_cast<int>(qkv.d[3]), mHeadDim, mKernel);
}

int LiteMLAOp::enqueue(TensorShape const* shapes, int32_t /*nbInputs*/, int dtype, void const* const* inputs,
    void* const* outputs, void* workspace, size_t workspaceBytes, void* stream) const
{
    TensorShape const& qkv = shapes[0];
    return edgeattn_lite_mla(inputs[0], outputs[0], static_cast<int>(qkv.d[0]), static_cast<int>(qkv.d[1]),
        static_cast<int>(qkv.d[2]), static_cast<int>(qkv.d[3]), mHeadDim, mKernel, mEps, mAlpha.data(), mBeta.data(),
        mGamma.data(), static_cast<int>(mAlpha.size()), dtype, workspace, workspaceBytes, stream);
}

namespace plugin
{
CreatorInterface* liteMLACreator()
{
    static Creator<LiteMLAOp> creator;
    return &creator;
}
} // namespace plugin

} // namespace edgeattn
