/*
 * Kernel path selection (kernelPath.h) and its C ABI: edgeattn_set_kernel_path / edgeattn_get_kernel_path.
 */
#include "kernelPath.h"

#include "common/kernelStatus.h"
#include "common/mma.cuh"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace edgeattn
{
namespace kernels
{
namespace
{

//! Compiled with the same -gencode flags as every kernel: its ptxVersion on a device is the arch the library's
//! device code for that device was compiled for.
__global__ void kernelPathProbeKernel() {}

constexpr int kPathInvalidEnvironment = -1;
constexpr int kCachedDevices = 64;

//! 0 = not queried yet, else 1 + computeCapability * 1024 + codeArch.
std::atomic<int> gArchCache[kCachedDevices];

char const* gEnvironmentValue = "";

int initialPath()
{
    char const* const value = std::getenv("EDGEATTN_KERNEL_PATH");
    if (value == nullptr || value[0] == '\0' || std::strcmp(value, "auto") == 0)
    {
        return EDGEATTN_KERNEL_PATH_AUTO;
    }
    if (std::strcmp(value, "scalar") == 0)
    {
        return EDGEATTN_KERNEL_PATH_SCALAR;
    }
    if (std::strcmp(value, "tensor_core") == 0)
    {
        return EDGEATTN_KERNEL_PATH_TENSOR_CORE;
    }
    if (std::strcmp(value, "tensor_core_warp") == 0)
    {
        return EDGEATTN_KERNEL_PATH_TENSOR_CORE_WARP;
    }
    gEnvironmentValue = value;
    return kPathInvalidEnvironment;
}

std::atomic<int>& pathSetting()
{
    static std::atomic<int> setting(initialPath()); // thread-safe one-time initialisation (C++11)
    return setting;
}

//! A failed runtime query also sets the runtime's last error, which the next checkLaunch would take
//! for a launch failure: clear it.
int queryFailed(char const* function, char const* what, cudaError_t error)
{
    cudaGetLastError();
    return fail(EDGEATTN_STATUS_CUDA_ERROR, function, "%s failed: %s (%s)", what, cudaGetErrorString(error),
        cudaGetErrorName(error));
}

} // namespace

int currentDeviceArch(char const* function, DeviceArch* arch)
{
    int device = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error != cudaSuccess)
    {
        return queryFailed(function, "cudaGetDevice", error);
    }
    bool const cacheable = device >= 0 && device < kCachedDevices;
    int const cached = cacheable ? gArchCache[device].load(std::memory_order_relaxed) : 0;
    if (cached != 0)
    {
        arch->computeCapability = (cached - 1) / 1024;
        arch->codeArch = (cached - 1) % 1024;
        return EDGEATTN_STATUS_SUCCESS;
    }
    int major = 0;
    int minor = 0;
    error = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (error == cudaSuccess)
    {
        error = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    }
    if (error != cudaSuccess)
    {
        return queryFailed(function, "querying the device's compute capability", error);
    }
    cudaFuncAttributes attributes;
    std::memset(&attributes, 0, sizeof(attributes));
    error = cudaFuncGetAttributes(&attributes, kernelPathProbeKernel);
    if (error != cudaSuccess)
    {
        return queryFailed(function, "cudaFuncGetAttributes (is this library built for this GPU's arch?)", error);
    }
    arch->computeCapability = major * 10 + minor;
    arch->codeArch = attributes.ptxVersion;
    if (cacheable)
    {
        gArchCache[device].store(1 + arch->computeCapability * 1024 + arch->codeArch, std::memory_order_relaxed);
    }
    return EDGEATTN_STATUS_SUCCESS;
}

int chooseKernelPath(char const* function, bool hasTensorCoreKernel, KernelPath* path)
{
    *path = KernelPath::kScalar;
    int const setting = pathSetting().load(std::memory_order_relaxed);
    EDGEATTN_CHECK_ARG(setting != kPathInvalidEnvironment, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "EDGEATTN_KERNEL_PATH=\"%s\" is not auto, scalar, tensor_core or tensor_core_warp", gEnvironmentValue);
    if (setting == EDGEATTN_KERNEL_PATH_SCALAR || !hasTensorCoreKernel)
    {
        return EDGEATTN_STATUS_SUCCESS;
    }
    bool const forced = setting == EDGEATTN_KERNEL_PATH_TENSOR_CORE || setting == EDGEATTN_KERNEL_PATH_TENSOR_CORE_WARP;
#if !EDGEATTN_TENSOR_CORES
    EDGEATTN_CHECK_ARG(!forced, EDGEATTN_STATUS_UNSUPPORTED,
        "the tensor-core path is forced but this library was built without tensor-core kernels "
        "(EDGEATTN_TENSOR_CORES=OFF, or no arch >= 80 in EDGEATTN_CUDA_ARCHS)");
    return EDGEATTN_STATUS_SUCCESS;
#else
    DeviceArch arch;
    int const status = currentDeviceArch(function, &arch);
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    EDGEATTN_CHECK_ARG(!forced || arch.computeCapability >= kMinTensorCoreArch, EDGEATTN_STATUS_UNSUPPORTED,
        "the tensor-core path is forced but the device is sm_%d (tensor-core kernels need sm_%d+)",
        arch.computeCapability, kMinTensorCoreArch);
    EDGEATTN_CHECK_ARG(!forced || arch.codeArch >= kMinTensorCoreArch, EDGEATTN_STATUS_UNSUPPORTED,
        "the tensor-core path is forced but this library's code for the sm_%d device was compiled for compute_%d "
        "(add an arch >= %d to EDGEATTN_CUDA_ARCHS)",
        arch.computeCapability, arch.codeArch, kMinTensorCoreArch);
    if (arch.computeCapability >= kMinTensorCoreArch && arch.codeArch >= kMinTensorCoreArch)
    {
        *path = setting == EDGEATTN_KERNEL_PATH_TENSOR_CORE_WARP ? KernelPath::kTensorCoreWarp : KernelPath::kTensorCore;
    }
    return EDGEATTN_STATUS_SUCCESS;
#endif
}

} // namespace kernels
} // namespace edgeattn

extern "C" EDGEATTN_API int edgeattn_set_kernel_path(int path)
{
    EDGEATTN_CHECK_ARG(path == EDGEATTN_KERNEL_PATH_AUTO || path == EDGEATTN_KERNEL_PATH_SCALAR
            || path == EDGEATTN_KERNEL_PATH_TENSOR_CORE || path == EDGEATTN_KERNEL_PATH_TENSOR_CORE_WARP,
        EDGEATTN_STATUS_INVALID_ARGUMENT,
        "kernel path %d is not auto (0), scalar (1), tensor_core (2) or tensor_core_warp (3)", path);
    edgeattn::kernels::pathSetting().store(path, std::memory_order_relaxed);
    return edgeattn::kernels::succeed();
}

extern "C" EDGEATTN_API int edgeattn_get_kernel_path(void)
{
    return edgeattn::kernels::pathSetting().load(std::memory_order_relaxed);
}
