// A stand-in for libnvinfer with just what the statically registering plugin library calls: getPluginRegistry()
// (a registry that records registerCreator calls) and getLogger(). Built as "libnvinfer.so" by
// tests/plugins/test_plugins_glue.py so libedgeattn_plugins.so can be linked with --no-undefined and loaded with
// ctypes on a machine without TensorRT; fake_registry_dump() reports what the library's load-time registration did.
//
// Built with -DEDGEATTN_EMULATE_LOAD_LIBRARY instead, it is a small program that does what
// IPluginRegistry::loadLibrary does with libedgeattn_plugins_dynamic.so (dlopen, setLoggerFinder, getCreators or
// getPluginCreators) and prints the creators it got.
#include <NvInferRuntime.h>
#include <NvInferVersion.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

using namespace nvinfer1;

namespace
{

std::string creatorDescription(char const* kind, char const* name, char const* version, char const* nameSpace,
    PluginFieldCollection const* fields)
{
    std::ostringstream out;
    out << "{\"kind\": \"" << kind << "\", \"name\": \"" << name << "\", \"version\": \"" << version
        << "\", \"creator_namespace\": \"" << nameSpace << "\", \"fields\": [";
    for (int32_t i = 0; fields != nullptr && i < fields->nbFields; ++i)
    {
        out << (i ? ", " : "") << "\"" << fields->fields[i].name << "\"";
    }
    out << "]";
    return out.str();
}

#if NV_TENSORRT_MAJOR >= 10
std::string describe(IPluginCreatorInterface& creator)
{
    InterfaceInfo const info = creator.getInterfaceInfo();
    if (std::strcmp(info.kind, "PLUGIN CREATOR_V3ONE") == 0)
    {
        auto& v3 = static_cast<IPluginCreatorV3One&>(creator);
        return creatorDescription(
            info.kind, v3.getPluginName(), v3.getPluginVersion(), v3.getPluginNamespace(), v3.getFieldNames());
    }
    auto& v1 = static_cast<IPluginCreator&>(creator);
    return creatorDescription(
        info.kind, v1.getPluginName(), v1.getPluginVersion(), v1.getPluginNamespace(), v1.getFieldNames());
}
#endif

#if NV_TENSORRT_MAJOR < 10 || !defined(EDGEATTN_EMULATE_LOAD_LIBRARY)
[[gnu::unused]] std::string describe(IPluginCreator& creator)
{
    return creatorDescription("PLUGIN CREATOR_V1", creator.getPluginName(), creator.getPluginVersion(),
        creator.getPluginNamespace(), creator.getFieldNames());
}
#endif

} // namespace

#if !defined(EDGEATTN_EMULATE_LOAD_LIBRARY)

namespace
{

class FakeLogger : public ILogger
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

class FakeRegistry : public IPluginRegistry
{
public:
    std::vector<std::string> registrations;

    bool record(std::string const& description, AsciiChar const* pluginNamespace)
    {
        std::string const entry = description + ", \"registered_namespace\": \"" + (pluginNamespace ? pluginNamespace : "")
            + "\"}";
        for (auto const& existing : registrations)
        {
            if (existing == entry)
            {
                return false; // like TensorRT: the same creator twice is refused
            }
        }
        registrations.push_back(entry);
        return true;
    }

#if NV_TENSORRT_MAJOR < 11
    // TensorRT 11 removed the IPluginCreator overloads of the registry (V1 creators register through the
    // IPluginCreatorInterface ones).
    bool registerCreator(IPluginCreator& creator, AsciiChar const* const pluginNamespace) noexcept override
    {
        return record(describe(creator), pluginNamespace);
    }
    IPluginCreator* const* getPluginCreatorList(int32_t* const numCreators) const noexcept override
    {
        *numCreators = 0;
        return nullptr;
    }
    IPluginCreator* getPluginCreator(AsciiChar const* const, AsciiChar const* const, AsciiChar const* const) noexcept override
    {
        return nullptr;
    }
    bool deregisterCreator(IPluginCreator const&) noexcept override
    {
        return false;
    }
#endif
    void setErrorRecorder(IErrorRecorder* const) noexcept override {}
    IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return nullptr;
    }
#if NV_TENSORRT_MAJOR >= 10
    bool isParentSearchEnabled() const override
    {
        return false;
    }
    void setParentSearchEnabled(bool const) override {}
    PluginLibraryHandle loadLibrary(AsciiChar const*) noexcept override
    {
        return nullptr;
    }
    void deregisterLibrary(PluginLibraryHandle) noexcept override {}
    bool registerCreator(IPluginCreatorInterface& creator, AsciiChar const* const pluginNamespace) noexcept override
    {
        return record(describe(creator), pluginNamespace);
    }
    IPluginCreatorInterface* const* getAllCreators(int32_t* const numCreators) const noexcept override
    {
        *numCreators = 0;
        return nullptr;
    }
    IPluginCreatorInterface* getCreator(AsciiChar const* const, AsciiChar const* const, AsciiChar const* const) noexcept override
    {
        return nullptr;
    }
    bool deregisterCreator(IPluginCreatorInterface const&) noexcept override
    {
        return false;
    }
    IPluginResource* acquirePluginResource(AsciiChar const*, IPluginResource*) noexcept override
    {
        return nullptr;
    }
    int32_t releasePluginResource(AsciiChar const*) noexcept override
    {
        return 0;
    }
    // Pure virtual from a 10.x minor release on (absent in 10.3), so no `override`: it overrides where it exists.
    IPluginCreatorInterface* const* getAllCreatorsRecursive(int32_t* const numCreators) noexcept
    {
        *numCreators = 0;
        return nullptr;
    }
#endif
};

FakeRegistry gRegistry;
FakeLogger gLogger;

} // namespace

extern "C" TENSORRTAPI IPluginRegistry* getPluginRegistry() noexcept
{
    return &gRegistry;
}

extern "C" TENSORRTAPI ILogger* getLogger() noexcept
{
    return &gLogger;
}

extern "C" TENSORRTAPI char const* fake_registry_dump()
{
    static std::string text;
    std::ostringstream out;
    out << "{\"registrations\": [";
    for (size_t i = 0; i < gRegistry.registrations.size(); ++i)
    {
        out << (i ? ", " : "") << gRegistry.registrations[i];
    }
    out << "], \"messages\": [";
    for (size_t i = 0; i < gLogger.messages.size(); ++i)
    {
        out << (i ? ", " : "") << "\"" << gLogger.messages[i] << "\"";
    }
    out << "]}";
    text = out.str();
    return text.c_str();
}

#else // EDGEATTN_EMULATE_LOAD_LIBRARY

#include <dlfcn.h>

namespace
{
class NullLogger : public ILogger
{
public:
    void log(Severity, AsciiChar const*) noexcept override {}
};

class Finder : public ILoggerFinder
{
public:
    ILogger* findLogger() override
    {
        return &logger;
    }
    NullLogger logger;
};
} // namespace

int main(int argc, char** argv)
{
    if (argc != 2)
    {
        std::fprintf(stderr, "usage: %s libedgeattn_plugins_dynamic.so\n", argv[0]);
        return 2;
    }
    void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr)
    {
        std::fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    using SetLoggerFinder = void (*)(ILoggerFinder*);
    auto setLoggerFinder = reinterpret_cast<SetLoggerFinder>(dlsym(handle, "setLoggerFinder"));
    static Finder finder;
    if (setLoggerFinder == nullptr)
    {
        std::fprintf(stderr, "no setLoggerFinder export\n");
        return 1;
    }
    setLoggerFinder(&finder);
    int32_t count = 0;
    std::ostringstream out;
    out << "{\"creators\": [";
#if NV_TENSORRT_MAJOR >= 10
    using GetCreators = IPluginCreatorInterface* const* (*) (int32_t&);
    auto getCreators = reinterpret_cast<GetCreators>(dlsym(handle, "getCreators"));
    if (getCreators == nullptr)
    {
        std::fprintf(stderr, "no getCreators export\n");
        return 1;
    }
    IPluginCreatorInterface* const* creators = getCreators(count);
#else
    using GetCreators = IPluginCreator* const* (*) (int32_t&);
    auto getCreators = reinterpret_cast<GetCreators>(dlsym(handle, "getPluginCreators"));
    if (getCreators == nullptr)
    {
        std::fprintf(stderr, "no getPluginCreators export\n");
        return 1;
    }
    IPluginCreator* const* creators = getCreators(count);
#endif
    for (int32_t i = 0; i < count; ++i)
    {
        out << (i ? ", " : "") << describe(*creators[i]) << "}";
    }
    out << "]}";
    std::printf("%s\n", out.str().c_str());
    return 0;
}

#endif // EDGEATTN_EMULATE_LOAD_LIBRARY
