#include "blockifyAttention/blockifyAttentionPlugin.h"

#include "common/generated/fieldTables.h"
#include "common/pluginError.h"
#include "common/pluginRegistration.h"
#include "common/pluginTemplates.h"
#include "edgeattn/kernels.h"

namespace edgeattn
{

OpSpec const& BlockifyAttentionOp::spec()
{
    return generated::kBlockifyAttentionSpec;
}

BlockifyAttentionOp::BlockifyAttentionOp(AttributeValues values)
    : OpBase(std::move(values))
    , mNumHeads(mAttributes.getInt("num_heads"))
    , mHeight(mAttributes.getInt("height"))
    , mWidth(mAttributes.getInt("width"))
    , mWindowSize(mAttributes.getInt("window_size"))
    , mScale(mAttributes.getFloat("scale"))
    , mHasLepe(mAttributes.getInt("has_lepe") == 1)
    , mPadding(EDGEATTN_PADDING_NONE)
{
    char const* name = spec().name;
    PLUGIN_CHECK(mNumHeads > 0, name << ": num_heads must be positive, got " << mNumHeads);
    PLUGIN_CHECK(mHeight > 0 && mWidth > 0, name << ": height and width must be positive, got " << mHeight << "x" << mWidth);
    PLUGIN_CHECK(mWindowSize > 0, name << ": window_size must be positive, got " << mWindowSize);
    PLUGIN_CHECK(mScale >= 0.0F, name << ": scale must be >= 0 (0 means head_dim ** -0.5), got " << mScale);
    std::string const& padding = mAttributes.getString("padding");
    mPadding = padding == "zeros" ? EDGEATTN_PADDING_ZEROS
                                  : (padding == "masked" ? EDGEATTN_PADDING_MASKED : EDGEATTN_PADDING_NONE);
    PLUGIN_CHECK(mPadding != EDGEATTN_PADDING_NONE || (mHeight % mWindowSize == 0 && mWidth % mWindowSize == 0),
        name << ": padding=\"none\" needs height and width to be multiples of window_size, got " << mHeight << "x"
             << mWidth << " with window_size " << mWindowSize << " (use padding \"zeros\" or \"masked\")");
}

std::string BlockifyAttentionOp::checkShapes(TensorShape const* inputs, int32_t nbInputs) const
{
    ShapeChecker check(spec().name);
    check.require(nbInputs == this->nbInputs(), "has_lepe=" + std::to_string(mHasLepe ? 1 : 0) + " needs "
            + std::to_string(this->nbInputs()) + " inputs, got " + std::to_string(nbInputs));
    if (!check.ok())
    {
        return check.error();
    }
    TensorShape const& q = inputs[0];
    check.rank(q, 3, "q (B, N, C)");
    check.sameDims(q, "q", inputs[1], "k");
    check.sameDims(q, "q", inputs[2], "v");
    if (!check.ok())
    {
        return check.error();
    }
    check.dimEquals(q.d[1], static_cast<int64_t>(mHeight) * mWidth, "q.shape[1] (N) vs height * width");
    check.dimDivisible(q.d[2], mNumHeads, "q.shape[2] (C) vs num_heads");
    if (mHasLepe)
    {
        check.rank(inputs[3], 4, "lepe_weight (C, 1, 3, 3)");
        check.rank(inputs[4], 1, "lepe_bias (C)");
        if (check.ok())
        {
            check.dimEquals(inputs[3].d[0], q.d[2], "lepe_weight.shape[0] vs C");
            check.dimEquals(inputs[3].d[1], 1, "lepe_weight.shape[1]");
            check.dimEquals(inputs[3].d[2], 3, "lepe_weight.shape[2]");
            check.dimEquals(inputs[3].d[3], 3, "lepe_weight.shape[3]");
            check.dimEquals(inputs[4].d[0], q.d[2], "lepe_bias.shape[0] vs C");
        }
    }
    return check.error();
}

size_t BlockifyAttentionOp::workspaceSize(TensorShape const* inputs, int32_t /*nbInputs*/) const
{
    return edgeattn_blockify_attention_workspace_size(static_cast<int>(inputs[0].d[0]), mHeight, mWidth,
        static_cast<int>(inputs[0].d[2]), mNumHeads, mWindowSize);
}

int BlockifyAttentionOp::enqueue(TensorShape const* shapes, int32_t /*nbInputs*/, int dtype, void const* const* inputs,
    void* const* outputs, void* /*workspace*/, size_t /*workspaceBytes*/, void* stream) const
{
    return edgeattn_blockify_attention(inputs[0], inputs[1], inputs[2], mHasLepe ? inputs[3] : nullptr,
        mHasLepe ? inputs[4] : nullptr, outputs[0], static_cast<int>(shapes[0].d[0]), mHeight, mWidth,
        static_cast<int>(shapes[0].d[2]), mNumHeads, mWindowSize, mScale, mPadding, dtype, stream);
}

namespace plugin
{
CreatorInterface* blockifyAttentionCreator()
{
    static Creator<BlockifyAttentionOp> creator;
    return &creator;
}
} // namespace plugin

} // namespace edgeattn
