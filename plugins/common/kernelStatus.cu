/*
 * Status strings, the thread-local last error, and library information for the C ABI.
 */
#include "kernelStatus.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#ifndef EDGEATTN_VERSION_STRING
#define EDGEATTN_VERSION_STRING "unknown"
#endif
#ifndef EDGEATTN_CUDA_ARCHS_STRING
#define EDGEATTN_CUDA_ARCHS_STRING "unknown"
#endif
#ifndef EDGEATTN_TENSOR_CORES
#define EDGEATTN_TENSOR_CORES 1
#endif
#if EDGEATTN_TENSOR_CORES
#define EDGEATTN_TENSOR_CORES_STRING "tensor cores sm_80+"
#else
#define EDGEATTN_TENSOR_CORES_STRING "tensor cores off"
#endif

#define EDGEATTN_STRINGIFY_(x) #x
#define EDGEATTN_STRINGIFY(x) EDGEATTN_STRINGIFY_(x)

namespace edgeattn
{
namespace kernels
{
namespace
{
// One message per host thread: TensorRT may enqueue from several threads.
thread_local char tLastError[512] = {0};
} // namespace

int fail(int status, char const* function, char const* format, ...)
{
    int const prefix = std::snprintf(tLastError, sizeof(tLastError), "%s: ", function);
    if (prefix >= 0 && static_cast<size_t>(prefix) < sizeof(tLastError))
    {
        va_list args;
        va_start(args, format);
        std::vsnprintf(tLastError + prefix, sizeof(tLastError) - prefix, format, args);
        va_end(args);
    }
    return status;
}

int succeed()
{
    tLastError[0] = '\0';
    return EDGEATTN_STATUS_SUCCESS;
}

int checkLaunch(char const* function, char const* kernel)
{
    cudaError_t const error = cudaGetLastError();
    if (error != cudaSuccess)
    {
        return fail(EDGEATTN_STATUS_CUDA_ERROR, function, "launching %s failed: %s (%s)", kernel,
            cudaGetErrorString(error), cudaGetErrorName(error));
    }
    return EDGEATTN_STATUS_SUCCESS;
}

} // namespace kernels
} // namespace edgeattn

extern "C" EDGEATTN_API int edgeattn_kernels_abi_version(void)
{
    return EDGEATTN_KERNELS_ABI_VERSION;
}

extern "C" EDGEATTN_API const char* edgeattn_kernels_build_info(void)
{
    return "edgeattn kernels " EDGEATTN_VERSION_STRING "; abi " EDGEATTN_STRINGIFY(
        EDGEATTN_KERNELS_ABI_VERSION) "; cuda " EDGEATTN_STRINGIFY(CUDART_VERSION) "; archs " EDGEATTN_CUDA_ARCHS_STRING
           "; " EDGEATTN_TENSOR_CORES_STRING;
}

extern "C" EDGEATTN_API const char* edgeattn_status_string(int status)
{
    switch (status)
    {
    case EDGEATTN_STATUS_SUCCESS: return "success";
    case EDGEATTN_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case EDGEATTN_STATUS_UNSUPPORTED: return "unsupported";
    case EDGEATTN_STATUS_WORKSPACE_TOO_SMALL: return "workspace too small";
    case EDGEATTN_STATUS_CUDA_ERROR: return "CUDA error";
    default: return "unknown status";
    }
}

extern "C" EDGEATTN_API const char* edgeattn_last_error(void)
{
    return edgeattn::kernels::tLastError;
}
