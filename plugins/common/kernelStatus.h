/*
 * Loud argument checking for the C ABI launchers: a failed check records one line (function, reason, values)
 * as the thread's last error and returns the status code. Nothing here throws; the launchers are extern "C".
 */
#ifndef EDGEATTN_COMMON_KERNEL_STATUS_H
#define EDGEATTN_COMMON_KERNEL_STATUS_H

#include "edgeattn/kernels.h"

#include <cuda_runtime_api.h>

#if defined(__CUDACC__)
#define EDGEATTN_HOST_DEVICE __host__ __device__
#else
#define EDGEATTN_HOST_DEVICE
#endif

namespace edgeattn
{
namespace kernels
{

//! Records printf-style text as the thread's last error and returns status (so callers can `return fail(...)`).
int fail(int status, char const* function, char const* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

//! Clears the thread's last error; returns EDGEATTN_STATUS_SUCCESS.
int succeed();

//! Maps a CUDA launch error (cudaGetLastError) to a status, naming the kernel that failed.
int checkLaunch(char const* function, char const* kernel);

inline bool isValidDtype(int dtype)
{
    return dtype == EDGEATTN_DTYPE_FLOAT32 || dtype == EDGEATTN_DTYPE_FLOAT16;
}

inline size_t dtypeSize(int dtype)
{
    return dtype == EDGEATTN_DTYPE_FLOAT16 ? 2 : 4;
}

//! Workspace sub-buffers start on 256-byte boundaries (float4 loads and coalescing need at least 16).
inline size_t alignUp(size_t bytes, size_t alignment = 256)
{
    return (bytes + alignment - 1) / alignment * alignment;
}

EDGEATTN_HOST_DEVICE inline int ceilDiv(int a, int b)
{
    return (a + b - 1) / b;
}

EDGEATTN_HOST_DEVICE inline int roundUp4(int a)
{
    return (a + 3) / 4 * 4;
}

//! Alignment the launchers require of the workspace: the SOFT projection reads its M and Y1 sub-buffers with
//! 16-byte vector loads (cudaMalloc and TensorRT workspaces are 256-byte aligned).
constexpr size_t kWorkspaceAlignment = 16;

inline bool isAligned(void const* pointer, size_t alignment)
{
    return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

//! Upper bound on the static shared memory our kernels request: the sm_53 / sm_62 per-block limit, so every
//! launch works on every Jetson without cudaFuncSetAttribute opt-in.
constexpr size_t kMaxSharedBytes = 48 * 1024;

//! gridDim.y / gridDim.z limit of every CUDA architecture.
constexpr int kMaxGridYZ = 65535;

} // namespace kernels
} // namespace edgeattn

//! Return `status` with a message unless `condition` holds. The message names the condition and the function.
#define EDGEATTN_CHECK_ARG(condition, status, ...)                                                                 \
    do                                                                                                             \
    {                                                                                                              \
        if (!(condition))                                                                                          \
        {                                                                                                          \
            return ::edgeattn::kernels::fail((status), __func__, __VA_ARGS__);                                     \
        }                                                                                                          \
    } while (0)

#endif // EDGEATTN_COMMON_KERNEL_STATUS_H
