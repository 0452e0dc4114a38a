/*
 * Which kernel a launcher runs: the scalar kernels (every arch; the sm_53 path and the reference) or a tensor-core
 * kernel (sm_80+, where this library carries sm_80+ device code for the device and the call has one, e.g. FP16 I/O).
 *
 * API for launchers (host code):
 *   return launchOnKernelPath(__func__, KernelCall{EDGEATTN_OP_..., batch}, hasTensorCoreKernel,
 *       [&](char const* function) { return <launch the tensor-core kernels>; },   // each returns a status
 *       [&](char const* function) { return <launch the scalar kernels>; });
 * or, for the path alone:
 *   KernelPath path;
 *   int const status = chooseKernelPath(__func__, call, hasTensorCoreKernel, &path);
 *   if (status != EDGEATTN_STATUS_SUCCESS) return status;     // the reason is already edgeattn_last_error()
 *
 * The setting that decides: the calling thread's (edgeattn_set_thread_kernel_path: a TensorRT plugin's tactic) unless
 * it is INHERIT, else the process-wide one (edgeattn_set_kernel_path, or $EDGEATTN_KERNEL_PATH = auto | scalar |
 * tensor_core | tensor_core_warp read once). AUTO takes the default table's path for the call (kernelPath.cu,
 * kDefaultPaths: from measurements, see plugins/README.md). The device's compute capability, and whether the library's
 * device code for it was compiled for sm_80+ (the ptxVersion of a probe kernel: a library built for 72 and run on Orin
 * JIT-compiles compute_72 PTX, which has no mma), are queried once per device and cached.
 *
 * A new kernel path (e.g. a tile variant): a KernelPath value, its edgeattn_kernel_path value (also the TensorRT
 * tactic), a row in kernelPath.cu's kPaths, and the launch lambda of the launchers that have it.
 */
#ifndef EDGEATTN_COMMON_KERNEL_PATH_H
#define EDGEATTN_COMMON_KERNEL_PATH_H

#include "common/kernelStatus.h"
#include "edgeattn/kernels.h"

namespace edgeattn
{
namespace kernels
{

//! The kernels of a launch (each a TensorRT tactic candidate). kTensorCoreWarp differs from kTensorCore only for
//! blockify attention (blockifyMmaKernel, one warp per window, instead of blockifyFlashMmaKernel, the pipelined CTA
//! kernel) and SOFT (M > 64: the Newton-Raphson one block per problem instead of the batched GEMM tiles);
//! launchOnKernelPath runs an op's tensor-core kernels for both.
enum class KernelPath
{
    kScalar,
    kTensorCore,
    kTensorCoreWarp
};

//! What the default table keys on: the op (edgeattn_op) and the call's batch.
struct KernelCall
{
    int op;
    int batch;
};

//! mma.sync m16n8k16 with FP32 accumulation needs sm_80 (compute capability 8.0).
constexpr int kMinTensorCoreArch = 80;

struct DeviceArch
{
    int computeCapability; // major * 10 + minor
    int codeArch;          // the arch this library's device code for the device was compiled for (ptxVersion)
};

//! The current device's arch (cached per device); a status, with the reason recorded on failure.
int currentDeviceArch(char const* function, DeviceArch* arch);

//! The path for this launch of `call`. `hasTensorCoreKernel`: the op has a tensor-core kernel for these arguments (e.g. FP16
//! I/O), whether or not this build compiled it (EDGEATTN_TENSOR_CORES=0 then fails a forced tensor-core path). Fails with
//! EDGEATTN_STATUS_UNSUPPORTED when the tensor-core path is forced where it cannot run, and with
//! EDGEATTN_STATUS_CUDA_ERROR when the device cannot be queried.
int chooseKernelPath(char const* function, KernelCall call, bool hasTensorCoreKernel, KernelPath* path);

/*
 * The end of every launcher: the path for this launch, then `tensorCore(function)` or `scalar(function)` (each
 * enqueues its kernels and returns a status, the reason recorded on failure); the last error is cleared on success.
 */
template <typename TensorCoreLaunch, typename ScalarLaunch>
int launchOnKernelPath(char const* function, KernelCall call, bool hasTensorCoreKernel,
    TensorCoreLaunch const& tensorCore, ScalarLaunch const& scalar)
{
    KernelPath path = KernelPath::kScalar;
    int status = chooseKernelPath(function, call, hasTensorCoreKernel, &path);
    if (status == EDGEATTN_STATUS_SUCCESS)
    {
        status = path == KernelPath::kScalar ? scalar(function) : tensorCore(function);
    }
    return status == EDGEATTN_STATUS_SUCCESS ? succeed() : status;
}

//! The tensor-core launch of a build without tensor-core kernels (EDGEATTN_TENSOR_CORES=0), which chooseKernelPath
//! never picks.
inline int noTensorCoreKernels(char const* function)
{
    return fail(EDGEATTN_STATUS_UNSUPPORTED, function, "this library was built without tensor-core kernels");
}

} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_COMMON_KERNEL_PATH_H
