/*
 * Asynchronous global -> shared copies (cp.async, sm_80+) behind one small wrapper, with the synchronous fallback
 * that older archs (sm_53 Nano, sm_72 Xavier, sm_75) compile instead, and the fast 2^x of the softmaxes.
 *
 * API (namespace edgeattn::kernels::async; device code)
 *   EDGEATTN_ASYNC_COPY_AVAILABLE   1 in sm_80+ device passes and in the CPU emulation, else 0
 *   void copy16(void* shared, void const* global, bool valid)
 *       cp.async.cg.shared.global [shared], [global], 16, valid ? 16 : 0: this thread's 16-byte copy; with
 *       valid = false nothing is read and the 16 bytes are zero-filled (padding rows without a branch around the
 *       copy; `global` must still be a 16-byte aligned address). Both addresses 16-byte aligned. `.cg` caches in L2
 *       only: each staged tile is read once per block.
 *   void commit()                 cp.async.commit_group: the copies issued since the last commit form one group
 *   template <int N> void wait()  cp.async.wait_group N: this thread's groups but the N most recent are complete
 *       The data of a thread's copies is visible to that thread after wait(); other threads of the block see it
 *       after a __syncthreads() that follows the writers' wait(). Until then the destination is undefined (the
 *       CPU emulation poisons it with NaN, so a missing or too lax wait shows).
 *   Fallback (arch < 80): copy16 is a 16-byte load and store, commit and wait do nothing; the same kernel source
 *   runs on every arch (slower below sm_80: the load's latency is not hidden behind the tile in flight).
 *
 *   float exp2Approx(float x)     ex2.approx.ftz.f32 (every arch): 2^x within the PTX ISA's relative error bound
 *       (2^-22; the CUDA C++ Programming Guide lists exp2f, which compiles to it, at 2 ulp); subnormal inputs and
 *       results flush to zero; exp2Approx(-inf) = 0. The emulation gives it a deliberate error of that size.
 *
 * ldmatrix (and its .trans form) and mma.sync are in mma.cuh.
 */
#ifndef EDGEATTN_COMMON_ASYNC_COPY_CUH
#define EDGEATTN_COMMON_ASYNC_COPY_CUH

#include <cuda_runtime.h>

#include <cstdint>

#if defined(EDGEATTN_CUDA_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define EDGEATTN_ASYNC_COPY_AVAILABLE 1
#else
#define EDGEATTN_ASYNC_COPY_AVAILABLE 0
#endif

namespace edgeattn
{
namespace kernels
{
namespace async
{

__device__ __forceinline__ void copy16(void* shared, void const* global, bool valid)
{
#if defined(EDGEATTN_CUDA_EMULATION)
    ::cuda_emu::cpAsync16(shared, global, valid ? 16 : 0);
#elif EDGEATTN_ASYNC_COPY_AVAILABLE
    unsigned const address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    int const sourceBytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(sourceBytes)
                 : "memory");
#else
    int4 value = make_int4(0, 0, 0, 0);
    if (valid)
    {
        value = *static_cast<int4 const*>(global);
    }
    *static_cast<int4*>(shared) = value;
#endif
}

__device__ __forceinline__ void commit()
{
#if defined(EDGEATTN_CUDA_EMULATION)
    ::cuda_emu::cpAsyncCommitGroup();
#elif EDGEATTN_ASYNC_COPY_AVAILABLE
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void wait()
{
    static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes an immediate 0..7");
#if defined(EDGEATTN_CUDA_EMULATION)
    ::cuda_emu::cpAsyncWaitGroup(N);
#elif EDGEATTN_ASYNC_COPY_AVAILABLE
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ float exp2Approx(float x)
{
#if defined(EDGEATTN_CUDA_EMULATION)
    return ::cuda_emu::ex2Approx(x);
#elif defined(__CUDA_ARCH__)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x); // host pass: never called
#endif
}

} // namespace async
} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_COMMON_ASYNC_COPY_CUH
