#!/usr/bin/env bash
# Checks ffn-trace as a new user meets it, in fresh Debian 12 roots made with debootstrap:
#   root 1: this checkout's last commit; the README's two commands (make demo, make test); then
#           make install puts ffn-trace on PATH, man ffn-trace shows the page, bash completes
#           `ffn-trace <TAB>`, and make package builds the .deb;
#   root 2: apt-get install ./ffn-trace_*.deb pulls the dependencies; ffn-trace --version and a
#           run of an installed example work; dpkg -L lists the man page and the completions.
# Needs root, debootstrap and the network (deb.debian.org). Usage: check-install.sh [WORKDIR]
# (default: a new folder under /var/tmp); both roots are removed at the end unless KEEP=1.
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "error: run as root (debootstrap and chroot need it)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "error: install debootstrap first (apt-get install debootstrap)" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /var/tmp/ffn-trace-check.XXXXXX)}
mirror=${MIRROR:-http://deb.debian.org/debian}
mkdir -p "$work"

cleanup() {
    for r in "$work/root1" "$work/root2"; do
        mountpoint -q "$r/dev/pts" && umount "$r/dev/pts"
        mountpoint -q "$r/proc" && umount "$r/proc"
    done
    [ "${KEEP:-0}" = 1 ] || rm -rf "$work/root1" "$work/root2"
}
trap cleanup EXIT

step() { printf '\n=== %s\n' "$*"; }
in_root() { local r=$1; shift; chroot "$r" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
                                   LANG=C.UTF-8 TERM=dumb bash -euo pipefail -c "$*"; }
make_root() {
    local r=$1
    step "debootstrap bookworm into $r"
    debootstrap --variant=minbase bookworm "$r" "$mirror" >"$r.log" 2>&1 || { tail -20 "$r.log"; exit 1; }
    cp /etc/resolv.conf "$r/etc/resolv.conf"
    mount -t proc proc "$r/proc"
    # Pseudo-terminals, as a real machine has them: the colour tests run the program in one.
    mkdir -p "$r/dev/pts"
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$r/dev/pts"
    [ -e "$r/dev/ptmx" ] || ln -s pts/ptmx "$r/dev/ptmx"
    in_root "$r" "apt-get update -qq"
}

# Root 1: from a clone, as the README tells a new user.
make_root "$work/root1"
step "root 1: g++, cmake, make (and man-db, bash-completion to check what is installed)"
in_root "$work/root1" "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    g++ cmake make ca-certificates man-db bash-completion >/dev/null"
# The committed tree, as a clone would have it (without .git: --version then has no commit).
mkdir -p "$work/root1/src/ffn-trace"
git -C "$src" archive HEAD | tar -x -C "$work/root1/src/ffn-trace"
# Timed, apt included, as a newcomer waits for them (docs/building.md gives the figures; ccache starts empty).
step "root 1: make demo"
in_root "$work/root1" "cd /src/ffn-trace && time (make demo | tail -5)"
step "root 1: make test"
in_root "$work/root1" "cd /src/ffn-trace && time (make test | tail -3)"
step "root 1: make install"
in_root "$work/root1" "cd /src/ffn-trace && make install | tail -3"
step "root 1: ffn-trace on PATH, the man page, bash completion"
in_root "$work/root1" "cd / && command -v ffn-trace && ffn-trace --version"
in_root "$work/root1" "MANPAGER=cat MANWIDTH=80 man ffn-trace | head -12"
in_root "$work/root1" "man -w ffn-trace"
in_root "$work/root1" 'source /usr/share/bash-completion/bash_completion
    _completion_loader ffn-trace || [ $? -eq 124 ]  # 124: loaded, as bash-completion tells readline
    COMP_WORDS=(ffn-trace ""); COMP_CWORD=1; COMPREPLY=(); _ffn_trace
    echo "ffn-trace <TAB>: ${COMPREPLY[*]}"
    [[ " ${COMPREPLY[*]} " == *" run "* ]]'
step "root 1: make package"
in_root "$work/root1" "cd /src/ffn-trace && make package | tail -2"
deb=$(ls "$work/root1/src/ffn-trace"/ffn-trace_*_amd64.deb)

# Root 2: only the package.
make_root "$work/root2"
cp "$deb" "$work/root2/tmp/"
step "root 2: apt-get install ./$(basename "$deb")"
in_root "$work/root2" "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /tmp/$(basename "$deb") >/dev/null"
in_root "$work/root2" "ffn-trace --version"
# Not piped into head: ffn-trace ends quietly on a closed pipe, by SIGPIPE, which pipefail counts.
in_root "$work/root2" "ffn-trace run /usr/share/ffn-trace/examples/walkthrough.json >/tmp/walkthrough.txt && head -8 /tmp/walkthrough.txt"
in_root "$work/root2" "ffn-trace check /usr/share/ffn-trace/examples/lesson_hand.json"
in_root "$work/root2" "dpkg -L ffn-trace | grep -E 'man1|completion|fish|zsh|schema'"
step "all checks passed"
