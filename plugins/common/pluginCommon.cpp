#include "common/pluginCommon.h"

#include "common/pluginError.h"
#include "edgeattn/kernels.h"

#include <atomic>
#include <cstdio>

namespace edgeattn
{
namespace plugin
{
namespace
{
std::atomic<LoggerProvider> gLoggerProvider{nullptr};

nvinfer1::PluginFieldType pluginFieldType(AttributeType type)
{
    switch (type)
    {
    case AttributeType::kInt:
    case AttributeType::kInts: return nvinfer1::PluginFieldType::kINT32;
    case AttributeType::kFloat:
    case AttributeType::kFloats: return nvinfer1::PluginFieldType::kFLOAT32;
    case AttributeType::kString: return nvinfer1::PluginFieldType::kCHAR;
    }
    return nvinfer1::PluginFieldType::kUNKNOWN;
}

FieldKind fieldKind(nvinfer1::PluginFieldType type)
{
    switch (type)
    {
    case nvinfer1::PluginFieldType::kINT32: return FieldKind::kInt32;
    case nvinfer1::PluginFieldType::kFLOAT32: return FieldKind::kFloat32;
    case nvinfer1::PluginFieldType::kFLOAT64: return FieldKind::kFloat64;
    case nvinfer1::PluginFieldType::kCHAR: return FieldKind::kChar;
#if NV_TENSORRT_MAJOR >= 10
    case nvinfer1::PluginFieldType::kINT64: return FieldKind::kInt64;
#endif
    default: return FieldKind::kOther;
    }
}
} // namespace

void setLoggerProvider(LoggerProvider provider)
{
    gLoggerProvider.store(provider);
}

void logMessage(nvinfer1::ILogger::Severity severity, std::string const& message) noexcept
{
    try
    {
        std::string const text = "[edgeattn] " + message;
        LoggerProvider const provider = gLoggerProvider.load();
        nvinfer1::ILogger* const logger = provider != nullptr ? provider() : nullptr;
        if (logger != nullptr)
        {
            logger->log(severity, text.c_str());
        }
        else if (severity <= nvinfer1::ILogger::Severity::kWARNING)
        {
            std::fprintf(stderr, "%s\n", text.c_str());
        }
    }
    catch (...)
    {
        // Logging must never throw out of a noexcept TensorRT entry point.
    }
}

void logError(std::string const& message) noexcept
{
    logMessage(nvinfer1::ILogger::Severity::kERROR, message);
}

TensorShape toShape(nvinfer1::Dims const& dims)
{
    PLUGIN_CHECK(dims.nbDims >= 0 && dims.nbDims <= kMaxShapeRank, "tensor rank " << dims.nbDims << " is not supported");
    TensorShape shape;
    shape.nbDims = dims.nbDims;
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        shape.d[i] = static_cast<int64_t>(dims.d[i]);
    }
    return shape;
}

int toKernelDtype(nvinfer1::DataType type)
{
    switch (type)
    {
    case nvinfer1::DataType::kFLOAT: return EDGEATTN_DTYPE_FLOAT32;
    case nvinfer1::DataType::kHALF: return EDGEATTN_DTYPE_FLOAT16;
    default: return -1;
    }
}

std::vector<int32_t> deviceKernelPathTactics(int op, int dtype)
{
    int computeCapability = 0;
    int codeArch = 0;
    int const status = edgeattn_device_arch(&computeCapability, &codeArch);
    PLUGIN_CHECK(status == EDGEATTN_STATUS_SUCCESS,
        "cannot query the device for its kernel paths: " << edgeattn_status_string(status) << ": "
                                                          << edgeattn_last_error());
    int32_t paths[16] = {};
    int const count = edgeattn_kernel_paths(op, dtype, computeCapability, codeArch, paths, 16);
    PLUGIN_CHECK(count >= 0 && count <= 16, "edgeattn_kernel_paths failed: " << edgeattn_last_error());
    return std::vector<int32_t>(paths, paths + count);
}

bool isKernelPathTactic(int op, int32_t tactic)
{
    if (tactic == 0)
    {
        return true;
    }
    // Every path this build has: the FP16 list on a device beyond every path's minimum arch.
    int constexpr kAnyArch = 1000;
    int32_t paths[16] = {};
    int const count = edgeattn_kernel_paths(op, EDGEATTN_DTYPE_FLOAT16, kAnyArch, kAnyArch, paths, 16);
    for (int i = 0; i < count && i < 16; ++i)
    {
        if (paths[i] == tactic)
        {
            return true;
        }
    }
    return false;
}

ScopedTactic::ScopedTactic(int32_t tactic)
    : mPrevious(edgeattn_get_thread_kernel_path())
{
    edgeattn_set_thread_kernel_path(tactic == 0 ? EDGEATTN_KERNEL_PATH_INHERIT : tactic);
}

ScopedTactic::~ScopedTactic()
{
    edgeattn_set_thread_kernel_path(mPrevious);
}

std::vector<FieldView> toFieldViews(nvinfer1::PluginFieldCollection const* collection)
{
    PLUGIN_CHECK(collection != nullptr, "the plugin field collection is null");
    PLUGIN_CHECK(collection->nbFields >= 0 && (collection->fields != nullptr || collection->nbFields == 0),
        "the plugin field collection has " << collection->nbFields << " fields and no storage");
    std::vector<FieldView> views;
    for (int32_t i = 0; i < collection->nbFields; ++i)
    {
        nvinfer1::PluginField const& field = collection->fields[i];
        PLUGIN_CHECK(field.name != nullptr, "plugin field " << i << " has no name");
        views.push_back(FieldView{field.name, fieldKind(field.type), field.data, field.length});
    }
    return views;
}

bool supportsLinearSameType(nvinfer1::PluginTensorDesc const& desc, nvinfer1::PluginTensorDesc const& first, int32_t pos)
{
    if (desc.format != nvinfer1::TensorFormat::kLINEAR)
    {
        return false;
    }
    bool const floating = desc.type == nvinfer1::DataType::kFLOAT || desc.type == nvinfer1::DataType::kHALF;
    return floating && (pos == 0 || desc.type == first.type);
}

nvinfer1::DimsExprs outputDims(
    OutputShapeRule rule, nvinfer1::DimsExprs const& input, nvinfer1::IExprBuilder& exprBuilder)
{
    nvinfer1::DimsExprs output = input;
    if (rule.dividedAxis >= 0)
    {
        PLUGIN_CHECK(rule.dividedAxis < input.nbDims, "output rule divides axis " << rule.dividedAxis << " of a rank-"
                                                                                 << input.nbDims << " input");
        output.d[rule.dividedAxis] = exprBuilder.operation(nvinfer1::DimensionOperation::kFLOOR_DIV,
            *input.d[rule.dividedAxis], *exprBuilder.constant(rule.divisor));
    }
    return output;
}

FieldNameTable::FieldNameTable(OpSpec const& spec)
{
    for (int32_t i = 0; i < spec.nbAttributes; ++i)
    {
        AttributeSpec const& attribute = spec.attributes[i];
        bool const scalar = attribute.type == AttributeType::kInt || attribute.type == AttributeType::kFloat;
        mFields.emplace_back(attribute.name, nullptr, pluginFieldType(attribute.type), scalar ? 1 : 0);
    }
    mCollection.nbFields = static_cast<int32_t>(mFields.size());
    mCollection.fields = mFields.data();
}

nvinfer1::PluginFieldCollection const* SerializedFields::build(AttributeValues const& values)
{
    mFields.clear();
    mStrings.clear();
    mStrings.reserve(static_cast<size_t>(values.size())); // c_str() pointers must stay valid
    for (int32_t i = 0; i < values.size(); ++i)
    {
        char const* name = values.specAt(i).name;
        AttributeValue const& value = values.valueAt(i);
        switch (value.type)
        {
        case AttributeType::kInt:
            mFields.emplace_back(name, &value.intValue, nvinfer1::PluginFieldType::kINT32, 1);
            break;
        case AttributeType::kFloat:
            mFields.emplace_back(name, &value.floatValue, nvinfer1::PluginFieldType::kFLOAT32, 1);
            break;
        case AttributeType::kString:
            mStrings.push_back(value.stringValue);
            mFields.emplace_back(name, mStrings.back().c_str(), nvinfer1::PluginFieldType::kCHAR,
                static_cast<int32_t>(mStrings.back().size() + 1));
            break;
        case AttributeType::kInts:
            mFields.emplace_back(
                name, value.ints.data(), nvinfer1::PluginFieldType::kINT32, static_cast<int32_t>(value.ints.size()));
            break;
        case AttributeType::kFloats:
            mFields.emplace_back(name, value.floats.data(), nvinfer1::PluginFieldType::kFLOAT32,
                static_cast<int32_t>(value.floats.size()));
            break;
        }
    }
    mCollection.nbFields = static_cast<int32_t>(mFields.size());
    mCollection.fields = mFields.data();
    return &mCollection;
}

} // namespace plugin
} // namespace edgeattn
