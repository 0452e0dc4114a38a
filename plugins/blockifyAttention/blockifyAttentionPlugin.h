/*
 * EdgeAttnBlockifyAttention v1: attribute rules, shapes and the kernel call (TensorRT-free); the TensorRT plugin
 * and creator are common/pluginTemplates.h instantiated over this class (blockifyAttentionPlugin.cpp).
 */
#ifndef EDGEATTN_BLOCKIFY_ATTENTION_PLUGIN_H
#define EDGEATTN_BLOCKIFY_ATTENTION_PLUGIN_H

#include "common/attributeSpec.h"
#include "common/opInterface.h"
#include "edgeattn/kernels.h"

namespace edgeattn
{

class BlockifyAttentionOp : public OpBase
{
public:
    //! The generated schema table (defined in the .cpp, so every translation unit sees one object).
    static OpSpec const& spec();

    explicit BlockifyAttentionOp(AttributeValues values);

    int32_t nbInputs() const
    {
        return mHasLepe ? 5 : 3;
    }

    //! The default kernel-path table's row (edgeattn_op).
    int kernelOp() const
    {
        return EDGEATTN_OP_BLOCKIFY_ATTENTION;
    }

    std::string checkShapes(TensorShape const* inputs, int32_t nbInputs) const;
    size_t workspaceSize(TensorShape const* inputs, int32_t nbInputs) const;
    int enqueue(TensorShape const* shapes, int32_t nbInputs, int dtype, void const* const* inputs,
        void* const* outputs, void* workspace, size_t workspaceBytes, void* stream) const;

private:
    int32_t mNumHeads;
    int32_t mHeight;
    int32_t mWidth;
    int32_t mWindowSize;
    float mScale;
    bool mHasLepe;
    int mPadding; // edgeattn_padding
};

} // namespace edgeattn

#endif // EDGEATTN_BLOCKIFY_ATTENTION_PLUGIN_H
