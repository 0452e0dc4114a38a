#!/usr/bin/env bash
# Build (and optionally install) the edgeattn TensorRT plugin library on a Jetson.
#
# Detects the L4T release (/etc/nv_tegra_release) and JetPack, the SoC (/proc/device-tree/compatible) and so the
# CUDA architecture (53 Nano/TX1, 62 TX2, 72 Xavier, 87 Orin), the TensorRT version (NvInferVersion.h under
# /usr/include/aarch64-linux-gnu) and the CUDA version (nvcc), checks they fit together, runs cmake + make and
# prints where the library is.
#
# Usage: deploy/jetson/build_plugins.sh [--dry-run] [--arch N] [--build-dir DIR] [--install-dir DIR]
#                                       [--trt-root DIR] [--nvcc PATH] [--jobs N] [--kernels-only]
#   --dry-run       print the detected facts and the commands, build nothing (exit 0 if a build would start)
#   --arch N        CUDA compute capability to build for (skips SoC detection), e.g. 87 or "72;87"
#   --build-dir     CMake build directory (default: <repo>/plugins/build, where edgeattn finds the library)
#   --install-dir   also copy the libraries there
#   --trt-root      TensorRT root with include/ and lib/ (default: the JetPack system locations)
#   --nvcc          nvcc to use (default: $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc, then PATH)
#   --jobs N        parallel compile jobs (default: number of CPUs, at most 4: Nano has 4 GB of RAM)
#   --kernels-only  build only libedgeattn_kernels.so (no TensorRT needed)
#
# Environment (for testing on other machines): EDGEATTN_SYSROOT prefixes every system path read
# (/etc/nv_tegra_release, /proc/device-tree/compatible, /usr/include/...); CMAKE names the cmake binary.
#
# Exit status: 0 success, 2 bad usage or an unsupported/undetectable setup (one "error:" line on stderr),
# other values: the failing cmake/make status.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/jetson/common.sh
. "${SCRIPT_DIR}/common.sh"
CMAKE_BIN="${CMAKE:-cmake}"

DRY_RUN=0
ARCH=""
BUILD_DIR="${REPO_ROOT}/plugins/build"
INSTALL_DIR=""
TRT_ROOT=""
NVCC=""
JOBS=""
KERNELS_ONLY=0

while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --arch) [ $# -ge 2 ] || die "--arch needs a value"; ARCH="$2"; shift ;;
        --build-dir) [ $# -ge 2 ] || die "--build-dir needs a value"; BUILD_DIR="$2"; shift ;;
        --install-dir) [ $# -ge 2 ] || die "--install-dir needs a value"; INSTALL_DIR="$2"; shift ;;
        --trt-root) [ $# -ge 2 ] || die "--trt-root needs a value"; TRT_ROOT="$2"; shift ;;
        --nvcc) [ $# -ge 2 ] || die "--nvcc needs a value"; NVCC="$2"; shift ;;
        --jobs) [ $# -ge 2 ] || die "--jobs needs a value"; JOBS="$2"; shift ;;
        --kernels-only) KERNELS_ONLY=1 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option: $1 (see --help)" ;;
    esac
    shift
done

# ---- L4T / JetPack ----------------------------------------------------------------------------------------------
L4T=""
JETPACK=""
RELEASE_FILE="${SYSROOT}/etc/nv_tegra_release"
read_l4t_release "${RELEASE_FILE}"
if [ -n "${L4T_MAJOR}" ] && [ -n "${L4T_REVISION}" ]; then
    L4T="${L4T_MAJOR}.${L4T_REVISION}"
    case "${L4T}" in
        *.*.*) ;;
        *) L4T="${L4T}.0" ;;
    esac
fi
case "${L4T}" in
    32.6.1) JETPACK="4.6" ;;
    32.7.1) JETPACK="4.6.1" ;;
    32.7.2) JETPACK="4.6.2" ;;
    32.7.3) JETPACK="4.6.3" ;;
    32.7.4) JETPACK="4.6.4" ;;
    32.7.5) JETPACK="4.6.5" ;;
    32.7.6) JETPACK="4.6.6" ;;
    35.1.0) JETPACK="5.0.2" ;;
    35.2.1) JETPACK="5.1" ;;
    35.3.1) JETPACK="5.1.1" ;;
    35.4.1) JETPACK="5.1.2" ;;
    35.5.0) JETPACK="5.1.3" ;;
    35.6.0) JETPACK="5.1.4" ;;
    35.6.1|35.6.2|35.6.3) JETPACK="5.1.5" ;;
    35.6.4) JETPACK="5.1.6" ;;
    36.3.0) JETPACK="6.0" ;;
    36.4.0|36.4.2) JETPACK="6.1" ;;
    36.4.3) JETPACK="6.2" ;;
    36.4.4|36.4.7) JETPACK="6.2.1" ;;
    36.5.0) JETPACK="6.2.2" ;;
    "") ;;
    *) JETPACK="unknown" ;;
esac

# ---- SoC -> CUDA architecture -------------------------------------------------------------------------------------
SOC=""
COMPATIBLE_FILE="${SYSROOT}/proc/device-tree/compatible"
if [ -r "${COMPATIBLE_FILE}" ]; then
    compatible="$(tr '\0' ' ' < "${COMPATIBLE_FILE}")"
    for candidate in tegra234 tegra194 tegra186 tegra210; do
        case "${compatible}" in
            *"nvidia,${candidate}"*) SOC="${candidate}"; break ;;
        esac
    done
fi
ARCH_SOURCE="--arch"
if [ -z "${ARCH}" ]; then
    case "${SOC}" in
        tegra210) ARCH=53 ;;  # Jetson Nano / TX1 (Maxwell)
        tegra186) ARCH=62 ;;  # TX2 (Pascal)
        tegra194) ARCH=72 ;;  # AGX Xavier / Xavier NX (Volta)
        tegra234) ARCH=87 ;;  # AGX Orin / Orin NX / Orin Nano (Ampere)
        *)
            if [ -n "${L4T}" ]; then
                die "L4T ${L4T} found but the SoC is not in ${COMPATIBLE_FILE}; pass --arch (53 Nano, 72 Xavier, 87 Orin)"
            fi
            die "not a Jetson (no ${RELEASE_FILE}); pass --arch N to build for compute capability N"
            ;;
    esac
    ARCH_SOURCE="${SOC}"
fi
case "${ARCH}" in
    *[!0-9\;]*|"") die "--arch must be compute capabilities like 87 or \"72;87\", got '${ARCH}'" ;;
esac

# ---- CUDA -------------------------------------------------------------------------------------------------------
if [ -z "${NVCC}" ]; then
    for candidate in "${CUDA_HOME:+${CUDA_HOME}/bin/nvcc}" "${SYSROOT}/usr/local/cuda/bin/nvcc"; do
        if [ -n "${candidate}" ] && [ -x "${candidate}" ]; then
            NVCC="${candidate}"
            break
        fi
    done
    if [ -z "${NVCC}" ]; then
        NVCC="$(command -v nvcc || true)"
    fi
fi
[ -n "${NVCC}" ] && [ -x "${NVCC}" ] || die "nvcc not found (install the CUDA toolkit of your JetPack, or pass --nvcc)"
CUDA_VERSION="$("${NVCC}" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1)"
[ -n "${CUDA_VERSION}" ] || die "cannot read the CUDA version from '${NVCC} --version'"
CUDA_MAJOR="${CUDA_VERSION%%.*}"
CUDA_MINOR="${CUDA_VERSION#*.}"

# CUDA 13 dropped offline compilation for compute capability < 7.5; sm_87 needs CUDA >= 11.4.
IFS=';' read -r -a ARCH_LIST <<< "${ARCH}"
for arch in "${ARCH_LIST[@]}"; do
    if [ "${arch}" -lt 75 ] && [ "${CUDA_MAJOR}" -ge 13 ]; then
        die "CUDA ${CUDA_VERSION} cannot compile for sm_${arch} (CUDA 13 dropped compute capability < 7.5); use the CUDA of the JetPack"
    fi
    if [ "${arch}" -eq 87 ] && { [ "${CUDA_MAJOR}" -lt 11 ] || { [ "${CUDA_MAJOR}" -eq 11 ] && [ "${CUDA_MINOR}" -lt 4 ]; }; }; then
        die "CUDA ${CUDA_VERSION} cannot compile for sm_87 (Orin needs CUDA >= 11.4)"
    fi
done

# ---- TensorRT ---------------------------------------------------------------------------------------------------
TRT_VERSION=""
TRT_INCLUDE=""
TRT_INTERFACE=""
if [ "${KERNELS_ONLY}" -eq 0 ]; then
    if [ -n "${TRT_ROOT}" ]; then
        candidates="${TRT_ROOT}/include"
    else
        candidates="${SYSROOT}/usr/include/aarch64-linux-gnu ${SYSROOT}/usr/include ${SYSROOT}/usr/local/include"
    fi
    for dir in ${candidates}; do
        if [ -r "${dir}/NvInferVersion.h" ]; then
            TRT_INCLUDE="${dir}"
            break
        fi
    done
    [ -n "${TRT_INCLUDE}" ] || die "TensorRT headers (NvInferVersion.h) not found in ${candidates}; install the TensorRT dev package (e.g. apt install libnvinfer-dev), pass --trt-root, or use --kernels-only"
    trt_define() {
        # NV_TENSORRT_MAJOR is a number, or (TensorRT >= 10.x) a name such as TRT_MAJOR_ENTERPRISE
        local value
        value="$(sed -n "s/^#define $1 \([A-Za-z0-9_]*\).*/\1/p" "${TRT_INCLUDE}/NvInferVersion.h" | head -n 1)"
        case "${value}" in
            [A-Za-z_]*) value="$(sed -n "s/^#define ${value} \([0-9]*\).*/\1/p" "${TRT_INCLUDE}/NvInferVersion.h" | head -n 1)" ;;
        esac
        printf '%s' "${value}"
    }
    TRT_MAJOR="$(trt_define NV_TENSORRT_MAJOR)"
    TRT_MINOR="$(trt_define NV_TENSORRT_MINOR)"
    TRT_PATCH="$(trt_define NV_TENSORRT_PATCH)"
    [ -n "${TRT_MAJOR}" ] && [ -n "${TRT_MINOR}" ] || die "cannot read the TensorRT version from ${TRT_INCLUDE}/NvInferVersion.h"
    TRT_VERSION="${TRT_MAJOR}.${TRT_MINOR}.${TRT_PATCH:-0}"
    [ "${TRT_MAJOR}" -ge 8 ] || die "TensorRT ${TRT_VERSION} is too old: the edgeattn plugins need TensorRT >= 8.0 (JetPack >= 4.6)"
    if [ "${TRT_MAJOR}" -ge 10 ]; then
        TRT_INTERFACE="IPluginV3"
    else
        TRT_INTERFACE="IPluginV2DynamicExt"
    fi
fi

if [ -z "${JOBS}" ]; then
    JOBS="$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)"
    [ "${JOBS}" -le 4 ] || JOBS=4
fi

CMAKE_ARGS=(-S "${REPO_ROOT}/plugins" -B "${BUILD_DIR}" -DCMAKE_BUILD_TYPE=Release
            "-DEDGEATTN_CUDA_ARCHS=${ARCH}" "-DCMAKE_CUDA_COMPILER=${NVCC}")
if [ "${KERNELS_ONLY}" -eq 1 ]; then
    CMAKE_ARGS+=(-DEDGEATTN_KERNELS_ONLY=ON)
elif [ -n "${TRT_ROOT}" ]; then
    CMAKE_ARGS+=("-DEDGEATTN_TENSORRT_ROOT=${TRT_ROOT}")
else
    # Debian multiarch layout: /usr/include/aarch64-linux-gnu -> /usr/lib/aarch64-linux-gnu
    TRT_LIBRARY_DIR="$(printf '%s\n' "${TRT_INCLUDE}" | sed 's#/include\(/[^/]*-linux-gnu\)\{0,1\}/*$#/lib\1#')"
    CMAKE_ARGS+=("-DTENSORRT_INCLUDE_DIR=${TRT_INCLUDE}" "-DTENSORRT_LIBRARY_DIR=${TRT_LIBRARY_DIR}")
fi
# `cmake --build -j` needs CMake 3.12; JetPack 4.6 has 3.10, so pass -j to make.
BUILD_ARGS=(--build "${BUILD_DIR}" -- "-j${JOBS}")

echo "l4t=${L4T:-none}"
echo "jetpack=${JETPACK:-none}"
echo "soc=${SOC:-none}"
echo "cuda_arch=${ARCH} (from ${ARCH_SOURCE})"
echo "cuda=${CUDA_VERSION} (${NVCC})"
if [ "${KERNELS_ONLY}" -eq 1 ]; then
    echo "tensorrt=skipped (--kernels-only)"
else
    echo "tensorrt=${TRT_VERSION} (${TRT_INCLUDE})"
    echo "plugin_interface=${TRT_INTERFACE}"
fi
echo "build_dir=${BUILD_DIR}"
echo "+ ${CMAKE_BIN} ${CMAKE_ARGS[*]}"
echo "+ ${CMAKE_BIN} ${BUILD_ARGS[*]}"
if [ "${DRY_RUN}" -eq 1 ]; then
    echo "dry run: nothing built"
    exit 0
fi

command -v "${CMAKE_BIN}" >/dev/null 2>&1 || die "cmake not found (apt install cmake; JetPack 4.6's 3.10 is enough)"
"${CMAKE_BIN}" "${CMAKE_ARGS[@]}"
"${CMAKE_BIN}" "${BUILD_ARGS[@]}"

LIBRARIES=()
for name in libedgeattn_plugins.so libedgeattn_plugins_dynamic.so libedgeattn_kernels.so; do
    if [ -e "${BUILD_DIR}/${name}" ]; then
        LIBRARIES+=("${BUILD_DIR}/${name}")
    fi
done
if [ "${KERNELS_ONLY}" -eq 0 ] && [ ! -e "${BUILD_DIR}/libedgeattn_plugins.so" ]; then
    die "the build finished without ${BUILD_DIR}/libedgeattn_plugins.so (was libnvinfer found? see the cmake output)"
fi
if [ -n "${INSTALL_DIR}" ]; then
    mkdir -p "${INSTALL_DIR}"
    for library in "${LIBRARIES[@]}"; do
        cp -L "${library}" "${INSTALL_DIR}/$(basename "${library}")"
    done
    echo "installed into ${INSTALL_DIR}"
    LIB_DIR="${INSTALL_DIR}"
else
    LIB_DIR="${BUILD_DIR}"
fi
for library in "${LIBRARIES[@]}"; do
    echo "library=${LIB_DIR}/$(basename "${library}")"
done
if [ "${KERNELS_ONLY}" -eq 0 ]; then
    echo "use it: export EDGEATTN_PLUGIN_LIB=${LIB_DIR}/libedgeattn_plugins.so"
    echo "        trtexec --onnx=model.onnx --staticPlugins=${LIB_DIR}/libedgeattn_plugins.so   (TensorRT >= 8.6; --plugins on 8.x)"
fi
