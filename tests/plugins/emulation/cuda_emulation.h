/*
 * CUDA-on-CPU emulation for the edgeattn kernel tests (test-only: nothing here ships in a library).
 *
 * The kernel sources (the .cu and .cuh files under plugins/) are compiled as C++17 by g++ with this header
 * force-included, after build_emulated.py has rewritten the few constructs C++ cannot express (kernel launches, __shared__
 * declarations, float4 reinterpret loads, __launch_bounds__). Device pointers are plain host pointers.
 *
 * Execution model: the blocks of a grid run one after the other; the threads of a block run as cooperative
 * fibers (one stack each) on the calling OS thread. A fiber runs until it reaches a barrier (__syncthreads,
 * or the warp barrier inside a shuffle), so every barrier has its real semantics and the code between two
 * barriers of thread t runs before (forward schedule) or after (reverse schedule) that of thread t + 1, and a
 * warp may run ahead of the others through its shuffles (warp-greedy): a missing barrier shows up as a
 * difference between the schedules. Strict checks turn undefined behaviour
 * into a launch failure (a sticky "device fault", as on a GPU): __syncthreads reached from different call sites
 * or after a thread of the block exited, deadlock, shuffles with inactive or missing lanes, misaligned float4
 * accesses, shared-memory overruns (canaries), segfaults inside a kernel, block size > __launch_bounds__, and
 * launch configurations a GPU rejects (block > 1024 threads, grid y/z > 65535, dynamic shared memory > 48 KiB
 * without cudaFuncSetAttribute, static + dynamic shared memory > the limit). Shared memory is poisoned with NaN
 * at the start of every block (a GPU leaves garbage there).
 */
#ifndef EDGEATTN_TESTS_CUDA_EMULATION_H
#define EDGEATTN_TESTS_CUDA_EMULATION_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <tuple>
#include <type_traits>
#include <utility>

#define EDGEATTN_CUDA_EMULATION 1

// ---- qualifiers ------------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __constant__ static
#define __launch_bounds__(...)
// build_emulated.py rewrites every __shared__ declaration; one it missed must not compile silently.
#define __shared__ EDGEATTN_EMULATION_UNREWRITTEN_SHARED_DECLARATION
// __restrict__ is a GNU C++ keyword already.

#ifndef CUDART_VERSION
#define CUDART_VERSION 0 /* no CUDA runtime: the emulation */
#endif

// ---- vector types ----------------------------------------------------------------------------------------------
struct uint3
{
    unsigned int x, y, z;
};

struct dim3
{
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx)
        , y(vy)
        , z(vz)
    {
    }
    constexpr dim3(uint3 v)
        : x(v.x)
        , y(v.y)
        , z(v.z)
    {
    }
};

struct alignas(8) float2
{
    float x, y;
};

struct alignas(16) float4
{
    float x, y, z, w;
};

struct alignas(16) int4
{
    int x, y, z, w;
};

inline float2 make_float2(float x, float y)
{
    return float2{x, y};
}

inline float4 make_float4(float x, float y, float z, float w)
{
    return float4{x, y, z, w};
}

inline int4 make_int4(int x, int y, int z, int w)
{
    return int4{x, y, z, w};
}

// ---- half precision (storage type; conversions are IEEE binary16 round-to-nearest-even) -------------------------
struct alignas(2) __half
{
    uint16_t __x;
};

struct alignas(4) __half2
{
    __half x, y;
};

typedef __half half;
typedef __half2 half2;

namespace cuda_emu
{

inline uint16_t floatToHalfBits(float value)
{
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    uint32_t const sign = (bits >> 16) & 0x8000U;
    uint32_t const magnitude = bits & 0x7fffffffU;
    if (magnitude >= 0x7f800000U)
    {
        // inf stays inf; NaN becomes the canonical quiet NaN (what __float2half_rn gives on a GPU)
        return magnitude == 0x7f800000U ? static_cast<uint16_t>(sign | 0x7c00U) : static_cast<uint16_t>(0x7fffU);
    }
    if (magnitude >= 0x477ff000U)
    {
        return static_cast<uint16_t>(sign | 0x7c00U); // >= 65520 rounds (ties to even) to inf
    }
    if (magnitude < 0x38800000U)
    {
        // half subnormal (or zero): units of 2^-24
        if (magnitude < 0x33000000U)
        {
            return static_cast<uint16_t>(sign); // < 2^-25 rounds to zero
        }
        uint32_t const exponent = magnitude >> 23;
        uint32_t const mantissa = (magnitude & 0x7fffffU) | 0x800000U;
        uint32_t const shift = 126U - exponent; // 14 .. 24
        uint32_t result = mantissa >> shift;
        uint32_t const remainder = mantissa & ((1U << shift) - 1U);
        uint32_t const halfway = 1U << (shift - 1U);
        if (remainder > halfway || (remainder == halfway && (result & 1U) != 0U))
        {
            ++result; // may carry into the smallest normal, which is the right answer
        }
        return static_cast<uint16_t>(sign | result);
    }
    uint32_t result = (magnitude - 0x38000000U) >> 13; // rebias 127 -> 15, drop 13 mantissa bits
    uint32_t const remainder = magnitude & 0x1fffU;
    if (remainder > 0x1000U || (remainder == 0x1000U && (result & 1U) != 0U))
    {
        ++result; // a carry into the exponent is the right answer (up to inf, excluded above)
    }
    return static_cast<uint16_t>(sign | result);
}

inline float halfBitsToFloat(uint16_t half)
{
    uint32_t const sign = static_cast<uint32_t>(half & 0x8000U) << 16;
    uint32_t exponent = (half >> 10) & 0x1fU;
    uint32_t mantissa = half & 0x3ffU;
    uint32_t bits;
    if (exponent == 0x1fU)
    {
        bits = sign | 0x7f800000U | (mantissa << 13);
    }
    else if (exponent == 0)
    {
        if (mantissa == 0)
        {
            bits = sign;
        }
        else
        {
            exponent = 113; // normalise the subnormal
            while ((mantissa & 0x400U) == 0)
            {
                mantissa <<= 1;
                --exponent;
            }
            bits = sign | (exponent << 23) | ((mantissa & 0x3ffU) << 13);
        }
    }
    else
    {
        bits = sign | ((exponent + 112U) << 23) | (mantissa << 13);
    }
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
}

} // namespace cuda_emu

inline float __half2float(__half h)
{
    return cuda_emu::halfBitsToFloat(h.__x);
}

inline __half __float2half_rn(float f)
{
    return __half{cuda_emu::floatToHalfBits(f)};
}

inline __half __float2half(float f)
{
    return __float2half_rn(f);
}

inline float __low2float(__half2 h)
{
    return __half2float(h.x);
}

inline float __high2float(__half2 h)
{
    return __half2float(h.y);
}

inline __half2 __floats2half2_rn(float a, float b)
{
    return __half2{__float2half_rn(a), __float2half_rn(b)};
}

inline float2 __half22float2(__half2 h)
{
    return float2{__half2float(h.x), __half2float(h.y)};
}

inline unsigned short __half_as_ushort(__half h)
{
    return h.__x;
}

inline __half __ushort_as_half(unsigned short bits)
{
    return __half{bits};
}

inline unsigned int __float_as_uint(float x)
{
    unsigned int bits;
    std::memcpy(&bits, &x, sizeof(bits));
    return bits;
}

inline float __uint_as_float(unsigned int bits)
{
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    return x;
}

// ---- device math (host libm; CUDA's own implementations differ by a few ulp at most) ---------------------------
inline float rsqrtf(float x)
{
    return 1.0F / sqrtf(x);
}

inline float __expf(float x)
{
    return expf(x);
}

inline float __exp2f(float x)
{
    return exp2f(x);
}

inline float __logf(float x)
{
    return logf(x);
}

inline float __fdividef(float a, float b)
{
    return a / b;
}

inline float __frcp_rn(float x)
{
    return 1.0F / x;
}

inline float __saturatef(float x)
{
    return x < 0.0F ? 0.0F : (x > 1.0F ? 1.0F : x);
}

// CUDA's global min/max overloads (device code calls them unqualified)
inline int min(int a, int b)
{
    return a < b ? a : b;
}
inline int max(int a, int b)
{
    return a > b ? a : b;
}
inline unsigned int min(unsigned int a, unsigned int b)
{
    return a < b ? a : b;
}
inline unsigned int max(unsigned int a, unsigned int b)
{
    return a > b ? a : b;
}
inline long long min(long long a, long long b)
{
    return a < b ? a : b;
}
inline long long max(long long a, long long b)
{
    return a > b ? a : b;
}
inline long min(long a, long b)
{
    return a < b ? a : b;
}
inline long max(long a, long b)
{
    return a > b ? a : b;
}
inline unsigned long min(unsigned long a, unsigned long b)
{
    return a < b ? a : b;
}
inline unsigned long max(unsigned long a, unsigned long b)
{
    return a > b ? a : b;
}
inline float min(float a, float b)
{
    return fminf(a, b);
}
inline float max(float a, float b)
{
    return fmaxf(a, b);
}
inline double min(double a, double b)
{
    return fmin(a, b);
}
inline double max(double a, double b)
{
    return fmax(a, b);
}

// ---- runtime API -----------------------------------------------------------------------------------------------
typedef struct CUstream_st* cudaStream_t;

enum cudaError
{
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorMisalignedAddress = 716,
    cudaErrorLaunchFailure = 719,
};
typedef enum cudaError cudaError_t;

enum cudaFuncAttribute
{
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

enum cudaDeviceAttr
{
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxBlockDimX = 2,
    cudaDevAttrMaxGridDimX = 5,
    cudaDevAttrMaxGridDimY = 6,
    cudaDevAttrMaxGridDimZ = 7,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

enum cudaMemcpyKind
{
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
char const* cudaGetErrorString(cudaError_t error);
char const* cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device);

//! The fields of CUDA's struct the emulation fills (the emulated device: edgeattn_emu_set_compute_capability).
struct cudaDeviceProp
{
    char name[256];
    int major;
    int minor;
    int multiProcessorCount;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    int maxThreadsPerBlock; // (no warpSize field: warpSize is a macro here, as a device variable it is 32)
};
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device);

//! The fields of CUDA's struct the launchers read: ptxVersion / binaryVersion are the arch the emulated
//! library's code for the current device "was compiled for" (the device's own, unless edgeattn_emu_select_device
//! limits it), as major * 10 + minor.
struct cudaFuncAttributes
{
    size_t sharedSizeBytes;
    size_t constSizeBytes;
    size_t localSizeBytes;
    int maxThreadsPerBlock;
    int numRegs;
    int ptxVersion;
    int binaryVersion;
    int cacheModeCA;
    int maxDynamicSharedSizeBytes;
    int preferredShmemCarveout;
};
cudaError_t cudaMemsetAsync(void* destination, int value, size_t bytes, cudaStream_t stream = 0);
//! Device memory is host memory here; cudaMalloc fills it with a garbage pattern (a GPU returns it uninitialised).
cudaError_t cudaMalloc(void** pointer, size_t bytes);
cudaError_t cudaFree(void* pointer);
enum cudaStreamCaptureStatus
{
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};
//! Active while edgeattn_emu_set_capturing(1) says so (a stream being captured into a CUDA graph), else None.
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaMemcpyAsync(
    void* destination, void const* source, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaDeviceSynchronize(void);

namespace cuda_emu
{
namespace detail
{
cudaError_t setFunctionAttribute(void const* function, int attribute, int value);
} // namespace detail
} // namespace cuda_emu

template <typename Function>
cudaError_t cudaFuncSetAttribute(Function* function, cudaFuncAttribute attribute, int value)
{
    return cuda_emu::detail::setFunctionAttribute(
        reinterpret_cast<void const*>(function), static_cast<int>(attribute), value);
}

namespace cuda_emu
{
namespace detail
{
cudaError_t functionAttributes(cudaFuncAttributes* attributes, void const* function);
} // namespace detail
} // namespace cuda_emu

template <typename Function>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, Function* function)
{
    return cuda_emu::detail::functionAttributes(attributes, reinterpret_cast<void const*>(function));
}

//! The emulated multiprocessor holds 2048 threads and 64 KiB of shared memory (the smallest of the sm_53+ GPUs;
//! registers are not modelled): the blocks of that size and shared memory that fit it, at least 1.
template <typename Function>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    int* numBlocks, Function* /*function*/, int blockSize, size_t dynamicSMemSize)
{
    if (numBlocks == nullptr || blockSize <= 0)
    {
        return cudaErrorInvalidValue;
    }
    int const byThreads = 2048 / blockSize;
    int const byShared = dynamicSMemSize > 0 ? static_cast<int>((64 * 1024) / dynamicSMemSize) : byThreads;
    *numBlocks = byThreads < byShared ? byThreads : byShared;
    return cudaSuccess;
}

// ---- execution model -------------------------------------------------------------------------------------------
namespace cuda_emu
{
namespace detail
{

//! What the device code of the running fiber sees.
struct ThreadState
{
    uint3 index;         // threadIdx
    unsigned int linear; // x + y * Dx + z * Dx * Dy
};

extern ThreadState* currentThread;
extern uint3 blockIdxValue;
extern dim3 blockDimValue;
extern dim3 gridDimValue;

[[noreturn]] void deviceFault(int error, char const* format, ...) __attribute__((format(printf, 2, 3)));
void syncThreads(char const* file, int line);
unsigned long long warpExchange(unsigned int mask, unsigned long long value, int sourceLane, char const* what);
unsigned int warpBallot(unsigned int mask, bool predicate);
void* dynamicShared();
void* staticShared(void const* key, size_t bytes, size_t alignment);
bool checkLaunchBounds(int maxThreads, char const* kernel);

typedef void (*BlockBody)(void* context);
void runLaunch(char const* kernel, char const* caller, void const* function, dim3 grid, dim3 block,
    size_t sharedBytes, cudaStream_t stream, BlockBody body, void* context);

} // namespace detail

//! One of `<<<grid, block, shared, stream>>>` (the rewritten launch passes the configuration text unchanged).
struct LaunchConfig
{
    dim3 grid;
    dim3 block;
    size_t sharedBytes;
    cudaStream_t stream;
    LaunchConfig(dim3 g, dim3 b, size_t shared = 0, cudaStream_t s = 0)
        : grid(g)
        , block(b)
        , sharedBytes(shared)
        , stream(s)
    {
    }
};

template <typename Tuple, typename... Params>
struct KernelCall
{
    void (*kernel)(Params...);
    Tuple arguments;

    static void invoke(void* self)
    {
        KernelCall* const call = static_cast<KernelCall*>(self);
        // each thread gets its own by-value copy of the parameters, like the GPU's parameter space
        Tuple copy = call->arguments;
        std::apply(call->kernel, copy);
    }
};

//! Bytes of a kernel's parameter buffer (each parameter at its natural alignment).
template <typename... Params>
constexpr size_t parameterBytes()
{
    size_t offset = 0;
    size_t const sizes[] = {sizeof(Params)..., 0};
    size_t const alignments[] = {alignof(Params)..., 1};
    for (size_t i = 0; i < sizeof...(Params); ++i)
    {
        offset = (offset + alignments[i] - 1) / alignments[i] * alignments[i] + sizes[i];
    }
    return offset;
}

//! CUDA before 12.1 (every JetPack up to 5.x) limits kernel parameters to 4 KB; nvcc 13 would accept 32 KB.
constexpr size_t kMaxParameterBytes = 4096;

//! `kernel<<<config>>>(args...)`: converts the arguments to the parameter types (as a launch does), then runs
//! the grid to completion. Errors are reported through cudaGetLastError. `caller` (the launching function's
//! __PRETTY_FUNCTION__) gives the launch log the template arguments that `name` (the source text) leaves open.
template <typename... Params, typename... Args>
void launch(char const* name, char const* caller, void (*kernel)(Params...), LaunchConfig const& config,
    Args&&... args)
{
    static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with the wrong number of arguments");
    static_assert(parameterBytes<typename std::decay<Params>::type...>() <= kMaxParameterBytes,
        "kernel parameters above 4 KB: CUDA < 12.1 (JetPack 4.6 / 5.x) cannot launch this kernel");
    typedef std::tuple<typename std::decay<Params>::type...> Tuple;
    KernelCall<Tuple, Params...> call{kernel, Tuple(std::forward<Args>(args)...)};
    detail::runLaunch(name, caller, reinterpret_cast<void const*>(kernel), config.grid, config.block, config.sharedBytes,
        config.stream, &KernelCall<Tuple, Params...>::invoke, &call);
}

template <typename T>
T* dynamicShared()
{
    return static_cast<T*>(detail::dynamicShared());
}

//! Per-block storage of a `__shared__ T name[N]` declaration: every thread of the block gets the same array.
template <typename Array>
Array& staticShared(void const* key)
{
    return *static_cast<Array*>(detail::staticShared(key, sizeof(Array), alignof(Array)));
}

//! `*reinterpret_cast<float4 [const]*>(p)`: a GPU faults on a misaligned 16-byte access.
template <typename Pointer>
auto& vectorRef(Pointer pointer)
{
    typedef typename std::remove_pointer<Pointer>::type Vector;
    if (reinterpret_cast<uintptr_t>(pointer) % alignof(Vector) != 0)
    {
        detail::deviceFault(cudaErrorMisalignedAddress, "misaligned %zu-byte vector access at %p",
            sizeof(Vector), static_cast<void const*>(pointer));
    }
    return *pointer;
}

template <typename T>
unsigned long long toBits(T value)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of an unsupported type");
    unsigned long long bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    return bits;
}

template <typename T>
T fromBits(unsigned long long bits)
{
    T value;
    std::memcpy(&value, &bits, sizeof(T));
    return value;
}

inline int laneId()
{
    return static_cast<int>(detail::currentThread->linear & 31U);
}

//! CUDA's source-lane rule for a sub-warp width: lanes are grouped in segments of `width`.
inline int segmentLane(int lane, int source, int width)
{
    if (width <= 0 || width > 32 || (width & (width - 1)) != 0)
    {
        detail::deviceFault(cudaErrorLaunchFailure, "shuffle width %d is not a power of two <= 32", width);
    }
    int const segment = lane & ~(width - 1);
    return segment + (source & (width - 1));
}

} // namespace cuda_emu

#define threadIdx (::cuda_emu::detail::currentThread->index)
#define blockIdx (::cuda_emu::detail::blockIdxValue)
#define blockDim (::cuda_emu::detail::blockDimValue)
#define gridDim (::cuda_emu::detail::gridDimValue)
#define warpSize 32

#define __syncthreads() ::cuda_emu::detail::syncThreads(__FILE__, __LINE__)

// what build_emulated.py puts in front of a kernel body that had __launch_bounds__(maxThreads[, minBlocks])
#define EDGEATTN_EMU_LAUNCH_BOUNDS(maxThreads, ...)                                                               \
    if (!::cuda_emu::detail::checkLaunchBounds((maxThreads), __func__))                                           \
    {                                                                                                              \
        return;                                                                                                    \
    }

template <typename T>
T __shfl_sync(unsigned int mask, T value, int sourceLane, int width = 32)
{
    int const lane = cuda_emu::laneId();
    int const source = cuda_emu::segmentLane(lane, sourceLane, width);
    return cuda_emu::fromBits<T>(
        cuda_emu::detail::warpExchange(mask, cuda_emu::toBits(value), source, "__shfl_sync"));
}

template <typename T>
T __shfl_xor_sync(unsigned int mask, T value, int laneMask, int width = 32)
{
    int const lane = cuda_emu::laneId();
    int source = lane ^ laneMask;
    if (source >= ((lane + width) & ~(width - 1)))
    {
        source = lane; // outside the caller's segment: own value
    }
    return cuda_emu::fromBits<T>(
        cuda_emu::detail::warpExchange(mask, cuda_emu::toBits(value), source, "__shfl_xor_sync"));
}

template <typename T>
T __shfl_down_sync(unsigned int mask, T value, unsigned int delta, int width = 32)
{
    int const lane = cuda_emu::laneId();
    int source = lane + static_cast<int>(delta);
    if ((source & ~(width - 1)) != (lane & ~(width - 1)))
    {
        source = lane;
    }
    return cuda_emu::fromBits<T>(
        cuda_emu::detail::warpExchange(mask, cuda_emu::toBits(value), source, "__shfl_down_sync"));
}

template <typename T>
T __shfl_up_sync(unsigned int mask, T value, unsigned int delta, int width = 32)
{
    int const lane = cuda_emu::laneId();
    int source = lane - static_cast<int>(delta);
    if (source < (lane & ~(width - 1)))
    {
        source = lane;
    }
    return cuda_emu::fromBits<T>(
        cuda_emu::detail::warpExchange(mask, cuda_emu::toBits(value), source, "__shfl_up_sync"));
}

[[noreturn]] inline void __trap()
{
    ::cuda_emu::detail::deviceFault(cudaErrorLaunchFailure, "__trap() reached");
}

// ---- tensor-core instructions (plugins/common/mma.cuh calls these under EDGEATTN_CUDA_EMULATION) ---------------
namespace cuda_emu
{

enum MmaInputType
{
    kMmaF16 = 0,
    kMmaBf16 = 1
};

//! mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 with d as both C and D: a warp collective (all
//! 32 lanes, converged). Fragments per lane as the PTX ISA defines them; inputs are the exact f16/bf16 values,
//! products exact, and each element's 16 products and C are summed in double and rounded to FP32 once (the GPU
//! adds in FP32 in an unspecified order, so results agree to a few FP32 ulps, not bitwise).
void mmaM16N8K16(float (&d)[4], uint32_t const (&a)[4], uint32_t const (&b)[2], int inputType);

//! ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16: lane l < 8 * count supplies the 16-byte aligned shared
//! memory address of row l % 8 of matrix l / 8 and reads it when it reaches the instruction (so a row another lane
//! has not written yet, without a __syncwarp in between, reads stale or poisoned data, as it may on a GPU);
//! register j of lane l receives matrix j as the PTX ISA distributes it.
void ldmatrix(uint32_t* registers, int count, void const* rowAddress, bool transpose);

//! cp.async.cg.shared.global [shared], [global], 16, sourceBytes (plugins/common/asyncCopy.cuh): one thread's
//! 16-byte asynchronous copy; bytes sourceBytes..15 of the destination are zero-filled. The source is read (and
//! counted as global traffic) when the thread issues the copy, the destination is poisoned then and written only
//! when a cp.async.wait_group of this thread retires the copy's group: reading it earlier reads NaN. On an emulated
//! device below sm_80 the copy is synchronous (what asyncCopy.cuh compiles to there) and commit/wait do nothing.
void cpAsync16(void* shared, void const* global, int sourceBytes);
//! cp.async.commit_group: this thread's copies issued since the last commit become one group.
void cpAsyncCommitGroup();
//! cp.async.wait_group n: retires this thread's committed groups until at most the n most recent are pending.
void cpAsyncWaitGroup(int pending);

//! ex2.approx.ftz.f32: 2^x off by a deliberate relative error of kEx2ApproxMaxRelativeError (sign from the input's
//! bits), the bound the PTX ISA documents, so no caller can depend on exactness; subnormal inputs and results are
//! flushed to +-0 (.ftz), ex2(-inf) = +0, ex2(+inf) = +inf, NaN stays NaN.
float ex2Approx(float x);
constexpr double kEx2ApproxMaxRelativeError = 1.0 / (1 << 22); // 2^-22, including the rounding to FP32

//! Test hook of the planted-bug variants (tests/plugins/planted_bugs.py): a mutated copy of a source guards its bug
//! with `if (plantedBug(id))`, so one variant library carries several bugs, each switched on alone
//! (edgeattn_emu_set_planted_bug). Always false in the regular build's code, which never calls it.
bool plantedBug(int id);

} // namespace cuda_emu

inline unsigned int __ballot_sync(unsigned int mask, int predicate)
{
    return cuda_emu::detail::warpBallot(mask, predicate != 0);
}

inline int __all_sync(unsigned int mask, int predicate)
{
    return cuda_emu::detail::warpBallot(mask, predicate != 0) == mask;
}

inline int __any_sync(unsigned int mask, int predicate)
{
    return cuda_emu::detail::warpBallot(mask, predicate != 0) != 0;
}

inline void __syncwarp(unsigned int mask = 0xffffffffU)
{
    cuda_emu::detail::warpBallot(mask, false);
}

// Memory fences and cache-global loads: the blocks of a grid run here one after the other, each to completion, so
// every global store of an earlier block is visible to a later one and the fences have nothing to order (what they
// guarantee on a GPU, e.g. for the last-block-to-arrive reductions, the GPU tests check). The arrival order of the
// blocks is what a kernel can observe: edgeattn_emu_set_block_order permutes it.
inline void __threadfence()
{
}

inline void __threadfence_block()
{
}

//! ld.global.cg (cache at L2 only: another block's fresh stores, never a stale L1 line): a plain load here.
template <typename T>
T __ldcg(T const* address)
{
    return *address;
}

// Atomics: blocks and threads never run concurrently here, so plain read-modify-write is atomic.
template <typename T>
T atomicAdd(T* address, T value)
{
    T const old = *address;
    *address = old + value;
    return old;
}

template <typename T>
T atomicMax(T* address, T value)
{
    T const old = *address;
    *address = old > value ? old : value;
    return old;
}

template <typename T>
T atomicMin(T* address, T value)
{
    T const old = *address;
    *address = old < value ? old : value;
    return old;
}

template <typename T>
T atomicSub(T* address, T value)
{
    T const old = *address;
    *address = old - value;
    return old;
}

//! ((old >= limit) ? 0 : old + 1), as CUDA's atomicInc: a counter that wraps back to 0 after limit + 1 increments.
inline unsigned int atomicInc(unsigned int* address, unsigned int limit)
{
    unsigned int const old = *address;
    *address = old >= limit ? 0U : old + 1U;
    return old;
}

template <typename T>
T atomicExch(T* address, T value)
{
    T const old = *address;
    *address = value;
    return old;
}

template <typename T>
T atomicCAS(T* address, T compare, T value)
{
    T const old = *address;
    if (old == compare)
    {
        *address = value;
    }
    return old;
}

#endif // EDGEATTN_TESTS_CUDA_EMULATION_H
