/*
 * TensorRT-facing helpers shared by every plugin: the interface selection by TensorRT version, conversions
 * between TensorRT types and the TensorRT-free op layer, the creators' field tables, V3 field serialization
 * and logging through TensorRT's logger.
 *
 * Interface selection (compile time, from NvInferVersion.h):
 *   TensorRT >= 10  -> IPluginV3 (IPluginV3OneCore/OneBuild/OneRuntime) + IPluginCreatorV3One
 *                      (10.3 JetPack 6.1/6.2, 11.x desktop and TensorRT-RTX: 11 removed only interfaces this glue
 *                      never used, such as the registry's IPluginCreator overloads)
 *   TensorRT 8.x    -> IPluginV2DynamicExt + IPluginCreator   (8.0.1 JetPack 4.6, 8.2.1 JetPack 4.6.1+,
 *                                                             8.5 JetPack 5.1, 8.6 JetPack 6.0)
 */
#ifndef EDGEATTN_COMMON_PLUGIN_COMMON_H
#define EDGEATTN_COMMON_PLUGIN_COMMON_H

#include "common/attributes.h"
#include "common/opInterface.h"

#include <NvInferRuntime.h>
#include <NvInferVersion.h>

#include <string>
#include <vector>

#if NV_TENSORRT_MAJOR >= 10
#define EDGEATTN_PLUGIN_V3 1
#else
#define EDGEATTN_PLUGIN_V3 0
#endif

#if NV_TENSORRT_MAJOR < 8
#error "edgeattn plugins need TensorRT >= 8.0 (IPluginV2DynamicExt with noexcept methods)"
#endif

// TensorRT >= 8.6 can load a plugin library through IPluginRegistry::loadLibrary (trtexec --dynamicPlugins,
// --setPluginsToSerialize, Python registry.load_library) via the getCreators/setLoggerFinder entry points.
#if NV_TENSORRT_MAJOR > 8 || (NV_TENSORRT_MAJOR == 8 && NV_TENSORRT_MINOR >= 6)
#define EDGEATTN_TRT_HAS_LOAD_LIBRARY 1
#else
#define EDGEATTN_TRT_HAS_LOAD_LIBRARY 0
#endif

namespace edgeattn
{
namespace plugin
{

#if EDGEATTN_PLUGIN_V3
using CreatorInterface = nvinfer1::IPluginCreatorInterface;
#else
using CreatorInterface = nvinfer1::IPluginCreator;
#endif

// ---- logging -------------------------------------------------------------------------------------------------

//! Where log messages go: a function returning TensorRT's logger (or nullptr -> stderr). Set by the registration
//! translation unit of each library variant (libnvinfer's getLogger(), or the ILoggerFinder of loadLibrary).
using LoggerProvider = nvinfer1::ILogger* (*) ();
void setLoggerProvider(LoggerProvider provider);
void logMessage(nvinfer1::ILogger::Severity severity, std::string const& message) noexcept;
void logError(std::string const& message) noexcept;

// ---- conversions ---------------------------------------------------------------------------------------------

TensorShape toShape(nvinfer1::Dims const& dims);

//! EDGEATTN_DTYPE_FLOAT32 / EDGEATTN_DTYPE_FLOAT16, or -1 for any other TensorRT type.
int toKernelDtype(nvinfer1::DataType type);

std::vector<FieldView> toFieldViews(nvinfer1::PluginFieldCollection const* collection);

//! Linear FP32 or FP16, every tensor of the same type as input 0.
bool supportsLinearSameType(nvinfer1::PluginTensorDesc const& desc, nvinfer1::PluginTensorDesc const& first, int32_t pos);

nvinfer1::DimsExprs outputDims(
    OutputShapeRule rule, nvinfer1::DimsExprs const& input, nvinfer1::IExprBuilder& exprBuilder);

// ---- kernel paths as TensorRT tactics (IPluginV3OneBuild::getValidTactics, IPluginV3OneRuntime::setTactic) ------

//! The kernel paths (edgeattn_kernel_path values, used as the tactic values: all non-zero) a call of `op`
//! (edgeattn_op) with `dtype` can run on the current device in this library, scalar first. Throws PluginError when the
//! device cannot be queried.
std::vector<int32_t> deviceKernelPathTactics(int op, int dtype);

//! Whether setTactic may take `tactic`: 0 (TensorRT's default tactic: the kernels' default table decides) or a kernel
//! path of this library on some device.
bool isKernelPathTactic(int op, int32_t tactic);

//! Makes `tactic` the calling thread's kernel path (edgeattn_set_thread_kernel_path; 0 leaves the process-wide
//! setting in charge) for one launch, and restores the previous thread setting when it goes out of scope.
class ScopedTactic
{
public:
    explicit ScopedTactic(int32_t tactic);
    ~ScopedTactic();
    ScopedTactic(ScopedTactic const&) = delete;
    ScopedTactic& operator=(ScopedTactic const&) = delete;

private:
    int mPrevious;
};

// ---- fields --------------------------------------------------------------------------------------------------

//! getFieldNames() of a creator: exactly the schema attributes, in schema order, with their TensorRT types.
class FieldNameTable
{
public:
    explicit FieldNameTable(OpSpec const& spec);
    nvinfer1::PluginFieldCollection const* collection()
    {
        return &mCollection;
    }

private:
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mCollection;
};

//! getFieldsToSerialize() of a V3 plugin: every attribute with its resolved value (same names and types as the
//! ONNX parser produces), so createPlugin(kRUNTIME) parses it back with parseAttributes.
class SerializedFields
{
public:
    nvinfer1::PluginFieldCollection const* build(AttributeValues const& values);

private:
    std::vector<nvinfer1::PluginField> mFields;
    std::vector<std::string> mStrings;
    nvinfer1::PluginFieldCollection mCollection{};
};

} // namespace plugin
} // namespace edgeattn

#endif // EDGEATTN_COMMON_PLUGIN_COMMON_H
