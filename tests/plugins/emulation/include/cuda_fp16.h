/* Stand-in for the CUDA toolkit header in the CPU emulation build (tests only). */
#include "../cuda_emulation.h"
