// Prints the compute capability of every visible CUDA device as "<major><minor>;..." (e.g. "87").
// Used by EDGEATTN_CUDA_ARCHS=native through try_run: no kernel is launched, so the probe needs no
// particular -gencode and runs on any device the driver sees.
#include <cstdio>
#include <cuda_runtime_api.h>

int main()
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    {
        return 1;
    }
    for (int device = 0; device < count; ++device)
    {
        int major = 0;
        int minor = 0;
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
        std::printf("%s%d%d", device == 0 ? "" : ";", major, minor);
    }
    return 0;
}
