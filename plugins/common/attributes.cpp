#include "common/attributes.h"

#include "common/pluginError.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace edgeattn
{
namespace
{

char const* typeName(AttributeType type)
{
    switch (type)
    {
    case AttributeType::kInt: return "int";
    case AttributeType::kFloat: return "float";
    case AttributeType::kString: return "string";
    case AttributeType::kInts: return "ints";
    case AttributeType::kFloats: return "floats";
    }
    return "?";
}

char const* kindName(FieldKind kind)
{
    switch (kind)
    {
    case FieldKind::kInt32: return "INT32";
    case FieldKind::kInt64: return "INT64";
    case FieldKind::kFloat32: return "FLOAT32";
    case FieldKind::kFloat64: return "FLOAT64";
    case FieldKind::kChar: return "CHAR";
    case FieldKind::kOther: return "unsupported";
    }
    return "?";
}

AttributeValue defaultValue(AttributeSpec const& spec)
{
    AttributeValue value;
    value.type = spec.type;
    value.intValue = spec.defaultInt;
    value.floatValue = spec.defaultFloat;
    value.stringValue = spec.defaultString != nullptr ? spec.defaultString : "";
    value.floats.assign(spec.defaultFloats, spec.defaultFloats + spec.nbDefaultFloats);
    value.ints.assign(spec.defaultInts, spec.defaultInts + spec.nbDefaultInts);
    return value;
}

std::vector<double> readNumbers(OpSpec const& op, AttributeSpec const& spec, FieldView const& field)
{
    PLUGIN_CHECK(field.length >= 0 && (field.data != nullptr || field.length == 0),
        op.name << ": field " << spec.name << " has no data");
    std::vector<double> numbers(static_cast<size_t>(field.length));
    for (int32_t i = 0; i < field.length; ++i)
    {
        switch (field.kind)
        {
        case FieldKind::kInt32: numbers[i] = static_cast<int32_t const*>(field.data)[i]; break;
        case FieldKind::kInt64: numbers[i] = static_cast<double>(static_cast<int64_t const*>(field.data)[i]); break;
        case FieldKind::kFloat32: numbers[i] = static_cast<float const*>(field.data)[i]; break;
        case FieldKind::kFloat64: numbers[i] = static_cast<double const*>(field.data)[i]; break;
        default:
            PLUGIN_CHECK(false, op.name << ": field " << spec.name << " (" << typeName(spec.type)
                                        << ") arrived as " << kindName(field.kind));
        }
    }
    return numbers;
}

int32_t toInt32(OpSpec const& op, AttributeSpec const& spec, double number)
{
    PLUGIN_CHECK(std::floor(number) == number && number >= -2147483648.0 && number <= 2147483647.0,
        op.name << ": field " << spec.name << " must be a 32-bit integer, got " << number);
    return static_cast<int32_t>(number);
}

void parseField(OpSpec const& op, AttributeSpec const& spec, FieldView const& field, AttributeValue& value)
{
    switch (spec.type)
    {
    case AttributeType::kInt:
    {
        PLUGIN_CHECK(field.kind == FieldKind::kInt32 || field.kind == FieldKind::kInt64,
            op.name << ": field " << spec.name << " must be INT32, got " << kindName(field.kind));
        std::vector<double> const numbers = readNumbers(op, spec, field);
        PLUGIN_CHECK(numbers.size() == 1, op.name << ": field " << spec.name << " must hold one int, got "
                                                  << numbers.size());
        value.intValue = toInt32(op, spec, numbers[0]);
        break;
    }
    case AttributeType::kFloat:
    {
        PLUGIN_CHECK(field.kind == FieldKind::kFloat32 || field.kind == FieldKind::kFloat64,
            op.name << ": field " << spec.name << " must be FLOAT32, got " << kindName(field.kind));
        std::vector<double> const numbers = readNumbers(op, spec, field);
        PLUGIN_CHECK(numbers.size() == 1, op.name << ": field " << spec.name << " must hold one float, got "
                                                  << numbers.size());
        value.floatValue = static_cast<float>(numbers[0]);
        PLUGIN_CHECK(std::isfinite(value.floatValue), op.name << ": field " << spec.name << " is not finite");
        break;
    }
    case AttributeType::kString:
    {
        PLUGIN_CHECK(field.kind == FieldKind::kChar,
            op.name << ": field " << spec.name << " must be CHAR (a string), got " << kindName(field.kind));
        PLUGIN_CHECK(field.length >= 0 && (field.data != nullptr || field.length == 0),
            op.name << ": field " << spec.name << " has no data");
        char const* text = static_cast<char const*>(field.data);
        size_t size = 0;
        while (size < static_cast<size_t>(field.length) && text[size] != '\0')
        {
            ++size;
        }
        value.stringValue.assign(text == nullptr ? "" : text, size);
        break;
    }
    case AttributeType::kInts:
    {
        PLUGIN_CHECK(field.kind == FieldKind::kInt32 || field.kind == FieldKind::kInt64,
            op.name << ": field " << spec.name << " must be INT32[], got " << kindName(field.kind));
        std::vector<double> const numbers = readNumbers(op, spec, field);
        value.ints.clear();
        for (double number : numbers)
        {
            value.ints.push_back(toInt32(op, spec, number));
        }
        break;
    }
    case AttributeType::kFloats:
    {
        PLUGIN_CHECK(field.kind == FieldKind::kFloat32 || field.kind == FieldKind::kFloat64,
            op.name << ": field " << spec.name << " must be FLOAT32[], got " << kindName(field.kind));
        std::vector<double> const numbers = readNumbers(op, spec, field);
        value.floats.clear();
        for (double number : numbers)
        {
            value.floats.push_back(static_cast<float>(number));
            PLUGIN_CHECK(std::isfinite(value.floats.back()), op.name << ": field " << spec.name << " has a non-finite entry");
        }
        break;
    }
    }
}

void checkAllowed(OpSpec const& op, AttributeSpec const& spec, AttributeValue const& value)
{
    if (spec.nbAllowedInts > 0)
    {
        bool found = false;
        std::ostringstream allowed;
        for (int32_t i = 0; i < spec.nbAllowedInts; ++i)
        {
            found = found || spec.allowedInts[i] == value.intValue;
            allowed << (i ? ", " : "") << spec.allowedInts[i];
        }
        PLUGIN_CHECK(found, op.name << ": " << spec.name << "=" << value.intValue << " is not one of {" << allowed.str() << "}");
    }
    if (spec.nbAllowedStrings > 0)
    {
        bool found = false;
        std::ostringstream allowed;
        for (int32_t i = 0; i < spec.nbAllowedStrings; ++i)
        {
            found = found || value.stringValue == spec.allowedStrings[i];
            allowed << (i ? ", " : "") << spec.allowedStrings[i];
        }
        PLUGIN_CHECK(found, op.name << ": " << spec.name << "=\"" << value.stringValue << "\" is not one of {"
                                    << allowed.str() << "}");
    }
}

// ---- V2 byte format: "EDGA" | u32 format | u32 len + op name | u32 count | per attribute:
//      u32 len + name | u32 kind | u32 elements | payload (little-endian host layout; engines are not portable
//      across architectures anyway).
constexpr char kMagic[4] = {'E', 'D', 'G', 'A'};
constexpr uint32_t kFormatVersion = 1;

void appendU32(std::vector<char>& out, uint32_t value)
{
    char bytes[sizeof(value)];
    std::memcpy(bytes, &value, sizeof(value));
    out.insert(out.end(), bytes, bytes + sizeof(value));
}

void appendBytes(std::vector<char>& out, void const* data, size_t size)
{
    char const* bytes = static_cast<char const*>(data);
    out.insert(out.end(), bytes, bytes + size);
}

void appendString(std::vector<char>& out, std::string const& text)
{
    appendU32(out, static_cast<uint32_t>(text.size()));
    appendBytes(out, text.data(), text.size());
}

class Reader
{
public:
    Reader(OpSpec const& spec, void const* data, size_t length)
        : mSpec(spec)
        , mData(static_cast<char const*>(data))
        , mLength(length)
    {
        PLUGIN_CHECK(data != nullptr || length == 0, spec.name << ": null serialized data");
    }

    char const* take(size_t size)
    {
        PLUGIN_CHECK(size <= mLength - mOffset,
            mSpec.name << ": serialized plugin data is truncated (" << mLength << " bytes)");
        char const* where = mData + mOffset;
        mOffset += size;
        return where;
    }

    uint32_t u32()
    {
        uint32_t value = 0;
        std::memcpy(&value, take(sizeof(value)), sizeof(value));
        return value;
    }

    std::string string()
    {
        uint32_t const size = u32();
        PLUGIN_CHECK(size <= 4096, mSpec.name << ": serialized string length " << size << " is implausible");
        char const* where = take(size);
        return std::string(where, size);
    }

    bool done() const
    {
        return mOffset == mLength;
    }

private:
    OpSpec const& mSpec;
    char const* mData;
    size_t mLength;
    size_t mOffset = 0;
};

size_t elementSize(FieldKind kind)
{
    switch (kind)
    {
    case FieldKind::kInt32: return 4;
    case FieldKind::kInt64: return 8;
    case FieldKind::kFloat32: return 4;
    case FieldKind::kFloat64: return 8;
    case FieldKind::kChar: return 1;
    case FieldKind::kOther: return 0;
    }
    return 0;
}

} // namespace

AttributeValues::AttributeValues(OpSpec const& spec)
    : mSpec(&spec)
{
    for (int32_t i = 0; i < spec.nbAttributes; ++i)
    {
        mValues.push_back(defaultValue(spec.attributes[i]));
    }
}

OpSpec const& AttributeValues::spec() const
{
    PLUGIN_CHECK(mSpec != nullptr, "attributes without an op spec");
    return *mSpec;
}

int32_t AttributeValues::size() const
{
    return static_cast<int32_t>(mValues.size());
}

AttributeSpec const& AttributeValues::specAt(int32_t index) const
{
    return spec().attributes[index];
}

AttributeValue const& AttributeValues::valueAt(int32_t index) const
{
    return mValues.at(static_cast<size_t>(index));
}

AttributeValue& AttributeValues::mutableAt(int32_t index)
{
    return mValues.at(static_cast<size_t>(index));
}

int32_t AttributeValues::indexOf(char const* name, AttributeType type) const
{
    for (int32_t i = 0; i < size(); ++i)
    {
        if (std::strcmp(specAt(i).name, name) == 0)
        {
            PLUGIN_CHECK(specAt(i).type == type, spec().name << ": attribute " << name << " is "
                                                             << typeName(specAt(i).type) << ", not " << typeName(type));
            return i;
        }
    }
    PLUGIN_CHECK(false, spec().name << " has no attribute " << name);
    return -1;
}

int32_t AttributeValues::getInt(char const* name) const
{
    return valueAt(indexOf(name, AttributeType::kInt)).intValue;
}

float AttributeValues::getFloat(char const* name) const
{
    return valueAt(indexOf(name, AttributeType::kFloat)).floatValue;
}

std::string const& AttributeValues::getString(char const* name) const
{
    return valueAt(indexOf(name, AttributeType::kString)).stringValue;
}

std::vector<float> const& AttributeValues::getFloats(char const* name) const
{
    return valueAt(indexOf(name, AttributeType::kFloats)).floats;
}

std::vector<int32_t> const& AttributeValues::getInts(char const* name) const
{
    return valueAt(indexOf(name, AttributeType::kInts)).ints;
}

AttributeValues parseAttributes(OpSpec const& spec, std::vector<FieldView> const& fields)
{
    AttributeValues values(spec);
    std::vector<bool> seen(static_cast<size_t>(spec.nbAttributes), false);
    for (FieldView const& field : fields)
    {
        int32_t index = -1;
        for (int32_t i = 0; i < spec.nbAttributes; ++i)
        {
            if (field.name == spec.attributes[i].name)
            {
                index = i;
            }
        }
        if (index < 0)
        {
            std::ostringstream known;
            for (int32_t i = 0; i < spec.nbAttributes; ++i)
            {
                known << (i ? ", " : "") << spec.attributes[i].name;
            }
            PLUGIN_CHECK(false, spec.name << ": unknown field \"" << field.name << "\" (fields: " << known.str() << ")");
        }
        PLUGIN_CHECK(!seen[index], spec.name << ": field " << field.name << " given twice");
        seen[index] = true;
        parseField(spec, spec.attributes[index], field, values.mutableAt(index));
    }
    for (int32_t i = 0; i < spec.nbAttributes; ++i)
    {
        PLUGIN_CHECK(seen[i] || !spec.attributes[i].required,
            spec.name << ": required field " << spec.attributes[i].name << " is missing");
        checkAllowed(spec, spec.attributes[i], values.valueAt(i));
    }
    return values;
}

std::string describeAttributes(AttributeValues const& values)
{
    std::ostringstream text;
    for (int32_t i = 0; i < values.size(); ++i)
    {
        AttributeValue const& value = values.valueAt(i);
        text << (i ? ", " : "") << values.specAt(i).name << "=";
        switch (value.type)
        {
        case AttributeType::kInt: text << value.intValue; break;
        case AttributeType::kFloat: text << value.floatValue; break;
        case AttributeType::kString: text << '"' << value.stringValue << '"'; break;
        case AttributeType::kInts:
            text << "[";
            for (size_t j = 0; j < value.ints.size(); ++j)
            {
                text << (j ? ", " : "") << value.ints[j];
            }
            text << "]";
            break;
        case AttributeType::kFloats:
            text << "[";
            for (size_t j = 0; j < value.floats.size(); ++j)
            {
                text << (j ? ", " : "") << value.floats[j];
            }
            text << "]";
            break;
        }
    }
    return text.str();
}

std::vector<char> serializeAttributes(AttributeValues const& values)
{
    std::vector<char> out;
    appendBytes(out, kMagic, sizeof(kMagic));
    appendU32(out, kFormatVersion);
    appendString(out, values.spec().name);
    appendU32(out, static_cast<uint32_t>(values.size()));
    for (int32_t i = 0; i < values.size(); ++i)
    {
        AttributeValue const& value = values.valueAt(i);
        appendString(out, values.specAt(i).name);
        switch (value.type)
        {
        case AttributeType::kInt:
            appendU32(out, static_cast<uint32_t>(FieldKind::kInt32));
            appendU32(out, 1);
            appendBytes(out, &value.intValue, sizeof(int32_t));
            break;
        case AttributeType::kFloat:
            appendU32(out, static_cast<uint32_t>(FieldKind::kFloat32));
            appendU32(out, 1);
            appendBytes(out, &value.floatValue, sizeof(float));
            break;
        case AttributeType::kString:
            appendU32(out, static_cast<uint32_t>(FieldKind::kChar));
            appendU32(out, static_cast<uint32_t>(value.stringValue.size()));
            appendBytes(out, value.stringValue.data(), value.stringValue.size());
            break;
        case AttributeType::kInts:
            appendU32(out, static_cast<uint32_t>(FieldKind::kInt32));
            appendU32(out, static_cast<uint32_t>(value.ints.size()));
            appendBytes(out, value.ints.data(), value.ints.size() * sizeof(int32_t));
            break;
        case AttributeType::kFloats:
            appendU32(out, static_cast<uint32_t>(FieldKind::kFloat32));
            appendU32(out, static_cast<uint32_t>(value.floats.size()));
            appendBytes(out, value.floats.data(), value.floats.size() * sizeof(float));
            break;
        }
    }
    return out;
}

AttributeValues deserializeAttributes(OpSpec const& spec, void const* data, size_t length)
{
    Reader reader(spec, data, length);
    PLUGIN_CHECK(std::memcmp(reader.take(sizeof(kMagic)), kMagic, sizeof(kMagic)) == 0,
        spec.name << ": serialized data is not an edgeattn plugin (bad magic)");
    uint32_t const format = reader.u32();
    PLUGIN_CHECK(format == kFormatVersion, spec.name << ": serialized format " << format << " is not supported (expected "
                                                     << kFormatVersion << ")");
    std::string const opName = reader.string();
    PLUGIN_CHECK(opName == spec.name, spec.name << ": serialized data belongs to " << opName);
    uint32_t const count = reader.u32();
    PLUGIN_CHECK(count <= 64, spec.name << ": serialized attribute count " << count << " is implausible");
    std::vector<std::string> names(count);
    std::vector<std::vector<char>> payloads(count);
    std::vector<FieldView> fields;
    for (uint32_t i = 0; i < count; ++i)
    {
        names[i] = reader.string();
        uint32_t const kind = reader.u32();
        PLUGIN_CHECK(kind <= static_cast<uint32_t>(FieldKind::kChar), spec.name << ": bad serialized field kind " << kind);
        uint32_t const elements = reader.u32();
        size_t const bytes = static_cast<size_t>(elements) * elementSize(static_cast<FieldKind>(kind));
        char const* payload = reader.take(bytes);
        payloads[i].assign(payload, payload + bytes); // aligned copy for the typed reads
        payloads[i].push_back('\0');
        fields.push_back(FieldView{names[i], static_cast<FieldKind>(kind), payloads[i].data(), static_cast<int32_t>(elements)});
    }
    PLUGIN_CHECK(reader.done(), spec.name << ": serialized data has trailing bytes");
    return parseAttributes(spec, fields);
}

} // namespace edgeattn
