/*
 * The op contract as C++ data: one OpSpec per export/schemas/<OpType>.yaml, generated into
 * common/generated/fieldTables.h by plugins/tools/generate_field_tables.py. Plugin creators build their
 * getFieldNames() list and parse/serialize their fields from these tables only, so the plugin fields cannot
 * drift from the schemas (tests/plugins/test_field_tables.py regenerates and compares).
 * TensorRT-free.
 */
#ifndef EDGEATTN_COMMON_ATTRIBUTE_SPEC_H
#define EDGEATTN_COMMON_ATTRIBUTE_SPEC_H

#include <cstdint>

namespace edgeattn
{

enum class AttributeType : int32_t
{
    kInt = 0,    // ONNX INT    -> PluginFieldType::kINT32, length 1
    kFloat = 1,  // ONNX FLOAT  -> kFLOAT32, length 1
    kString = 2, // ONNX STRING -> kCHAR, bytes plus NUL
    kInts = 3,   // ONNX INTS   -> kINT32[n]
    kFloats = 4  // ONNX FLOATS -> kFLOAT32[n]
};

struct AttributeSpec
{
    char const* name;
    AttributeType type;
    bool required;
    // Default (meaningful when !required): the member matching `type`.
    int32_t defaultInt;
    float defaultFloat;
    char const* defaultString;
    float const* defaultFloats;
    int32_t nbDefaultFloats;
    int32_t const* defaultInts;
    int32_t nbDefaultInts;
    // Allowed values (empty = any).
    int32_t const* allowedInts;
    int32_t nbAllowedInts;
    char const* const* allowedStrings;
    int32_t nbAllowedStrings;
};

struct OpSpec
{
    char const* name;      // op_type = TensorRT plugin name
    char const* version;   // plugin version
    char const* nameSpace; // plugin namespace
    AttributeSpec const* attributes;
    int32_t nbAttributes;
    int32_t minInputs; // inputs without `optional: true`
    int32_t maxInputs;
    int32_t nbOutputs;
};

} // namespace edgeattn

#endif // EDGEATTN_COMMON_ATTRIBUTE_SPEC_H
