#!/usr/bin/env bash
# Puts Debian's CUDA 11.8 compiler (non-free `nvidia-cuda-toolkit` 11.8.89, the nvcc line of the JetPack 5 era:
# JetPack 5 ships 11.4) under PREFIX without installing the toolkit package, and prints its nvcc's path.
#
#   .ci/install_cuda_11_8.sh [PREFIX]      PREFIX defaults to $EDGEATTN_CUDA_11_8_PREFIX, else /opt/edgeattn-cuda-11.8
#
# Why not `apt-get install nvidia-cuda-toolkit`: it pulls 1.6 GB (5.5 GB installed), including libcuda1 and the
# driver's alternatives from contrib, which would put a CUDA driver library on a machine without a GPU and change
# what the "no GPU" tests see. Only four packages hold what compiling needs (nvcc, cicc, ptxas, fatbinary, the
# headers, cudart): they are downloaded with `apt-get download` (867 MB; about 15 s on the CI network) and the
# needed paths extracted (about 2 min of one core for the 774 MB nvidia-cuda-dev archive; 0.3 GB on disk). The
# compiler needs a host g++ <= 11 (CUDA 11.8's host_config.h refuses gcc 12, bookworm's default): g++-11 comes from
# Debian main (apt-get install, about 45 s, 40 MB). Debian's own nvcc.profile names absolute /usr paths, so a
# PREFIX-relative one replaces it. Idempotent: an existing working install is reused at no cost.
# Needs root, apt and Debian 12 (bookworm) sources; the contrib/non-free components are enabled when the package
# is not visible.
set -euo pipefail

prefix="${1:-${EDGEATTN_CUDA_11_8_PREFIX:-/opt/edgeattn-cuda-11.8}}"
bin="$prefix/usr/lib/nvidia-cuda-toolkit/bin"
nvcc="$bin/nvcc"

fail() {
  echo "install_cuda_11_8.sh: $1" >&2
  exit 1
}

works() {
  [ -x "$nvcc" ] && "$nvcc" --version 2>/dev/null | grep -q "release 11.8" && command -v g++-11 >/dev/null 2>&1
}

if works; then
  echo "$nvcc"
  exit 0
fi

[ "$(id -u)" = 0 ] || fail "needs root (apt-get) to install CUDA 11.8 into $prefix"
command -v apt-get >/dev/null 2>&1 || fail "needs apt-get (Debian 12) to fetch nvidia-cuda-toolkit 11.8"

candidate() {
  apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}'
}

case "$(candidate nvidia-cuda-toolkit)" in
  11.8.*) ;;
  *)
    cat >/etc/apt/sources.list.d/edgeattn-debian-nonfree.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get update -q >&2 || fail "apt-get update failed"
    ;;
esac
version=$(candidate nvidia-cuda-toolkit)
case "$version" in
  11.8.*) ;;
  *) fail "apt offers nvidia-cuda-toolkit '$version', not 11.8 (this script knows Debian 12's package)" ;;
esac

command -v g++-11 >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends g++-11 >&2 ||
  fail "apt-get install g++-11 failed"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -q nvidia-cuda-toolkit nvidia-cuda-dev libnvvm4 libcudart11.0 >&2) ||
  fail "apt-get download of the CUDA 11.8 packages failed"

staging="$prefix.partial"
rm -rf "$staging"
mkdir -p "$staging"
for deb in "$work"/*.deb; do
  # Compiler, headers and cudart only: nvidia-cuda-dev's other 2.5 GB are static cuBLAS/cuFFT/NPP libraries.
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$staging" --wildcards \
    './usr/bin/*' './usr/include/*' './usr/lib/nvidia-cuda-toolkit/*' './usr/lib/cuda/*' \
    './usr/lib/x86_64-linux-gnu/libcudart*' './usr/lib/x86_64-linux-gnu/libcudadevrt.a' \
    './usr/lib/x86_64-linux-gnu/libculibos.a' './usr/lib/x86_64-linux-gnu/libnvvm*' 2>/dev/null || true
done
[ -x "$staging/usr/lib/nvidia-cuda-toolkit/bin/nvcc" ] || fail "the downloaded packages hold no nvcc"
rm -f "$staging/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile"
cat >"$staging/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile" <<'EOF'
# Debian's /etc/nvcc.profile with paths relative to this directory (the tree lives under a prefix, not /usr). TOP
# and a libdevice path ending in nvvm/libdevice are how CMake finds a scattered toolkit's root and library root.
TOP = $(_HERE_)/../../..
NVVMIR_LIBRARY_DIR = $(TOP)/lib/cuda/nvvm/libdevice
PATH		+= $(_HERE_):$(TOP)/bin:
INCLUDES	+= "-I$(TOP)/include" $(_SPACE_)
LIBRARIES	=+ $(_SPACE_) "-L$(TOP)/lib/x86_64-linux-gnu"
EOF
rm -rf "$prefix"
mv "$staging" "$prefix"
works || fail "$nvcc does not report CUDA 11.8 after the install"
echo "$nvcc"
