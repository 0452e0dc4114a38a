#!/usr/bin/env bash
# Bring up edgeattn on a Jetson in one command: Python environment, plugin library, board-side packages, doctor.
#
# One recipe per JetPack line, detected from /etc/nv_tegra_release (L4T R32.6+ = 4.6, R34/R35 = 5, R36 = 6):
#   JetPack 4.6 (Jetson Nano, Ubuntu 18.04): the system python3 is 3.6 and its TensorRT bindings are for 3.6 only,
#       which edgeattn cannot use; edgeattn runs on the distribution's python3.8 (apt package python3.8 and
#       python3.8-venv, installed when missing) in a plain virtual environment, and builds and benchmarks through
#       trtexec (/usr/src/tensorrt/bin/trtexec), which `edgeattn build/bench --backend auto` pick by themselves.
#   JetPack 5 (Ubuntu 20.04, Python 3.8) and JetPack 6 (Ubuntu 22.04, Python 3.10): a virtual environment of the
#       system python3 with --system-site-packages, so the TensorRT Python bindings JetPack installs stay visible.
# Then it builds the plugin library (deploy/jetson/build_plugins.sh, into plugins/build where edgeattn finds it),
# installs this checkout with the board-side extras (pip install -e '.[board]', wheels preferred, constrained by
# deploy/jetson/constraints.txt: numpy < 2, which JetPack's TensorRT bindings are built for) and ends with
# `edgeattn doctor`.
# Running it again is harmless: an existing environment of the right Python is reused, the plugin build is
# incremental and pip leaves satisfied requirements alone. torch is not installed (export runs anywhere).
#
# Usage: deploy/jetson/setup.sh [--dry-run] [--venv DIR] [--python PATH] [--jetpack 4.6|5|6] [--skip-plugins]
#   --dry-run       print the detected facts and every command, run nothing (exit 0 if setup would start)
#   --venv DIR      the virtual environment (default: <repo>/.venv)
#   --python PATH   interpreter to build the environment from (default: python3.8 on JetPack 4.6, else python3)
#   --jetpack LINE  skip detection and use this JetPack line (4.6, 5 or 6)
#   --skip-plugins  do not build the plugin library (e.g. it is built already, or elsewhere)
#
# Environment (for testing on other machines): EDGEATTN_SYSROOT prefixes /etc/nv_tegra_release (and is passed on
# to build_plugins.sh); BUILD_PLUGINS names the plugin build script.
#
# Exit status: 0 success, 2 bad usage or an unsupported/undetectable board (one "error:" line on stderr), other
# values: the status of the command that failed.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/jetson/common.sh
. "${SCRIPT_DIR}/common.sh"
BUILD_PLUGINS="${BUILD_PLUGINS:-${SCRIPT_DIR}/build_plugins.sh}"

DRY_RUN=0
VENV="${REPO_ROOT}/.venv"
PYTHON=""
LINE=""
SKIP_PLUGINS=0

while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --venv) [ $# -ge 2 ] && [ -n "$2" ] || die "--venv needs a directory"; VENV="$2"; shift ;;
        --python) [ $# -ge 2 ] && [ -n "$2" ] || die "--python needs an interpreter"; PYTHON="$2"; shift ;;
        --jetpack) [ $# -ge 2 ] || die "--jetpack needs a value (4.6, 5 or 6)"; LINE="$2"; shift ;;
        --skip-plugins) SKIP_PLUGINS=1 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option: $1 (see --help)" ;;
    esac
    shift
done

# ---- JetPack line ------------------------------------------------------------------------------------------------
L4T=""
RELEASE_FILE="${SYSROOT}/etc/nv_tegra_release"
if [ -z "${LINE}" ]; then
    [ -r "${RELEASE_FILE}" ] || die "not a Jetson (no ${RELEASE_FILE}); pass --jetpack 4.6, 5 or 6 to choose the recipe"
    read_l4t_release "${RELEASE_FILE}"
    [ -n "${L4T_MAJOR}" ] && [ -n "${L4T_REVISION}" ] || die "cannot read the L4T release from ${RELEASE_FILE}: '${L4T_RELEASE_LINE}'"
    L4T="${L4T_MAJOR}.${L4T_REVISION}"
    minor="${L4T_REVISION%%.*}"
    case "${L4T_MAJOR}" in
        32)
            # R32.6.1 is JetPack 4.6, the first with TensorRT 8 (older L4T 32 releases ship TensorRT 7)
            [ "${minor}" -ge 6 ] || die "L4T ${L4T} is older than JetPack 4.6 (TensorRT 7); the edgeattn plugins need TensorRT >= 8: upgrade to JetPack 4.6.x"
            LINE="4.6" ;;
        34|35) LINE="5" ;;
        36) LINE="6" ;;
        *) die "L4T ${L4T} is not a JetPack line this script knows (4.6: R32.6+, 5: R34/R35, 6: R36); pass --jetpack to force one" ;;
    esac
fi
case "${LINE}" in
    4.6|4.6.*) LINE="4.6"; PY_VERSION="3.8"; DEFAULT_PYTHON="python3.8"; SYSTEM_SITE=0; BACKEND="trtexec" ;;
    5|5.*) LINE="5"; PY_VERSION="3.8"; DEFAULT_PYTHON="python3"; SYSTEM_SITE=1; BACKEND="tensorrt (system bindings)" ;;
    6|6.*) LINE="6"; PY_VERSION="3.10"; DEFAULT_PYTHON="python3"; SYSTEM_SITE=1; BACKEND="tensorrt (system bindings)" ;;
    *) die "--jetpack must be 4.6, 5 or 6, got '${LINE}'" ;;
esac
PYTHON="${PYTHON:-${DEFAULT_PYTHON}}"

python_version() {
    "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

# ---- what to run -------------------------------------------------------------------------------------------------
STEPS=()   # one shell-quoted command per entry, run in order
step() {
    local quoted
    printf -v quoted '%q ' "$@"
    STEPS+=("${quoted% }")
}

VENV_PY="${VENV}/bin/python"
NOTE_VENV=""
if [ -x "${VENV_PY}" ]; then
    have="$(python_version "${VENV_PY}")"
    [ "${have}" = "${PY_VERSION}" ] || die "${VENV} holds Python ${have:-?}, JetPack ${LINE} needs ${PY_VERSION}: remove it or pass --venv DIR"
    if [ "${SYSTEM_SITE}" -eq 1 ] && ! grep -qi '^include-system-site-packages *= *true' "${VENV}/pyvenv.cfg" 2>/dev/null; then
        die "${VENV} was made without --system-site-packages, so JetPack's TensorRT bindings are invisible in it: remove it or pass --venv DIR"
    fi
    NOTE_VENV="reusing ${VENV}"
else
    if ! command -v "${PYTHON}" >/dev/null 2>&1; then
        [ "${LINE}" = "4.6" ] && [ "${PYTHON}" = "python3.8" ] || die "${PYTHON} not found"
        # Ubuntu 18.04's python3.8 package (bionic-updates); python3.8-venv brings ensurepip for `-m venv`
        SUDO=()
        [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
        step "${SUDO[@]}" apt-get install -y python3.8 python3.8-venv python3.8-dev
    else
        have="$(python_version "${PYTHON}")"
        [ "${have}" = "${PY_VERSION}" ] || die "${PYTHON} is Python ${have:-?}; JetPack ${LINE} needs ${PY_VERSION} (pass --python)"
    fi
    if [ "${SYSTEM_SITE}" -eq 1 ]; then
        step "${PYTHON}" -m venv --system-site-packages "${VENV}"
    else
        step "${PYTHON}" -m venv "${VENV}"
    fi
fi
# JetPack 4.6's python3.8-venv seeds a pip too old for manylinux2014 wheels
step "${VENV_PY}" -m pip install --upgrade pip
if [ "${SKIP_PLUGINS}" -eq 0 ]; then
    step "${BUILD_PLUGINS}"
fi
CONSTRAINTS="${SCRIPT_DIR}/constraints.txt"
step "${VENV_PY}" -m pip install --prefer-binary --constraint "${CONSTRAINTS}" --editable "${REPO_ROOT}[board]"
step "${VENV}/bin/edgeattn" doctor

echo "l4t=${L4T:-none}"
echo "jetpack=${LINE}"
echo "python=${PYTHON} (${PY_VERSION})"
echo "venv=${VENV}$([ "${SYSTEM_SITE}" -eq 1 ] && echo " (--system-site-packages)")${NOTE_VENV:+ [${NOTE_VENV}]}"
echo "backend=${BACKEND}"
for command in "${STEPS[@]}"; do
    echo "+ ${command}"
done
if [ "${DRY_RUN}" -eq 1 ]; then
    echo "dry run: nothing run"
    exit 0
fi

mkdir -p "$(dirname "${VENV}")"
[ -z "${SYSROOT}" ] || export EDGEATTN_SYSROOT="${SYSROOT}"
for command in "${STEPS[@]}"; do
    echo "setup.sh: ${command}" >&2
    eval "${command}"  # every word was quoted with printf %q
done
echo "ready: . ${VENV}/bin/activate   (edgeattn doctor above shows what this board can do)"
