/*
 * Runtime of the CUDA-on-CPU emulation (see cuda_emulation.h): fibers per thread block, barriers, warp exchange,
 * shared memory with poison and canaries, launch validation, device faults, and the test hooks (edgeattn_emu_*).
 */
// Fibers switch with _setjmp/_longjmp between their own stacks; glibc's fortified longjmp (__longjmp_chk) would
// take a jump to another stack for stack corruption.
#ifdef _FORTIFY_SOURCE
#undef _FORTIFY_SOURCE
#endif

#include "cuda_emulation.h"

#include <algorithm>
#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <vector>

#define EDGEATTN_EMU_EXPORT extern "C" __attribute__((visibility("default")))

namespace cuda_emu
{
namespace detail
{

ThreadState* currentThread = nullptr;
uint3 blockIdxValue = {0, 0, 0};
dim3 blockDimValue;
dim3 gridDimValue;

namespace
{

constexpr size_t kStackBytes = 64 * 1024;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr size_t kDefaultSharedLimit = 48 * 1024;
constexpr size_t kOptInSharedLimit = 64 * 1024; // sm_75, the smallest opt-in among the CI archs
constexpr size_t kGuardBytes = 64;
constexpr size_t kArenaBytes = 512 * 1024;
constexpr uint32_t kPoisonWord = 0x7ff0deadU;  // a NaN as float, and NaN halves
constexpr uint32_t kCanaryWord = 0x7fbadbadU;  // a NaN too: reading past a buffer poisons the result

struct Barrier
{
    int arrived = 0;
    uint64_t generation = 0;
    char const* file = nullptr;
    int line = 0;
    unsigned int mask = 0;
    char const* what = nullptr; // the warp operation the waiting lanes are in
};

//! One cp.async of a thread: the 16 bytes it will deposit at `destination` when its group is waited on.
struct PendingCopy
{
    unsigned char* destination;
    unsigned char data[16];
};

struct Fiber
{
    ThreadState state;
    std::vector<PendingCopy> uncommitted;              // cp.async issued since the last commit_group
    std::deque<std::vector<PendingCopy>> pendingGroups; // committed, not yet retired by a wait_group (oldest first)
    ucontext_t context; // the entry point (makecontext); later switches use `resume`
    jmp_buf resume;
    bool started = false;
    bool done = false;
    Barrier* waitingOn = nullptr;
    uint64_t waitGeneration = 0;
};

constexpr size_t kCollectiveBytes = 48; // per lane, operands (and results) of mma and ldmatrix

struct Warp
{
    Barrier barrier;
    unsigned long long slots[32];
    bool votes[32];
    unsigned char operands[32][kCollectiveBytes];
    unsigned char results[32][kCollectiveBytes];
};

struct StaticAllocation
{
    void const* key;
    size_t offset;
    size_t bytes;
};

struct Block
{
    std::vector<Fiber> fibers;
    std::vector<Warp> warps;
    Barrier barrier;
    int exited = 0;
    size_t dynamicBytes = 0;
    size_t staticCursor = 0;
    size_t staticBytes = 0;
    std::vector<StaticAllocation> statics;
    BlockBody body = nullptr;
    void* context = nullptr;
};

struct LaunchRecord
{
    std::string text;
    unsigned long long globalRead = 0;    // bytes, by loads and cp.async of the watched global regions
    unsigned long long globalWritten = 0; // bytes, by stores (and memsets/copies) into them
};

//! A range of "global memory" whose loads and stores are counted (edgeattn_emu_watch_global).
struct WatchedRegion
{
    uintptr_t begin;
    uintptr_t end;
};

// ---- global state (the emulation is single-threaded: one launch at a time) --------------------------------------
Block gBlock;
Fiber* gFiber = nullptr;
// Switching: the scheduler saves itself in gScheduler (_setjmp) and enters a fiber with setcontext the first time,
// _longjmp to its `resume` afterwards; a fiber yields with _setjmp(resume) + _longjmp(gScheduler). Unlike
// swapcontext, neither saves or restores the signal mask, so a switch costs no system call (the emulation spends
// most of its time switching: every barrier, shuffle, mma and ldmatrix switches each lane out and back in).
jmp_buf gScheduler;
sigjmp_buf gFaultJump;
volatile sig_atomic_t gInFiber = 0;
bool gFaulted = false;
bool gLaunchBoundsViolated = false;
char const* gKernel = "";
cudaError_t gLastError = cudaSuccess;
cudaError_t gStickyError = cudaSuccess;
std::string gFaultMessage;
std::vector<LaunchRecord> gLaunches;
std::map<void const*, int> gMaxDynamicShared;
std::vector<WatchedRegion> gWatched;
uintptr_t gWatchedLow = UINTPTR_MAX; // the hull of gWatched: most accesses (registers spilled to the fiber stack,
uintptr_t gWatchedHigh = 0;          // shared memory) fall outside it and cost two compares
bool gCountTraffic = false;          // inside a launch
unsigned long long gLaunchRead = 0;
unsigned long long gLaunchWritten = 0;
bool gReverse = false;
//! 0: blocks in index order (reversed with gReverse); else the seed of a pseudo-random arrival order.
unsigned int gBlockOrderSeed = 0;
bool gWarpGreedy = true;

//! The emulated devices: a compute capability and the arch the library's code for it "was compiled for" (what
//! cudaFuncGetAttributes reports as ptxVersion). Each distinct pair is its own ordinal, kept for the process, so
//! the launchers' per-device caches stay right when a test switches devices. Ordinal 0 is sm_75.
struct EmulatedDevice
{
    int computeCapability;
    int codeArch;
};
std::vector<EmulatedDevice> gDevices(1, EmulatedDevice{75, 75});
int gMultiprocessors = 1; // what every emulated device reports (edgeattn_emu_set_multiprocessor_count)
int gPlantedBug = 0;       // edgeattn_emu_set_planted_bug
bool gCapturing = false;   // edgeattn_emu_set_capturing
int gCurrentDevice = 0;
unsigned char* gArena = nullptr;
unsigned char* gStacks = nullptr;
size_t gStackCount = 0;
size_t gPageBytes = 4096;
char gAltStack[64 * 1024];
struct sigaction gPreviousSegv;
struct sigaction gPreviousBus;

void fillWords(unsigned char* begin, size_t bytes, uint32_t word)
{
    for (size_t offset = 0; offset + 4 <= bytes; offset += 4)
    {
        std::memcpy(begin + offset, &word, 4);
    }
    for (size_t offset = bytes / 4 * 4; offset < bytes; ++offset)
    {
        begin[offset] = 0xff;
    }
}

bool wordsIntact(unsigned char const* begin, size_t bytes, uint32_t word)
{
    for (size_t offset = 0; offset + 4 <= bytes; offset += 4)
    {
        uint32_t value;
        std::memcpy(&value, begin + offset, 4);
        if (value != word)
        {
            return false;
        }
    }
    return true;
}

size_t alignUp(size_t value, size_t alignment)
{
    return (value + alignment - 1) / alignment * alignment;
}

std::string where()
{
    char text[256];
    if (currentThread != nullptr && gInFiber)
    {
        std::snprintf(text, sizeof(text), "%s block (%u,%u,%u) thread (%u,%u,%u)", gKernel, blockIdxValue.x,
            blockIdxValue.y, blockIdxValue.z, currentThread->index.x, currentThread->index.y,
            currentThread->index.z);
    }
    else
    {
        std::snprintf(
            text, sizeof(text), "%s block (%u,%u,%u)", gKernel, blockIdxValue.x, blockIdxValue.y, blockIdxValue.z);
    }
    return text;
}

void recordFault(cudaError_t error, std::string const& message)
{
    if (!gFaulted)
    {
        gFaulted = true;
        gFaultMessage = message;
        gStickyError = error;
    }
}

void yieldToScheduler()
{
    Fiber* const self = gFiber;
    if (_setjmp(self->resume) == 0)
    {
        _longjmp(gScheduler, 1);
    }
}

void arrive(Barrier& barrier, int expected)
{
    Fiber* const self = gFiber;
    ++barrier.arrived;
    if (barrier.arrived == expected)
    {
        barrier.arrived = 0;
        ++barrier.generation;
    }
    else
    {
        self->waitingOn = &barrier;
        self->waitGeneration = barrier.generation;
    }
    yieldToScheduler();
}

void fiberMain()
{
    Fiber* const self = gFiber;
    gBlock.body(gBlock.context);
    self->done = true;
    ++gBlock.exited;
    if (gBlock.barrier.arrived > 0)
    {
        deviceFault(cudaErrorLaunchFailure,
            "thread exited while %d thread(s) of its block wait at __syncthreads (%s:%d): undefined on a GPU",
            gBlock.barrier.arrived, gBlock.barrier.file, gBlock.barrier.line);
    }
    Warp const& warp = gBlock.warps[self->state.linear / 32];
    if (warp.barrier.arrived > 0 && ((warp.barrier.mask >> (self->state.linear & 31U)) & 1U) != 0)
    {
        deviceFault(cudaErrorLaunchFailure, "thread exited while lanes of its warp wait for it in a warp operation");
    }
    _longjmp(gScheduler, 1); // a finished fiber is never resumed
}

void segfaultHandler(int signal, siginfo_t* info, void*)
{
    if (!gInFiber)
    {
        // not ours: reinstall the previous handler; the re-executed access faults again and reaches it
        sigaction(SIGSEGV, &gPreviousSegv, nullptr);
        sigaction(SIGBUS, &gPreviousBus, nullptr);
        return;
    }
    char text[160];
    std::snprintf(text, sizeof(text), "invalid memory access (signal %d) at address %p", signal, info->si_addr);
    recordFault(cudaErrorIllegalAddress, where() + ": " + text);
    gInFiber = 0;
    siglongjmp(gFaultJump, 1);
}

void ensureStacks(size_t count)
{
    if (count <= gStackCount)
    {
        return;
    }
    gPageBytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t const slot = kStackBytes + gPageBytes;
    void* memory = mmap(nullptr, slot * kMaxThreadsPerBlock, PROT_READ | PROT_WRITE,
        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED)
    {
        std::fprintf(stderr, "cuda emulation: cannot map fiber stacks\n");
        std::abort();
    }
    gStacks = static_cast<unsigned char*>(memory);
    for (int i = 0; i < kMaxThreadsPerBlock; ++i)
    {
        mprotect(gStacks + i * slot, gPageBytes, PROT_NONE); // guard page below each stack
    }
    gStackCount = kMaxThreadsPerBlock;
}

//! Runs one block to completion; false after a device fault.
bool runBlock(int threadCount)
{
    Block& block = gBlock;
    size_t const slot = kStackBytes + gPageBytes;
    block.fibers.assign(static_cast<size_t>(threadCount), Fiber());
    block.warps.assign(static_cast<size_t>((threadCount + 31) / 32), Warp());
    block.barrier = Barrier();
    block.exited = 0;
    block.statics.clear();
    block.staticBytes = 0;
    // dynamic shared memory first (poisoned), then a canary, then the static arrays as they are declared
    fillWords(gArena, block.dynamicBytes, kPoisonWord);
    fillWords(gArena + block.dynamicBytes, kGuardBytes, kCanaryWord); // right after the last requested byte
    block.staticCursor = alignUp(block.dynamicBytes + kGuardBytes, 256);
    for (int i = 0; i < threadCount; ++i)
    {
        Fiber& fiber = block.fibers[static_cast<size_t>(i)];
        unsigned int const dx = blockDimValue.x;
        unsigned int const dy = blockDimValue.y;
        fiber.state.linear = static_cast<unsigned int>(i);
        fiber.state.index = uint3{static_cast<unsigned int>(i) % dx, (static_cast<unsigned int>(i) / dx) % dy,
            static_cast<unsigned int>(i) / (dx * dy)};
        getcontext(&fiber.context);
        fiber.context.uc_stack.ss_sp = gStacks + static_cast<size_t>(i) * slot + gPageBytes;
        fiber.context.uc_stack.ss_size = kStackBytes;
        fiber.context.uc_link = nullptr; // fiberMain never returns: it jumps back to the scheduler
        makecontext(&fiber.context, fiberMain, 0);
    }

    if (sigsetjmp(gFaultJump, 1) != 0)
    {
        gInFiber = 0;
        return false; // a segfault inside a fiber; the fault is recorded
    }
    // One pass visits the warps in order (reversed: last warp first, lanes reversed) and runs every runnable fiber
    // up to its next barrier. Warp-greedy: a warp keeps running (through its shuffles) until all its lanes wait at
    // __syncthreads or exit, so one warp runs ahead of the others as far as the code allows. A released
    // __syncthreads starts a new pass, so every block-wide phase runs in the schedule's thread order.
    int const warpCount = (threadCount + 31) / 32;
    int remaining = threadCount;
    while (remaining > 0)
    {
        bool progressed = false;
        uint64_t const phase = block.barrier.generation;
        for (int w = 0; w < warpCount && block.barrier.generation == phase; ++w)
        {
            int const warp = gReverse ? warpCount - 1 - w : w;
            bool ran = true;
            while (ran && block.barrier.generation == phase)
            {
                ran = false;
                for (int l = 0; l < 32 && block.barrier.generation == phase; ++l)
                {
                    int const index = warp * 32 + (gReverse ? 31 - l : l);
                    if (index >= threadCount)
                    {
                        continue;
                    }
                    Fiber& fiber = block.fibers[static_cast<size_t>(index)];
                    if (fiber.done
                        || (fiber.waitingOn != nullptr && fiber.waitingOn->generation == fiber.waitGeneration))
                    {
                        continue;
                    }
                    fiber.waitingOn = nullptr;
                    gFiber = &fiber;
                    currentThread = &fiber.state;
                    gInFiber = 1;
                    if (_setjmp(gScheduler) == 0)
                    {
                        if (!fiber.started)
                        {
                            fiber.started = true;
                            setcontext(&fiber.context);
                        }
                        _longjmp(fiber.resume, 1);
                    }
                    gInFiber = 0;
                    ran = true;
                    progressed = true;
                    if (gFaulted)
                    {
                        return false;
                    }
                    if (fiber.done)
                    {
                        --remaining;
                    }
                }
                if (!gWarpGreedy)
                {
                    break;
                }
            }
        }
        if (!progressed && remaining > 0)
        {
            char text[256];
            std::snprintf(text, sizeof(text),
                "deadlock: %d thread(s) wait (block barrier: %d arrived at %s:%d) and none can run", remaining,
                block.barrier.arrived, block.barrier.file ? block.barrier.file : "-", block.barrier.line);
            currentThread = nullptr;
            recordFault(cudaErrorLaunchFailure, where() + ": " + text);
            return false;
        }
    }
    currentThread = nullptr;
    if (!wordsIntact(gArena + block.dynamicBytes, kGuardBytes, kCanaryWord))
    {
        recordFault(cudaErrorIllegalAddress,
            where() + ": write past the end of the dynamic shared memory (" + std::to_string(block.dynamicBytes)
                + " bytes requested at launch)");
        return false;
    }
    for (StaticAllocation const& allocation : block.statics)
    {
        if (!wordsIntact(gArena + allocation.offset + allocation.bytes, kGuardBytes, kCanaryWord))
        {
            recordFault(cudaErrorIllegalAddress,
                where() + ": write past the end of a static __shared__ array of " + std::to_string(allocation.bytes)
                    + " bytes");
            return false;
        }
    }
    return true;
}

} // namespace

void deviceFault(int error, char const* format, ...)
{
    char text[512];
    va_list args;
    va_start(args, format);
    std::vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    recordFault(static_cast<cudaError_t>(error), where() + ": " + text);
    if (gInFiber && gFiber != nullptr)
    {
        gInFiber = 0;
        _longjmp(gScheduler, 1); // never resumed
    }
    std::fprintf(stderr, "cuda emulation: device fault outside a kernel: %s\n", gFaultMessage.c_str());
    std::abort();
}

void syncThreads(char const* file, int line)
{
    Block& block = gBlock;
    if (block.exited > 0)
    {
        deviceFault(cudaErrorLaunchFailure, "__syncthreads (%s:%d) after %d thread(s) of the block exited", file,
            line, block.exited);
    }
    Barrier& barrier = block.barrier;
    if (barrier.arrived == 0)
    {
        barrier.file = file;
        barrier.line = line;
    }
    else if (barrier.line != line || std::strcmp(barrier.file, file) != 0)
    {
        deviceFault(cudaErrorLaunchFailure, "divergent __syncthreads: this thread is at %s:%d, others wait at %s:%d",
            file, line, barrier.file, barrier.line);
    }
    arrive(barrier, static_cast<int>(block.fibers.size()));
}

namespace
{

Warp& warpOfCaller(unsigned int mask, char const* what)
{
    Block& block = gBlock;
    unsigned int const linear = currentThread->linear;
    unsigned int const lane = linear & 31U;
    if (((mask >> lane) & 1U) == 0)
    {
        deviceFault(cudaErrorLaunchFailure, "%s with mask 0x%08x called by lane %u outside the mask", what, mask,
            lane);
    }
    unsigned int const warpBase = linear & ~31U;
    for (unsigned int other = 0; other < 32; ++other)
    {
        if (((mask >> other) & 1U) == 0)
        {
            continue;
        }
        size_t const index = warpBase + other;
        if (index >= block.fibers.size() || block.fibers[index].done)
        {
            deviceFault(cudaErrorLaunchFailure, "%s with mask 0x%08x names lane %u, which %s", what, mask, other,
                index >= block.fibers.size() ? "does not exist (partial warp)" : "has exited");
        }
    }
    return block.warps[linear / 32];
}

void warpBarrier(Warp& warp, unsigned int mask, char const* what)
{
    if (warp.barrier.arrived == 0)
    {
        warp.barrier.mask = mask;
        warp.barrier.what = what;
    }
    else if (warp.barrier.mask != mask)
    {
        deviceFault(cudaErrorLaunchFailure, "%s: lanes of one warp disagree on the mask (0x%08x vs 0x%08x)", what,
            mask, warp.barrier.mask);
    }
    else if (std::strcmp(warp.barrier.what, what) != 0)
    {
        deviceFault(cudaErrorLaunchFailure, "lanes of one warp are in different warp operations (%s and %s)", what,
            warp.barrier.what);
    }
    arrive(warp.barrier, __builtin_popcount(mask));
}

typedef void (*CollectiveBody)(unsigned char const (*operands)[kCollectiveBytes],
    unsigned char (*results)[kCollectiveBytes], void const* context);

/*
 * A full-warp collective: every lane deposits `bytes` of operands, the last lane to arrive computes every lane's
 * result (`body`), the warp barrier releases them, and each lane copies out its own `resultBytes`. One barrier is
 * enough: the next full-warp collective computes (overwriting the results) only when its last lane arrives, and
 * every lane reads its result before it can get there.
 */
void warpCollective(char const* what, void const* operands, size_t bytes, CollectiveBody body, void const* context,
    void* result, size_t resultBytes)
{
    Warp& warp = warpOfCaller(0xffffffffU, what);
    unsigned int const lane = currentThread->linear & 31U;
    std::memcpy(warp.operands[lane], operands, bytes);
    if (warp.barrier.arrived == 31 && warp.barrier.what != nullptr && std::strcmp(warp.barrier.what, what) == 0)
    {
        body(warp.operands, warp.results, context);
    }
    warpBarrier(warp, 0xffffffffU, what);
    std::memcpy(result, warp.results[lane], resultBytes);
}

float fragmentValue(uint32_t registerBits, int half, int inputType)
{
    uint16_t const bits = static_cast<uint16_t>(registerBits >> (16 * half));
    if (inputType == kMmaBf16)
    {
        uint32_t const wide = static_cast<uint32_t>(bits) << 16;
        float value;
        std::memcpy(&value, &wide, sizeof(value));
        return value;
    }
    return halfBitsToFloat(bits);
}

} // namespace

unsigned long long warpExchange(unsigned int mask, unsigned long long value, int sourceLane, char const* what)
{
    Warp& warp = warpOfCaller(mask, what);
    unsigned int const lane = currentThread->linear & 31U;
    warp.slots[lane] = value;
    warpBarrier(warp, mask, what);
    if (sourceLane < 0 || sourceLane > 31 || ((mask >> sourceLane) & 1U) == 0)
    {
        deviceFault(cudaErrorLaunchFailure, "%s reads lane %d, outside the mask 0x%08x", what, sourceLane, mask);
    }
    unsigned long long const result = warp.slots[sourceLane];
    warpBarrier(warp, mask, what);
    return result;
}

unsigned int warpBallot(unsigned int mask, bool predicate)
{
    Warp& warp = warpOfCaller(mask, "__ballot_sync");
    unsigned int const lane = currentThread->linear & 31U;
    warp.votes[lane] = predicate;
    warpBarrier(warp, mask, "__ballot_sync");
    unsigned int result = 0;
    for (unsigned int other = 0; other < 32; ++other)
    {
        if (((mask >> other) & 1U) != 0 && warp.votes[other])
        {
            result |= 1U << other;
        }
    }
    warpBarrier(warp, mask, "__ballot_sync");
    return result;
}

} // namespace detail

namespace
{

struct MmaOperands
{
    uint32_t a[4];
    uint32_t b[2];
    float c[4];
};

//! The fragment tables of the PTX ISA ("Matrix Fragments for mma.m16n8k16 with floating point type"), with
//! groupID = laneid >> 2 and threadID_in_group = laneid % 4:
//!   A a0..a7: row = groupID for a0, a1, a4, a5, else groupID + 8; col = 2 threadID_in_group + (i & 1), + 8 for i >= 4
//!   B b0..b3: row = 2 threadID_in_group + (i & 1), + 8 for i >= 2; col = groupID
//!   C c0..c3: row = groupID for c0, c1, else groupID + 8; col = 2 threadID_in_group + (i & 1)
void mmaBody(unsigned char const (*operands)[detail::kCollectiveBytes], unsigned char (*results)[detail::kCollectiveBytes],
    void const* context)
{
    int const inputType = *static_cast<int const*>(context);
    double matrixA[16][16];
    double matrixB[16][8];
    MmaOperands lanes[32];
    for (int lane = 0; lane < 32; ++lane)
    {
        std::memcpy(&lanes[lane], operands[lane], sizeof(MmaOperands));
        int const groupId = lane >> 2;
        int const threadInGroup = lane % 4;
        for (int i = 0; i < 8; ++i)
        {
            int const row = (i == 0 || i == 1 || i == 4 || i == 5) ? groupId : groupId + 8;
            int const col = threadInGroup * 2 + (i & 1) + (i >= 4 ? 8 : 0);
            matrixA[row][col] = detail::fragmentValue(lanes[lane].a[i / 2], i % 2, inputType);
        }
        for (int i = 0; i < 4; ++i)
        {
            int const row = threadInGroup * 2 + (i & 1) + (i >= 2 ? 8 : 0);
            matrixB[row][groupId] = detail::fragmentValue(lanes[lane].b[i / 2], i % 2, inputType);
        }
    }
    for (int lane = 0; lane < 32; ++lane)
    {
        float d[4];
        for (int i = 0; i < 4; ++i)
        {
            int const row = i < 2 ? (lane >> 2) : (lane >> 2) + 8;
            int const col = (lane % 4) * 2 + (i & 1);
            double sum = lanes[lane].c[i]; // exact products of 11-bit (bf16: 8-bit) significands, one rounding
            for (int k = 0; k < 16; ++k)
            {
                sum += matrixA[row][k] * matrixB[k][col];
            }
            d[i] = static_cast<float>(sum);
        }
        std::memcpy(results[lane], d, sizeof(d));
    }
}

struct LdmatrixShape
{
    int count;
    bool transpose;
};

//! Matrix j is the rows of lanes 8j .. 8j + 7. Lane l receives row l / 4, elements 2 (l % 4) and + 1; with .trans the
//! matrix is transposed first: elements (row 2 (l % 4), col l / 4) and (row 2 (l % 4) + 1, col l / 4).
void ldmatrixBody(unsigned char const (*rows)[detail::kCollectiveBytes], unsigned char (*results)[detail::kCollectiveBytes],
    void const* context)
{
    LdmatrixShape const shape = *static_cast<LdmatrixShape const*>(context);
    for (int lane = 0; lane < 32; ++lane)
    {
        uint32_t registers[4] = {0, 0, 0, 0};
        for (int j = 0; j < shape.count; ++j)
        {
            uint16_t lo;
            uint16_t hi;
            if (!shape.transpose)
            {
                std::memcpy(&lo, rows[8 * j + lane / 4] + 2 * (2 * (lane % 4)), 2);
                std::memcpy(&hi, rows[8 * j + lane / 4] + 2 * (2 * (lane % 4) + 1), 2);
            }
            else
            {
                std::memcpy(&lo, rows[8 * j + 2 * (lane % 4)] + 2 * (lane / 4), 2);
                std::memcpy(&hi, rows[8 * j + 2 * (lane % 4) + 1] + 2 * (lane / 4), 2);
            }
            registers[j] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
        }
        std::memcpy(results[lane], registers, sizeof(registers));
    }
}

} // namespace

void mmaM16N8K16(float (&d)[4], uint32_t const (&a)[4], uint32_t const (&b)[2], int inputType)
{
    MmaOperands mine;
    std::memcpy(mine.a, a, sizeof(mine.a));
    std::memcpy(mine.b, b, sizeof(mine.b));
    std::memcpy(mine.c, d, sizeof(mine.c));
    static_assert(sizeof(MmaOperands) <= detail::kCollectiveBytes, "mma operands do not fit a collective slot");
    detail::warpCollective(inputType == kMmaBf16 ? "mma.sync.aligned.m16n8k16 (bf16)" : "mma.sync.aligned.m16n8k16 (f16)",
        &mine, sizeof(mine), mmaBody, &inputType, d, sizeof(d));
}

void ldmatrix(uint32_t* registers, int count, void const* rowAddress, bool transpose)
{
    using namespace detail;
    if (count != 1 && count != 2 && count != 4)
    {
        deviceFault(cudaErrorLaunchFailure, "ldmatrix .x%d does not exist", count);
    }
    int const lane = static_cast<int>(currentThread->linear & 31U);
    uint16_t row[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (lane < 8 * count)
    {
        unsigned char const* const address = static_cast<unsigned char const*>(rowAddress);
        if (address < gArena || address + 16 > gArena + kArenaBytes)
        {
            deviceFault(cudaErrorIllegalAddress, "ldmatrix row address %p (lane %d) is not in shared memory",
                rowAddress, lane);
        }
        if (reinterpret_cast<uintptr_t>(address) % 16 != 0)
        {
            deviceFault(cudaErrorMisalignedAddress, "ldmatrix row address %p (lane %d) is not 16-byte aligned",
                rowAddress, lane);
        }
        std::memcpy(row, address, sizeof(row)); // read when this lane reaches the instruction
    }
    LdmatrixShape const shape{count, transpose};
    uint32_t result[4];
    warpCollective(transpose ? "ldmatrix.sync.aligned.m8n8.trans" : "ldmatrix.sync.aligned.m8n8", row, sizeof(row),
        ldmatrixBody, &shape, result, sizeof(result));
    std::memcpy(registers, result, sizeof(uint32_t) * static_cast<size_t>(count));
}

namespace
{

bool inSharedArena(unsigned char const* address, size_t bytes)
{
    return detail::gArena != nullptr && address >= detail::gArena && address + bytes <= detail::gArena + detail::kArenaBytes;
}

bool deviceHasAsyncCopy()
{
    return detail::gDevices[static_cast<size_t>(detail::gCurrentDevice)].computeCapability >= 80;
}

//! Bytes of [address, address + bytes) inside the watched global regions (0 outside a launch).
size_t watchedBytes(void const* address, size_t bytes)
{
    using namespace detail;
    uintptr_t const begin = reinterpret_cast<uintptr_t>(address);
    if (!gCountTraffic || bytes == 0 || begin + bytes <= gWatchedLow || begin >= gWatchedHigh)
    {
        return 0;
    }
    size_t counted = 0;
    for (WatchedRegion const& region : gWatched)
    {
        uintptr_t const low = std::max(begin, region.begin);
        uintptr_t const high = std::min(begin + bytes, region.end);
        counted += high > low ? high - low : 0;
    }
    return counted;
}

void countGlobalRead(void const* address, size_t bytes)
{
    detail::gLaunchRead += watchedBytes(address, bytes);
}

void retire(std::vector<detail::PendingCopy> const& group)
{
    for (detail::PendingCopy const& copy : group)
    {
        std::memcpy(copy.destination, copy.data, sizeof(copy.data));
    }
}

} // namespace

void cpAsync16(void* shared, void const* global, int sourceBytes)
{
    using namespace detail;
    unsigned char* const destination = static_cast<unsigned char*>(shared);
    unsigned char const* const source = static_cast<unsigned char const*>(global);
    if (sourceBytes < 0 || sourceBytes > 16)
    {
        deviceFault(cudaErrorLaunchFailure, "cp.async src-size %d outside 0..16", sourceBytes);
    }
    if (!inSharedArena(destination, 16))
    {
        deviceFault(cudaErrorIllegalAddress, "cp.async destination %p is not in shared memory", shared);
    }
    if (reinterpret_cast<uintptr_t>(destination) % 16 != 0 || reinterpret_cast<uintptr_t>(source) % 16 != 0)
    {
        deviceFault(cudaErrorMisalignedAddress, "cp.async.cg of 16 bytes needs 16-byte aligned addresses (%p <- %p)",
            shared, global);
    }
    if (sourceBytes > 0 && inSharedArena(source, 1))
    {
        deviceFault(cudaErrorIllegalAddress, "cp.async source %p is in shared memory, not global memory", global);
    }
    detail::PendingCopy copy;
    copy.destination = destination;
    std::memset(copy.data, 0, sizeof(copy.data)); // src-size < 16: the rest is zero-filled
    std::memcpy(copy.data, source, static_cast<size_t>(sourceBytes));
    countGlobalRead(source, static_cast<size_t>(sourceBytes));
    if (!deviceHasAsyncCopy())
    {
        std::memcpy(destination, copy.data, sizeof(copy.data)); // the synchronous fallback below sm_80
        return;
    }
    fillWords(destination, 16, kPoisonWord); // undefined until the copy's group is waited on
    gFiber->uncommitted.push_back(copy);
}

void cpAsyncCommitGroup()
{
    using namespace detail;
    if (!deviceHasAsyncCopy())
    {
        return;
    }
    Fiber* const self = gFiber;
    // an empty group is legal (and what a pipeline's tail commits): it completes at once
    self->pendingGroups.push_back(std::vector<PendingCopy>());
    self->pendingGroups.back().swap(self->uncommitted);
}

void cpAsyncWaitGroup(int pending)
{
    using namespace detail;
    if (pending < 0 || pending > 7)
    {
        deviceFault(cudaErrorLaunchFailure, "cp.async.wait_group %d: N must be an immediate 0..7", pending);
    }
    if (!deviceHasAsyncCopy())
    {
        return;
    }
    Fiber* const self = gFiber;
    while (self->pendingGroups.size() > static_cast<size_t>(pending))
    {
        retire(self->pendingGroups.front());
        self->pendingGroups.pop_front();
    }
}

bool plantedBug(int id)
{
    return detail::gPlantedBug == id;
}

float ex2Approx(float x)
{
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    if ((bits & 0x7f800000U) == 0)
    {
        return 1.0F; // +-0 and subnormal inputs (flushed to zero): 2^0, exactly (the ISA's table for +-0)
    }
    if (std::isnan(x))
    {
        return x;
    }
    if (std::isinf(x))
    {
        return x > 0 ? x : 0.0F;
    }
    double const exact = std::exp2(static_cast<double>(x));
    if (exact < 0x1p-126)
    {
        return 0.0F; // subnormal results flush to +0 (.ftz)
    }
    if (exact >= 0x1p128)
    {
        return INFINITY; // beyond FP32
    }
    // a deliberate error of (2^-22 - 2^-24) relative, its sign from a hash of the input's bits, so the result with
    // its rounding to FP32 stays within the documented 2^-22 and no caller can rely on 2^x being exact
    uint32_t hash = bits * 0x9e3779b1U;
    hash ^= hash >> 15;
    double const error = 0.75 * kEx2ApproxMaxRelativeError;
    return static_cast<float>(exact * ((hash & 1U) != 0 ? 1.0 + error : 1.0 - error));
}

namespace detail
{

void* dynamicShared()
{
    return gArena;
}

void* staticShared(void const* key, size_t bytes, size_t alignment)
{
    Block& block = gBlock;
    for (StaticAllocation const& allocation : block.statics)
    {
        if (allocation.key == key)
        {
            return gArena + allocation.offset;
        }
    }
    size_t const offset = alignUp(block.staticCursor, std::max<size_t>(alignment, 16));
    size_t const end = offset + bytes + kGuardBytes;
    if (end > kArenaBytes)
    {
        deviceFault(cudaErrorLaunchOutOfResources, "static shared memory beyond the emulator's arena");
    }
    fillWords(gArena + offset, bytes, kPoisonWord);
    fillWords(gArena + offset + bytes, kGuardBytes, kCanaryWord);
    block.statics.push_back(StaticAllocation{key, offset, bytes});
    block.staticCursor = end;
    block.staticBytes += alignUp(bytes, std::max<size_t>(alignment, 4));
    return gArena + offset;
}

bool checkLaunchBounds(int maxThreads, char const* kernel)
{
    unsigned int const threads = blockDimValue.x * blockDimValue.y * blockDimValue.z;
    if (threads > static_cast<unsigned int>(maxThreads))
    {
        if (!gLaunchBoundsViolated)
        {
            gLaunchBoundsViolated = true;
            gFaultMessage = std::string(gKernel) + ": launched with " + std::to_string(threads)
                + " threads per block but " + kernel + " has __launch_bounds__(" + std::to_string(maxThreads) + ")";
        }
        return false;
    }
    return true;
}

cudaError_t setFunctionAttribute(void const* function, int attribute, int value)
{
    if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize)
    {
        if (value < 0 || static_cast<size_t>(value) > kOptInSharedLimit)
        {
            return gLastError = cudaErrorInvalidValue;
        }
        gMaxDynamicShared[function] = value;
        return cudaSuccess;
    }
    if (attribute == cudaFuncAttributePreferredSharedMemoryCarveout)
    {
        return cudaSuccess;
    }
    return gLastError = cudaErrorInvalidValue;
}

namespace
{

//! The blocks' run order when gBlockOrderSeed is set (empty otherwise): a Fisher-Yates shuffle driven by
//! std::mt19937 (its sequence is fixed by the C++ standard, so a seed means the same order everywhere).
std::vector<unsigned long long> blockOrder(unsigned long long blocks)
{
    std::vector<unsigned long long> order;
    if (gBlockOrderSeed == 0)
    {
        return order;
    }
    order.resize(static_cast<size_t>(blocks));
    for (unsigned long long k = 0; k < blocks; ++k)
    {
        order[static_cast<size_t>(k)] = k;
    }
    std::mt19937 generator(gBlockOrderSeed);
    for (unsigned long long k = blocks; k > 1; --k)
    {
        unsigned long long const j = generator() % k;
        std::swap(order[static_cast<size_t>(k - 1)], order[static_cast<size_t>(j)]);
    }
    return order;
}

} // namespace

LaunchRecord rejected(std::string const& text)
{
    LaunchRecord record;
    record.text = text;
    return record;
}

void runLaunch(char const* kernel, char const* caller, void const* function, dim3 grid, dim3 block,
    size_t sharedBytes, cudaStream_t /*stream*/, BlockBody body, void* context)
{
    char text[1024];
    gKernel = kernel;
    if (gStickyError != cudaSuccess)
    {
        gLastError = gStickyError; // a faulted context rejects every later launch
        return;
    }
    unsigned long long const threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
    bool const validConfig = threads >= 1 && threads <= kMaxThreadsPerBlock && block.x <= 1024 && block.y <= 1024
        && block.z <= 64 && grid.x >= 1 && grid.x <= 2147483647U && grid.y >= 1 && grid.y <= 65535 && grid.z >= 1
        && grid.z <= 65535;
    std::map<void const*, int>::const_iterator const attribute = gMaxDynamicShared.find(function);
    size_t const dynamicLimit
        = attribute != gMaxDynamicShared.end() ? static_cast<size_t>(attribute->second) : kDefaultSharedLimit;
    char const* const with = std::strstr(caller, "[with ");
    std::snprintf(text, sizeof(text), "%s%s%s grid=(%u,%u,%u) block=(%u,%u,%u) dynamic_smem=%zu", kernel,
        with != nullptr ? " " : "", with != nullptr ? with : "", grid.x, grid.y, grid.z, block.x, block.y, block.z,
        sharedBytes);
    if (!validConfig)
    {
        gLastError = cudaErrorInvalidConfiguration;
        gFaultMessage = std::string("invalid launch configuration: ") + text;
        gLaunches.push_back(rejected(std::string(text) + " REJECTED invalid configuration"));
        return;
    }
    if (sharedBytes > dynamicLimit)
    {
        gLastError = cudaErrorInvalidValue;
        gFaultMessage = std::string("dynamic shared memory above the per-block limit: ") + text;
        gLaunches.push_back(rejected(std::string(text) + " REJECTED dynamic shared memory"));
        return;
    }
    if (gArena == nullptr)
    {
        gArena = static_cast<unsigned char*>(std::aligned_alloc(256, kArenaBytes));
    }
    ensureStacks(static_cast<size_t>(threads));

    // segfaults inside a kernel become a device fault instead of killing the process
    stack_t alternate;
    stack_t previousAlternate;
    alternate.ss_sp = gAltStack;
    alternate.ss_size = sizeof(gAltStack);
    alternate.ss_flags = 0;
    sigaltstack(&alternate, &previousAlternate);
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = segfaultHandler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &gPreviousSegv);
    sigaction(SIGBUS, &action, &gPreviousBus);

    gLaunchRead = 0;
    gLaunchWritten = 0;
    gCountTraffic = true;
    gBlock.body = body;
    gBlock.context = context;
    gBlock.dynamicBytes = sharedBytes;
    gridDimValue = grid;
    blockDimValue = block;
    gLaunchBoundsViolated = false;
    size_t maxStatic = 0;
    unsigned long long const blocks = static_cast<unsigned long long>(grid.x) * grid.y * grid.z;
    bool ok = true;
    std::vector<unsigned long long> const order = blockOrder(blocks);
    for (unsigned long long k = 0; k < blocks && ok; ++k)
    {
        unsigned long long const index = order.empty() ? (gReverse ? blocks - 1 - k : k) : order[k];
        blockIdxValue = uint3{static_cast<unsigned int>(index % grid.x),
            static_cast<unsigned int>((index / grid.x) % grid.y), static_cast<unsigned int>(index / grid.x / grid.y)};
        ok = runBlock(static_cast<int>(threads));
        maxStatic = std::max(maxStatic, gBlock.staticBytes);
        if (ok && gLaunchBoundsViolated)
        {
            break;
        }
        size_t const limit = attribute != gMaxDynamicShared.end() ? kOptInSharedLimit : kDefaultSharedLimit;
        if (ok && gBlock.staticBytes + sharedBytes > limit)
        {
            recordFault(cudaErrorLaunchOutOfResources,
                std::string(text) + ": static (" + std::to_string(gBlock.staticBytes) + ") + dynamic shared memory "
                    + "exceeds the per-block limit of " + std::to_string(limit) + " bytes");
            ok = false;
        }
    }
    gCountTraffic = false;
    sigaction(SIGSEGV, &gPreviousSegv, nullptr);
    sigaction(SIGBUS, &gPreviousBus, nullptr);
    sigaltstack(&previousAlternate, nullptr);
    currentThread = nullptr;

    std::string record = std::string(text) + " static_smem=" + std::to_string(maxStatic);
    if (!ok)
    {
        gLastError = gStickyError;
        record += " FAULT";
    }
    else if (gLaunchBoundsViolated)
    {
        gLastError = cudaErrorLaunchOutOfResources;
        record += " REJECTED launch bounds";
    }
    LaunchRecord launched;
    launched.text = record;
    launched.globalRead = gLaunchRead;
    launched.globalWritten = gLaunchWritten;
    gLaunches.push_back(launched);
}

} // namespace detail
} // namespace cuda_emu

using namespace cuda_emu::detail;

cudaError_t cudaGetLastError(void)
{
    cudaError_t const error = gLastError;
    gLastError = gStickyError;
    return error;
}

cudaError_t cudaPeekAtLastError(void)
{
    return gLastError;
}

char const* cudaGetErrorName(cudaError_t error)
{
    switch (error)
    {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

char const* cudaGetErrorString(cudaError_t error)
{
    // the emulator's own explanation (which check fired, where) is more useful than CUDA's generic text
    if (error != cudaSuccess && !gFaultMessage.empty())
    {
        return gFaultMessage.c_str();
    }
    return error == cudaSuccess ? "no error" : "emulated CUDA error";
}

cudaError_t cudaGetDevice(int* device)
{
    *device = gCurrentDevice;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || static_cast<size_t>(device) >= gDevices.size())
    {
        return gLastError = cudaErrorInvalidValue;
    }
    gCurrentDevice = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count)
{
    *count = static_cast<int>(gDevices.size());
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device)
{
    if (device < 0 || static_cast<size_t>(device) >= gDevices.size())
    {
        return gLastError = cudaErrorInvalidValue;
    }
    std::memset(properties, 0, sizeof(*properties));
    int const capability = gDevices[static_cast<size_t>(device)].computeCapability;
    std::snprintf(properties->name, sizeof(properties->name), "edgeattn CPU emulation (sm_%d)", capability);
    properties->major = capability / 10;
    properties->minor = capability % 10;
    properties->multiProcessorCount = gMultiprocessors;
    properties->sharedMemPerBlock = 48 * 1024;
    properties->sharedMemPerBlockOptin = 64 * 1024;
    properties->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}

namespace cuda_emu
{
namespace detail
{

cudaError_t functionAttributes(cudaFuncAttributes* attributes, void const* /*function*/)
{
    std::memset(attributes, 0, sizeof(*attributes));
    EmulatedDevice const& device = gDevices[static_cast<size_t>(gCurrentDevice)];
    attributes->ptxVersion = device.codeArch;
    attributes->binaryVersion = device.codeArch;
    attributes->maxThreadsPerBlock = 1024;
    attributes->maxDynamicSharedSizeBytes = static_cast<int>(kDefaultSharedLimit);
    return cudaSuccess;
}

} // namespace detail
} // namespace cuda_emu

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device)
{
    if (device < 0 || static_cast<size_t>(device) >= gDevices.size())
    {
        return gLastError = cudaErrorInvalidValue;
    }
    int const capability = gDevices[static_cast<size_t>(device)].computeCapability;
    switch (attribute)
    {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxBlockDimX: *value = 1024; break;
    case cudaDevAttrMaxGridDimX: *value = 2147483647; break;
    case cudaDevAttrMaxGridDimY: *value = 65535; break;
    case cudaDevAttrMaxGridDimZ: *value = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMultiProcessorCount: *value = gMultiprocessors; break;
    case cudaDevAttrComputeCapabilityMajor: *value = capability / 10; break;
    case cudaDevAttrComputeCapabilityMinor: *value = capability % 10; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 64 * 1024; break;
    default: return gLastError = cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

namespace
{

//! A memset or device copy is a launch on a GPU (a kernel or a copy engine): it gets a record with its traffic.
void recordCopy(char const* what, void const* source, void* destination, size_t bytes)
{
    gCountTraffic = true;
    LaunchRecord record;
    record.text = std::string(what) + " bytes=" + std::to_string(bytes);
    record.globalRead = source != nullptr ? cuda_emu::watchedBytes(source, bytes) : 0;
    record.globalWritten = cuda_emu::watchedBytes(destination, bytes);
    gCountTraffic = false;
    gLaunches.push_back(record);
}

} // namespace

cudaError_t cudaMemsetAsync(void* destination, int value, size_t bytes, cudaStream_t)
{
    if (gStickyError != cudaSuccess)
    {
        return gStickyError;
    }
    std::memset(destination, value, bytes);
    recordCopy("cudaMemsetAsync", nullptr, destination, bytes);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void** pointer, size_t bytes)
{
    if (gStickyError != cudaSuccess)
    {
        return gStickyError;
    }
    void* const memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (memory == nullptr)
    {
        return gLastError = cudaErrorMemoryAllocation;
    }
    std::memset(memory, 0xA5, bytes); // uninitialised on a GPU
    *pointer = memory;
    return cudaSuccess;
}

cudaError_t cudaFree(void* pointer)
{
    std::free(pointer);
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* status)
{
    *status = gCapturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* destination, void const* source, size_t bytes, cudaMemcpyKind, cudaStream_t)
{
    if (gStickyError != cudaSuccess)
    {
        return gStickyError;
    }
    std::memmove(destination, source, bytes);
    recordCopy("cudaMemcpyAsync", source, destination, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t)
{
    return gStickyError;
}

cudaError_t cudaDeviceSynchronize(void)
{
    return gStickyError;
}

// ---- test hooks ------------------------------------------------------------------------------------------------

//! Bit 0: blocks, warps and lanes in reverse index order (a missing barrier changes the result). Bit 1:
//! round-robin instead of warp-greedy (every warp advances one barrier per pass, as in lockstep).
EDGEATTN_EMU_EXPORT void edgeattn_emu_set_schedule(int mode)
{
    gReverse = (mode & 1) != 0;
    gWarpGreedy = (mode & 2) == 0;
}

//! The order in which the blocks of every later launch run (and so arrive at a last-block-to-arrive counter):
//! 0 = index order (reversed by edgeattn_emu_set_schedule's bit 0), any other value seeds a pseudo-random
//! permutation. Warps and lanes keep the schedule's order.
EDGEATTN_EMU_EXPORT void edgeattn_emu_set_block_order(unsigned int seed)
{
    gBlockOrderSeed = seed;
}

//! Makes the emulated device of compute capability major.minor current (cudaGetDevice returns its ordinal), with
//! the library's code for it compiled for `code_arch` (major * 10 + minor; <= 0: the device's own arch), so the
//! launchers see what a library built without sm_80+ code would see on an Ampere device. Returns the ordinal.
EDGEATTN_EMU_EXPORT int edgeattn_emu_select_device(int major, int minor, int code_arch)
{
    int const capability = major * 10 + minor;
    int const code = code_arch > 0 ? code_arch : capability;
    for (size_t i = 0; i < gDevices.size(); ++i)
    {
        if (gDevices[i].computeCapability == capability && gDevices[i].codeArch == code)
        {
            gCurrentDevice = static_cast<int>(i);
            return gCurrentDevice;
        }
    }
    gDevices.push_back(EmulatedDevice{capability, code});
    gCurrentDevice = static_cast<int>(gDevices.size() - 1);
    return gCurrentDevice;
}

//! Whether cudaStreamIsCapturing reports every stream as being captured into a CUDA graph (cudaMalloc is not
//! allowed then), so launchers' capture paths can be tested; back to 0 at edgeattn_emu_reset.
EDGEATTN_EMU_EXPORT void edgeattn_emu_set_capturing(int capturing)
{
    gCapturing = capturing != 0;
}

//! Switches on the bug `id` of a planted-bug variant library (0: none); kept across edgeattn_emu_reset.
EDGEATTN_EMU_EXPORT void edgeattn_emu_set_planted_bug(int id)
{
    gPlantedBug = id;
}

//! The SM count every emulated device reports (default 1; e.g. 132 for an H100/H200, 16 for an AGX Orin), so
//! launchers that size their grids to the device can be tested; blocks still run one after the other. Back to 1
//! at edgeattn_emu_reset.
EDGEATTN_EMU_EXPORT void edgeattn_emu_set_multiprocessor_count(int count)
{
    gMultiprocessors = count > 0 ? count : 1;
}

//! The emulated device's compute capability (5.3 Nano: scalar kernels; 8.7 Orin: tensor-core kernels).
EDGEATTN_EMU_EXPORT int edgeattn_emu_set_compute_capability(int major, int minor)
{
    return edgeattn_emu_select_device(major, minor, 0);
}

//! Clears the sticky fault, the last error, the launch log and the watched regions (a fresh "context"), and sets
//! the SM count back to 1.
EDGEATTN_EMU_EXPORT void edgeattn_emu_reset(void)
{
    gStickyError = cudaSuccess;
    gLastError = cudaSuccess;
    gCapturing = false;
    gFaulted = false;
    gFaultMessage.clear();
    gLaunches.clear();
    gMaxDynamicShared.clear();
    gMultiprocessors = 1;
    gWatched.clear();
    gWatchedLow = UINTPTR_MAX;
    gWatchedHigh = 0;
}

//! Counts the loads and stores of every later launch that touch [base, base + bytes) as global-memory traffic
//! (device pointers are host pointers here, so the emulator cannot tell global memory from any other by itself:
//! the caller names its inputs, outputs and workspace). Cleared by edgeattn_emu_reset. Returns the region count.
EDGEATTN_EMU_EXPORT int edgeattn_emu_watch_global(void const* base, size_t bytes)
{
    uintptr_t const begin = reinterpret_cast<uintptr_t>(base);
    gWatched.push_back(WatchedRegion{begin, begin + bytes});
    gWatchedLow = std::min(gWatchedLow, begin);
    gWatchedHigh = std::max(gWatchedHigh, begin + bytes);
    return static_cast<int>(gWatched.size());
}

//! Global-memory bytes read and written by launch record `index` (kernel loads/stores and cp.async sources inside
//! the watched regions; memset/memcpy records their bytes). 0 on success, -1 for an index without a record.
EDGEATTN_EMU_EXPORT int edgeattn_emu_launch_traffic(int index, unsigned long long* read, unsigned long long* written)
{
    if (index < 0 || static_cast<size_t>(index) >= gLaunches.size())
    {
        return -1;
    }
    *read = gLaunches[static_cast<size_t>(index)].globalRead;
    *written = gLaunches[static_cast<size_t>(index)].globalWritten;
    return 0;
}

//! The device fault or launch rejection of this context ("" if none).
EDGEATTN_EMU_EXPORT char const* edgeattn_emu_fault(void)
{
    return gFaultMessage.c_str();
}

EDGEATTN_EMU_EXPORT int edgeattn_emu_launch_count(void)
{
    return static_cast<int>(gLaunches.size());
}

//! "kernel grid=(x,y,z) block=(x,y,z) dynamic_smem=N static_smem=M [FAULT|REJECTED ...]".
EDGEATTN_EMU_EXPORT char const* edgeattn_emu_launch_record(int index)
{
    if (index < 0 || static_cast<size_t>(index) >= gLaunches.size())
    {
        return "";
    }
    return gLaunches[static_cast<size_t>(index)].text.c_str();
}

EDGEATTN_EMU_EXPORT void edgeattn_emu_float_to_half(float const* source, uint16_t* destination, size_t count)
{
    for (size_t i = 0; i < count; ++i)
    {
        destination[i] = __float2half_rn(source[i]).__x;
    }
}

EDGEATTN_EMU_EXPORT void edgeattn_emu_half_to_float(uint16_t const* source, float* destination, size_t count)
{
    for (size_t i = 0; i < count; ++i)
    {
        destination[i] = __half2float(__half{source[i]});
    }
}

// ---- global-memory traffic: the kernel sources are compiled with -fsanitize=thread (build_emulated.py), which
// makes g++ call these hooks before every load and store it could not keep in a register; no ThreadSanitizer
// runtime is linked. Only accesses inside the watched regions during a launch are counted.
#define EDGEATTN_EMU_HOOK extern "C" __attribute__((visibility("hidden")))
#define EDGEATTN_EMU_TRAFFIC_HOOKS(bytes)                                                                          \
    EDGEATTN_EMU_HOOK void __tsan_read##bytes(void* address)                                                    \
    {                                                                                                              \
        gLaunchRead += cuda_emu::watchedBytes(address, bytes);                                                     \
    }                                                                                                              \
    EDGEATTN_EMU_HOOK void __tsan_write##bytes(void* address)                                                   \
    {                                                                                                              \
        gLaunchWritten += cuda_emu::watchedBytes(address, bytes);                                                  \
    }                                                                                                              \
    EDGEATTN_EMU_HOOK void __tsan_unaligned_read##bytes(void* address)                                          \
    {                                                                                                              \
        gLaunchRead += cuda_emu::watchedBytes(address, bytes);                                                     \
    }                                                                                                              \
    EDGEATTN_EMU_HOOK void __tsan_unaligned_write##bytes(void* address)                                         \
    {                                                                                                              \
        gLaunchWritten += cuda_emu::watchedBytes(address, bytes);                                                  \
    }

EDGEATTN_EMU_TRAFFIC_HOOKS(1)
EDGEATTN_EMU_TRAFFIC_HOOKS(2)
EDGEATTN_EMU_TRAFFIC_HOOKS(4)
EDGEATTN_EMU_TRAFFIC_HOOKS(8)
EDGEATTN_EMU_TRAFFIC_HOOKS(16)
#undef EDGEATTN_EMU_TRAFFIC_HOOKS

EDGEATTN_EMU_HOOK void __tsan_read_range(void* address, unsigned long bytes)
{
    gLaunchRead += cuda_emu::watchedBytes(address, bytes);
}

EDGEATTN_EMU_HOOK void __tsan_write_range(void* address, unsigned long bytes)
{
    gLaunchWritten += cuda_emu::watchedBytes(address, bytes);
}

EDGEATTN_EMU_HOOK void __tsan_init(void) {}
EDGEATTN_EMU_HOOK void __tsan_func_entry(void*) {}
EDGEATTN_EMU_HOOK void __tsan_func_exit(void) {}

// Host code of the instrumented sources (the launchers' cached device queries, the kernel-path setting) uses
// std::atomic, which -fsanitize=thread routes through these: plain atomics, not traffic.
#define EDGEATTN_EMU_ATOMIC_HOOKS(bits, type)                                                                       \
    EDGEATTN_EMU_HOOK type __tsan_atomic##bits##_load(type const volatile* address, int)                           \
    {                                                                                                              \
        return __atomic_load_n(address, __ATOMIC_SEQ_CST);                                                         \
    }                                                                                                              \
    EDGEATTN_EMU_HOOK void __tsan_atomic##bits##_store(type volatile* address, type value, int)                    \
    {                                                                                                              \
        __atomic_store_n(address, value, __ATOMIC_SEQ_CST);                                                        \
    }                                                                                                              \
    EDGEATTN_EMU_HOOK type __tsan_atomic##bits##_exchange(type volatile* address, type value, int)                 \
    {                                                                                                              \
        return __atomic_exchange_n(address, value, __ATOMIC_SEQ_CST);                                              \
    }                                                                                                              \
    EDGEATTN_EMU_HOOK type __tsan_atomic##bits##_fetch_add(type volatile* address, type value, int)                \
    {                                                                                                              \
        return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);                                               \
    }                                                                                                              \
    EDGEATTN_EMU_HOOK int __tsan_atomic##bits##_compare_exchange_strong(                                           \
        type volatile* address, type* expected, type value, int, int)                                              \
    {                                                                                                              \
        return __atomic_compare_exchange_n(address, expected, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);   \
    }

EDGEATTN_EMU_ATOMIC_HOOKS(8, uint8_t)
EDGEATTN_EMU_ATOMIC_HOOKS(16, uint16_t)
EDGEATTN_EMU_ATOMIC_HOOKS(32, uint32_t)
EDGEATTN_EMU_ATOMIC_HOOKS(64, uint64_t)
#undef EDGEATTN_EMU_ATOMIC_HOOKS
