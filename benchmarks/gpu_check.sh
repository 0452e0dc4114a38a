#!/usr/bin/env bash
# Issue 15's device session as one command, sized for a short GPU lease: the kernels library, the GPU tests,
# compute-sanitizer (memcheck, racecheck, synccheck, initcheck) over them, then benchmarks/kernels_gpu.py alone on
# the GPU, then benchmarks/models_gpu.py (whole models in PyTorch, with and without the kernels). Every step has its
# own time limit, so the script ends (and bundles its logs) before the lease's limit.
#
#   benchmarks/gpu_check.sh OUT_DIR [LIBRARY]
#
# LIBRARY: a libedgeattn_kernels.so built elsewhere for this GPU's arch (e.g. with the same nvcc for "87;90");
# without one, or when it does not load, the kernels are built here with CMake for the native arch.
# Needs python3 with a CUDA build of torch, pytest, nvcc + cmake (for a build), compute-sanitizer (optional).
# OUT_DIR receives: gpu_tests.xml (JUnit), kernels_gpu_{float16_core,float16,float32}.json, models_gpu.json and
# logs.tar.gz (every log); the last lines printed are a summary.
# GPU_CHECK_SANITIZERS picks the compute-sanitizer runs ("" for none), GPU_CHECK_TEST_K the tests (pytest -k),
# GPU_CHECK_BENCH_RUNS the benchmark runs (float16_core float16 float32); GPU_CHECK_TESTS=0 skips the tests and the
# sanitizers, GPU_CHECK_BENCH=0 the benchmark, GPU_CHECK_MODELS=0 the model benchmark.
# Budgets (seconds) can be changed through GPU_CHECK_TESTS_S, GPU_CHECK_SANITIZER_S, GPU_CHECK_BENCH_CORE_S,
# GPU_CHECK_BENCH_FP16_S, GPU_CHECK_BENCH_FP32_S and GPU_CHECK_MODELS_S; GPU_CHECK_BENCH_ARGS replaces the
# benchmark's iteration arguments, GPU_CHECK_MODELS_ARGS the model benchmark's case and iteration arguments.
set -u
OUT=${1:?usage: benchmarks/gpu_check.sh OUT_DIR [LIBRARY]}
LIBRARY=${2:-}
PY=${PYTHON:-python3}
TESTS=tests/plugins/test_plugins_kernels_gpu.py
# racecheck/synccheck/initcheck: every kernel path and edge case at small sizes, and the multi-chunk windows of 384
SUBSET="(edge_cases or 224 or model_windows or path_setting or no_cuda_error) and not 512"
TESTS_S=${GPU_CHECK_TESTS_S:-150}
SANITIZER_S=${GPU_CHECK_SANITIZER_S:-150}
BENCH_CORE_S=${GPU_CHECK_BENCH_CORE_S:-25}
BENCH_FP16_S=${GPU_CHECK_BENCH_FP16_S:-120}
BENCH_FP32_S=${GPU_CHECK_BENCH_FP32_S:-60}
BENCH_ARGS=${GPU_CHECK_BENCH_ARGS:---warmup 3 --iters 10 --repeats 3}
MODELS_S=${GPU_CHECK_MODELS_S:-150}
# 224 first (the paper's Table I is at 224), batch 64 before 256; the JSON is rewritten after every case
MODELS_ARGS=${GPU_CHECK_MODELS_ARGS:---resolutions 224 384 512 --batches 64 256 --warmup 2 --iters 5 --repeats 3}
RUN_MODELS=${GPU_CHECK_MODELS:-1}
# tool:selection pairs (selections: subset, rest, soft, large, large_other; see below). memcheck covers the whole
# file in two processes. No initcheck: with the kernel-name filter it cannot see torch's (unfiltered) kernels write
# the inputs and reports every tensor read; unfiltered it is far too slow for a lease. The tests poison outputs
# (NaN) and workspaces (0xFF) instead, which catches unwritten outputs and reads of unwritten workspace.
SANITIZER_CHECKS=${GPU_CHECK_SANITIZERS-memcheck:subset memcheck:rest racecheck:subset synccheck:subset}
TEST_K=${GPU_CHECK_TEST_K:-}
BENCH_RUNS=${GPU_CHECK_BENCH_RUNS:-float16_core float16 float32}
RUN_BENCH=${GPU_CHECK_BENCH:-1}
RUN_TESTS=${GPU_CHECK_TESTS:-1}
selection_for() {  # the pytest -k expression of a sanitizer run's selection name
    case $1 in
        subset) echo "$SUBSET" ;;
        rest) echo "not ($SUBSET)" ;;
        soft) echo "soft_kernel" ;;
        large) echo "not ($SUBSET) and (model_windows or soft_kernel)" ;;
        large_other) echo "not ($SUBSET) and not (model_windows or soft_kernel)" ;;
        *) return 1 ;;
    esac
}
for check in $SANITIZER_CHECKS; do  # refuse a mistyped run before anything starts
    case ${check%%:*} in
        memcheck | racecheck | synccheck | initcheck) ;;
        *) echo "gpu_check.sh: unknown compute-sanitizer tool in '$check'" >&2; exit 2 ;;
    esac
    selection_for "${check#*:}" >/dev/null || {
        echo "gpu_check.sh: unknown selection in '$check' (subset, rest, soft, large, large_other)" >&2; exit 2; }
done
if [ -n "$LIBRARY" ] && [ -d "$(dirname "$LIBRARY")" ]; then  # absolute before the cd below
    LIBRARY=$(cd "$(dirname "$LIBRARY")" && pwd)/$(basename "$LIBRARY")
fi
mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
LOGS=$OUT/logs
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s)
say() { echo "== +$(( $(date +%s) - T0 ))s $*"; }
bundle() { tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs 2>/dev/null && rm -rf "$LOGS"; }
trap bundle EXIT

say "device"
QUERY=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,memory.total
nvidia-smi --format=csv --query-gpu="$QUERY" 2>&1 | tee "$LOGS/nvidia_smi_before.csv"
"$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', \
torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))" 2>&1 | tee "$LOGS/torch.txt"
nvcc --version 2>&1 | tail -2
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
[ -n "$SANITIZER" ] && "$SANITIZER" --version 2>&1 | tail -1

say "kernels library"
loads() {
    # torch first, as in the tests and the benchmark: its CUDA runtime then satisfies the library's libcudart.so.13
    "$PY" -c "import sys, torch; from edgeattn.plugins.kernels_abi import KernelsLibrary; \
print(KernelsLibrary(sys.argv[1]).build_info())" "$1"
}
if [ -z "$LIBRARY" ] || ! loads "$LIBRARY" >"$LOGS/library.txt" 2>&1; then
    [ -n "$LIBRARY" ] && { echo "the given library does not load:"; cat "$LOGS/library.txt"; }
    BUILD=/tmp/edgeattn-gpu-check-build
    cmake -S plugins -B "$BUILD" -DEDGEATTN_CUDA_ARCHS=native -DEDGEATTN_KERNELS_ONLY=ON >"$LOGS/build.log" 2>&1 &&
        cmake --build "$BUILD" -- -j"$(nproc)" >>"$LOGS/build.log" 2>&1 || { tail -30 "$LOGS/build.log"; exit 1; }
    LIBRARY=$BUILD/libedgeattn_kernels.so
    loads "$LIBRARY" >"$LOGS/library.txt" 2>&1 || { cat "$LOGS/library.txt"; exit 1; }
fi
export EDGEATTN_KERNELS_LIB=$LIBRARY
echo "$LIBRARY: $(cat "$LOGS/library.txt")"
command -v cuobjdump >/dev/null && cuobjdump --list-elf "$LIBRARY" >"$LOGS/library_elf.txt" 2>&1

[ "$RUN_TESTS" = 1 ] && say "GPU tests and compute-sanitizer side by side (correctness only: nothing is timed here)"
TESTS_PID=""
if [ "$RUN_TESTS" = 1 ]; then
    timeout "$TESTS_S" "$PY" -m pytest -m gpu "$TESTS" ${TEST_K:+-k "$TEST_K"} -p no:cacheprovider -v -rfEs \
        --junitxml="$OUT/gpu_tests.xml" >"$LOGS/gpu_tests.log" 2>&1 &
    TESTS_PID=$!
fi
SANITIZER_PIDS=""
if [ -n "$SANITIZER" ] && [ "$RUN_TESTS" = 1 ]; then
    FILTER=""
    "$SANITIZER" --help 2>&1 | grep -q -- "--kernel-name" && FILTER="--kernel-name kns=edgeattn"
    for check in $SANITIZER_CHECKS; do
        tool=${check%%:*}
        selection=$(selection_for "${check#*:}")
        # one cudaMalloc per tensor, so memcheck sees each tensor's own bounds (not the caching allocator's blocks)
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "$SANITIZER_S" "$SANITIZER" --tool "$tool" $FILTER --error-exitcode 9 \
            --print-limit 20 "$PY" -m pytest -m gpu "$TESTS" -k "$selection" -p no:cacheprovider -v \
            >"$LOGS/sanitizer_${tool}_${check#*:}.log" 2>&1 &
        SANITIZER_PIDS="$SANITIZER_PIDS $!:${tool}_${check#*:}"
    done
fi
[ -n "$TESTS_PID" ] && { wait "$TESTS_PID"; echo "pytest exit status $?" >>"$LOGS/gpu_tests.log"; }
for entry in $SANITIZER_PIDS; do
    wait "${entry%%:*}"; echo "compute-sanitizer exit status $?" >>"$LOGS/sanitizer_${entry#*:}.log"
done

[ "$RUN_BENCH" = 1 ] && say "benchmark (alone on the GPU)"
# name, time budget, arguments: issue 5's ELFATT-core comparison first (it is short), then FP16 with 512 first (issue
# 12's blockify target is at 512, batch 64), then FP32; a run stopped by its budget keeps what it measured (the JSON is
# rewritten after every stage)
OTHER_OPS=blockify_attention,efficient_attention,lite_mla,lite_mla_qt,soft_kernel_attention
for run in "float16_core|$BENCH_CORE_S|--dtypes float16 --ops elfatt_core" \
           "float16|$BENCH_FP16_S|--dtypes float16 --ops $OTHER_OPS --resolutions 512,224,384" \
           "float32|$BENCH_FP32_S|--dtypes float32 --resolutions 512,224,384"; do
    [ "$RUN_BENCH" = 1 ] || break
    IFS='|' read -r name budget arguments <<<"$run"
    case " $BENCH_RUNS " in *" $name "*) ;; *) continue ;; esac
    timeout "$budget" "$PY" benchmarks/kernels_gpu.py --library "$LIBRARY" $arguments $BENCH_ARGS \
        --json "$OUT/kernels_gpu_$name.json" >"$LOGS/bench_$name.log" 2>&1
    echo "kernels_gpu.py exit status $?" >>"$LOGS/bench_$name.log"
done
if [ "$RUN_MODELS" = 1 ]; then
    say "model benchmark (alone on the GPU)"
    timeout "$MODELS_S" "$PY" benchmarks/models_gpu.py --library "$LIBRARY" $MODELS_ARGS \
        --json "$OUT/models_gpu.json" >"$LOGS/models_gpu.log" 2>&1
    echo "models_gpu.py exit status $?" >>"$LOGS/models_gpu.log"
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv \
    >"$LOGS/nvidia_smi_after.csv" 2>&1

say "summary"
[ -f "$LOGS/gpu_tests.log" ] && grep -E "^(FAILED|ERROR)|[0-9]+ (passed|failed|skipped|errors?)|exit status" \
    "$LOGS/gpu_tests.log" | tail -25
for log in "$LOGS"/sanitizer_*.log; do
    [ -f "$log" ] || continue
    tool=$(basename "$log" .log); tool=${tool#sanitizer_}
    echo "-- $tool: $(grep -cE '::.* (PASSED|FAILED|ERROR|SKIPPED)' "$log") tests ran;" \
        "$(grep -E '[0-9]+ (passed|failed)|SUMMARY|exit status' "$log" | tr '\n' ' ')"
    grep -m 5 -E "^========= (Invalid|Race|Barrier|Uninitialized|Error|Program hit|.*[Hh]azard)" "$log"
done
if [ "$RUN_BENCH" = 1 ]; then
    [ -f "$OUT/kernels_gpu_float16_core.json" ] && "$PY" benchmarks/kernels_gpu_summary.py \
        "$OUT/kernels_gpu_float16_core.json" 2>&1
    [ -f "$OUT/kernels_gpu_float16.json" ] && "$PY" benchmarks/kernels_gpu_summary.py --batch 64 \
        "$OUT/kernels_gpu_float16.json" 2>&1
    [ -f "$OUT/kernels_gpu_float32.json" ] && "$PY" benchmarks/kernels_gpu_summary.py --no-cases \
        "$OUT/kernels_gpu_float32.json" 2>&1
fi
if [ "$RUN_MODELS" = 1 ]; then
    tail -3 "$LOGS/models_gpu.log"
    [ -f "$OUT/models_gpu.json" ] && "$PY" -c "import json, sys
for r in json.load(open(sys.argv[1]))['results']:
    print('{model:>6} {impl:<10} {resolution} B={batch:<4}'.format(**r), r.get('error') or '{:.0f} img/s'.format(
        r['img_per_s']), '(paper {})'.format(r['paper_img_per_s']) if r.get('paper_img_per_s') else '')
" "$OUT/models_gpu.json" 2>&1
fi
say "done"
