"""What keeps the suite's memory down: which tests hold large models (tests/conftest.py runs them one after another
on one pytest-xdist worker), and handing freed heap back to the system between tests (tests/conftest.py) and between
the exports of one test (tests/export/test_export_models.py). Standard library only: the device-side tests also run
under Python 3.8."""
import os

#: Registered models of MEMORY_HEAVY_PARAMETERS or more (tests/models/test_registry.py checks the list against them).
#: Exporting one peaks at ~2 GB in a worker, loading and saving one at ~1.5 GB; two such tests at once on the two
#: workers took the suite to 3.6-3.8 GB. Their tests and MEMORY_HEAVY_TESTS form one pytest-xdist scope
#: (tests/conftest.py): on two workers, one runs them in order while the other runs everything else.
MEMORY_HEAVY_PARAMETERS = 45 * 10**6
MEMORY_HEAVY_MODELS = frozenset([
    "cswin_144_24322_large", "cswin_96_24322_base", "cswin_b36292_agent", "cswin_b36292_effatt",
    "cswin_b36292_elfatt", "cswin_b36292_flatten", "cswin_b36292_global", "cswin_b36292_local", "efficientvit_b3",
    "qtvit_3", "soft_norm_large", "soft_norm_medium", "softpp_large", "softpp_medium", "swin_b_agent", "swin_b_effatt",
    "swin_b_elfatt", "swin_b_flatten", "swin_b_global", "swin_b_local", "vit_base_patch16_384",
    "vit_base_patch16_384_ms_top64", "vit_base_patch16_384_ms_top64_s16", "vit_base_patch16_384_ms_top96_s16",
    "vit_base_patch16_384_ms_top96_s4"])
#: tests that hold several copies of a large model without naming it in their parameters (timm's ViT-B and Swin-B),
#: the exports with an ONNX Runtime check of every model (1.0-1.5 GB in a worker for the smaller ones): two
#: exports at once made most of the suite's peaks; and a test whose subprocesses import torch three times at once
MEMORY_HEAVY_TESTS = (
    "tests/export/test_export_models.py::",
    "tests/export/test_export_new_models.py::test_representative_exports_through_the_cli[",
    "tests/models/test_zoo_timm.py::test_edgeattn_compare_measures_how_far_a_substitution_moves_the_logits",
    "tests/models/test_zoo_timm.py::test_timm_state_dict_loads_unchanged_and_gives_timm_logits[swin_base_",
    "tests/models/test_zoo_timm.py::test_timm_state_dict_loads_unchanged_and_gives_timm_logits[vit_base_",
    # not a large model, but three torch processes at once (gpu_check.sh's tests and two sanitizer runs beside them)
    "tests/plugins/test_kernels_gpu_benchmark.py::test_gpu_check_script_runs_each_step_and_bundles_its_logs",
    # whole-model forwards in float64, the model's and the written-out reference's: 0.35-0.47 GB over the worker's
    # own ~0.65 GB (CSWin-T GLOBAL at 224 peaked at 1.13 GB RSS); beside a large export (up to 2.1 GB) one took a
    # run with an empty temp dir to 3.03 GB PSS
    "tests/models/test_oracles.py::test_cswin_matches_functional_forward[",
    "tests/models/test_oracles.py::test_softpp_matches_functional_forward[",
)


def memory_heavy(nodeid):
    """Whether the test ``nodeid`` holds a large model: it names one in its parameters, or is in
    MEMORY_HEAVY_TESTS."""
    if nodeid.startswith(MEMORY_HEAVY_TESTS):
        return True
    parameters = nodeid[nodeid.index("[") + 1:-1] if nodeid.endswith("]") and "[" in nodeid else ""
    return any(token in MEMORY_HEAVY_MODELS for token in parameters.split("-"))


#: growth of resident memory since the last trim after which a finished test's freed heap is handed back to the
#: system (see release_freed_memory)
TRIM_GROWTH_BYTES = 128 << 20
#: above this, a trim also collects reference cycles first (models, TorchScript graphs), which frees more
COLLECT_ABOVE_BYTES = 1 << 30


def _libc_malloc_trim():
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


def _resident_bytes():
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


_TRIM = {}


def release_freed_memory():
    """glibc keeps the pages of freed allocations (protobuf messages, TorchScript graphs, tensors below its mmap
    threshold) in its heap: a worker that had exported a large model kept ~1 GB it no longer used, and the next large
    export's peak (~2 GB over what the worker holds) came on top of it. After a test that left the process
    TRIM_GROWTH_BYTES larger than after the last trim, hand those pages back (malloc_trim: ~40 ms, 0.5 ms when there
    is nothing to return)."""
    if "malloc_trim" not in _TRIM:
        _TRIM.update(malloc_trim=_libc_malloc_trim(), after=0)
    resident = _resident_bytes()
    if _TRIM["malloc_trim"] is None or resident < _TRIM["after"] + TRIM_GROWTH_BYTES:
        return
    if resident > COLLECT_ABOVE_BYTES:
        import gc

        gc.collect()
    _TRIM["malloc_trim"](0)
    _TRIM["after"] = _resident_bytes()
