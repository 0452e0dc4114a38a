/*
 * Kernel path selection (kernelPath.h) and its C ABI: the process-wide and per-thread settings, the device query, the
 * paths each op can run per arch (what the TensorRT >= 10 plugins offer as tactics) and the default table (what AUTO
 * and TensorRT 8.x run).
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

//! Every kernel path and where it can run: the device and the library's code for it at least minArch, FP16 I/O only
//! where the path has no FP32 kernels, only in a build with tensor-core kernels where it needs them, and only for the
//! op that has it (op -1: every op).
struct PathRow
{
    int path;
    int minArch;
    bool fp16Only;
    bool tensorCoreBuild;
    int op;
};

constexpr PathRow kPaths[] = {
    {EDGEATTN_KERNEL_PATH_SCALAR, 0, false, false, -1},
    {EDGEATTN_KERNEL_PATH_TENSOR_CORE, kMinTensorCoreArch, true, true, -1},
    // blockify's one-warp-per-window kernel beside the pipelined one; SOFT's Newton-Raphson one block per problem
    // (M > 64: the scalar iteration) beside its batched GEMM tiles; EFFATT and LiteMLA have one tensor-core kernel
    {EDGEATTN_KERNEL_PATH_TENSOR_CORE_WARP, kMinTensorCoreArch, true, true, EDGEATTN_OP_BLOCKIFY_ATTENTION},
    {EDGEATTN_KERNEL_PATH_TENSOR_CORE_WARP, kMinTensorCoreArch, true, true, EDGEATTN_OP_SOFT_KERNEL_ATTENTION},
};

/*
 * What AUTO runs (and TensorRT 8.x, which has no plugin tactics; TensorRT >= 10's tactic 0): per op, the path of the
 * last row whose minArch and minBatch the call reaches, else the scalar kernels. Source: the tensor-core / scalar
 * ratios of the first GPU run (H200, sm_90, FP16, CUDA-graph timed, the CSWin-T24181 stage shapes, kernels at commit
 * 2e62b91: benchmarks/results/kernels_gpu_h200.md), applied to every sm_80+ device until one of those is measured:
 * blockify 1.79x (batch 1) / 1.97x (batch 64) and SOFT 1.05x / 1.23x take the tensor cores; EFFATT 0.65x / 0.92x and
 * LiteMLA-QT 0.55x / 0.74x stay scalar; LiteMLA ReLU (0.75x at batch 1, 1.34x at 64) takes them from batch 64.
 * SOFT's row names tensor_core_warp: the kernels of that measurement (M > 64: the scalar Newton-Raphson beside the
 * tensor-core token passes). Its GEMM-tiled Newton-Raphson (tensor_core) is not measured yet: TensorRT >= 10 times it
 * as a tactic; AUTO and TensorRT 8.x keep the measured kernels until a GPU run says otherwise.
 */
struct DefaultRow
{
    int op;
    int minArch;
    int minBatch;
    int path;
};

constexpr DefaultRow kDefaultPaths[] = {
    {EDGEATTN_OP_BLOCKIFY_ATTENTION, kMinTensorCoreArch, 1, EDGEATTN_KERNEL_PATH_TENSOR_CORE},
    {EDGEATTN_OP_LITE_MLA_RELU, kMinTensorCoreArch, 64, EDGEATTN_KERNEL_PATH_TENSOR_CORE},
    {EDGEATTN_OP_SOFT_KERNEL_ATTENTION, kMinTensorCoreArch, 1, EDGEATTN_KERNEL_PATH_TENSOR_CORE_WARP},
};

bool knownOp(int op)
{
    return op >= EDGEATTN_OP_BLOCKIFY_ATTENTION && op <= EDGEATTN_OP_SOFT_KERNEL_ATTENTION;
}

bool pathRuns(PathRow const& row, int op, int dtype, int computeCapability, int codeArch)
{
    return (row.op < 0 || row.op == op) && computeCapability >= row.minArch && codeArch >= row.minArch
        && (!row.fp16Only || dtype == EDGEATTN_DTYPE_FLOAT16) && (!row.tensorCoreBuild || EDGEATTN_TENSOR_CORES);
}

PathRow const* findPath(int path)
{
    for (PathRow const& row : kPaths)
    {
        if (row.path == path)
        {
            return &row;
        }
    }
    return nullptr;
}

//! The default table's path, if it can run there (any dtype: the launcher knows whether the call has its kernel).
int defaultPath(int op, int batch, int computeCapability, int codeArch)
{
    int path = EDGEATTN_KERNEL_PATH_SCALAR;
    for (DefaultRow const& row : kDefaultPaths)
    {
        if (row.op == op && computeCapability >= row.minArch && codeArch >= row.minArch && batch >= row.minBatch)
        {
            path = row.path;
        }
    }
    PathRow const* const row = findPath(path);
    bool const runs = row != nullptr && computeCapability >= row->minArch && codeArch >= row->minArch
        && (!row->tensorCoreBuild || EDGEATTN_TENSOR_CORES);
    return runs ? path : EDGEATTN_KERNEL_PATH_SCALAR;
}

//! The calling thread's setting (EDGEATTN_KERNEL_PATH_INHERIT: the process-wide one decides).
thread_local int tThreadPath = EDGEATTN_KERNEL_PATH_INHERIT;

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

int chooseKernelPath(char const* function, KernelCall call, bool hasTensorCoreKernel, KernelPath* path)
{
    *path = KernelPath::kScalar;
    int const setting
        = tThreadPath != EDGEATTN_KERNEL_PATH_INHERIT ? tThreadPath : pathSetting().load(std::memory_order_relaxed);
    EDGEATTN_CHECK_ARG(setting != kPathInvalidEnvironment, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "EDGEATTN_KERNEL_PATH=\"%s\" is not auto, scalar, tensor_core or tensor_core_warp", gEnvironmentValue);
    if (setting == EDGEATTN_KERNEL_PATH_SCALAR || !hasTensorCoreKernel)
    {
        return EDGEATTN_STATUS_SUCCESS;
    }
    bool const forced = setting == EDGEATTN_KERNEL_PATH_TENSOR_CORE || setting == EDGEATTN_KERNEL_PATH_TENSOR_CORE_WARP;
#if !EDGEATTN_TENSOR_CORES
    (void) call;
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
    int const chosen
        = forced ? setting : defaultPath(call.op, call.batch, arch.computeCapability, arch.codeArch);
    if (chosen == EDGEATTN_KERNEL_PATH_TENSOR_CORE)
    {
        *path = KernelPath::kTensorCore;
    }
    else if (chosen == EDGEATTN_KERNEL_PATH_TENSOR_CORE_WARP)
    {
        *path = KernelPath::kTensorCoreWarp;
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

extern "C" EDGEATTN_API int edgeattn_set_thread_kernel_path(int path)
{
    EDGEATTN_CHECK_ARG(path == EDGEATTN_KERNEL_PATH_INHERIT || path == EDGEATTN_KERNEL_PATH_AUTO
            || edgeattn::kernels::findPath(path) != nullptr,
        EDGEATTN_STATUS_INVALID_ARGUMENT,
        "thread kernel path %d is not inherit (-1), auto (0), scalar (1), tensor_core (2) or tensor_core_warp (3)",
        path);
    edgeattn::kernels::tThreadPath = path;
    return edgeattn::kernels::succeed();
}

extern "C" EDGEATTN_API int edgeattn_get_thread_kernel_path(void)
{
    return edgeattn::kernels::tThreadPath;
}

extern "C" EDGEATTN_API int edgeattn_device_arch(int* compute_capability, int* code_arch)
{
    EDGEATTN_CHECK_ARG(compute_capability != nullptr && code_arch != nullptr, EDGEATTN_STATUS_INVALID_ARGUMENT,
        "null output pointer");
    edgeattn::kernels::DeviceArch arch;
    int const status = edgeattn::kernels::currentDeviceArch(__func__, &arch);
    if (status != EDGEATTN_STATUS_SUCCESS)
    {
        return status;
    }
    *compute_capability = arch.computeCapability;
    *code_arch = arch.codeArch;
    return edgeattn::kernels::succeed();
}

extern "C" EDGEATTN_API int edgeattn_kernel_paths(
    int op, int dtype, int compute_capability, int code_arch, int* paths, int capacity)
{
    if (!edgeattn::kernels::knownOp(op) || (dtype != EDGEATTN_DTYPE_FLOAT32 && dtype != EDGEATTN_DTYPE_FLOAT16)
        || capacity < 0 || (paths == nullptr && capacity > 0))
    {
        return -edgeattn::kernels::fail(EDGEATTN_STATUS_INVALID_ARGUMENT, __func__,
            "op %d, dtype %d, capacity %d: not an edgeattn_op, an edgeattn_dtype and a buffer", op, dtype, capacity);
    }
    int count = 0;
    for (edgeattn::kernels::PathRow const& row : edgeattn::kernels::kPaths)
    {
        if (edgeattn::kernels::pathRuns(row, op, dtype, compute_capability, code_arch))
        {
            if (count < capacity)
            {
                paths[count] = row.path;
            }
            ++count;
        }
    }
    edgeattn::kernels::succeed();
    return count;
}

extern "C" EDGEATTN_API int edgeattn_default_kernel_path(int op, int batch, int compute_capability, int code_arch)
{
    if (!edgeattn::kernels::knownOp(op) || batch < 0)
    {
        return -edgeattn::kernels::fail(
            EDGEATTN_STATUS_INVALID_ARGUMENT, __func__, "op %d, batch %d: not an edgeattn_op and a batch", op, batch);
    }
    edgeattn::kernels::succeed();
    return edgeattn::kernels::defaultPath(op, batch, compute_capability, code_arch);
}
