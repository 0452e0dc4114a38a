#include "efficientAttention/efficientAttentionPlugin.h"

#include "common/generated/fieldTables.h"
#include "common/pluginError.h"
#include "common/pluginRegistration.h"
#include "common/pluginTemplates.h"
#include "edgeattn/kernels.h"

namespace edgeattn
{

OpSpec const& EfficientAttentionOp::spec()
{
    return generated::kEfficientAttentionSpec;
}

EfficientAttentionOp::EfficientAttentionOp(AttributeValues values)
    : OpBase(std::move(values))
    , mNumHeads(mAttributes.getInt("num_heads"))
{
    PLUGIN_CHECK(mNumHeads > 0, spec().name << ": num_heads must be positive, got " << mNumHeads);
}

std::string EfficientAttentionOp::checkShapes(TensorShape const* inputs, int32_t nbInputs) const
{
    ShapeChecker check(spec().name);
    check.require(nbInputs == 3, "expected 3 inputs (q, k, v), got " + std::to_string(nbInputs));
    if (!check.ok())
    {
        return check.error();
    }
    check.rank(inputs[0], 3, "q (B, N, C)");
    check.sameDims(inputs[0], "q", inputs[1], "k");
    check.sameDims(inputs[0], "q", inputs[2], "v");
    if (check.ok())
    {
        check.dimDivisible(inputs[0].d[2], mNumHeads, "q.shape[2] (C) vs num_heads");
    }
    return check.error();
}

size_t EfficientAttentionOp::workspaceSize(TensorShape const* inputs, int32_t /*nbInputs*/) const
{
    return edgeattn_efficient_attention_workspace_size(static_cast<int>(inputs[0].d[0]),
        static_cast<int>(inputs[0].d[1]), static_cast<int>(inputs[0].d[2]), mNumHeads);
}

int EfficientAttentionOp::enqueue(TensorShape const* shapes, int32_t /*nbInputs*/, int dtype,
    void const* const* inputs, void* const* outputs, void* workspace, size_t workspaceBytes, void* stream) const
{
    return edgeattn_efficient_attention(inputs[0], inputs[1], inputs[2], outputs[0], static_cast<int>(shapes[0].d[0]),
        static_cast<int>(shapes[0].d[1]), static_cast<int>(shapes[0].d[2]), mNumHeads, dtype, workspace,
        workspaceBytes, stream);
}

namespace plugin
{
CreatorInterface* efficientAttentionCreator()
{
    static Creator<EfficientAttentionOp> creator;
    return &creator;
}
} // namespace plugin

} // namespace edgeattn
