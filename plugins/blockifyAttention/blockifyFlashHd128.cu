// The pipelined tensor-core blockify kernel for head_dim <= 128 (blockifyFlash.cuh); one file per head_dim so the
// variants compile in parallel.
#include "blockifyAttention/blockifyFlash.cuh"

#if EDGEATTN_TENSOR_CORES
template void edgeattn::kernels::blockify::launchBlockifyFlash<128>(
    edgeattn::kernels::blockify::BlockifyParams const&, cudaStream_t);
#endif
