/*
 * The TensorRT plugin and creator classes, written once over an op class (see common/opInterface.h):
 *   TensorRT >= 10: PluginV3<Op> (IPluginV3 + OneCore/OneBuild/OneRuntime), CreatorV3<Op> (IPluginCreatorV3One)
 *   TensorRT 8.x:   PluginV2<Op> (IPluginV2DynamicExt), CreatorV2<Op> (IPluginCreator)
 * Plugin<Op> / Creator<Op> name the pair selected for the TensorRT being compiled against.
 *
 * Every entry point is noexcept: errors (PluginError from checks, std::exception from the library) are logged
 * through TensorRT's logger with the op name and reported with the method's failure value.
 */
#ifndef EDGEATTN_COMMON_PLUGIN_TEMPLATES_H
#define EDGEATTN_COMMON_PLUGIN_TEMPLATES_H

#include "common/pluginCommon.h"
#include "common/pluginError.h"
#include "edgeattn/kernels.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace edgeattn
{
namespace plugin
{

template <class Op>
void logException(char const* method, std::exception const& error) noexcept
{
    logError(std::string(Op::spec().name) + "::" + method + ": " + error.what());
}

#if EDGEATTN_PLUGIN_V3

template <class Op>
class PluginV3 final : public nvinfer1::IPluginV3,
                       public nvinfer1::IPluginV3OneCore,
                       public nvinfer1::IPluginV3OneBuild,
                       public nvinfer1::IPluginV3OneRuntime
{
public:
    PluginV3(Op op, std::string nameSpace)
        : mOp(std::move(op))
        , mNamespace(std::move(nameSpace))
    {
    }

    PluginV3(PluginV3 const& other)
        : mOp(other.mOp)
        , mNamespace(other.mNamespace)
        , mDtype(other.mDtype)
        , mTactic(other.mTactic)
    {
    }

    // IPluginV3
    nvinfer1::IPluginCapability* getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept override
    {
        switch (type)
        {
        case nvinfer1::PluginCapabilityType::kCORE: return static_cast<nvinfer1::IPluginV3OneCore*>(this);
        case nvinfer1::PluginCapabilityType::kBUILD: return static_cast<nvinfer1::IPluginV3OneBuild*>(this);
        case nvinfer1::PluginCapabilityType::kRUNTIME: return static_cast<nvinfer1::IPluginV3OneRuntime*>(this);
        }
        return nullptr;
    }

    nvinfer1::IPluginV3* clone() noexcept override
    {
        try
        {
            return new PluginV3(*this);
        }
        catch (std::exception const& error)
        {
            logException<Op>("clone", error);
        }
        return nullptr;
    }

    // IPluginV3OneCore
    char const* getPluginName() const noexcept override
    {
        return Op::spec().name;
    }

    char const* getPluginVersion() const noexcept override
    {
        return Op::spec().version;
    }

    char const* getPluginNamespace() const noexcept override
    {
        return mNamespace.c_str();
    }

    // IPluginV3OneBuild
    int32_t getNbOutputs() const noexcept override
    {
        return 1;
    }

    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs,
        nvinfer1::DataType const* inputTypes, int32_t nbInputs) const noexcept override
    {
        try
        {
            PLUGIN_CHECK(nbOutputs == 1 && nbInputs == mOp.nbInputs() && outputTypes != nullptr && inputTypes != nullptr,
                "expected " << mOp.nbInputs() << " inputs and 1 output, got " << nbInputs << " and " << nbOutputs);
            PLUGIN_CHECK(toKernelDtype(inputTypes[0]) >= 0, "input 0 must be FP32 or FP16");
            outputTypes[0] = inputTypes[0];
            return 0;
        }
        catch (std::exception const& error)
        {
            logException<Op>("getOutputDataTypes", error);
        }
        return -1;
    }

    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* /*shapeInputs*/,
        int32_t /*nbShapeInputs*/, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
        nvinfer1::IExprBuilder& exprBuilder) noexcept override
    {
        try
        {
            PLUGIN_CHECK(nbOutputs == 1 && nbInputs == mOp.nbInputs() && inputs != nullptr && outputs != nullptr,
                "expected " << mOp.nbInputs() << " inputs and 1 output, got " << nbInputs << " and " << nbOutputs
                            << " (has_lepe and the inputs disagree?)");
            outputs[0] = outputDims(mOp.outputShapeRule(), inputs[0], exprBuilder);
            return 0;
        }
        catch (std::exception const& error)
        {
            logException<Op>("getOutputShapes", error);
        }
        return -1;
    }

    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept override
    {
        if (inOut == nullptr || pos < 0 || pos >= nbInputs + nbOutputs || nbInputs != mOp.nbInputs() || nbOutputs != 1)
        {
            return false;
        }
        return supportsLinearSameType(inOut[pos].desc, inOut[0].desc, pos);
    }

    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override
    {
        try
        {
            PLUGIN_CHECK(in != nullptr && out != nullptr && nbInputs == mOp.nbInputs() && nbOutputs == 1,
                "expected " << mOp.nbInputs() << " inputs and 1 output, got " << nbInputs << " and " << nbOutputs);
            std::vector<TensorShape> shapes;
            for (int32_t i = 0; i < nbInputs; ++i)
            {
                shapes.push_back(toShape(in[i].desc.dims));
            }
            std::string const problem = mOp.checkShapes(shapes.data(), nbInputs);
            PLUGIN_CHECK(problem.empty(), problem);
            mDtype = toKernelDtype(in[0].desc.type);
            return 0;
        }
        catch (std::exception const& error)
        {
            logException<Op>("configurePlugin", error);
        }
        return -1;
    }

    // Tactics: the kernel paths the device can run for the configured format (TensorRT times each and records the
    // winner in the engine; at runtime it calls setTactic with it before enqueue). Tactic 0, TensorRT's default, is
    // the kernels' default table (what TensorRT 8.x runs).
    int32_t getNbTactics() noexcept override
    {
        try
        {
            return static_cast<int32_t>(deviceKernelPathTactics(mOp.kernelOp(), configuredDtype()).size());
        }
        catch (std::exception const& error)
        {
            logException<Op>("getNbTactics", error);
        }
        return 0;
    }

    int32_t getValidTactics(int32_t* tactics, int32_t nbTactics) noexcept override
    {
        try
        {
            std::vector<int32_t> const paths = deviceKernelPathTactics(mOp.kernelOp(), configuredDtype());
            PLUGIN_CHECK(tactics != nullptr && nbTactics == static_cast<int32_t>(paths.size()),
                "expected a buffer for " << paths.size() << " tactics, got " << nbTactics);
            std::copy(paths.begin(), paths.end(), tactics);
            return 0;
        }
        catch (std::exception const& error)
        {
            logException<Op>("getValidTactics", error);
        }
        return -1;
    }

    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const noexcept override
    {
        try
        {
            PLUGIN_CHECK(inputs != nullptr && nbInputs == mOp.nbInputs(), "unexpected input count " << nbInputs);
            std::vector<TensorShape> shapes;
            for (int32_t i = 0; i < nbInputs; ++i)
            {
                shapes.push_back(toShape(inputs[i].max));
            }
            return mOp.workspaceSize(shapes.data(), nbInputs);
        }
        catch (std::exception const& error)
        {
            logException<Op>("getWorkspaceSize", error);
        }
        return 0;
    }

    // IPluginV3OneRuntime
    int32_t setTactic(int32_t tactic) noexcept override
    {
        try
        {
            PLUGIN_CHECK(isKernelPathTactic(mOp.kernelOp(), tactic),
                "tactic " << tactic << " is not 0 (default) or a kernel path of this library");
            mTactic = tactic;
            return 0;
        }
        catch (std::exception const& error)
        {
            logException<Op>("setTactic", error);
        }
        return -1;
    }

    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) noexcept override
    {
        try
        {
            PLUGIN_CHECK(in != nullptr && out != nullptr && nbInputs == mOp.nbInputs() && nbOutputs == 1,
                "expected " << mOp.nbInputs() << " inputs and 1 output, got " << nbInputs << " and " << nbOutputs);
            std::vector<TensorShape> shapes;
            for (int32_t i = 0; i < nbInputs; ++i)
            {
                shapes.push_back(toShape(in[i].dims));
            }
            std::string const problem = mOp.checkShapes(shapes.data(), nbInputs);
            PLUGIN_CHECK(problem.empty(), problem);
            return 0;
        }
        catch (std::exception const& error)
        {
            logException<Op>("onShapeChange", error);
        }
        return -1;
    }

    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override
    {
        try
        {
            PLUGIN_CHECK(inputDesc != nullptr && outputDesc != nullptr && inputs != nullptr && outputs != nullptr,
                "null tensor descriptors or pointers");
            int32_t const nbInputs = mOp.nbInputs();
            std::vector<TensorShape> shapes;
            for (int32_t i = 0; i < nbInputs; ++i)
            {
                shapes.push_back(toShape(inputDesc[i].dims));
            }
            int const dtype = toKernelDtype(inputDesc[0].type);
            PLUGIN_CHECK(dtype >= 0, "input 0 is neither FP32 nor FP16");
            size_t const workspaceBytes = mOp.workspaceSize(shapes.data(), nbInputs);
            int status = 0;
            {
                ScopedTactic const path(mTactic);
                status = mOp.enqueue(shapes.data(), nbInputs, dtype, inputs, outputs, workspace, workspaceBytes,
                    reinterpret_cast<void*>(stream));
            }
            PLUGIN_CHECK(status == 0, describeKernelFailure(Op::spec().name, status));
            return 0;
        }
        catch (std::exception const& error)
        {
            logException<Op>("enqueue", error);
        }
        return -1;
    }

    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* /*context*/) noexcept override
    {
        return clone();
    }

    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override
    {
        try
        {
            return mSerialized.build(mOp.attributes());
        }
        catch (std::exception const& error)
        {
            logException<Op>("getFieldsToSerialize", error);
        }
        return nullptr;
    }

    Op const& op() const
    {
        return mOp;
    }

    int32_t tactic() const
    {
        return mTactic;
    }

private:
    //! Before configurePlugin, the FP16 list (every path's).
    int configuredDtype() const
    {
        return mDtype >= 0 ? mDtype : EDGEATTN_DTYPE_FLOAT16;
    }

    Op mOp;
    std::string mNamespace;
    SerializedFields mSerialized;
    int mDtype = -1;     // edgeattn_dtype of the last configurePlugin
    int32_t mTactic = 0; // the kernel path TensorRT chose (setTactic); 0 = the default table
};

template <class Op>
class CreatorV3 final : public nvinfer1::IPluginCreatorV3One
{
public:
    CreatorV3()
        : mFieldNames(Op::spec())
        , mNamespace(Op::spec().nameSpace)
    {
    }

    nvinfer1::IPluginV3* createPlugin(
        char const* name, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase /*phase*/) noexcept override
    {
        try
        {
            AttributeValues values = parseAttributes(Op::spec(), toFieldViews(fc));
            return new PluginV3<Op>(Op(std::move(values)), mNamespace);
        }
        catch (std::exception const& error)
        {
            logError(std::string(Op::spec().name) + "::createPlugin(" + (name != nullptr ? name : "") + "): " + error.what());
        }
        return nullptr;
    }

    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override
    {
        return mFieldNames.collection();
    }

    char const* getPluginName() const noexcept override
    {
        return Op::spec().name;
    }

    char const* getPluginVersion() const noexcept override
    {
        return Op::spec().version;
    }

    char const* getPluginNamespace() const noexcept override
    {
        return mNamespace.c_str();
    }

private:
    FieldNameTable mFieldNames;
    std::string mNamespace;
};

template <class Op>
using Plugin = PluginV3<Op>;
template <class Op>
using Creator = CreatorV3<Op>;

#else // TensorRT 8.x

template <class Op>
class PluginV2 final : public nvinfer1::IPluginV2DynamicExt
{
public:
    PluginV2(Op op, std::string nameSpace)
        : mOp(std::move(op))
        , mNamespace(std::move(nameSpace))
    {
    }

    // IPluginV2
    char const* getPluginType() const noexcept override
    {
        return Op::spec().name;
    }

    char const* getPluginVersion() const noexcept override
    {
        return Op::spec().version;
    }

    int32_t getNbOutputs() const noexcept override
    {
        return 1;
    }

    int32_t initialize() noexcept override
    {
        return 0;
    }

    void terminate() noexcept override {}

    size_t getSerializationSize() const noexcept override
    {
        try
        {
            return serializeAttributes(mOp.attributes()).size();
        }
        catch (std::exception const& error)
        {
            logException<Op>("getSerializationSize", error);
        }
        return 0;
    }

    void serialize(void* buffer) const noexcept override
    {
        try
        {
            PLUGIN_CHECK(buffer != nullptr, "null serialization buffer");
            std::vector<char> const bytes = serializeAttributes(mOp.attributes());
            std::memcpy(buffer, bytes.data(), bytes.size());
        }
        catch (std::exception const& error)
        {
            logException<Op>("serialize", error);
        }
    }

    void destroy() noexcept override
    {
        delete this;
    }

    void setPluginNamespace(char const* pluginNamespace) noexcept override
    {
        try
        {
            mNamespace = pluginNamespace != nullptr ? pluginNamespace : "";
        }
        catch (std::exception const& error)
        {
            logException<Op>("setPluginNamespace", error);
        }
    }

    char const* getPluginNamespace() const noexcept override
    {
        return mNamespace.c_str();
    }

    // IPluginV2Ext
    nvinfer1::DataType getOutputDataType(
        int32_t index, nvinfer1::DataType const* inputTypes, int32_t nbInputs) const noexcept override
    {
        if (index != 0 || inputTypes == nullptr || nbInputs < 1)
        {
            logError(std::string(Op::spec().name) + "::getOutputDataType: bad arguments");
            return nvinfer1::DataType::kFLOAT;
        }
        return inputTypes[0];
    }

    // IPluginV2DynamicExt
    nvinfer1::IPluginV2DynamicExt* clone() const noexcept override
    {
        try
        {
            return new PluginV2(*this);
        }
        catch (std::exception const& error)
        {
            logException<Op>("clone", error);
        }
        return nullptr;
    }

    nvinfer1::DimsExprs getOutputDimensions(int32_t outputIndex, nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
        nvinfer1::IExprBuilder& exprBuilder) noexcept override
    {
        try
        {
            PLUGIN_CHECK(outputIndex == 0 && inputs != nullptr && nbInputs == mOp.nbInputs(),
                "expected output 0 of " << mOp.nbInputs() << " inputs, got output " << outputIndex << " of " << nbInputs
                                        << " (has_lepe and the inputs disagree?)");
            return outputDims(mOp.outputShapeRule(), inputs[0], exprBuilder);
        }
        catch (std::exception const& error)
        {
            logException<Op>("getOutputDimensions", error);
        }
        return nvinfer1::DimsExprs{};
    }

    bool supportsFormatCombination(
        int32_t pos, nvinfer1::PluginTensorDesc const* inOut, int32_t nbInputs, int32_t nbOutputs) noexcept override
    {
        if (inOut == nullptr || pos < 0 || pos >= nbInputs + nbOutputs || nbInputs != mOp.nbInputs() || nbOutputs != 1)
        {
            return false;
        }
        return supportsLinearSameType(inOut[pos], inOut[0], pos);
    }

    void configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override
    {
        try
        {
            PLUGIN_CHECK(in != nullptr && out != nullptr && nbInputs == mOp.nbInputs() && nbOutputs == 1,
                "expected " << mOp.nbInputs() << " inputs and 1 output, got " << nbInputs << " and " << nbOutputs);
            std::vector<TensorShape> shapes;
            for (int32_t i = 0; i < nbInputs; ++i)
            {
                shapes.push_back(toShape(in[i].desc.dims));
            }
            std::string const problem = mOp.checkShapes(shapes.data(), nbInputs);
            // configurePlugin cannot fail in the V2 interface: log now, and enqueue refuses to run.
            PLUGIN_CHECK(problem.empty(), problem);
        }
        catch (std::exception const& error)
        {
            logException<Op>("configurePlugin", error);
        }
    }

    size_t getWorkspaceSize(nvinfer1::PluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::PluginTensorDesc const* /*outputs*/, int32_t /*nbOutputs*/) const noexcept override
    {
        try
        {
            PLUGIN_CHECK(inputs != nullptr && nbInputs == mOp.nbInputs(), "unexpected input count " << nbInputs);
            std::vector<TensorShape> shapes;
            for (int32_t i = 0; i < nbInputs; ++i)
            {
                shapes.push_back(toShape(inputs[i].dims));
            }
            return mOp.workspaceSize(shapes.data(), nbInputs);
        }
        catch (std::exception const& error)
        {
            logException<Op>("getWorkspaceSize", error);
        }
        return 0;
    }

    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override
    {
        try
        {
            PLUGIN_CHECK(inputDesc != nullptr && outputDesc != nullptr && inputs != nullptr && outputs != nullptr,
                "null tensor descriptors or pointers");
            int32_t const nbInputs = mOp.nbInputs();
            std::vector<TensorShape> shapes;
            for (int32_t i = 0; i < nbInputs; ++i)
            {
                shapes.push_back(toShape(inputDesc[i].dims));
            }
            std::string const problem = mOp.checkShapes(shapes.data(), nbInputs);
            PLUGIN_CHECK(problem.empty(), problem);
            int const dtype = toKernelDtype(inputDesc[0].type);
            PLUGIN_CHECK(dtype >= 0, "input 0 is neither FP32 nor FP16");
            // The workspace is monotone in every dimension, so this never exceeds what TensorRT allocated for the
            // profile's maximum shapes.
            size_t const workspaceBytes = mOp.workspaceSize(shapes.data(), nbInputs);
            int const status = mOp.enqueue(shapes.data(), nbInputs, dtype, inputs, outputs, workspace, workspaceBytes,
                reinterpret_cast<void*>(stream));
            PLUGIN_CHECK(status == 0, describeKernelFailure(Op::spec().name, status));
            return 0;
        }
        catch (std::exception const& error)
        {
            logException<Op>("enqueue", error);
        }
        return -1;
    }

    Op const& op() const
    {
        return mOp;
    }

private:
    Op mOp;
    std::string mNamespace;
};

template <class Op>
class CreatorV2 final : public nvinfer1::IPluginCreator
{
public:
    CreatorV2()
        : mFieldNames(Op::spec())
        , mNamespace(Op::spec().nameSpace)
    {
    }

    char const* getPluginName() const noexcept override
    {
        return Op::spec().name;
    }

    char const* getPluginVersion() const noexcept override
    {
        return Op::spec().version;
    }

    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override
    {
        return mFieldNames.collection();
    }

    nvinfer1::IPluginV2* createPlugin(char const* name, nvinfer1::PluginFieldCollection const* fc) noexcept override
    {
        try
        {
            AttributeValues values = parseAttributes(Op::spec(), toFieldViews(fc));
            return new PluginV2<Op>(Op(std::move(values)), mNamespace);
        }
        catch (std::exception const& error)
        {
            logError(std::string(Op::spec().name) + "::createPlugin(" + (name != nullptr ? name : "") + "): " + error.what());
        }
        return nullptr;
    }

    nvinfer1::IPluginV2* deserializePlugin(char const* name, void const* serialData, size_t serialLength) noexcept override
    {
        try
        {
            AttributeValues values = deserializeAttributes(Op::spec(), serialData, serialLength);
            return new PluginV2<Op>(Op(std::move(values)), mNamespace);
        }
        catch (std::exception const& error)
        {
            logError(std::string(Op::spec().name) + "::deserializePlugin(" + (name != nullptr ? name : "") + "): " + error.what());
        }
        return nullptr;
    }

    void setPluginNamespace(char const* pluginNamespace) noexcept override
    {
        try
        {
            mNamespace = pluginNamespace != nullptr ? pluginNamespace : "";
        }
        catch (std::exception const& error)
        {
            logException<Op>("setPluginNamespace", error);
        }
    }

    char const* getPluginNamespace() const noexcept override
    {
        return mNamespace.c_str();
    }

private:
    FieldNameTable mFieldNames;
    std::string mNamespace;
};

template <class Op>
using Plugin = PluginV2<Op>;
template <class Op>
using Creator = CreatorV2<Op>;

#endif // EDGEATTN_PLUGIN_V3

} // namespace plugin
} // namespace edgeattn

#endif // EDGEATTN_COMMON_PLUGIN_TEMPLATES_H
