/*
 * What the blockify kernels share: the launch parameters, the LePE tap walk, and of the tensor-core products the
 * S = Q K^T of one query tile and the V fragments of P V. Three paths use them, one file each:
 *   blockifyAttentionKernel.cu   the scalar kernel (every arch, FP32 and FP16; the sm_53 path and the reference),
 *                                the one-warp-per-unit tensor-core kernel and the C ABI launcher that picks a path
 *   blockifyFlash.cuh            the pipelined tensor-core kernel (sm_80+, FP16): a CTA of warps sharing cp.async-
 *                                staged K/V tiles; instantiated per head_dim by blockifyFlashHd{16,32,64,128}.cu
 */
#ifndef EDGEATTN_BLOCKIFY_COMMON_CUH
#define EDGEATTN_BLOCKIFY_COMMON_CUH

#include "common/kernelStatus.h"
#include "common/mma.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace edgeattn
{
namespace kernels
{
namespace blockify
{

struct BlockifyParams
{
    void const* q;
    void const* k;
    void const* v;
    void const* lepeWeight; // (C, 1, 3, 3) or null
    void const* lepeBias;   // (C) or null
    void* out;
    int height;
    int width;
    int channels;
    int headDim;
    int windowSize;
    int windowsX; // windows per row of the padded map
    int padding;
    float scaleLog2; // softmax scale * log2(e)
    // tensor-core paths
    int numHeads;
    int windows;       // per image
    int64_t problems;  // windows * numHeads * batch: the (window, head, batch) attention problems
    // one-warp-per-unit kernel
    int tileGroups;    // query-tile groups per window (one unit each)
    int tilesPerGroup; // 16-row query tiles per group (the last group may have fewer)
    int64_t units;     // tileGroups * windows * numHeads * batch
    int vectorLoads;   // k and v rows may be staged with 16-byte loads (head_dim, channels % 8 == 0, aligned)
    // flash kernel (blockifyFlash.cuh)
    int windowsPerBlock; // > 1: several small windows share one CTA and one K/V tile (one query tile per warp)
    int tilesPerBlock;   // query tiles (= warps) per CTA and window
    int queryBlocks;     // CTAs per window: ceil(query tiles / tilesPerBlock)
};

/*
 * Calls visit(tap, ny, nx) for each tap ((dy + 1) * 3 + dx + 1) of the 3x3 LePE convolution around token (qy, qx)
 * whose neighbour (ny, nx) lies inside the window with top-left token (y0, x0) and inside the map: the convolution
 * zero-pads at the window border and at padded (outside-the-map) positions.
 */
template <typename Visit>
__device__ __forceinline__ void forEachLepeTap(
    BlockifyParams const& p, int qy, int qx, int y0, int x0, Visit const& visit)
{
    int const ws = p.windowSize;
    for (int dy = -1; dy <= 1; ++dy)
    {
        int const ny = qy + dy;
        if (ny < y0 || ny >= y0 + ws || ny >= p.height)
        {
            continue;
        }
        for (int dx = -1; dx <= 1; ++dx)
        {
            int const nx = qx + dx;
            if (nx < x0 || nx >= x0 + ws || nx >= p.width)
            {
                continue;
            }
            visit((dy + 1) * 3 + (dx + 1), ny, nx);
        }
    }
}

#if EDGEATTN_MMA_AVAILABLE // only the tensor-core kernel bodies (sm_80+ device code, the CPU emulation) use it
/*
 * S = Q K^T of one 16-row query tile against kKeyTiles * 8 staged keys, FP32 accumulation: score[t] (C fragment of
 * n tile t) is zeroed, then gets the kDepthSteps k blocks of mma.sync m16n8k16. query: the tile's A fragments;
 * keys: the key rows in shared memory, kStride halves apart (16-byte aligned); rowLoad / matrixLoad: the lane's
 * mma::ldmatrixRow / ldmatrixMatrix. One ldmatrix.x4 yields the B fragments of two n tiles.
 */
template <int kStride, int kKeyTiles, int kDepthSteps>
__device__ __forceinline__ void queryKeyScores(mma::FragmentC (&score)[kKeyTiles],
    mma::FragmentA const (&query)[kDepthSteps], __half const* keys, int rowLoad, int matrixLoad)
{
    static_assert(kKeyTiles % 2 == 0, "n tiles come in pairs (one ldmatrix.x4)");
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t)
    {
        score[t] = mma::FragmentC{{0.0F, 0.0F, 0.0F, 0.0F}};
    }
#pragma unroll
    for (int step = 0; step < kDepthSteps; ++step)
    {
#pragma unroll
        for (int t = 0; t < kKeyTiles; t += 2)
        {
            // matrices: keys of n tile t (depth low / high half of the step), then of n tile t + 1
            uint32_t b[4];
            mma::ldmatrixX4(
                b, keys + (t * 8 + (matrixLoad >> 1) * 8 + rowLoad) * kStride + step * 16 + (matrixLoad & 1) * 8);
            mma::mmaF16(score[t], query[step], mma::FragmentB{{b[0], b[1]}});
            mma::mmaF16(score[t + 1], query[step], mma::FragmentB{{b[2], b[3]}});
        }
    }
}

//! The B fragments of O += P V for n tiles t and t + 1 (output columns 8 t .. 8 t + 15) of k block `step` (keys
//! 16 step .. 16 step + 15), from the staged value rows (kStride halves apart): b[0], b[1] of tile t, b[2], b[3] of
//! tile t + 1, one ldmatrix.x4.trans.
template <int kStride>
__device__ __forceinline__ void valueFragments(
    uint32_t (&b)[4], __half const* values, int step, int t, int rowLoad, int matrixLoad)
{
    // matrices: keys low / high half of the step, values of n tile t, then of n tile t + 1
    mma::ldmatrixX4Trans(
        b, values + (step * 16 + (matrixLoad & 1) * 8 + rowLoad) * kStride + (t + (matrixLoad >> 1)) * 8);
}
#endif // EDGEATTN_MMA_AVAILABLE

//! Keys per pipeline stage of the flash kernel for head_dim padded to headDimPad (its shared memory stays < 48 KB).
EDGEATTN_HOST_DEVICE constexpr int flashKeyTile(int headDimPad)
{
    return headDimPad <= 64 ? 64 : 32;
}

//! Warps (16-row query tiles) per CTA of the flash kernel at most.
constexpr int kFlashMaxWarps = 4;

//! The pipelined tensor-core kernel for head_dim <= kHeadDimPad (blockifyFlashHd<kHeadDimPad>.cu); needs FP16 I/O,
//! head_dim and channels multiples of 8 and 16-byte aligned q, k, v, out. Enqueues one launch.
template <int kHeadDimPad>
void launchBlockifyFlash(BlockifyParams const& params, cudaStream_t stream);

} // namespace blockify
} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_BLOCKIFY_COMMON_CUH
