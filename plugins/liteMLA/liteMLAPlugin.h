/*
 * EdgeAttnLiteMLA v1: attribute rules, shapes and the kernel call (TensorRT-free); the TensorRT plugin and creator
 * are common/pluginTemplates.h instantiated over this class (liteMLAPlugin.cpp).
 */
#ifndef EDGEATTN_LITE_MLA_PLUGIN_H
#define EDGEATTN_LITE_MLA_PLUGIN_H

#include "common/attributeSpec.h"
#include "common/opInterface.h"
#include "edgeattn/kernels.h"

#include <vector>

namespace edgeattn
{

class LiteMLAOp : public OpBase
{
public:
    //! The generated schema table (defined in the .cpp, so every translation unit sees one object).
    static OpSpec const& spec();

    explicit LiteMLAOp(AttributeValues values);

    int32_t nbInputs() const
    {
        return 1;
    }

    //! out (B, G*head_dim, H, W) from qkv (B, G*3*head_dim, H, W).
    OutputShapeRule outputShapeRule() const
    {
        OutputShapeRule rule;
        rule.dividedAxis = 1;
        rule.divisor = 3;
        return rule;
    }

    //! The default kernel-path table's row (edgeattn_op): ReLU and QT have their own.
    int kernelOp() const
    {
        return mKernel == EDGEATTN_LITE_MLA_QUADRATIC_TAYLOR ? EDGEATTN_OP_LITE_MLA_QUADRATIC_TAYLOR
                                                             : EDGEATTN_OP_LITE_MLA_RELU;
    }

    std::string checkShapes(TensorShape const* inputs, int32_t nbInputs) const;
    size_t workspaceSize(TensorShape const* inputs, int32_t nbInputs) const;
    int enqueue(TensorShape const* shapes, int32_t nbInputs, int dtype, void const* const* inputs,
        void* const* outputs, void* workspace, size_t workspaceBytes, void* stream) const;

private:
    int32_t mHeadDim;
    int mKernel; // edgeattn_lite_mla_kernel
    float mEps;
    std::vector<float> mAlpha;
    std::vector<float> mBeta;
    std::vector<float> mGamma;
};

} // namespace edgeattn

#endif // EDGEATTN_LITE_MLA_PLUGIN_H
