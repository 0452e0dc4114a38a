// Host-only harness for the plugin glue (tests/plugins/test_plugins_glue.py builds and runs it).
//
// Compiled against the public TensorRT headers of one version (8.x -> IPluginV2DynamicExt, 10.x -> IPluginV3),
// linked with the plugin glue objects and the real libedgeattn_kernels.so, but NOT with libnvinfer: everything
// TensorRT would provide is faked here (an IExprBuilder backed by a fake apiv::VExprBuilder, a capturing
// ILogger). No GPU is touched: the enqueue calls use an empty batch (a no-op) or shapes the glue must reject.
// Prints one JSON document; the Python test compares it with the op schemas.
#include "blockifyAttention/blockifyAttentionPlugin.h"
#include "common/pluginRegistration.h"
#include "common/pluginTemplates.h"
#include "efficientAttention/efficientAttentionPlugin.h"
#include "liteMLA/liteMLAPlugin.h"
#include "softKernelAttention/softKernelAttentionPlugin.h"

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace nvinfer1;
using namespace edgeattn;
using namespace edgeattn::plugin;

namespace
{

#if NV_TENSORRT_MAJOR >= 10
using DimValue = int64_t;
#else
using DimValue = int32_t;
#endif

// ---- fakes of what libnvinfer provides -----------------------------------------------------------------------
class CapturingLogger : public ILogger
{
public:
    void log(Severity severity, AsciiChar const* msg) noexcept override
    {
        if (severity <= Severity::kWARNING)
        {
            messages.push_back(msg);
        }
    }
    std::vector<std::string> messages;
};

CapturingLogger gLogger;

ILogger* capturingLogger()
{
    return &gLogger;
}

class FakeDimImpl : public apiv::VDimensionExpr
{
public:
    FakeDimImpl(DimValue value, bool constant)
        : mValue(value)
        , mConstant(constant)
    {
    }
    bool isConstant() const override
    {
        return mConstant;
    }
    DimValue getConstantValue() const override
    {
        return mValue;
    }
#if NV_TENSORRT_MAJOR >= 10
    bool isSizeTensor() const override
    {
        return false;
    }
#endif
    DimValue mValue;
    bool mConstant;
};

class FakeDim : public IDimensionExpr
{
public:
    FakeDim(DimValue value, bool constant)
        : mFake(value, constant)
    {
        mImpl = &mFake;
    }
    FakeDimImpl mFake;
};

class FakeBuilderImpl : public apiv::VExprBuilder
{
public:
    IDimensionExpr const* constant(DimValue value) override
    {
        return make(value, true);
    }
    IDimensionExpr const* operation(DimensionOperation op, IDimensionExpr const& first, IDimensionExpr const& second) override
    {
        ++operations;
        bool const constant = first.isConstant() && second.isConstant();
        DimValue a = first.getConstantValue();
        DimValue b = second.getConstantValue();
        DimValue value = 0;
        switch (op)
        {
        case DimensionOperation::kSUM: value = a + b; break;
        case DimensionOperation::kPROD: value = a * b; break;
        case DimensionOperation::kFLOOR_DIV: value = b != 0 ? a / b : 0; break;
        case DimensionOperation::kCEIL_DIV: value = b != 0 ? (a + b - 1) / b : 0; break;
        default: value = -1;
        }
        return make(constant ? value : -1, constant);
    }
#if NV_TENSORRT_MAJOR >= 10
    IDimensionExpr const* declareSizeTensor(int32_t, IDimensionExpr const&, IDimensionExpr const&) override
    {
        return nullptr;
    }
#endif
    IDimensionExpr const* make(DimValue value, bool constant)
    {
        mOwned.emplace_back(new FakeDim(value, constant));
        return mOwned.back().get();
    }
    int operations = 0;

private:
    std::vector<std::unique_ptr<FakeDim>> mOwned;
};

class FakeBuilder : public IExprBuilder
{
public:
    FakeBuilder()
    {
        mImpl = &fake;
    }
    FakeBuilderImpl fake;
};

// ---- tiny JSON writer ------------------------------------------------------------------------------------------
std::string quote(std::string const& text)
{
    std::string out = "\"";
    for (char c : text)
    {
        if (c == '"' || c == '\\')
        {
            out += '\\';
            out += c;
        }
        else if (c == '\n')
        {
            out += "\\n";
        }
        else if (static_cast<unsigned char>(c) < 0x20)
        {
            out += ' ';
        }
        else
        {
            out += c;
        }
    }
    return out + "\"";
}

std::string fieldsJson(PluginFieldCollection const* fc)
{
    std::ostringstream out;
    out << "[";
    for (int32_t i = 0; fc != nullptr && i < fc->nbFields; ++i)
    {
        out << (i ? ", " : "") << "[" << quote(fc->fields[i].name) << ", " << static_cast<int>(fc->fields[i].type)
            << ", " << fc->fields[i].length << "]";
    }
    return out.str() + "]";
}

std::string messagesJson()
{
    std::ostringstream out;
    out << "[";
    for (size_t i = 0; i < gLogger.messages.size(); ++i)
    {
        out << (i ? ", " : "") << quote(gLogger.messages[i]);
    }
    gLogger.messages.clear();
    return out.str() + "]";
}

// ---- per-op scenarios --------------------------------------------------------------------------------------------
struct Scenario
{
    char const* op;
    std::vector<PluginField> fields;   // valid attributes
    std::vector<std::vector<DimValue>> inputDims; // valid input shapes (one profile)
    std::vector<std::vector<DimValue>> badInputDims; // shapes the contract rejects
    int32_t batchedInputs;                          // leading inputs whose dim 0 is the batch
};

int32_t const kHeads2 = 2;
int32_t const kHeight56 = 56;
int32_t const kWindow7 = 7;
int32_t const kHasLepe1 = 1;
float const kScale = 0.0F;
char const kMasked[] = "masked";
int32_t const kHeadDim16 = 16;
char const kQuadratic[] = "quadratic_taylor";
float const kEps = 1e-6F;
float const kAlpha[] = {0.5F, 0.25F};
int32_t const kIters = 12;

std::vector<Scenario> scenarios()
{
    std::vector<Scenario> list;
    list.push_back(Scenario{"EdgeAttnBlockifyAttention",
        {PluginField("num_heads", &kHeads2, PluginFieldType::kINT32, 1),
            PluginField("height", &kHeight56, PluginFieldType::kINT32, 1),
            PluginField("width", &kHeight56, PluginFieldType::kINT32, 1),
            PluginField("window_size", &kWindow7, PluginFieldType::kINT32, 1),
            PluginField("scale", &kScale, PluginFieldType::kFLOAT32, 1),
            PluginField("has_lepe", &kHasLepe1, PluginFieldType::kINT32, 1),
            PluginField("padding", kMasked, PluginFieldType::kCHAR, sizeof(kMasked))},
        {{3, 3136, 64}, {3, 3136, 64}, {3, 3136, 64}, {64, 1, 3, 3}, {64}},
        {{3, 3000, 64}, {3, 3000, 64}, {3, 3000, 64}, {64, 1, 3, 3}, {64}}, 3});
    list.push_back(Scenario{"EdgeAttnEfficientAttention",
        {PluginField("num_heads", &kHeads2, PluginFieldType::kINT32, 1)},
        {{3, 3136, 64}, {3, 3136, 64}, {3, 3136, 64}},
        {{3, 3136, 63}, {3, 3136, 63}, {3, 3136, 63}}, 3});
    list.push_back(Scenario{"EdgeAttnLiteMLA",
        {PluginField("head_dim", &kHeadDim16, PluginFieldType::kINT32, 1),
            PluginField("kernel", kQuadratic, PluginFieldType::kCHAR, sizeof(kQuadratic)),
            PluginField("eps", &kEps, PluginFieldType::kFLOAT32, 1),
            PluginField("qt_alpha", kAlpha, PluginFieldType::kFLOAT32, 2),
            PluginField("qt_beta", kAlpha, PluginFieldType::kFLOAT32, 2),
            PluginField("qt_gamma", kAlpha, PluginFieldType::kFLOAT32, 2)},
        {{3, 96, 14, 14}},
        {{3, 144, 14, 14}}, 1});
    list.push_back(Scenario{"EdgeAttnSoftKernelAttention",
        {PluginField("num_heads", &kHeads2, PluginFieldType::kINT32, 1),
            PluginField("newton_iters", &kIters, PluginFieldType::kINT32, 1)},
        {{3, 3136, 64}, {3, 49, 64}, {3, 3136, 64}},
        {{3, 3136, 64}, {3, 49, 32}, {3, 3136, 64}}, 3});
    return list;
}

Dims toDims(std::vector<DimValue> const& values)
{
    Dims dims;
    dims.nbDims = static_cast<int32_t>(values.size());
    for (size_t i = 0; i < values.size(); ++i)
    {
        dims.d[i] = values[i];
    }
    return dims;
}

PluginTensorDesc tensorDesc(std::vector<DimValue> const& dims, DataType type, TensorFormat format = TensorFormat::kLINEAR)
{
    PluginTensorDesc desc;
    std::memset(&desc, 0, sizeof(desc));
    desc.dims = toDims(dims);
    desc.type = type;
    desc.format = format;
    desc.scale = 1.0F;
    return desc;
}

DynamicPluginTensorDesc dynamicDesc(std::vector<DimValue> const& dims, DataType type, TensorFormat format = TensorFormat::kLINEAR)
{
    DynamicPluginTensorDesc desc;
    std::memset(&desc, 0, sizeof(desc));
    desc.desc = tensorDesc(dims, type, format);
    desc.min = desc.desc.dims;
    desc.max = desc.desc.dims;
#if NV_TENSORRT_MAJOR >= 10
    desc.opt = desc.desc.dims;
#endif
    return desc;
}

std::vector<DimValue> withBatch(std::vector<DimValue> dims, DimValue batch)
{
    dims[0] = batch;
    return dims;
}

#if EDGEATTN_PLUGIN_V3
using PluginHandle = IPluginV3;
#else
using PluginHandle = IPluginV2DynamicExt;
#endif

//! The format-combination question for every position, for the given input/output types.
template <typename Desc>
std::string formatRow(std::function<bool(int32_t, Desc const*, int32_t, int32_t)> const& ask, std::vector<Desc> descs, int32_t nbInputs)
{
    std::ostringstream out;
    out << "[";
    for (size_t pos = 0; pos < descs.size(); ++pos)
    {
        out << (pos ? ", " : "") << (ask(static_cast<int32_t>(pos), descs.data(), nbInputs, 1) ? "true" : "false");
    }
    return out.str() + "]";
}

std::string dimsJson(DimsExprs const& dims)
{
    std::ostringstream out;
    out << "[";
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        out << (i ? ", " : "");
        if (dims.d[i] == nullptr)
        {
            out << "null";
        }
        else if (dims.d[i]->isConstant())
        {
            out << dims.d[i]->getConstantValue();
        }
        else
        {
            out << "\"?\"";
        }
    }
    return out.str() + "]";
}

std::string runScenario(CreatorEntry const& entry, Scenario const& scenario)
{
    std::ostringstream out;
    PluginFieldCollection fc;
    fc.nbFields = static_cast<int32_t>(scenario.fields.size());
    fc.fields = scenario.fields.data();
    int32_t const nbInputs = static_cast<int32_t>(scenario.inputDims.size());

#if EDGEATTN_PLUGIN_V3
    auto* creator = static_cast<IPluginCreatorV3One*>(entry.creator);
    std::unique_ptr<IPluginV3> plugin(creator->createPlugin("node", &fc, TensorRTPhase::kBUILD));
    out << "\"created\": " << (plugin ? "true" : "false");
    if (!plugin)
    {
        out << ", \"messages\": " << messagesJson();
        return out.str();
    }
    auto* core = static_cast<IPluginV3OneCore*>(plugin->getCapabilityInterface(PluginCapabilityType::kCORE));
    auto* build = static_cast<IPluginV3OneBuild*>(plugin->getCapabilityInterface(PluginCapabilityType::kBUILD));
    auto* runtime = static_cast<IPluginV3OneRuntime*>(plugin->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
    out << ", \"plugin_name\": " << quote(core->getPluginName()) << ", \"plugin_version\": "
        << quote(core->getPluginVersion()) << ", \"plugin_namespace\": " << quote(core->getPluginNamespace());

    // serialization round trip through createPlugin(kRUNTIME)
    PluginFieldCollection const* serialized = runtime->getFieldsToSerialize();
    out << ", \"serialized_fields\": " << fieldsJson(serialized);
    std::unique_ptr<IPluginV3> restored(creator->createPlugin("node", serialized, TensorRTPhase::kRUNTIME));
    std::string roundTrip = "null";
    if (restored)
    {
        auto* restoredRuntime
            = static_cast<IPluginV3OneRuntime*>(restored->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
        roundTrip = quote(describeAttributes(parseAttributes(*entry.spec, toFieldViews(restoredRuntime->getFieldsToSerialize()))));
    }
    out << ", \"round_trip\": " << roundTrip << ", \"original\": "
        << quote(describeAttributes(parseAttributes(*entry.spec, toFieldViews(runtime->getFieldsToSerialize()))));

    // output types and shapes
    std::vector<DataType> inTypes(static_cast<size_t>(nbInputs), DataType::kHALF);
    DataType outType = DataType::kFLOAT;
    out << ", \"output_type_status\": " << build->getOutputDataTypes(&outType, 1, inTypes.data(), nbInputs)
        << ", \"output_type_is_half\": " << (outType == DataType::kHALF ? "true" : "false");
    FakeBuilder builder;
    std::vector<DimsExprs> inputExprs(static_cast<size_t>(nbInputs));
    for (int32_t i = 0; i < nbInputs; ++i)
    {
        inputExprs[i].nbDims = static_cast<int32_t>(scenario.inputDims[i].size());
        for (int32_t j = 0; j < inputExprs[i].nbDims; ++j)
        {
            // the batch dimension is symbolic, the rest constant
            inputExprs[i].d[j] = builder.fake.make(j == 0 ? -1 : scenario.inputDims[i][j], j != 0);
        }
    }
    DimsExprs outputExprs;
    int32_t const shapeStatus = build->getOutputShapes(inputExprs.data(), nbInputs, nullptr, 0, &outputExprs, 1, builder);
    out << ", \"output_shape_status\": " << shapeStatus << ", \"output_dims\": " << dimsJson(outputExprs)
        << ", \"output_batch_is_input_batch\": " << (outputExprs.d[0] == inputExprs[0].d[0] ? "true" : "false");
    int32_t const wrongCount = build->getOutputShapes(inputExprs.data(), nbInputs - 1, nullptr, 0, &outputExprs, 1, builder);
    out << ", \"output_shape_wrong_input_count\": " << wrongCount;

    // format combinations
    auto ask = [&](int32_t pos, DynamicPluginTensorDesc const* descs, int32_t nbIn, int32_t nbOut) {
        return build->supportsFormatCombination(pos, descs, nbIn, nbOut);
    };
    auto row = [&](DataType first, DataType rest, TensorFormat format) {
        std::vector<DynamicPluginTensorDesc> descs;
        for (int32_t i = 0; i < nbInputs; ++i)
        {
            descs.push_back(dynamicDesc(scenario.inputDims[i], i == 0 ? first : rest, format));
        }
        descs.push_back(dynamicDesc(scenario.inputDims[0], rest, format));
        return formatRow<DynamicPluginTensorDesc>(ask, descs, nbInputs);
    };
    out << ", \"formats\": {\"fp32\": " << row(DataType::kFLOAT, DataType::kFLOAT, TensorFormat::kLINEAR)
        << ", \"fp16\": " << row(DataType::kHALF, DataType::kHALF, TensorFormat::kLINEAR)
        << ", \"mixed\": " << row(DataType::kFLOAT, DataType::kHALF, TensorFormat::kLINEAR)
        << ", \"int8\": " << row(DataType::kINT8, DataType::kINT8, TensorFormat::kLINEAR)
        << ", \"chw2\": " << row(DataType::kHALF, DataType::kHALF, TensorFormat::kCHW2) << "}";

    // configure / workspace / onShapeChange / enqueue
    auto dynamicDescs = [&](std::vector<std::vector<DimValue>> const& dims, DimValue batch) {
        std::vector<DynamicPluginTensorDesc> descs;
        for (auto const& d : dims)
        {
            descs.push_back(dynamicDesc(batch >= 0 ? withBatch(d, batch) : d, DataType::kHALF));
        }
        return descs;
    };
    auto good = dynamicDescs(scenario.inputDims, -1);
    auto bad = dynamicDescs(scenario.badInputDims, -1);
    DynamicPluginTensorDesc outDesc = dynamicDesc(scenario.inputDims[0], DataType::kHALF);
    gLogger.messages.clear();
    out << ", \"configure_good\": " << build->configurePlugin(good.data(), nbInputs, &outDesc, 1);
    out << ", \"configure_bad\": " << build->configurePlugin(bad.data(), nbInputs, &outDesc, 1)
        << ", \"configure_bad_messages\": " << messagesJson();
    out << ", \"workspace\": " << build->getWorkspaceSize(good.data(), nbInputs, &outDesc, 1);
    std::vector<PluginTensorDesc> plain;
    for (size_t i = 0; i < scenario.inputDims.size(); ++i)
    {
        auto const& d = scenario.inputDims[i];
        plain.push_back(tensorDesc(static_cast<int32_t>(i) < scenario.batchedInputs ? withBatch(d, 0) : d, DataType::kHALF));
    }
    PluginTensorDesc plainOut = tensorDesc(withBatch(scenario.inputDims[0], 0), DataType::kHALF);
    out << ", \"shape_change_empty_batch\": " << runtime->onShapeChange(plain.data(), nbInputs, &plainOut, 1);
    std::vector<void const*> pointers(static_cast<size_t>(nbInputs), nullptr);
    void* outputs[1] = {nullptr};
    out << ", \"enqueue_empty_batch\": "
        << runtime->enqueue(plain.data(), &plainOut, pointers.data(), outputs, nullptr, nullptr)
        << ", \"enqueue_empty_batch_messages\": " << messagesJson();
    std::unique_ptr<IPluginV3> attached(runtime->attachToContext(nullptr));
    out << ", \"attach_clones\": " << (attached && attached.get() != plugin.get() ? "true" : "false");
#else
    auto* creator = static_cast<IPluginCreator*>(entry.creator);
    IPluginV2* raw = creator->createPlugin("node", &fc);
    out << "\"created\": " << (raw ? "true" : "false");
    if (!raw)
    {
        out << ", \"messages\": " << messagesJson();
        return out.str();
    }
    auto* plugin = static_cast<IPluginV2DynamicExt*>(raw);
    out << ", \"plugin_name\": " << quote(plugin->getPluginType()) << ", \"plugin_version\": "
        << quote(plugin->getPluginVersion()) << ", \"plugin_namespace\": " << quote(plugin->getPluginNamespace());

    std::vector<char> bytes(plugin->getSerializationSize());
    plugin->serialize(bytes.data());
    IPluginV2* restoredRaw = creator->deserializePlugin("node", bytes.data(), bytes.size());
    std::string roundTrip = "null";
    if (restoredRaw)
    {
        roundTrip = quote(describeAttributes(deserializeAttributes(*entry.spec, bytes.data(), bytes.size())));
        std::vector<char> again(restoredRaw->getSerializationSize());
        restoredRaw->serialize(again.data());
        out << ", \"reserialized_identical\": " << (again == bytes ? "true" : "false");
        restoredRaw->destroy();
    }
    out << ", \"round_trip\": " << roundTrip << ", \"original\": "
        << quote(describeAttributes(deserializeAttributes(*entry.spec, bytes.data(), bytes.size())));
    std::vector<char> corrupt = bytes;
    corrupt[0] = 'X';
    IPluginV2* corrupted = creator->deserializePlugin("node", corrupt.data(), corrupt.size());
    out << ", \"corrupt_rejected\": " << (corrupted == nullptr ? "true" : "false") << ", \"corrupt_messages\": " << messagesJson();
    IPluginV2* truncated = creator->deserializePlugin("node", bytes.data(), bytes.size() - 1);
    out << ", \"truncated_rejected\": " << (truncated == nullptr ? "true" : "false");
    gLogger.messages.clear();

    std::vector<DataType> inTypes(static_cast<size_t>(nbInputs), DataType::kHALF);
    out << ", \"output_type_status\": 0, \"output_type_is_half\": "
        << (plugin->getOutputDataType(0, inTypes.data(), nbInputs) == DataType::kHALF ? "true" : "false");
    FakeBuilder builder;
    std::vector<DimsExprs> inputExprs(static_cast<size_t>(nbInputs));
    for (int32_t i = 0; i < nbInputs; ++i)
    {
        inputExprs[i].nbDims = static_cast<int32_t>(scenario.inputDims[i].size());
        for (int32_t j = 0; j < inputExprs[i].nbDims; ++j)
        {
            inputExprs[i].d[j] = builder.fake.make(j == 0 ? -1 : scenario.inputDims[i][j], j != 0);
        }
    }
    DimsExprs outputExprs = plugin->getOutputDimensions(0, inputExprs.data(), nbInputs, builder);
    out << ", \"output_shape_status\": " << (outputExprs.nbDims > 0 ? 0 : -1) << ", \"output_dims\": " << dimsJson(outputExprs)
        << ", \"output_batch_is_input_batch\": " << (outputExprs.d[0] == inputExprs[0].d[0] ? "true" : "false");
    DimsExprs wrong = plugin->getOutputDimensions(0, inputExprs.data(), nbInputs - 1, builder);
    out << ", \"output_shape_wrong_input_count\": " << (wrong.nbDims > 0 ? 0 : -1);
    gLogger.messages.clear();

    auto ask = [&](int32_t pos, PluginTensorDesc const* descs, int32_t nbIn, int32_t nbOut) {
        return plugin->supportsFormatCombination(pos, descs, nbIn, nbOut);
    };
    auto row = [&](DataType first, DataType rest, TensorFormat format) {
        std::vector<PluginTensorDesc> descs;
        for (int32_t i = 0; i < nbInputs; ++i)
        {
            descs.push_back(tensorDesc(scenario.inputDims[i], i == 0 ? first : rest, format));
        }
        descs.push_back(tensorDesc(scenario.inputDims[0], rest, format));
        return formatRow<PluginTensorDesc>(ask, descs, nbInputs);
    };
    out << ", \"formats\": {\"fp32\": " << row(DataType::kFLOAT, DataType::kFLOAT, TensorFormat::kLINEAR)
        << ", \"fp16\": " << row(DataType::kHALF, DataType::kHALF, TensorFormat::kLINEAR)
        << ", \"mixed\": " << row(DataType::kFLOAT, DataType::kHALF, TensorFormat::kLINEAR)
        << ", \"int8\": " << row(DataType::kINT8, DataType::kINT8, TensorFormat::kLINEAR)
        << ", \"chw2\": " << row(DataType::kHALF, DataType::kHALF, TensorFormat::kCHW2) << "}";

    std::vector<DynamicPluginTensorDesc> good;
    std::vector<DynamicPluginTensorDesc> bad;
    for (auto const& d : scenario.inputDims)
    {
        good.push_back(dynamicDesc(d, DataType::kHALF));
    }
    for (auto const& d : scenario.badInputDims)
    {
        bad.push_back(dynamicDesc(d, DataType::kHALF));
    }
    DynamicPluginTensorDesc outDesc = dynamicDesc(scenario.inputDims[0], DataType::kHALF);
    plugin->configurePlugin(good.data(), nbInputs, &outDesc, 1);
    out << ", \"configure_good\": " << (gLogger.messages.empty() ? 0 : -1);
    gLogger.messages.clear();
    plugin->configurePlugin(bad.data(), nbInputs, &outDesc, 1);
    out << ", \"configure_bad\": " << (gLogger.messages.empty() ? 0 : -1) << ", \"configure_bad_messages\": " << messagesJson();
    std::vector<PluginTensorDesc> maxDescs;
    for (auto const& d : scenario.inputDims)
    {
        maxDescs.push_back(tensorDesc(d, DataType::kHALF));
    }
    PluginTensorDesc plainOutMax = tensorDesc(scenario.inputDims[0], DataType::kHALF);
    out << ", \"workspace\": " << plugin->getWorkspaceSize(maxDescs.data(), nbInputs, &plainOutMax, 1);
    std::vector<PluginTensorDesc> plain;
    for (size_t i = 0; i < scenario.inputDims.size(); ++i)
    {
        auto const& d = scenario.inputDims[i];
        plain.push_back(tensorDesc(static_cast<int32_t>(i) < scenario.batchedInputs ? withBatch(d, 0) : d, DataType::kHALF));
    }
    PluginTensorDesc plainOut = tensorDesc(withBatch(scenario.inputDims[0], 0), DataType::kHALF);
    out << ", \"shape_change_empty_batch\": 0";
    std::vector<void const*> pointers(static_cast<size_t>(nbInputs), nullptr);
    void* outputs[1] = {nullptr};
    out << ", \"enqueue_empty_batch\": " << plugin->enqueue(plain.data(), &plainOut, pointers.data(), outputs, nullptr, nullptr)
        << ", \"enqueue_empty_batch_messages\": " << messagesJson();
    std::vector<PluginTensorDesc> badPlain;
    for (size_t i = 0; i < scenario.badInputDims.size(); ++i)
    {
        auto const& d = scenario.badInputDims[i];
        badPlain.push_back(tensorDesc(static_cast<int32_t>(i) < scenario.batchedInputs ? withBatch(d, 0) : d, DataType::kHALF));
    }
    out << ", \"enqueue_bad_shapes\": " << plugin->enqueue(badPlain.data(), &plainOut, pointers.data(), outputs, nullptr, nullptr)
        << ", \"enqueue_bad_messages\": " << messagesJson();
    IPluginV2DynamicExt* cloned = plugin->clone();
    out << ", \"attach_clones\": " << (cloned != nullptr && cloned != plugin ? "true" : "false");
    if (cloned)
    {
        cloned->destroy();
    }
    plugin->destroy();
#endif
    return out.str();
}

//! createPlugin must refuse these (and log why).
std::string rejections(CreatorEntry const& entry, Scenario const& scenario)
{
    std::ostringstream out;
    int32_t const wrongInt = 3;
    float const wrongFloat = 1.0F;
    char const bogus[] = "bogus";
    struct Case
    {
        char const* label;
        std::vector<PluginField> fields;
    };
    std::vector<Case> cases;
    std::vector<PluginField> unknown = scenario.fields;
    unknown.push_back(PluginField("not_in_schema", &wrongInt, PluginFieldType::kINT32, 1));
    cases.push_back(Case{"unknown_field", unknown});
    std::vector<PluginField> missing(scenario.fields.begin() + 1, scenario.fields.end()); // first is required
    cases.push_back(Case{"missing_required", missing});
    std::vector<PluginField> wrongType = scenario.fields;
    wrongType[0] = PluginField(wrongType[0].name, &wrongFloat, PluginFieldType::kFLOAT32, 1);
    cases.push_back(Case{"wrong_type", wrongType});
    std::vector<PluginField> badValue = scenario.fields;
    for (auto& field : badValue)
    {
        if (field.type == PluginFieldType::kCHAR)
        {
            field = PluginField(field.name, bogus, PluginFieldType::kCHAR, sizeof(bogus));
        }
    }
    cases.push_back(Case{"bad_string_value", badValue});
    for (size_t i = 0; i < cases.size(); ++i)
    {
        PluginFieldCollection fc;
        fc.nbFields = static_cast<int32_t>(cases[i].fields.size());
        fc.fields = cases[i].fields.data();
        gLogger.messages.clear();
#if EDGEATTN_PLUGIN_V3
        std::unique_ptr<IPluginV3> plugin(
            static_cast<IPluginCreatorV3One*>(entry.creator)->createPlugin("node", &fc, TensorRTPhase::kBUILD));
        bool const created = plugin != nullptr;
#else
        IPluginV2* plugin = static_cast<IPluginCreator*>(entry.creator)->createPlugin("node", &fc);
        bool const created = plugin != nullptr;
        if (plugin)
        {
            plugin->destroy();
        }
#endif
        out << (i ? ", " : "") << quote(cases[i].label) << ": {\"created\": " << (created ? "true" : "false")
            << ", \"messages\": " << messagesJson() << "}";
    }
    return out.str();
}

} // namespace

int main()
{
    setLoggerProvider(&capturingLogger);
    std::ostringstream out;
    out << "{\"trt_version\": \"" << NV_TENSORRT_MAJOR << "." << NV_TENSORRT_MINOR << "." << NV_TENSORRT_PATCH << "\"";
    out << ", \"interface\": " << quote(EDGEATTN_PLUGIN_V3 ? "IPluginV3" : "IPluginV2DynamicExt");
    int32_t count = 0;
    CreatorEntry const* entries = allCreators(&count);
    out << ", \"creators\": [";
    for (int32_t i = 0; i < count; ++i)
    {
#if EDGEATTN_PLUGIN_V3
        auto* creator = static_cast<IPluginCreatorV3One*>(entries[i].creator);
        InterfaceInfo const info = creator->getInterfaceInfo();
        std::string const kind = info.kind;
#else
        auto* creator = static_cast<IPluginCreator*>(entries[i].creator);
        std::string const kind = "PLUGIN CREATOR_V1";
#endif
        out << (i ? ", " : "") << "{\"name\": " << quote(creator->getPluginName()) << ", \"version\": "
            << quote(creator->getPluginVersion()) << ", \"namespace\": " << quote(creator->getPluginNamespace())
            << ", \"interface_kind\": " << quote(kind) << ", \"fields\": " << fieldsJson(creator->getFieldNames()) << "}";
    }
    out << "], \"scenarios\": {";
    std::vector<Scenario> const list = scenarios();
    bool first = true;
    for (Scenario const& scenario : list)
    {
        for (int32_t i = 0; i < count; ++i)
        {
            if (std::string(entries[i].spec->name) == scenario.op)
            {
                out << (first ? "" : ", ") << quote(scenario.op) << ": {" << runScenario(entries[i], scenario)
                    << ", \"rejections\": {" << rejections(entries[i], scenario) << "}}";
                first = false;
            }
        }
    }
    out << "}, \"unexpected_messages\": " << messagesJson() << "}";
    std::printf("%s\n", out.str().c_str());
    return 0;
}
