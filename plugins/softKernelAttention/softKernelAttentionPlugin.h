/*
 * EdgeAttnSoftKernelAttention v1: attribute rules, shapes and the kernel call (TensorRT-free); the TensorRT plugin
 * and creator are common/pluginTemplates.h instantiated over this class (softKernelAttentionPlugin.cpp).
 */
#ifndef EDGEATTN_SOFT_KERNEL_ATTENTION_PLUGIN_H
#define EDGEATTN_SOFT_KERNEL_ATTENTION_PLUGIN_H

#include "common/attributeSpec.h"
#include "common/opInterface.h"
#include "edgeattn/kernels.h"

namespace edgeattn
{

class SoftKernelAttentionOp : public OpBase
{
public:
    //! The generated schema table (defined in the .cpp, so every translation unit sees one object).
    static OpSpec const& spec();

    explicit SoftKernelAttentionOp(AttributeValues values);

    int32_t nbInputs() const
    {
        return 3;
    }

    //! The default kernel-path table's row (edgeattn_op).
    int kernelOp() const
    {
        return EDGEATTN_OP_SOFT_KERNEL_ATTENTION;
    }

    std::string checkShapes(TensorShape const* inputs, int32_t nbInputs) const;
    size_t workspaceSize(TensorShape const* inputs, int32_t nbInputs) const;
    int enqueue(TensorShape const* shapes, int32_t nbInputs, int dtype, void const* const* inputs,
        void* const* outputs, void* workspace, size_t workspaceBytes, void* stream) const;

private:
    int32_t mNumHeads;
    int32_t mNewtonIters;
    int32_t mSymmetricNorm;
};

} // namespace edgeattn

#endif // EDGEATTN_SOFT_KERNEL_ATTENTION_PLUGIN_H
