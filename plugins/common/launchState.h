/*
 * Device memory this library keeps per (device, stream) for launches that coordinate their blocks through counters
 * (the single-launch linear-attention pass: a work queue, per-head tickets and context-ready flags). The memory is
 * zeroed once, when it is allocated, and every such launch leaves its counters at zero when it ends (they wrap or
 * count back down by construction), so no memset precedes a launch. A TensorRT workspace cannot hold them: its
 * contents are undefined between enqueues.
 *
 * One launch at a time per stream uses the memory (stream order), so launches on different streams (TensorRT's
 * execution contexts and auxiliary streams, PyTorch streams) never share it. Not allowed: replaying one CUDA graph
 * that holds such a launch on two streams at once (its workspace would be shared the same way).
 *
 * Allocation (cudaMalloc, then cudaMemsetAsync on the stream) is refused while the stream is being captured into a
 * CUDA graph; the launcher then takes its memset-and-two-kernels path. Memory outgrown by a larger problem is kept,
 * not freed (pending launches may still use it), and released with the process: a few KB per stream.
 */
#ifndef EDGEATTN_COMMON_LAUNCH_STATE_H
#define EDGEATTN_COMMON_LAUNCH_STATE_H

#include "common/kernelStatus.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

namespace edgeattn
{
namespace kernels
{

//! Smallest allocation (words): enough for 16K (batch, head) problems, so the memory is rarely outgrown.
constexpr size_t kLaunchStateMinWords = 2 * 16384 + 64;

/*
 * Zeroed counters of `words` 32-bit words for launches on `stream` (see above): *state is the memory, or nullptr
 * where there is none and none can be allocated now (the stream is being captured, or cudaMalloc / the memset
 * failed): the caller then uses its path without counters. Only a failing cudaGetDevice is an error
 * (EDGEATTN_STATUS_CUDA_ERROR, message set).
 */
inline int launchState(cudaStream_t stream, size_t words, unsigned int** state, char const* function)
{
    struct Entry
    {
        unsigned int* memory;
        size_t words;
    };
    static std::mutex mutex;
    static std::map<std::pair<int, cudaStream_t>, Entry> entries;

    *state = nullptr;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess)
    {
        cudaGetLastError();
        return fail(EDGEATTN_STATUS_CUDA_ERROR, function, "cudaGetDevice failed");
    }
    std::lock_guard<std::mutex> lock(mutex);
    std::pair<int, cudaStream_t> const key(device, stream);
    auto const found = entries.find(key);
    if (found != entries.end() && found->second.words >= words)
    {
        *state = found->second.memory;
        return EDGEATTN_STATUS_SUCCESS;
    }
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone)
    {
        cudaGetLastError();
        return EDGEATTN_STATUS_SUCCESS; // no counters inside a capture: the caller's other path
    }
    size_t const allocated = words > kLaunchStateMinWords ? words : kLaunchStateMinWords;
    void* memory = nullptr;
    cudaError_t error = cudaMalloc(&memory, allocated * sizeof(unsigned int));
    if (error == cudaSuccess)
    {
        error = cudaMemsetAsync(memory, 0, allocated * sizeof(unsigned int), stream);
        if (error != cudaSuccess)
        {
            cudaFree(memory);
        }
    }
    if (error != cudaSuccess)
    {
        // e.g. another stream being captured in cudaStreamCaptureModeGlobal forbids cudaMalloc: no state this time,
        // the caller's other path (a real failure of the device shows again at that path's launch)
        cudaGetLastError();
        return EDGEATTN_STATUS_SUCCESS;
    }
    // an outgrown entry's memory is dropped, not freed: launches queued on the stream may still use it
    entries[key] = Entry{static_cast<unsigned int*>(memory), allocated};
    *state = static_cast<unsigned int*>(memory);
    return EDGEATTN_STATUS_SUCCESS;
}

} // namespace kernels
} // namespace edgeattn

#endif // EDGEATTN_COMMON_LAUNCH_STATE_H
