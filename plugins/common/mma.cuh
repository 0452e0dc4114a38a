/*
 * The tensor-core matrix instruction of the edgeattn kernels, behind one small device wrapper.
 *
 * API (namespace edgeattn::kernels::mma; stable: the linear-attention and SOFT tensor-core paths build on it)
 *
 *   Compile guards
 *     EDGEATTN_TENSOR_CORES    1 (default) when this build has tensor-core kernels at all; CMake sets 0 with
 *                              EDGEATTN_TENSOR_CORES=OFF, or with AUTO when no requested arch is >= 80 (JetPack 4.6 /
 *                              sm_53, sm_72: only the scalar kernels are compiled). Host code instantiates and launches
 *                              tensor-core kernels only under `#if EDGEATTN_TENSOR_CORES`.
 *     EDGEATTN_MMA_AVAILABLE   1 in the device passes for sm_80+ and in the CPU emulation, 0 in sm_53..sm_75 device
 *                              passes and in the host pass. Every tensor-core kernel body is wrapped in
 *                              `#if EDGEATTN_MMA_AVAILABLE ... #endif`, so the SASS/PTX of sm_75 and older holds no
 *                              mma/ldmatrix (the launchers never pick such a kernel there: kernelPath.h).
 *
 *   Fragments of mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (D = A * B + C, one per warp):
 *     FragmentA { uint32_t x[4]; }   A 16x16 (row = M, col = K), two f16/bf16 per register, element i in register
 *                                    i / 2 (low half for even i)
 *     FragmentB { uint32_t x[2]; }   B 16x8 (row = K, col = N), same packing
 *     FragmentC { float x[4]; }      C and D 16x8, FP32
 *   Which element a lane holds (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"):
 *     fragmentGroup(lane) = lane >> 2 (groupID), fragmentThread(lane) = lane & 3 (threadID_in_group);
 *     aRow/aCol(lane, i) for i < 8, bRow/bCol(lane, i) for i < 4 (bRow is k, bCol is n), cRow/cCol(lane, i) for
 *     i < 4. The C fragment of one product is laid out like the A fragment of the next (FlashAttention-2 trick):
 *     C tiles n and n + 1 of a 16-row block, packed with packHalf2, are the A fragment of k block n / 2.
 *
 *   Device functions (only inside EDGEATTN_MMA_AVAILABLE code; all 32 lanes of the warp must call them together,
 *   converged, like a full-mask shuffle)
 *     void mmaF16(FragmentC& d, FragmentA const& a, FragmentB const& b)    d += a * b, f16 inputs, FP32 accumulate
 *     void mmaBf16(FragmentC& d, FragmentA const& a, FragmentB const& b)   the same with bf16 inputs
 *     void ldmatrixX4(uint32_t (&r)[4], void const* row)       ldmatrix.sync.aligned.m8n8.x4.shared.b16
 *     void ldmatrixX4Trans(uint32_t (&r)[4], void const* row)  the same with .trans
 *     void ldmatrixX2(uint32_t (&r)[2], void const* row), ldmatrixX2Trans(...)
 *       `row`: this lane's row of 8 b16 values in SHARED memory, 16-byte aligned. Lane l addresses row
 *       ldmatrixRow(l) = l & 7 of matrix ldmatrixMatrix(l) = l >> 3 (x2 reads lanes 0..15 only); register j
 *       receives matrix j. Non-transposed, lane l gets row l >> 2, columns 2 (l & 3) and + 1 of each matrix: the
 *       A fragment of a row-major 16x16 tile is x4 of (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15);
 *       the B fragment of an N x K (k-contiguous) tile is x2 of (n 0-7, k 0-7), (n 0-7, k 8-15). With .trans lane l
 *       gets rows 2 (l & 3) and + 1 of column l >> 2: the B fragment of a K x N (n-contiguous) tile is x2.trans of
 *       (k 0-7, n 0-7), (k 8-15, n 0-7).
 *   Host and device helpers
 *     uint32_t packHalf2(float lo, float hi)       both rounded to nearest even (__float2half_rn), lo in bits 0-15
 *     uint32_t packBfloat162(float lo, float hi)   the same for bf16
 *     float halfBitsToFloat(uint32_t bits, int half) / unpack helpers for tests and epilogues
 *
 * Numerics: inputs are exact f16/bf16 values (convert with the pack helpers, round to nearest even), products are
 * exact, accumulation is FP32 in an order the ISA leaves open. Why hand-written mma.sync and not CUTLASS/CuTe:
 * plugins/README.md ("Tensor cores").
 */
#ifndef EDGEATTN_COMMON_MMA_CUH
#define EDGEATTN_COMMON_MMA_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#ifndef EDGEATTN_TENSOR_CORES
#define EDGEATTN_TENSOR_CORES 1
#endif

#if defined(EDGEATTN_CUDA_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define EDGEATTN_MMA_AVAILABLE 1
#else
#define EDGEATTN_MMA_AVAILABLE 0
#endif

#if defined(__CUDACC__) || defined(EDGEATTN_CUDA_EMULATION)
#define EDGEATTN_MMA_HOST_DEVICE __host__ __device__
#else
#define EDGEATTN_MMA_HOST_DEVICE
#endif

namespace edgeattn
{
namespace kernels
{
namespace mma
{

struct FragmentA
{
    uint32_t x[4];
};

struct FragmentB
{
    uint32_t x[2];
};

struct FragmentC
{
    float x[4];
};

// ---- which matrix element each lane holds ------------------------------------------------------------------------
EDGEATTN_MMA_HOST_DEVICE constexpr int fragmentGroup(int lane)
{
    return lane >> 2;
}

EDGEATTN_MMA_HOST_DEVICE constexpr int fragmentThread(int lane)
{
    return lane & 3;
}

//! Row (M) of element i < 8 of the A fragment: groupID for i in {0, 1, 4, 5}, groupID + 8 otherwise.
EDGEATTN_MMA_HOST_DEVICE constexpr int aRow(int lane, int i)
{
    return fragmentGroup(lane) + ((i >> 1) & 1) * 8;
}

//! Column (K) of element i < 8 of the A fragment: 2 threadID_in_group + (i & 1), + 8 for i >= 4.
EDGEATTN_MMA_HOST_DEVICE constexpr int aCol(int lane, int i)
{
    return fragmentThread(lane) * 2 + (i & 1) + (i >> 2) * 8;
}

//! Row (K) of element i < 4 of the B fragment: 2 threadID_in_group + (i & 1), + 8 for i >= 2.
EDGEATTN_MMA_HOST_DEVICE constexpr int bRow(int lane, int i)
{
    return fragmentThread(lane) * 2 + (i & 1) + (i >> 1) * 8;
}

//! Column (N) of every element of the B fragment: groupID.
EDGEATTN_MMA_HOST_DEVICE constexpr int bCol(int lane, int /*i*/)
{
    return fragmentGroup(lane);
}

//! Row (M) of element i < 4 of the C/D fragment: groupID for c0, c1, groupID + 8 for c2, c3.
EDGEATTN_MMA_HOST_DEVICE constexpr int cRow(int lane, int i)
{
    return fragmentGroup(lane) + (i >> 1) * 8;
}

//! Column (N) of element i < 4 of the C/D fragment: 2 threadID_in_group + (i & 1).
EDGEATTN_MMA_HOST_DEVICE constexpr int cCol(int lane, int i)
{
    return fragmentThread(lane) * 2 + (i & 1);
}

//! ldmatrix: the row (0..7) of the 8x8 matrix whose address lane `lane` supplies, and that matrix (0..3).
EDGEATTN_MMA_HOST_DEVICE constexpr int ldmatrixRow(int lane)
{
    return lane & 7;
}

EDGEATTN_MMA_HOST_DEVICE constexpr int ldmatrixMatrix(int lane)
{
    return lane >> 3;
}

// ---- packing -------------------------------------------------------------------------------------------------------
//! Two FP32 values rounded to nearest even into f16, `lo` in bits 0-15 (the lower-indexed fragment element).
__device__ __forceinline__ uint32_t packHalf2(float lo, float hi)
{
    __half2 const pair = __floats2half2_rn(lo, hi);
    uint32_t bits;
    memcpy(&bits, &pair, sizeof(bits));
    return bits;
}

//! FP32 -> bf16 bits, round to nearest even (NaN stays a quiet NaN); cuda_bf16.h is not needed (CUDA 10.2 has none).
EDGEATTN_MMA_HOST_DEVICE inline uint32_t bfloat16Bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    if ((bits & 0x7fffffffU) > 0x7f800000U)
    {
        return ((bits >> 16) | 0x40U) & 0xffffU;
    }
    bits += 0x7fffU + ((bits >> 16) & 1U);
    return bits >> 16;
}

EDGEATTN_MMA_HOST_DEVICE inline uint32_t packBfloat162(float lo, float hi)
{
    return bfloat16Bits(lo) | (bfloat16Bits(hi) << 16);
}

//! The f16 value in half `half` (0 = bits 0-15) of a packed register, as FP32.
__device__ __forceinline__ float unpackHalf(uint32_t bits, int half)
{
    __half2 pair;
    memcpy(&pair, &bits, sizeof(bits));
    return half == 0 ? __low2float(pair) : __high2float(pair);
}

// ---- the instructions ----------------------------------------------------------------------------------------------
// Each wrapper names its CPU-emulation call and its PTX instruction; EDGEATTN_MMA_INSTRUCTION keeps the one this
// compilation pass can run: the emulation (tests/plugins/emulation gives them their warp-collective semantics) under
// EDGEATTN_CUDA_EMULATION, the instruction in sm_80+ device passes, and a trap anywhere else (device code for archs
// < 80 is guarded by EDGEATTN_MMA_AVAILABLE and never launched).
#if defined(EDGEATTN_CUDA_EMULATION)
#define EDGEATTN_MMA_INSTRUCTION(emulated, instruction) emulated
#elif EDGEATTN_MMA_AVAILABLE
#define EDGEATTN_MMA_INSTRUCTION(emulated, instruction) instruction
#else
#define EDGEATTN_MMA_INSTRUCTION(emulated, instruction) __trap()
#endif

__device__ __forceinline__ void mmaF16(FragmentC& d, FragmentA const& a, FragmentB const& b)
{
    EDGEATTN_MMA_INSTRUCTION(::cuda_emu::mmaM16N8K16(d.x, a.x, b.x, ::cuda_emu::kMmaF16),
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3])
                     : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1])));
}

__device__ __forceinline__ void mmaBf16(FragmentC& d, FragmentA const& a, FragmentB const& b)
{
    EDGEATTN_MMA_INSTRUCTION(::cuda_emu::mmaM16N8K16(d.x, a.x, b.x, ::cuda_emu::kMmaBf16),
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3])
                     : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1])));
}

#if !defined(EDGEATTN_CUDA_EMULATION) && EDGEATTN_MMA_AVAILABLE
__device__ __forceinline__ unsigned sharedAddress(void const* pointer)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}
#endif

__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], void const* row)
{
    EDGEATTN_MMA_INSTRUCTION(::cuda_emu::ldmatrix(r, 4, row, false),
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(sharedAddress(row))));
}

__device__ __forceinline__ void ldmatrixX4Trans(uint32_t (&r)[4], void const* row)
{
    EDGEATTN_MMA_INSTRUCTION(::cuda_emu::ldmatrix(r, 4, row, true),
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(sharedAddress(row))));
}

__device__ __forceinline__ void ldmatrixX2(uint32_t (&r)[2], void const* row)
{
    EDGEATTN_MMA_INSTRUCTION(::cuda_emu::ldmatrix(r, 2, row, false),
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(sharedAddress(row))));
}

__device__ __forceinline__ void ldmatrixX2Trans(uint32_t (&r)[2], void const* row)
{
    EDGEATTN_MMA_INSTRUCTION(::cuda_emu::ldmatrix(r, 2, row, true),
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(sharedAddress(row))));
}

#undef EDGEATTN_MMA_INSTRUCTION

} // namespace mma
} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_COMMON_MMA_CUH
