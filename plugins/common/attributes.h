/*
 * Plugin attributes, parsed and validated against an OpSpec (the generated schema table). TensorRT-free: the
 * TensorRT glue converts PluginFieldCollection entries to FieldView first, so build-time fields (from the ONNX
 * parser), V3 runtime fields (getFieldsToSerialize) and V2 serialized bytes all go through parseAttributes.
 */
#ifndef EDGEATTN_COMMON_ATTRIBUTES_H
#define EDGEATTN_COMMON_ATTRIBUTES_H

#include "common/attributeSpec.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace edgeattn
{

//! Element types a field can carry (the subset of nvinfer1::PluginFieldType we understand).
enum class FieldKind : int32_t
{
    kInt32 = 0,
    kInt64 = 1,
    kFloat32 = 2,
    kFloat64 = 3,
    kChar = 4,
    kOther = 5
};

struct FieldView
{
    std::string name;
    FieldKind kind;
    void const* data;
    int32_t length; // elements (for kChar: bytes, the NUL may or may not be included)
};

struct AttributeValue
{
    AttributeType type = AttributeType::kInt;
    int32_t intValue = 0;
    float floatValue = 0.0F;
    std::string stringValue;
    std::vector<int32_t> ints;
    std::vector<float> floats;
};

class AttributeValues
{
public:
    AttributeValues() = default;
    explicit AttributeValues(OpSpec const& spec);

    OpSpec const& spec() const;
    int32_t size() const;
    AttributeSpec const& specAt(int32_t index) const;
    AttributeValue const& valueAt(int32_t index) const;

    int32_t getInt(char const* name) const;
    float getFloat(char const* name) const;
    std::string const& getString(char const* name) const;
    std::vector<float> const& getFloats(char const* name) const;
    std::vector<int32_t> const& getInts(char const* name) const;

    //! Mutable access used by the parser only.
    AttributeValue& mutableAt(int32_t index);

private:
    int32_t indexOf(char const* name, AttributeType type) const;

    OpSpec const* mSpec = nullptr;
    std::vector<AttributeValue> mValues; // in spec order
};

//! Fills defaults, checks names (unknown fields are errors), kinds, lengths, required fields and allowed values.
//! Throws PluginError with a one-line explanation.
AttributeValues parseAttributes(OpSpec const& spec, std::vector<FieldView> const& fields);

//! One line "name=value, ..." for logs and error messages.
std::string describeAttributes(AttributeValues const& values);

//! V2 (TensorRT 8.x) plugin serialization: attributes as a self-describing byte string; deserializeAttributes
//! turns it back into FieldViews and runs parseAttributes, so a corrupt or foreign blob fails loudly.
std::vector<char> serializeAttributes(AttributeValues const& values);
AttributeValues deserializeAttributes(OpSpec const& spec, void const* data, size_t length);

} // namespace edgeattn

#endif // EDGEATTN_COMMON_ATTRIBUTES_H
