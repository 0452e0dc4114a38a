/*
 * EdgeAttnEfficientAttention v1: attribute rules, shapes and the kernel call (TensorRT-free); the TensorRT plugin
 * and creator are common/pluginTemplates.h instantiated over this class (efficientAttentionPlugin.cpp).
 */
#ifndef EDGEATTN_EFFICIENT_ATTENTION_PLUGIN_H
#define EDGEATTN_EFFICIENT_ATTENTION_PLUGIN_H

#include "common/attributeSpec.h"
#include "common/opInterface.h"
#include "edgeattn/kernels.h"

namespace edgeattn
{

class EfficientAttentionOp : public OpBase
{
public:
    //! The generated schema table (defined in the .cpp, so every translation unit sees one object).
    static OpSpec const& spec();

    explicit EfficientAttentionOp(AttributeValues values);

    int32_t nbInputs() const
    {
        return 3;
    }

    //! The default kernel-path table's row (edgeattn_op).
    int kernelOp() const
    {
        return EDGEATTN_OP_EFFICIENT_ATTENTION;
    }

    std::string checkShapes(TensorShape const* inputs, int32_t nbInputs) const;
    size_t workspaceSize(TensorShape const* inputs, int32_t nbInputs) const;
    int enqueue(TensorShape const* shapes, int32_t nbInputs, int dtype, void const* const* inputs,
        void* const* outputs, void* workspace, size_t workspaceBytes, void* stream) const;

private:
    int32_t mNumHeads;
};

} // namespace edgeattn

#endif // EDGEATTN_EFFICIENT_ATTENTION_PLUGIN_H
