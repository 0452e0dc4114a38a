/*
 * edgeattn kernels: plain C ABI over the CUDA kernels of the four custom attention ops.
 *
 * This header is the whole interface of libedgeattn_kernels.so (which builds without TensorRT) and of the
 * edgeattn_* symbols that libedgeattn_plugins.so re-exports. Every launcher
 *   - takes device pointers, sizes, a dtype (all tensors of one call share it) and a CUDA stream (as void*,
 *     so callers need no CUDA headers: pass a cudaStream_t, or 0 for the legacy default stream); tensor
 *     pointers must be aligned to their element size and a workspace to 16 bytes (cudaMalloc and TensorRT
 *     give 256), else the call fails with EDGEATTN_STATUS_INVALID_ARGUMENT,
 *   - validates its arguments and returns EDGEATTN_STATUS_SUCCESS or an error code; the reason is available as
 *     one line from edgeattn_last_error() (thread-local, valid until the next call on the same thread),
 *   - only enqueues work (no synchronisation, no allocation, no host<->device copies), so it can be captured in
 *     a CUDA graph; asynchronous kernel faults surface at the caller's next synchronisation.
 * Semantics are the op contract in export/schemas/<OpType>.yaml. All accumulation is FP32 for FP16 I/O.
 *
 * Layouts (row-major, contiguous):
 *   token tensors         (B, N, C), channel c belongs to head c / head_dim, head_dim = C / num_heads
 *   LiteMLA qkv / out     (B, G*3*head_dim, H, W) / (B, G*head_dim, H, W), per group [q | k | v]
 *   SOFT landmarks        (B, M, C)
 */
#ifndef EDGEATTN_KERNELS_H
#define EDGEATTN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define EDGEATTN_API __declspec(dllexport)
#else
#define EDGEATTN_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a signature or an enum value below changes. */
#define EDGEATTN_KERNELS_ABI_VERSION 2

typedef enum edgeattn_status
{
    EDGEATTN_STATUS_SUCCESS = 0,
    EDGEATTN_STATUS_INVALID_ARGUMENT = 1, /* shapes/attributes violate the op contract */
    EDGEATTN_STATUS_UNSUPPORTED = 2,      /* valid per contract but beyond this build's limits (e.g. head_dim) */
    EDGEATTN_STATUS_WORKSPACE_TOO_SMALL = 3,
    EDGEATTN_STATUS_CUDA_ERROR = 4        /* a kernel launch failed */
} edgeattn_status;

typedef enum edgeattn_dtype
{
    EDGEATTN_DTYPE_FLOAT32 = 0,
    EDGEATTN_DTYPE_FLOAT16 = 1
} edgeattn_dtype;

typedef enum edgeattn_padding
{
    EDGEATTN_PADDING_NONE = 0,
    EDGEATTN_PADDING_ZEROS = 1,
    EDGEATTN_PADDING_MASKED = 2
} edgeattn_padding;

typedef enum edgeattn_lite_mla_kernel
{
    EDGEATTN_LITE_MLA_RELU = 0,
    EDGEATTN_LITE_MLA_QUADRATIC_TAYLOR = 1
} edgeattn_lite_mla_kernel;

typedef enum edgeattn_kernel_path
{
    EDGEATTN_KERNEL_PATH_AUTO = 0,        /* edgeattn_default_kernel_path: per op and arch, from measurements */
    EDGEATTN_KERNEL_PATH_SCALAR = 1,      /* always the scalar kernels (the sm_53 path and the reference) */
    EDGEATTN_KERNEL_PATH_TENSOR_CORE = 2, /* tensor-core kernels; a call that has one fails where it cannot run */
    /* as TENSOR_CORE, but blockify attention runs its one-warp-per-window kernel (blockifyMmaKernel) instead of the
       pipelined CTA kernel (blockifyFlashMmaKernel), and SOFT with M > 64 landmarks its Newton-Raphson one block per
       problem (the scalar iteration) instead of the batched tensor-core GEMM tiles; the other ops have one
       tensor-core kernel each */
    EDGEATTN_KERNEL_PATH_TENSOR_CORE_WARP = 3,
    EDGEATTN_KERNEL_PATH_INHERIT = -1     /* thread setting only: follow the process-wide setting */
} edgeattn_kernel_path;

/* The op calls the default-path table distinguishes (LiteMLA's two kernels have their own rows). */
typedef enum edgeattn_op
{
    EDGEATTN_OP_BLOCKIFY_ATTENTION = 0,
    EDGEATTN_OP_EFFICIENT_ATTENTION = 1,
    EDGEATTN_OP_LITE_MLA_RELU = 2,
    EDGEATTN_OP_LITE_MLA_QUADRATIC_TAYLOR = 3,
    EDGEATTN_OP_SOFT_KERNEL_ATTENTION = 4
} edgeattn_op;

/* Library information. */
EDGEATTN_API int edgeattn_kernels_abi_version(void);
/* One line, e.g. "edgeattn kernels 0.1.0; abi 2; cuda 13000; archs 75,87,90; tensor cores sm_80+". */
EDGEATTN_API const char* edgeattn_kernels_build_info(void);
EDGEATTN_API const char* edgeattn_status_string(int status);
/* Why the last call on this thread failed ("" after a success). */
EDGEATTN_API const char* edgeattn_last_error(void);

/*
 * Kernel path, process-wide: which kernel the launchers below run where a tensor-core kernel exists for the call
 * (FP16 I/O of blockify attention, EFFATT, LiteMLA and SOFT, within their head_dim limits; see plugins/README.md).
 * AUTO runs what edgeattn_default_kernel_path says for the call (a per-arch table from measurements).
 * The initial value comes from $EDGEATTN_KERNEL_PATH (auto | scalar | tensor_core | tensor_core_warp; another value
 * makes such launches fail with EDGEATTN_STATUS_INVALID_ARGUMENT), else AUTO. With TENSOR_CORE(_WARP), such a launch
 * fails with
 * EDGEATTN_STATUS_UNSUPPORTED on a device below sm_80 or when this library has no sm_80+ code for the device.
 * set returns EDGEATTN_STATUS_SUCCESS or EDGEATTN_STATUS_INVALID_ARGUMENT; get returns the setting (-1 while
 * $EDGEATTN_KERNEL_PATH holds an unknown value). Not synchronised with launches in flight on other threads.
 */
EDGEATTN_API int edgeattn_set_kernel_path(int path);
EDGEATTN_API int edgeattn_get_kernel_path(void);

/*
 * Kernel path of the calling thread, which wins over the process-wide setting while it is not
 * EDGEATTN_KERNEL_PATH_INHERIT (the initial value): the TensorRT plugins set the tactic TensorRT chose around each
 * launch. set returns EDGEATTN_STATUS_SUCCESS or EDGEATTN_STATUS_INVALID_ARGUMENT; get returns the setting.
 */
EDGEATTN_API int edgeattn_set_thread_kernel_path(int path);
EDGEATTN_API int edgeattn_get_thread_kernel_path(void);

/*
 * The current device's compute capability (major * 10 + minor) and the arch this library's device code for it was
 * compiled for (its PTX version: a library built for 72 runs on an sm_87 device as JIT-compiled compute_72).
 * Returns a status (EDGEATTN_STATUS_CUDA_ERROR without a device).
 */
EDGEATTN_API int edgeattn_device_arch(int* compute_capability, int* code_arch);

/*
 * Pure functions of their arguments (no device query), so callers and tests can ask about any device:
 * edgeattn_kernel_paths writes the paths a call of `op` (edgeattn_op) with `dtype` can run on a device of
 * compute_capability whose library code is code_arch, in this build (scalar first; at most capacity), and returns how
 * many there are, or -EDGEATTN_STATUS_INVALID_ARGUMENT for an unknown op or dtype. A call whose arguments are beyond a
 * listed kernel's limits (head_dim, see plugins/README.md) runs the scalar kernels on that path.
 * edgeattn_default_kernel_path returns the path AUTO takes there for a call of `batch` (the table in
 * plugins/README.md, "Kernel path by timing"), or -EDGEATTN_STATUS_INVALID_ARGUMENT.
 */
EDGEATTN_API int edgeattn_kernel_paths(int op, int dtype, int compute_capability, int code_arch, int* paths,
    int capacity);
EDGEATTN_API int edgeattn_default_kernel_path(int op, int batch, int compute_capability, int code_arch);

/*
 * EdgeAttnBlockifyAttention: softmax attention inside non-overlapping window_size x window_size windows of the
 * height x width token map (N = height * width), optional per-window depthwise 3x3 LePE on v.
 * lepe_weight (C, 1, 3, 3) and lepe_bias (C) are device pointers of the same dtype, or both NULL (has_lepe = 0).
 * scale <= 0 means head_dim ** -0.5. padding: edgeattn_padding. No workspace.
 */
EDGEATTN_API size_t edgeattn_blockify_attention_workspace_size(
    int batch, int height, int width, int channels, int num_heads, int window_size);
EDGEATTN_API int edgeattn_blockify_attention(const void* q, const void* k, const void* v, const void* lepe_weight,
    const void* lepe_bias, void* out, int batch, int height, int width, int channels, int num_heads,
    int window_size, float scale, int padding, int dtype, void* stream);

/*
 * EdgeAttnEfficientAttention (EFFATT): per head, softmax of q over features, softmax of k over tokens,
 * out = q_hat (k_hat^T v). Workspace: FP32 split-N partial contexts plus the final per-head context.
 */
EDGEATTN_API size_t edgeattn_efficient_attention_workspace_size(
    int batch, int tokens, int channels, int num_heads);
EDGEATTN_API int edgeattn_efficient_attention(const void* q, const void* k, const void* v, void* out, int batch,
    int tokens, int channels, int num_heads, int dtype, void* workspace, size_t workspace_bytes, void* stream);

/*
 * EdgeAttnLiteMLA: ReLU or compact quadratic-Taylor linear attention on NCHW qkv (channels_in = G*3*head_dim),
 * out = num / (den + eps) in FP32. qt_alpha/qt_beta/qt_gamma are HOST arrays of qt_count (1 or G) floats,
 * read only for kernel = EDGEATTN_LITE_MLA_QUADRATIC_TAYLOR (may be NULL otherwise); they are passed to the
 * kernels by value, so the arrays need not outlive the call.
 */
EDGEATTN_API size_t edgeattn_lite_mla_workspace_size(
    int batch, int channels_in, int height, int width, int head_dim, int kernel);
EDGEATTN_API int edgeattn_lite_mla(const void* qkv, void* out, int batch, int channels_in, int height, int width,
    int head_dim, int kernel, float eps, const float* qt_alpha, const float* qt_beta, const float* qt_gamma,
    int qt_count, int dtype, void* workspace, size_t workspace_bytes, void* stream);

/*
 * EdgeAttnSoftKernelAttention (SOFT / SOFT++): Gaussian-kernel Nystrom attention with tied Q = K,
 * out = P^T (M (P v)), M from a fixed-count Newton-Raphson pseudo-inverse of the landmark kernel A
 * (symmetric_norm = 1: M = diag(s) X diag(s), s = rowsum(A) ** -0.5). The inverse runs in shared memory
 * for small M (M = 49 at 224^2) and in the workspace otherwise; the workspace size accounts for both.
 */
EDGEATTN_API size_t edgeattn_soft_kernel_attention_workspace_size(
    int batch, int tokens, int num_landmarks, int channels, int num_heads);
EDGEATTN_API int edgeattn_soft_kernel_attention(const void* q, const void* landmarks, const void* v, void* out,
    int batch, int tokens, int num_landmarks, int channels, int num_heads, int newton_iters, int symmetric_norm,
    int dtype, void* workspace, size_t workspace_bytes, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* EDGEATTN_KERNELS_H */
