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

#include "edgeattn/kernels.h"

#include <dlfcn.h>

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


// ---- spies on the C ABI launchers the glue calls --------------------------------------------------------------
// The harness defines the four launchers itself, so the glue linked into it calls these. Outside spy mode they
// forward to libedgeattn_kernels.so (RTLD_NEXT); in spy mode they record the arguments as JSON and return
// gSpyStatus without touching memory, so enqueue can be driven with a non-empty batch on a machine without a GPU.
bool gSpyMode = false;
int gSpyStatus = 0;
std::string gSpyCall = "null";

template <typename Fn>
Fn realLauncher(char const* name)
{
    void* symbol = dlsym(RTLD_NEXT, name);
    if (symbol == nullptr)
    {
        std::fprintf(stderr, "glue_harness: no real %s\n", name);
        std::abort();
    }
    return reinterpret_cast<Fn>(symbol);
}

//! The spied call's JSON object with the calling thread's kernel path at the time of the call (the real library's
//! edgeattn_get_thread_kernel_path: a plugin's tactic, -1 = the process-wide setting decides).
std::string withPath(std::string const& json)
{
    return json.substr(0, json.size() - 1) + ", \"thread_path\": " + std::to_string(edgeattn_get_thread_kernel_path())
        + "}";
}

// The device TensorRT would build on: edgeattn_device_arch is interposed like the launchers. Outside fake mode it
// forwards to libedgeattn_kernels.so (no GPU here: a CUDA error); in fake mode it reports gFakeArch.
bool gFakeDevice = false;
int gFakeCapability = 0;
int gFakeCodeArch = 0;

std::string floatsJson(float const* values, int count)
{
    std::ostringstream out;
    out.precision(9);
    out << "[";
    for (int i = 0; values != nullptr && i < count; ++i)
    {
        out << (i ? ", " : "") << values[i];
    }
    return out.str() + "]";
}

} // namespace

extern "C" int edgeattn_device_arch(int* compute_capability, int* code_arch)
{
    if (!gFakeDevice)
    {
        return realLauncher<decltype(&edgeattn_device_arch)>("edgeattn_device_arch")(compute_capability, code_arch);
    }
    *compute_capability = gFakeCapability;
    *code_arch = gFakeCodeArch;
    return EDGEATTN_STATUS_SUCCESS;
}

extern "C" int edgeattn_blockify_attention(const void* q, const void* k, const void* v, const void* lepe_weight,
    const void* lepe_bias, void* out, int batch, int height, int width, int channels, int num_heads, int window_size,
    float scale, int padding, int dtype, void* stream)
{
    if (!gSpyMode)
    {
        return realLauncher<decltype(&edgeattn_blockify_attention)>("edgeattn_blockify_attention")(q, k, v,
            lepe_weight, lepe_bias, out, batch, height, width, channels, num_heads, window_size, scale, padding, dtype,
            stream);
    }
    std::ostringstream json;
    json.precision(9);
    json << "{\"batch\": " << batch << ", \"height\": " << height << ", \"width\": " << width << ", \"channels\": "
         << channels << ", \"num_heads\": " << num_heads << ", \"window_size\": " << window_size << ", \"scale\": "
         << scale << ", \"padding\": " << padding << ", \"dtype\": " << dtype << ", \"lepe\": "
         << (lepe_weight != nullptr && lepe_bias != nullptr ? "true" : "false") << "}";
    gSpyCall = withPath(json.str());
    return gSpyStatus;
}

extern "C" int edgeattn_efficient_attention(const void* q, const void* k, const void* v, void* out, int batch,
    int tokens, int channels, int num_heads, int dtype, void* workspace, size_t workspace_bytes, void* stream)
{
    if (!gSpyMode)
    {
        return realLauncher<decltype(&edgeattn_efficient_attention)>("edgeattn_efficient_attention")(q, k, v, out,
            batch, tokens, channels, num_heads, dtype, workspace, workspace_bytes, stream);
    }
    std::ostringstream json;
    json << "{\"batch\": " << batch << ", \"tokens\": " << tokens << ", \"channels\": " << channels
         << ", \"num_heads\": " << num_heads << ", \"dtype\": " << dtype << ", \"workspace_bytes\": " << workspace_bytes
         << "}";
    gSpyCall = withPath(json.str());
    return gSpyStatus;
}

extern "C" int edgeattn_lite_mla(const void* qkv, void* out, int batch, int channels_in, int height, int width,
    int head_dim, int kernel, float eps, const float* qt_alpha, const float* qt_beta, const float* qt_gamma,
    int qt_count, int dtype, void* workspace, size_t workspace_bytes, void* stream)
{
    if (!gSpyMode)
    {
        return realLauncher<decltype(&edgeattn_lite_mla)>("edgeattn_lite_mla")(qkv, out, batch, channels_in, height,
            width, head_dim, kernel, eps, qt_alpha, qt_beta, qt_gamma, qt_count, dtype, workspace, workspace_bytes,
            stream);
    }
    std::ostringstream json;
    json.precision(9);
    json << "{\"batch\": " << batch << ", \"channels_in\": " << channels_in << ", \"height\": " << height
         << ", \"width\": " << width << ", \"head_dim\": " << head_dim << ", \"kernel\": " << kernel << ", \"eps\": "
         << eps << ", \"qt_count\": " << qt_count << ", \"qt_alpha\": " << floatsJson(qt_alpha, qt_count)
         << ", \"qt_beta\": " << floatsJson(qt_beta, qt_count) << ", \"qt_gamma\": " << floatsJson(qt_gamma, qt_count)
         << ", \"dtype\": " << dtype << ", \"workspace_bytes\": " << workspace_bytes << "}";
    gSpyCall = withPath(json.str());
    return gSpyStatus;
}

extern "C" int edgeattn_soft_kernel_attention(const void* q, const void* landmarks, const void* v, void* out,
    int batch, int tokens, int num_landmarks, int channels, int num_heads, int newton_iters, int symmetric_norm,
    int dtype, void* workspace, size_t workspace_bytes, void* stream)
{
    if (!gSpyMode)
    {
        return realLauncher<decltype(&edgeattn_soft_kernel_attention)>("edgeattn_soft_kernel_attention")(q,
            landmarks, v, out, batch, tokens, num_landmarks, channels, num_heads, newton_iters, symmetric_norm, dtype,
            workspace, workspace_bytes, stream);
    }
    std::ostringstream json;
    json << "{\"batch\": " << batch << ", \"tokens\": " << tokens << ", \"num_landmarks\": " << num_landmarks
         << ", \"channels\": " << channels << ", \"num_heads\": " << num_heads << ", \"newton_iters\": " << newton_iters
         << ", \"symmetric_norm\": " << symmetric_norm << ", \"dtype\": " << dtype << ", \"workspace_bytes\": "
         << workspace_bytes << "}";
    gSpyCall = withPath(json.str());
    return gSpyStatus;
}

namespace
{
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
    std::vector<char> trailing = bytes;
    trailing.push_back('\0');
    IPluginV2* withTrailing = creator->deserializePlugin("node", trailing.data(), trailing.size());
    out << ", \"trailing_rejected\": " << (withTrailing == nullptr ? "true" : "false")
        << ", \"trailing_messages\": " << messagesJson();
    if (withTrailing)
    {
        withTrailing->destroy();
    }
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
#if NV_TENSORRT_MAJOR >= 10
    // The first field is a required int: as INT64 it is taken when it fits 32 bits, refused (not wrapped) otherwise.
    int64_t const int64Two = 2;
    int64_t const int64Wrapping = (int64_t{1} << 32) + 2;
    std::vector<PluginField> int64InRange = scenario.fields;
    int64InRange[0] = PluginField(int64InRange[0].name, &int64Two, PluginFieldType::kINT64, 1);
    cases.push_back(Case{"int64_in_range", int64InRange});
    std::vector<PluginField> int64OutOfRange = scenario.fields;
    int64OutOfRange[0] = PluginField(int64OutOfRange[0].name, &int64Wrapping, PluginFieldType::kINT64, 1);
    cases.push_back(Case{"int64_out_of_range", int64OutOfRange});
#endif
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


//! What the glue hands the kernels and TensorRT beyond the basic scenario: the launcher arguments for the scenario's
//! attributes and for the required attributes only (schema defaults), a failing launch, FP32 output types, the
//! workspace of a dynamic profile, and what clone() keeps.
std::string extraChecks(CreatorEntry const& entry, Scenario const& scenario)
{
    std::ostringstream out;
    int32_t const nbInputs = static_cast<int32_t>(scenario.inputDims.size());
    std::vector<PluginField> required;
    for (PluginField const& field : scenario.fields)
    {
        for (int32_t i = 0; i < entry.spec->nbAttributes; ++i)
        {
            if (std::strcmp(entry.spec->attributes[i].name, field.name) == 0 && entry.spec->attributes[i].required)
            {
                required.push_back(field);
            }
        }
    }
    std::vector<PluginTensorDesc> descs;
    for (auto const& d : scenario.inputDims)
    {
        descs.push_back(tensorDesc(d, DataType::kFLOAT));
    }
    PluginTensorDesc outDesc = tensorDesc(scenario.inputDims[0], DataType::kFLOAT);
    std::vector<float> dummy(16, 0.0F);
    std::vector<void const*> pointers(static_cast<size_t>(nbInputs), dummy.data());
    void* outputs[1] = {dummy.data()};
    std::vector<char> workspace(1 << 20);
    std::vector<DataType> floatTypes(static_cast<size_t>(nbInputs), DataType::kFLOAT);

    auto launch = [&](std::vector<PluginField> const& fields, char const* label, bool first) {
        PluginFieldCollection fc;
        fc.nbFields = static_cast<int32_t>(fields.size());
        fc.fields = fields.data();
        gLogger.messages.clear();
#if EDGEATTN_PLUGIN_V3
        std::unique_ptr<IPluginV3> plugin(
            static_cast<IPluginCreatorV3One*>(entry.creator)->createPlugin("node", &fc, TensorRTPhase::kRUNTIME));
        auto* runtime = plugin ? static_cast<IPluginV3OneRuntime*>(plugin->getCapabilityInterface(PluginCapabilityType::kRUNTIME))
                               : nullptr;
#else
        IPluginV2* raw = static_cast<IPluginCreator*>(entry.creator)->createPlugin("node", &fc);
        auto* runtime = static_cast<IPluginV2DynamicExt*>(raw);
#endif
        out << (first ? "" : ", ") << quote(label) << ": {\"created\": " << (runtime ? "true" : "false");
        if (runtime)
        {
            gSpyMode = true;
            gSpyStatus = EDGEATTN_STATUS_SUCCESS;
            gSpyCall = "null";
            int32_t const status = runtime->enqueue(descs.data(), &outDesc, pointers.data(), outputs, workspace.data(), nullptr);
            out << ", \"status\": " << status << ", \"args\": " << gSpyCall << ", \"messages\": " << messagesJson();
            gSpyStatus = EDGEATTN_STATUS_INVALID_ARGUMENT;
            gSpyCall = "null";
            int32_t const failed = runtime->enqueue(descs.data(), &outDesc, pointers.data(), outputs, workspace.data(), nullptr);
            out << ", \"failed_status\": " << failed << ", \"failed_called\": " << (gSpyCall != "null" ? "true" : "false")
                << ", \"failed_messages\": " << messagesJson();
            gSpyMode = false;
            gSpyStatus = 0;
        }
        else
        {
            out << ", \"messages\": " << messagesJson();
        }
        out << "}";
#if !EDGEATTN_PLUGIN_V3
        if (raw)
        {
            raw->destroy();
        }
#endif
    };
    launch(scenario.fields, "launch", true);
    launch(required, "launch_required_only", false);

    PluginFieldCollection fc;
    fc.nbFields = static_cast<int32_t>(scenario.fields.size());
    fc.fields = scenario.fields.data();
#if EDGEATTN_PLUGIN_V3
    auto* creator = static_cast<IPluginCreatorV3One*>(entry.creator);
    std::unique_ptr<IPluginV3> plugin(creator->createPlugin("node", &fc, TensorRTPhase::kBUILD));
    auto* build = static_cast<IPluginV3OneBuild*>(plugin->getCapabilityInterface(PluginCapabilityType::kBUILD));
    auto* runtime = static_cast<IPluginV3OneRuntime*>(plugin->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
    DataType outType = DataType::kHALF;
    int32_t const typeStatus = build->getOutputDataTypes(&outType, 1, floatTypes.data(), nbInputs);
    out << ", \"fp32_output_type_status\": " << typeStatus << ", \"fp32_output_is_float\": "
        << (outType == DataType::kFLOAT ? "true" : "false");

    // a dynamic batch profile 1..3 (opt 2): desc holds -1 for the batch, as at build time
    std::vector<DynamicPluginTensorDesc> dynamic;
    for (int32_t i = 0; i < nbInputs; ++i)
    {
        DynamicPluginTensorDesc desc = dynamicDesc(scenario.inputDims[i], DataType::kHALF);
        if (i < scenario.batchedInputs)
        {
            desc.desc.dims.d[0] = -1;
            desc.min.d[0] = 1;
            desc.opt.d[0] = 2;
            desc.max.d[0] = scenario.inputDims[i][0];
        }
        dynamic.push_back(desc);
    }
    DynamicPluginTensorDesc dynamicOut = dynamicDesc(scenario.inputDims[0], DataType::kHALF);
    out << ", \"workspace_dynamic_batch\": " << build->getWorkspaceSize(dynamic.data(), nbInputs, &dynamicOut, 1);

    std::string const original = describeAttributes(parseAttributes(*entry.spec, toFieldViews(runtime->getFieldsToSerialize())));
    std::unique_ptr<IPluginV3> cloned(plugin->clone());
    auto* clonedCore = static_cast<IPluginV3OneCore*>(cloned->getCapabilityInterface(PluginCapabilityType::kCORE));
    auto* clonedRuntime = static_cast<IPluginV3OneRuntime*>(cloned->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
    out << ", \"clone\": {\"name\": " << quote(clonedCore->getPluginName()) << ", \"version\": "
        << quote(clonedCore->getPluginVersion()) << ", \"namespace\": " << quote(clonedCore->getPluginNamespace())
        << ", \"same_attributes\": "
        << (describeAttributes(parseAttributes(*entry.spec, toFieldViews(clonedRuntime->getFieldsToSerialize()))) == original
                   ? "true"
                   : "false")
        << "}";
#else
    auto* creator = static_cast<IPluginCreator*>(entry.creator);
    auto* plugin = static_cast<IPluginV2DynamicExt*>(creator->createPlugin("node", &fc));
    DataType const outType = plugin->getOutputDataType(0, floatTypes.data(), nbInputs);
    out << ", \"fp32_output_type_status\": 0, \"fp32_output_is_float\": " << (outType == DataType::kFLOAT ? "true" : "false");
    // TensorRT 8 sets the namespace on the plugin after creating it; clone() must keep it (and everything else).
    plugin->setPluginNamespace("custom_namespace");
    std::vector<char> bytes(plugin->getSerializationSize());
    plugin->serialize(bytes.data());
    IPluginV2DynamicExt* cloned = plugin->clone();
    std::vector<char> clonedBytes(cloned->getSerializationSize());
    cloned->serialize(clonedBytes.data());
    out << ", \"clone\": {\"name\": " << quote(cloned->getPluginType()) << ", \"version\": "
        << quote(cloned->getPluginVersion()) << ", \"namespace\": " << quote(cloned->getPluginNamespace())
        << ", \"same_attributes\": " << (clonedBytes == bytes ? "true" : "false") << "}";
    cloned->destroy();
    plugin->destroy();
#endif
    return out.str();
}

#if EDGEATTN_PLUGIN_V3
std::string intsJson(std::vector<int32_t> const& values)
{
    std::ostringstream out;
    out << "[";
    for (size_t i = 0; i < values.size(); ++i)
    {
        out << (i ? ", " : "") << values[i];
    }
    return out.str() + "]";
}

//! The kernel paths as TensorRT tactics, the way a TensorRT >= 10 build and runtime use them: the tactics offered
//! per (faked) device and data type after configurePlugin, setTactic's verdicts, which path the launcher is called
//! under (spied) for a tactic, tactic 0, a clone and attachToContext, and an engine round trip (serialized fields ->
//! createPlugin(kRUNTIME) -> setTactic with the recorded tactic, as the runtime does -> attachToContext -> enqueue).
std::string tacticChecks(CreatorEntry const& entry, Scenario const& scenario)
{
    std::ostringstream out;
    int32_t const nbInputs = static_cast<int32_t>(scenario.inputDims.size());
    PluginFieldCollection fc;
    fc.nbFields = static_cast<int32_t>(scenario.fields.size());
    fc.fields = scenario.fields.data();
    auto* creator = static_cast<IPluginCreatorV3One*>(entry.creator);
    auto build = [](IPluginV3* plugin) {
        return static_cast<IPluginV3OneBuild*>(plugin->getCapabilityInterface(PluginCapabilityType::kBUILD));
    };
    auto runtime = [](IPluginV3* plugin) {
        return static_cast<IPluginV3OneRuntime*>(plugin->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
    };
    auto configure = [&](IPluginV3* plugin, DataType type) {
        std::vector<DynamicPluginTensorDesc> descs;
        for (auto const& d : scenario.inputDims)
        {
            descs.push_back(dynamicDesc(d, type));
        }
        DynamicPluginTensorDesc outDesc = dynamicDesc(scenario.inputDims[0], type);
        return build(plugin)->configurePlugin(descs.data(), nbInputs, &outDesc, 1);
    };
    auto offered = [&](IPluginV3* plugin, int32_t* status) {
        int32_t const count = build(plugin)->getNbTactics();
        std::vector<int32_t> tactics(static_cast<size_t>(count > 0 ? count : 0), 0);
        *status = build(plugin)->getValidTactics(tactics.data(), count);
        return tactics;
    };

    // tactics offered per device (compute capability, code arch) and data type
    struct Device
    {
        char const* label;
        int capability;
        int codeArch;
    };
    Device const devices[] = {{"sm_53", 53, 53}, {"sm_72", 72, 72}, {"sm_75", 75, 75}, {"sm_80", 80, 80},
        {"sm_87", 87, 87}, {"sm_87_code_72", 87, 72}, {"sm_90", 90, 90}};
    std::unique_ptr<IPluginV3> plugin(creator->createPlugin("node", &fc, TensorRTPhase::kBUILD));
    out << "\"offered\": {";
    for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); ++i)
    {
        gFakeDevice = true;
        gFakeCapability = devices[i].capability;
        gFakeCodeArch = devices[i].codeArch;
        out << (i ? ", " : "") << quote(devices[i].label) << ": {";
        char const* const types[] = {"fp16", "fp32"};
        for (int t = 0; t < 2; ++t)
        {
            int32_t const configured = configure(plugin.get(), t == 0 ? DataType::kHALF : DataType::kFLOAT);
            int32_t status = 0;
            std::vector<int32_t> const tactics = offered(plugin.get(), &status);
            out << (t ? ", " : "") << quote(types[t]) << ": {\"configure\": " << configured << ", \"status\": " << status
                << ", \"tactics\": " << intsJson(tactics) << "}";
        }
        out << "}";
    }
    gFakeDevice = true;
    gFakeCapability = 90;
    gFakeCodeArch = 90;
    configure(plugin.get(), DataType::kHALF);
    int32_t wrongBuffer[1] = {0};
    gLogger.messages.clear();
    out << "}, \"wrong_buffer_status\": " << build(plugin.get())->getValidTactics(wrongBuffer, 1)
        << ", \"wrong_buffer_messages\": " << messagesJson();
    gFakeDevice = false; // the real query: no GPU on this machine
    out << ", \"no_device_count\": " << build(plugin.get())->getNbTactics()
        << ", \"no_device_messages\": " << messagesJson();

    // setTactic's verdicts and the path each enqueue runs under
    std::vector<PluginTensorDesc> descs;
    for (auto const& d : scenario.inputDims)
    {
        descs.push_back(tensorDesc(d, DataType::kHALF));
    }
    PluginTensorDesc outDesc = tensorDesc(scenario.inputDims[0], DataType::kHALF);
    std::vector<float> dummy(16, 0.0F);
    std::vector<void const*> pointers(static_cast<size_t>(nbInputs), dummy.data());
    void* outputs[1] = {dummy.data()};
    std::vector<char> workspace(1 << 20);
    auto enqueued = [&](IPluginV3* target) {
        gSpyMode = true;
        gSpyStatus = EDGEATTN_STATUS_SUCCESS;
        gSpyCall = "null";
        gLogger.messages.clear();
        int32_t const status = runtime(target)->enqueue(descs.data(), &outDesc, pointers.data(), outputs, workspace.data(), nullptr);
        gSpyMode = false;
        std::ostringstream call;
        call << "{\"status\": " << status << ", \"args\": " << gSpyCall << ", \"thread_path_after\": "
             << edgeattn_get_thread_kernel_path() << ", \"messages\": " << messagesJson() << "}";
        return call.str();
    };
    out << ", \"set_tactic\": {";
    int32_t const candidates[] = {0, EDGEATTN_KERNEL_PATH_SCALAR, EDGEATTN_KERNEL_PATH_TENSOR_CORE, 7, -1};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); ++i)
    {
        std::unique_ptr<IPluginV3> fresh(creator->createPlugin("node", &fc, TensorRTPhase::kRUNTIME));
        gLogger.messages.clear();
        int32_t const status = runtime(fresh.get())->setTactic(candidates[i]);
        out << (i ? ", " : "") << "\"" << candidates[i] << "\": {\"status\": " << status << ", \"messages\": " << messagesJson()
            << ", \"enqueue\": " << enqueued(fresh.get()) << "}";
    }
    out << "}";

    // a thread setting made by the application survives the plugin's launch
    edgeattn_set_thread_kernel_path(EDGEATTN_KERNEL_PATH_SCALAR);
    {
        std::unique_ptr<IPluginV3> fresh(creator->createPlugin("node", &fc, TensorRTPhase::kRUNTIME));
        runtime(fresh.get())->setTactic(EDGEATTN_KERNEL_PATH_TENSOR_CORE);
        out << ", \"over_application_scalar\": " << enqueued(fresh.get());
    }
    edgeattn_set_thread_kernel_path(EDGEATTN_KERNEL_PATH_INHERIT);

    // clone and attachToContext keep the tactic
    std::unique_ptr<IPluginV3> chosen(creator->createPlugin("node", &fc, TensorRTPhase::kBUILD));
    runtime(chosen.get())->setTactic(EDGEATTN_KERNEL_PATH_TENSOR_CORE);
    std::unique_ptr<IPluginV3> cloned(chosen->clone());
    std::unique_ptr<IPluginV3> attached(runtime(chosen.get())->attachToContext(nullptr));
    out << ", \"clone\": " << enqueued(cloned.get()) << ", \"attached\": " << enqueued(attached.get());

    // the engine round trip
    std::unique_ptr<IPluginV3> restored(
        creator->createPlugin("node", runtime(chosen.get())->getFieldsToSerialize(), TensorRTPhase::kRUNTIME));
    out << ", \"restored_default\": " << enqueued(restored.get());
    int32_t const restoredStatus = runtime(restored.get())->setTactic(EDGEATTN_KERNEL_PATH_TENSOR_CORE);
    std::unique_ptr<IPluginV3> context(runtime(restored.get())->attachToContext(nullptr));
    out << ", \"restored_set_tactic\": " << restoredStatus << ", \"restored\": " << enqueued(context.get());
    return out.str();
}
#endif

//! Shapes the op contracts accept or reject beyond the scenarios, each with its own attributes: the verdict of
//! configurePlugin (V3: its status; V2: whether it logged).
struct ShapeCase
{
    char const* op;
    char const* label;
    std::vector<PluginField> fields;
    std::vector<std::vector<DimValue>> dims;
};

int32_t const kHeads3 = 3;

std::vector<ShapeCase> shapeCases()
{
    std::vector<ShapeCase> list;
    std::vector<PluginField> soft{PluginField("num_heads", &kHeads2, PluginFieldType::kINT32, 1)};
    list.push_back(ShapeCase{"EdgeAttnSoftKernelAttention", "landmarks_batch_differs", soft,
        {{3, 3136, 64}, {2, 49, 64}, {3, 3136, 64}}});
    list.push_back(ShapeCase{"EdgeAttnSoftKernelAttention", "landmarks_channels_differ", soft,
        {{3, 3136, 64}, {3, 49, 32}, {3, 3136, 64}}});
    list.push_back(ShapeCase{"EdgeAttnSoftKernelAttention", "other_landmark_count", soft,
        {{3, 3136, 64}, {3, 10, 64}, {3, 3136, 64}}});
    std::vector<PluginField> efficient{PluginField("num_heads", &kHeads2, PluginFieldType::kINT32, 1)};
    list.push_back(ShapeCase{"EdgeAttnEfficientAttention", "k_tokens_differ", efficient,
        {{3, 3136, 64}, {3, 3000, 64}, {3, 3136, 64}}});
    list.push_back(ShapeCase{"EdgeAttnEfficientAttention", "v_batch_differs", efficient,
        {{3, 3136, 64}, {3, 3136, 64}, {2, 3136, 64}}});
    std::vector<PluginField> liteOne{PluginField("head_dim", &kHeadDim16, PluginFieldType::kINT32, 1),
        PluginField("kernel", kQuadratic, PluginFieldType::kCHAR, sizeof(kQuadratic))}; // default qt_*: 1 entry
    list.push_back(ShapeCase{"EdgeAttnLiteMLA", "one_coefficient_set_two_groups", liteOne, {{3, 96, 14, 14}}});
    list.push_back(ShapeCase{"EdgeAttnLiteMLA", "one_coefficient_set_three_groups", liteOne, {{3, 144, 14, 14}}});
    list.push_back(ShapeCase{"EdgeAttnLiteMLA", "channels_not_multiple_of_3_head_dim", liteOne, {{3, 100, 14, 14}}});
    std::vector<PluginField> blockify{PluginField("num_heads", &kHeads3, PluginFieldType::kINT32, 1),
        PluginField("height", &kHeight56, PluginFieldType::kINT32, 1),
        PluginField("width", &kHeight56, PluginFieldType::kINT32, 1),
        PluginField("window_size", &kWindow7, PluginFieldType::kINT32, 1)};
    list.push_back(ShapeCase{"EdgeAttnBlockifyAttention", "channels_not_multiple_of_heads", blockify,
        {{3, 3136, 64}, {3, 3136, 64}, {3, 3136, 64}}});
    list.push_back(ShapeCase{"EdgeAttnBlockifyAttention", "channels_multiple_of_heads", blockify,
        {{3, 3136, 66}, {3, 3136, 66}, {3, 3136, 66}}});
    return list;
}

std::string shapeVerdicts(CreatorEntry const& entry)
{
    std::ostringstream out;
    bool first = true;
    for (ShapeCase const& shapeCase : shapeCases())
    {
        if (std::string(entry.spec->name) != shapeCase.op)
        {
            continue;
        }
        PluginFieldCollection fc;
        fc.nbFields = static_cast<int32_t>(shapeCase.fields.size());
        fc.fields = shapeCase.fields.data();
        int32_t const nbInputs = static_cast<int32_t>(shapeCase.dims.size());
        std::vector<DynamicPluginTensorDesc> descs;
        for (auto const& d : shapeCase.dims)
        {
            descs.push_back(dynamicDesc(d, DataType::kHALF));
        }
        DynamicPluginTensorDesc outDesc = dynamicDesc(shapeCase.dims[0], DataType::kHALF);
        gLogger.messages.clear();
        bool accepted = false;
        bool created = false;
#if EDGEATTN_PLUGIN_V3
        std::unique_ptr<IPluginV3> plugin(
            static_cast<IPluginCreatorV3One*>(entry.creator)->createPlugin("node", &fc, TensorRTPhase::kBUILD));
        created = plugin != nullptr;
        if (plugin)
        {
            auto* build = static_cast<IPluginV3OneBuild*>(plugin->getCapabilityInterface(PluginCapabilityType::kBUILD));
            accepted = build->configurePlugin(descs.data(), nbInputs, &outDesc, 1) == 0;
        }
#else
        IPluginV2* raw = static_cast<IPluginCreator*>(entry.creator)->createPlugin("node", &fc);
        created = raw != nullptr;
        if (raw)
        {
            static_cast<IPluginV2DynamicExt*>(raw)->configurePlugin(descs.data(), nbInputs, &outDesc, 1);
            accepted = gLogger.messages.empty();
            raw->destroy();
        }
#endif
        out << (first ? "" : ", ") << quote(shapeCase.label) << ": {\"created\": " << (created ? "true" : "false")
            << ", \"accepted\": " << (accepted ? "true" : "false") << ", \"messages\": " << messagesJson() << "}";
        first = false;
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
                    << ", \"rejections\": {" << rejections(entries[i], scenario) << "}"
                    << ", \"extra\": {" << extraChecks(entries[i], scenario) << "}"
                    << ", \"shape_cases\": {" << shapeVerdicts(entries[i]) << "}"
#if EDGEATTN_PLUGIN_V3
                    << ", \"tactics\": {" << tacticChecks(entries[i], scenario) << "}"
#endif
                    << "}";
                first = false;
            }
        }
    }
    out << "}, \"unexpected_messages\": " << messagesJson() << "}";
    std::printf("%s\n", out.str().c_str());
    return 0;
}
