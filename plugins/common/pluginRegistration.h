/*
 * The creators of this library, one per op schema, and how TensorRT finds them:
 *   libedgeattn_plugins.so          (EDGEATTN_REGISTRATION_STATIC): registers every creator with
 *       getPluginRegistry() when the library is loaded (ctypes.CDLL, trtexec --plugins/--staticPlugins, dlopen);
 *   libedgeattn_plugins_dynamic.so  (EDGEATTN_REGISTRATION_DYNAMIC, TensorRT >= 8.6): registers nothing itself
 *       and exports getCreators (TensorRT >= 10; getPluginCreators on 8.6) and setLoggerFinder for
 *       IPluginRegistry::loadLibrary (trtexec --dynamicPlugins / --setPluginsToSerialize,
 *       tensorrt.get_plugin_registry().load_library). It does not link libnvinfer.
 */
#ifndef EDGEATTN_COMMON_PLUGIN_REGISTRATION_H
#define EDGEATTN_COMMON_PLUGIN_REGISTRATION_H

#include "common/attributeSpec.h"
#include "common/pluginCommon.h"

namespace edgeattn
{
namespace plugin
{

CreatorInterface* blockifyAttentionCreator();
CreatorInterface* efficientAttentionCreator();
CreatorInterface* liteMLACreator();
CreatorInterface* softKernelAttentionCreator();

//! Every creator of the library with its schema, in schema-table order (static storage).
struct CreatorEntry
{
    OpSpec const* spec;
    CreatorInterface* creator;
};
CreatorEntry const* allCreators(int32_t* count);

} // namespace plugin
} // namespace edgeattn

#endif // EDGEATTN_COMMON_PLUGIN_REGISTRATION_H
