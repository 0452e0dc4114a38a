/*
 * What every op provides to the TensorRT glue (common/pluginTemplates.h), free of TensorRT types so the op
 * logic (attribute validation, shape rules, workspace, the C ABI call) is written once for IPluginV3 and
 * IPluginV2DynamicExt. An op class Op has:
 *
 *   static OpSpec const& spec();                         the generated schema table
 *   explicit Op(AttributeValues values);                 validates attribute combinations (throws PluginError)
 *   AttributeValues const& attributes() const;           what gets serialized
 *   int32_t nbInputs() const;                            inputs for these attributes (e.g. 3 or 5 with LePE)
 *   int kernelOp() const;                                the edgeattn_op of its kernel call (kernel-path tactics)
 *   OutputShapeRule outputShapeRule() const;             output 0 dims in terms of input 0 dims
 *   std::string checkShapes(TensorShape const*, int32_t) const;   "" or why the shapes break the contract
 *                                                        (dimensions < 0 are unknown and skipped)
 *   size_t workspaceSize(TensorShape const*, int32_t) const;      for concrete (maximum) shapes; monotone
 *   int enqueue(TensorShape const*, int32_t, int dtype, void const* const* inputs, void* const* outputs,
 *               void* workspace, size_t workspaceBytes, void* stream) const;   edgeattn_status
 */
#ifndef EDGEATTN_COMMON_OP_INTERFACE_H
#define EDGEATTN_COMMON_OP_INTERFACE_H

#include "common/attributes.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>

namespace edgeattn
{

constexpr int32_t kMaxShapeRank = 8;

struct TensorShape
{
    int32_t nbDims = 0;
    int64_t d[kMaxShapeRank] = {};
};

//! Output 0 has the dims of input 0, except that `dividedAxis` (if >= 0) is divided by `divisor`.
struct OutputShapeRule
{
    int32_t dividedAxis = -1;
    int32_t divisor = 1;
};

std::string shapeToString(TensorShape const& shape);

//! Collects the first contract violation among shape checks; dimensions < 0 (unknown at build time) pass.
class ShapeChecker
{
public:
    explicit ShapeChecker(char const* opName)
        : mOpName(opName)
    {
    }

    void rank(TensorShape const& shape, int32_t expected, char const* tensor);
    void dimEquals(int64_t actual, int64_t expected, char const* what);
    void dimDivisible(int64_t value, int64_t divisor, char const* what);
    void sameDims(TensorShape const& a, char const* nameA, TensorShape const& b, char const* nameB);
    void require(bool condition, std::string const& what);

    bool ok() const
    {
        return mError.empty();
    }
    std::string const& error() const
    {
        return mError;
    }

private:
    void fail(std::string const& message);

    char const* mOpName;
    std::string mError;
};

class OpBase
{
public:
    explicit OpBase(AttributeValues values)
        : mAttributes(std::move(values))
    {
    }

    AttributeValues const& attributes() const
    {
        return mAttributes;
    }

    OutputShapeRule outputShapeRule() const
    {
        return OutputShapeRule{};
    }

protected:
    AttributeValues mAttributes;
};

//! Turns a failed C ABI call into the message the glue logs: "<op>: <status>: <edgeattn_last_error()>".
std::string describeKernelFailure(char const* opName, int status);

} // namespace edgeattn

#endif // EDGEATTN_COMMON_OP_INTERFACE_H
