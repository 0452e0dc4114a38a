/*
 * FP32 operands on the f16 tensor cores of common/mma.cuh, shared by the linear-attention and SOFT tensor-core paths.
 *
 * Why a split: the operands these kernels multiply are mostly computed in FP32 (softmax numerators, Gaussian kernel
 * values, feature maps, contexts, Newton-Raphson iterates). One rounding to f16 costs 2^-11 relative per element,
 * which alone is as large as the FP16 acceptance criterion (2x PyTorch's own FP16 error, i.e. about one f16 ulp of
 * the output; PyTorch computes these ops in FP32 and rounds once). So an FP32 value x is first scaled by a power of
 * two s (exact) with |x s| < 2^15, then split into two f16 values
 *     hi = rn(x s),  lo = rn(x s - hi),   hi + lo = x s  to 2^-22 relative (2^-25 absolute where lo is subnormal),
 * and a product of two split operands is hi*hi + hi*lo + lo*hi (three mma; the dropped lo*lo is 2^-22 relative).
 * An operand that is already an exact f16 value (the FP16 inputs, relu of them) is used as is (one or two mma).
 * The power-of-two scale keeps every operand inside the f16 range (no overflow for any FP32 input) and its small
 * entries out of the subnormals; the result is unscaled in FP32 with the inverse power of two (exact).
 *
 * Fragment loads (ldmatrix, shared memory, 16-byte aligned rows, row strides a multiple of 8 halves) for a 16x16 A
 * tile or a 16x8 B tile stored either way round:
 *   loadFragmentA<false>(a, base, stride)  A stored [m][k] (k contiguous), base = &tile(m0, k0)
 *   loadFragmentA<true>(a, base, stride)   A stored [k][m] (m contiguous), base = &tile(k0, m0)
 *   loadFragmentB<false>(b, base, stride)  B stored [n][k] (k contiguous), base = &tile(n0, k0)
 *   loadFragmentB<true>(b, base, stride)   B stored [k][n] (n contiguous), base = &tile(k0, n0)
 * Like every mma.cuh instruction they are warp collectives: all 32 lanes, converged.
 */
#ifndef EDGEATTN_COMMON_SPLIT_TENSOR_CORE_CUH
#define EDGEATTN_COMMON_SPLIT_TENSOR_CORE_CUH

#include "common/mma.cuh"

namespace edgeattn
{
namespace kernels
{

//! Operands are scaled so that their largest magnitude lies in [2^14, 2^15): 2x headroom below the f16 maximum
//! (65504) for hi's rounding, and 2^-22 relative precision down to 2^-25 absolute for everything else.
constexpr int kSplitTargetExponent = 14;
constexpr float kSplitUnitScale = 16384.0F; // 2^14: the scale of operands bounded by 1 (softmax, Gaussian values)
constexpr float kSplitUnitInverse = 1.0F / 16384.0F;

/*
 * The power of two s with maxAbs * s in [2^14, 2^15) (1 for 0, NaN or inf: nothing to scale). Bit arithmetic,
 * so the same value on the host, the device and the CPU emulation.
 */
__device__ __forceinline__ float splitScale(float maxAbs)
{
    if (!(maxAbs > 0.0F) || !(maxAbs <= 3.4028235e38F))
    {
        return 1.0F;
    }
    int biased = static_cast<int>((__float_as_uint(maxAbs) >> 23) & 0xffU);
    biased = biased == 0 ? 1 : biased; // subnormal: bounded by 2^-126
    int scaleBiased = 127 + kSplitTargetExponent - (biased - 127);
    scaleBiased = scaleBiased < 1 ? 1 : (scaleBiased > 254 ? 254 : scaleBiased);
    return __uint_as_float(static_cast<unsigned int>(scaleBiased) << 23);
}

//! x (already scaled) as hi + lo in f16, both rounded to nearest even.
__device__ __forceinline__ void splitHalf(float x, __half* hi, __half* lo)
{
    __half const high = __float2half_rn(x);
    *hi = high;
    *lo = __float2half_rn(x - __half2float(high));
}

#if EDGEATTN_MMA_AVAILABLE
template <int kTiles>
__device__ __forceinline__ void zeroFragments(mma::FragmentC (&c)[kTiles])
{
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
    {
#pragma unroll
        for (int e = 0; e < 4; ++e)
        {
            c[t].x[e] = 0.0F;
        }
    }
}

template <int kTiles>
__device__ __forceinline__ void scaleFragments(mma::FragmentC (&c)[kTiles], float factor)
{
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
    {
#pragma unroll
        for (int e = 0; e < 4; ++e)
        {
            c[t].x[e] *= factor;
        }
    }
}

//! The largest |element| this lane holds (the input of a block-wide splitScale).
template <int kTiles>
__device__ __forceinline__ float fragmentsMaxAbs(mma::FragmentC const (&c)[kTiles])
{
    float maxAbs = 0.0F;
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
    {
#pragma unroll
        for (int e = 0; e < 4; ++e)
        {
            maxAbs = fmaxf(maxAbs, fabsf(c[t].x[e]));
        }
    }
    return maxAbs;
}

template <bool kMContiguous>
__device__ __forceinline__ void loadFragmentA(mma::FragmentA& a, __half const* base, int stride)
{
    int const lane = threadIdx.x & 31;
    int const row = mma::ldmatrixRow(lane);
    int const matrix = mma::ldmatrixMatrix(lane);
    if (kMContiguous)
    {
        // registers: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15), each stored transposed
        mma::ldmatrixX4Trans(a.x, base + ((matrix >> 1) * 8 + row) * stride + (matrix & 1) * 8);
    }
    else
    {
        mma::ldmatrixX4(a.x, base + ((matrix & 1) * 8 + row) * stride + (matrix >> 1) * 8);
    }
}

template <bool kNContiguous>
__device__ __forceinline__ void loadFragmentB(mma::FragmentB& b, __half const* base, int stride)
{
    int const lane = threadIdx.x & 31;
    int const row = mma::ldmatrixRow(lane);
    int const matrix = mma::ldmatrixMatrix(lane) & 1; // x2: lanes 16-31 supply no address
    if (kNContiguous)
    {
        // registers: (k 0-7, n 0-7), (k 8-15, n 0-7), stored transposed
        mma::ldmatrixX2Trans(b.x, base + (matrix * 8 + row) * stride);
    }
    else
    {
        mma::ldmatrixX2(b.x, base + row * stride + matrix * 8);
    }
}

//! Two FP32 values (already scaled) as packed f16x2 hi and lo registers, lower index in the low half.
__device__ __forceinline__ void packSplit(float first, float second, uint32_t* high, uint32_t* low)
{
    __half firstHigh;
    __half firstLow;
    __half secondHigh;
    __half secondLow;
    splitHalf(first, &firstHigh, &firstLow);
    splitHalf(second, &secondHigh, &secondLow);
    *high = mma::packHalf2(__half2float(firstHigh), __half2float(secondHigh));
    *low = mma::packHalf2(__half2float(firstLow), __half2float(secondLow));
}

/*
 * The A fragment of one 16-deep k block from the C fragments of a 16-row product (FlashAttention-2: C tiles 2b and
 * 2b + 1 hold exactly the A elements of k block b, mma.cuh), split into hi and lo. `left` / `right`: the elements of
 * C tiles 2b / 2b + 1, already transformed and scaled by the caller.
 */
__device__ __forceinline__ void splitCToA(float const (&left)[4], float const (&right)[4], mma::FragmentA* high,
    mma::FragmentA* low)
{
    packSplit(left[0], left[1], &high->x[0], &low->x[0]);
    packSplit(left[2], left[3], &high->x[1], &low->x[1]);
    packSplit(right[0], right[1], &high->x[2], &low->x[2]);
    packSplit(right[2], right[3], &high->x[3], &low->x[3]);
}

//! d += (ahi + alo)(bhi + blo) without the lo*lo term.
__device__ __forceinline__ void mmaSplitBoth(mma::FragmentC& d, mma::FragmentA const& aHigh, mma::FragmentA const& aLow,
    mma::FragmentB const& bHigh, mma::FragmentB const& bLow)
{
    mma::mmaF16(d, aLow, bHigh);
    mma::mmaF16(d, aHigh, bLow);
    mma::mmaF16(d, aHigh, bHigh);
}
#endif // EDGEATTN_MMA_AVAILABLE

} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_COMMON_SPLIT_TENSOR_CORE_CUH
