# Sourced by the deploy/jetson scripts (not run): their error line, their --help text and the board's L4T release.
# The sourcing script sets SCRIPT_DIR first; this sets REPO_ROOT and SYSROOT ($EDGEATTN_SYSROOT, which prefixes the
# system paths read so the scripts can be tested against fake boards).
REPO_ROOT="$(cd "${SCRIPT_DIR}/../.." && pwd)"
SYSROOT="${EDGEATTN_SYSROOT:-}"

# One "<script>: error: ..." line on stderr, exit status 2 (bad usage, an unsupported or undetectable setup).
die() {
    echo "${0##*/}: error: $*" >&2
    exit 2
}

# The script's header comment (from line 2 to `set -euo pipefail`) without the comment marks.
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}

# L4T_MAJOR and L4T_REVISION ("32" and "7.1") from the first line of the release file $1, e.g.
#   "# R32 (release), REVISION: 7.1, GCID: ..., BOARD: t210ref, ..."  (BOARD is unreliable; not used)
# L4T_RELEASE_LINE is that line; all three stay empty where the file cannot be read, the numbers where the line has
# another form.
read_l4t_release() {
    L4T_RELEASE_LINE=""
    L4T_MAJOR=""
    L4T_REVISION=""
    [ -r "$1" ] || return 0
    L4T_RELEASE_LINE="$(head -n 1 "$1")"
    L4T_MAJOR="$(printf '%s\n' "${L4T_RELEASE_LINE}" | sed -n 's/^# R\([0-9][0-9]*\) (release).*/\1/p')"
    L4T_REVISION="$(printf '%s\n' "${L4T_RELEASE_LINE}" | sed -n 's/.*REVISION: \([0-9][0-9.]*\).*/\1/p')"
}
