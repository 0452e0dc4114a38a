#include "softKernelAttention/softKernelAttentionPlugin.h"

#include "common/generated/fieldTables.h"
#include "common/pluginError.h"
#include "common/pluginRegistration.h"
#include "common/pluginTemplates.h"
#include "edgeattn/kernels.h"

namespace edgeattn
{

OpSpec const& SoftKernelAttentionOp::spec()
{
    return generated::kSoftKernelAttentionSpec;
}

SoftKernelAttentionOp::SoftKernelAttentionOp(AttributeValues values)
    : OpBase(std::move(values))
    , mNumHeads(mAttributes.getInt("num_heads"))
    , mNewtonIters(mAttributes.getInt("newton_iters"))
    , mSymmetricNorm(mAttributes.getInt("symmetric_norm"))
{
    char const* name = spec().name;
    PLUGIN_CHECK(mNumHeads > 0, name << ": num_heads must be positive, got " << mNumHeads);
    PLUGIN_CHECK(mNewtonIters >= 0, name << ": newton_iters must be >= 0, got " << mNewtonIters);
}

std::string SoftKernelAttentionOp::checkShapes(TensorShape const* inputs, int32_t nbInputs) const
{
    ShapeChecker check(spec().name);
    check.require(nbInputs == 3, "expected 3 inputs (q, landmarks, v), got " + std::to_string(nbInputs));
    if (!check.ok())
    {
        return check.error();
    }
    TensorShape const& q = inputs[0];
    TensorShape const& landmarks = inputs[1];
    check.rank(q, 3, "q (B, N, C)");
    check.rank(landmarks, 3, "landmarks (B, M, C)");
    check.sameDims(q, "q", inputs[2], "v");
    if (check.ok())
    {
        check.dimEquals(landmarks.d[0], q.d[0], "landmarks.shape[0] vs B");
        check.dimEquals(landmarks.d[2], q.d[2], "landmarks.shape[2] vs C");
        check.dimDivisible(q.d[2], mNumHeads, "q.shape[2] (C) vs num_heads");
        check.require(landmarks.d[1] != 0, "landmarks must hold at least one landmark (M > 0)");
    }
    return check.error();
}

size_t SoftKernelAttentionOp::workspaceSize(TensorShape const* inputs, int32_t /*nbInputs*/) const
{
    return edgeattn_soft_kernel_attention_workspace_size(static_cast<int>(inputs[0].d[0]),
        static_cast<int>(inputs[0].d[1]), static_cast<int>(inputs[1].d[1]), static_cast<int>(inputs[0].d[2]),
        mNumHeads);
}

int SoftKernelAttentionOp::enqueue(TensorShape const* shapes, int32_t /*nbInputs*/, int dtype,
    void const* const* inputs, void* const* outputs, void* workspace, size_t workspaceBytes, void* stream) const
{
    return edgeattn_soft_kernel_attention(inputs[0], inputs[1], inputs[2], outputs[0], static_cast<int>(shapes[0].d[0]),
        static_cast<int>(shapes[0].d[1]), static_cast<int>(shapes[1].d[1]), static_cast<int>(shapes[0].d[2]),
        mNumHeads, mNewtonIters, mSymmetricNorm, dtype, workspace, workspaceBytes, stream);
}

namespace plugin
{
CreatorInterface* softKernelAttentionCreator()
{
    static Creator<SoftKernelAttentionOp> creator;
    return &creator;
}
} // namespace plugin

} // namespace edgeattn
