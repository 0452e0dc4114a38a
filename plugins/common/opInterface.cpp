#include "common/opInterface.h"

#include "edgeattn/kernels.h"

namespace edgeattn
{

std::string shapeToString(TensorShape const& shape)
{
    std::ostringstream text;
    text << "(";
    for (int32_t i = 0; i < shape.nbDims; ++i)
    {
        text << (i ? ", " : "");
        if (shape.d[i] < 0)
        {
            text << "?";
        }
        else
        {
            text << shape.d[i];
        }
    }
    text << ")";
    return text.str();
}

void ShapeChecker::fail(std::string const& message)
{
    if (mError.empty())
    {
        mError = std::string(mOpName) + ": " + message;
    }
}

void ShapeChecker::rank(TensorShape const& shape, int32_t expected, char const* tensor)
{
    if (shape.nbDims != expected)
    {
        std::ostringstream text;
        text << tensor << " must have rank " << expected << ", got " << shapeToString(shape);
        fail(text.str());
    }
}

void ShapeChecker::dimEquals(int64_t actual, int64_t expected, char const* what)
{
    if (actual >= 0 && expected >= 0 && actual != expected)
    {
        std::ostringstream text;
        text << what << ": expected " << expected << ", got " << actual;
        fail(text.str());
    }
}

void ShapeChecker::dimDivisible(int64_t value, int64_t divisor, char const* what)
{
    if (divisor <= 0)
    {
        std::ostringstream text;
        text << what << ": divisor " << divisor << " is not positive";
        fail(text.str());
    }
    else if (value >= 0 && value % divisor != 0)
    {
        std::ostringstream text;
        text << what << ": " << value << " is not a multiple of " << divisor;
        fail(text.str());
    }
}

void ShapeChecker::sameDims(TensorShape const& a, char const* nameA, TensorShape const& b, char const* nameB)
{
    if (a.nbDims != b.nbDims)
    {
        fail(std::string(nameB) + " " + shapeToString(b) + " must have the shape of " + nameA + " " + shapeToString(a));
        return;
    }
    for (int32_t i = 0; i < a.nbDims; ++i)
    {
        if (a.d[i] >= 0 && b.d[i] >= 0 && a.d[i] != b.d[i])
        {
            fail(std::string(nameB) + " " + shapeToString(b) + " must have the shape of " + nameA + " "
                + shapeToString(a));
            return;
        }
    }
}

void ShapeChecker::require(bool condition, std::string const& what)
{
    if (!condition)
    {
        fail(what);
    }
}

std::string describeKernelFailure(char const* opName, int status)
{
    std::ostringstream text;
    text << opName << ": " << edgeattn_status_string(status) << ": " << edgeattn_last_error();
    return text.str();
}

} // namespace edgeattn
