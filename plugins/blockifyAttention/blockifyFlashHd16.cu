// The pipelined tensor-core blockify kernel for head_dim <= 16 (blockifyFlash.cuh); one file per head_dim so the
// variants compile in parallel.
#include "blockifyAttention/blockifyFlash.cuh"

#if EDGEATTN_TENSOR_CORES
template void edgeattn::kernels::blockify::launchBlockifyFlash<16>(
    edgeattn::kernels::blockify::BlockifyParams const&, cudaStream_t);
#endif
