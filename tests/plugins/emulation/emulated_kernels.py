"""The emulated kernels library (build_emulated.py) from Python: the C ABI through edgeattn.plugins.kernels_abi,
plus the emulator's test hooks (``edgeattn_emu_*``): schedules, emulated devices, faults, the launch log and its
global-memory traffic. Tests only (and CPU benchmarks built on the emulation); stdlib only, Python 3.8.

Traffic, per op call::

    kernels.reset()                                # fresh context: empty launch log, no watched regions
    kernels.watch_global(q_ptr, q_bytes)            # each input, output and workspace buffer of the call
    kernels.blockify_attention(...)
    for launch in kernels.traffic():               # one entry per kernel launch (and memset/memcpy), in order
        launch["name"], launch["read_bytes"], launch["written_bytes"]

Counted: every load and store of the kernel code (g++ instruments them, build_emulated.py) and every cp.async
source that falls inside a watched region; shared memory, registers and the kernel's local variables are not
global memory and never counted. A region must be watched before the launch it is counted in.
"""
import ctypes

from edgeattn.plugins import kernels_abi


class EmulatedKernels(kernels_abi.KernelsLibrary):
    """kernels_abi.KernelsLibrary over the emulated library, plus the emulator's test hooks (edgeattn_emu_*)."""

    def __init__(self, path):
        super(EmulatedKernels, self).__init__(path)
        self.emu = self._lib
        self.emu.edgeattn_emu_fault.restype = ctypes.c_char_p
        self.emu.edgeattn_emu_launch_record.restype = ctypes.c_char_p
        self.emu.edgeattn_emu_launch_record.argtypes = [ctypes.c_int]
        self.emu.edgeattn_emu_set_schedule.argtypes = [ctypes.c_int]
        for name in ("edgeattn_emu_float_to_half", "edgeattn_emu_half_to_float"):
            getattr(self.emu, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        self.emu.edgeattn_emu_select_device.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.emu.edgeattn_emu_set_block_order.argtypes = [ctypes.c_uint]
        self.emu.edgeattn_emu_set_multiprocessor_count.argtypes = [ctypes.c_int]
        self.emu.edgeattn_emu_set_planted_bug.argtypes = [ctypes.c_int]
        self.emu.edgeattn_emu_set_capturing.argtypes = [ctypes.c_int]
        self.emu.edgeattn_emu_watch_global.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.emu.edgeattn_emu_launch_traffic.argtypes = [
            ctypes.c_int, ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_ulonglong)]

    def reset(self):
        """A fresh context: no sticky fault, empty launch log, no watched regions."""
        self.emu.edgeattn_emu_reset()

    def set_compute_capability(self, major, minor, code_arch=0):
        """Makes the emulated device of that compute capability current; ``code_arch`` (e.g. 75) is the arch the
        library's code for it was compiled for (default: the device's own), as cudaFuncGetAttributes reports it.
        Also selects the path a kernel test on that device means: the tensor-core kernels forced on sm_80+ (AUTO's
        default table keeps EFFATT and LiteMLA scalar there), AUTO below; path-selection tests set theirs after."""
        ordinal = self.emu.edgeattn_emu_select_device(major, minor, code_arch)
        tensor_cores = major >= 8 and (code_arch or major * 10 + minor) >= 80
        self.set_kernel_path("tensor_core" if tensor_cores else "auto")
        return ordinal

    def set_schedule(self, reverse, round_robin=False):
        """Reverse: blocks, warps and lanes in reverse order. Default warp-greedy: each warp runs ahead until all
        its lanes wait at __syncthreads; round_robin: every runnable thread advances one barrier per pass."""
        self.emu.edgeattn_emu_set_schedule((1 if reverse else 0) | (2 if round_robin else 0))

    def set_block_order(self, seed):
        """0: blocks in index order (reversed by the reverse schedule); else a pseudo-random permutation of that
        seed: the order in which blocks arrive at a last-block-to-arrive counter."""
        self.emu.edgeattn_emu_set_block_order(seed)

    def set_multiprocessor_count(self, count):
        """The SM count the emulated devices report (default 1)."""
        self.emu.edgeattn_emu_set_multiprocessor_count(count)

    def set_capturing(self, capturing):
        """Whether every stream reports itself as being captured into a CUDA graph (cudaStreamIsCapturing);
        back to False at reset()."""
        self.emu.edgeattn_emu_set_capturing(1 if capturing else 0)

    def set_planted_bug(self, bug):
        """Switches on one bug of a planted-bug variant (tests/plugins/planted_bugs.py; 0: none). Kept across
        reset()."""
        self.emu.edgeattn_emu_set_planted_bug(bug)

    def fault(self):
        return self.emu.edgeattn_emu_fault().decode()

    def launches(self):
        """The launch log since the last reset: "kernel grid=... block=... dynamic_smem=N static_smem=M [...]"."""
        return [self.emu.edgeattn_emu_launch_record(i).decode() for i in range(self.emu.edgeattn_emu_launch_count())]

    def watch_global(self, pointer, nbytes):
        """Counts later launches' loads and stores inside [pointer, pointer + nbytes) as global-memory traffic."""
        return self.emu.edgeattn_emu_watch_global(pointer, nbytes)

    def traffic(self):
        """Per launch since the last reset: {"name", "record", "read_bytes", "written_bytes"} (watched regions)."""
        result = []
        for index, record in enumerate(self.launches()):
            read, written = ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)
            self.emu.edgeattn_emu_launch_traffic(index, ctypes.byref(read), ctypes.byref(written))
            result.append({"name": record.split(" ")[0], "record": record, "read_bytes": read.value,
                           "written_bytes": written.value})
        return result
