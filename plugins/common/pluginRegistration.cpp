#include "common/pluginRegistration.h"

#include "blockifyAttention/blockifyAttentionPlugin.h"
#include "efficientAttention/efficientAttentionPlugin.h"
#include "edgeattn/kernels.h"
#include "liteMLA/liteMLAPlugin.h"
#include "softKernelAttention/softKernelAttentionPlugin.h"

#include <atomic>
#include <string>

#if defined(EDGEATTN_REGISTRATION_STATIC) && defined(EDGEATTN_REGISTRATION_DYNAMIC)
#error "define at most one of EDGEATTN_REGISTRATION_STATIC and EDGEATTN_REGISTRATION_DYNAMIC"
#endif

#define EDGEATTN_PLUGIN_EXPORT __attribute__((visibility("default")))

#ifndef EDGEATTN_VERSION_STRING
#define EDGEATTN_VERSION_STRING "unknown"
#endif
#define EDGEATTN_PLUGIN_STRINGIFY_(x) #x
#define EDGEATTN_PLUGIN_STRINGIFY(x) EDGEATTN_PLUGIN_STRINGIFY_(x)

namespace edgeattn
{
namespace plugin
{

CreatorEntry const* allCreators(int32_t* count)
{
    static CreatorEntry const kEntries[] = {
        {&BlockifyAttentionOp::spec(), blockifyAttentionCreator()},
        {&EfficientAttentionOp::spec(), efficientAttentionCreator()},
        {&LiteMLAOp::spec(), liteMLACreator()},
        {&SoftKernelAttentionOp::spec(), softKernelAttentionCreator()},
    };
    *count = static_cast<int32_t>(sizeof(kEntries) / sizeof(kEntries[0]));
    return kEntries;
}

#if defined(EDGEATTN_REGISTRATION_DYNAMIC)
namespace
{
CreatorInterface* const* creatorPointers(int32_t* count)
{
    struct Pointers
    {
        CreatorInterface* values[16];
        int32_t count = 0;
        Pointers()
        {
            CreatorEntry const* entries = allCreators(&count);
            for (int32_t i = 0; i < count; ++i)
            {
                values[i] = entries[i].creator;
            }
        }
    };
    static Pointers const kPointers;
    *count = kPointers.count;
    return kPointers.values;
}
} // namespace
#endif

} // namespace plugin
} // namespace edgeattn

using namespace edgeattn::plugin;

#if defined(EDGEATTN_REGISTRATION_STATIC)
namespace
{
nvinfer1::ILogger* libnvinferLogger()
{
    return getLogger();
}

// What REGISTER_TENSORRT_PLUGIN(Creator) does (a static PluginRegistrar<Creator> calling
// getPluginRegistry()->registerCreator(instance, "")), except that each creator is registered under its own
// plugin namespace ("edgeattn"), so lookups by (name, version, namespace) from the ONNX parser's
// plugin_namespace attribute succeed whichever key the registry files creators under.
struct StaticRegistration
{
    StaticRegistration()
    {
        setLoggerProvider(&libnvinferLogger);
        nvinfer1::IPluginRegistry* const registry = getPluginRegistry();
        if (registry == nullptr)
        {
            logError("getPluginRegistry() returned null; the edgeattn plugins are not registered");
            return;
        }
        int32_t count = 0;
        CreatorEntry const* entries = allCreators(&count);
        for (int32_t i = 0; i < count; ++i)
        {
            // CreatorInterface picks the overload that exists on every version: IPluginCreator& on 8.x,
            // IPluginCreatorInterface& on >= 10 (11 removed the IPluginCreator& one).
            if (!registry->registerCreator(*entries[i].creator, entries[i].spec->nameSpace))
            {
                logMessage(nvinfer1::ILogger::Severity::kWARNING,
                    std::string("could not register ") + entries[i].spec->nameSpace + "::" + entries[i].spec->name
                        + " v" + entries[i].spec->version + " (already registered by another copy of the library?)");
            }
        }
    }
};

StaticRegistration const gStaticRegistration;
} // namespace
#endif // EDGEATTN_REGISTRATION_STATIC

#if defined(EDGEATTN_REGISTRATION_DYNAMIC)
#if !EDGEATTN_TRT_HAS_LOAD_LIBRARY
#error "libedgeattn_plugins_dynamic needs TensorRT >= 8.6 (IPluginRegistry::loadLibrary)"
#endif
namespace
{
std::atomic<nvinfer1::ILoggerFinder*> gLoggerFinder{nullptr};

nvinfer1::ILogger* finderLogger()
{
    nvinfer1::ILoggerFinder* const finder = gLoggerFinder.load();
    return finder != nullptr ? finder->findLogger() : nullptr;
}
} // namespace

extern "C" EDGEATTN_PLUGIN_EXPORT void setLoggerFinder(nvinfer1::ILoggerFinder* finder)
{
    gLoggerFinder.store(finder);
    setLoggerProvider(&finderLogger);
}

#if NV_TENSORRT_MAJOR >= 10
extern "C" EDGEATTN_PLUGIN_EXPORT nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators)
{
    return creatorPointers(&nbCreators);
}
#else
// TensorRT 8.6 looks for getPluginCreators (getCreators arrived with IPluginCreatorInterface in 10.0).
extern "C" EDGEATTN_PLUGIN_EXPORT nvinfer1::IPluginCreator* const* getPluginCreators(int32_t& nbCreators)
{
    return creatorPointers(&nbCreators);
}
#endif
#endif // EDGEATTN_REGISTRATION_DYNAMIC

//! One line describing the library, for `edgeattn doctor` and the Python loader.
extern "C" EDGEATTN_PLUGIN_EXPORT char const* edgeattn_plugins_build_info(void)
{
    static std::string const kInfo = std::string("edgeattn plugins " EDGEATTN_VERSION_STRING "; TensorRT ")
        + EDGEATTN_PLUGIN_STRINGIFY(NV_TENSORRT_MAJOR) "." EDGEATTN_PLUGIN_STRINGIFY(NV_TENSORRT_MINOR) "."
          EDGEATTN_PLUGIN_STRINGIFY(NV_TENSORRT_PATCH)
        + (EDGEATTN_PLUGIN_V3 ? " (IPluginV3)" : " (IPluginV2DynamicExt)")
#if defined(EDGEATTN_REGISTRATION_STATIC)
        + "; registration static"
#elif defined(EDGEATTN_REGISTRATION_DYNAMIC)
        + "; registration getCreators"
#else
        + "; registration none"
#endif
        + "; " + edgeattn_kernels_build_info();
    return kInfo.c_str();
}
