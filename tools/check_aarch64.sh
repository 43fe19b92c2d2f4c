#!/usr/bin/env bash
# The package on 64-bit ARM (aarch64), checked from an x86-64 machine. Two modes:
#
#   tools/check_aarch64.sh cross
#       Every kernel.c at both aarch64 levels (baseline: plain C that GCC vectorises with NEON;
#       neon_dot: the same for Armv8.2 with the dot products), dispatch.c and runtime.c, compiled
#       by aarch64-linux-gnu-gcc with setup.py's flags and warnings as errors, then linked into
#       one shared library with --no-undefined: x86-only code outside its guards, or a kernel
#       variant missing on aarch64, fails here. Seconds. Needs Debian's gcc-aarch64-linux-gnu.
#       .ci/run runs it.
#
#   tools/check_aarch64.sh emulated [DIR]
#       The README's first Quick start command, then the CPU kernel tests (tests/kernel_tests.txt),
#       in an arm64 Debian (bookworm, Python 3.11) made by debootstrap in DIR (default
#       /tmp/a2r_arm64) and run under qemu-user: pip takes the aarch64 wheels of the dependencies
#       from PyPI and builds the kernels there. Root, and Debian's debootstrap, qemu-user-static
#       and binfmt-support.
#       Measured on a 2-core x86 box: debootstrap 8 min; the rest 14 min, of which the kernel
#       tests 6.5 min (3,270 at both levels). Emulated times say nothing about an ARM CPU's speed.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"

cross() {
    local cc=aarch64-linux-gnu-gcc out
    command -v "$cc" >/dev/null ||
        { echo "check_aarch64: $cc not found (Debian: gcc-aarch64-linux-gnu)" >&2; exit 1; }
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' RETURN
    # setup.py's COMMON_CFLAGS and aarch64 macro, with every warning an error
    local flags=(-O3 -std=gnu11 -fno-math-errno -fno-trapping-math -ffp-contract=off -fopenmp
                 -Wall -Wno-unknown-pragmas -Werror -fPIC -DA2R_AARCH64_VARIANTS=1
                 -I"$src/cpu_ops/include")
    local k op level
    # setup.py's ISA_FLAGS on aarch64, level:flags
    for level in baseline: neon_dot:-march=armv8.2-a+dotprod; do
        for k in "$src"/cpu_ops/src/*/kernel.c; do
            op="$(basename "$(dirname "$k")")"
            "$cc" "${flags[@]}" ${level#*:} -Werror=missing-prototypes -DA2R_ISA="${level%%:*}" \
                -DA2R_OP="$op" -I"$src/cpu_ops/src/common" -c "$k" -o "$out/$op.${level%%:*}.o"
        done
    done
    "$cc" "${flags[@]}" -c "$src/cpu_ops/src/dispatch.c" -o "$out/dispatch.o"
    "$cc" "${flags[@]}" -c "$src/cpu_ops/src/runtime.c" -o "$out/runtime.o"
    "$cc" -shared -fopenmp -Wl,--no-undefined -o "$out/libkernels.so" "$out"/*.o -lm
    echo "check_aarch64: the CPU kernels compile and link for aarch64" \
         "($(ls "$out"/*.o | wc -l) objects)"
}

emulated() {
    local root="${1:-/tmp/a2r_arm64}"
    [ "$(id -u)" = 0 ] ||
        { echo "check_aarch64: emulated needs root (debootstrap, chroot)" >&2; exit 1; }
    [ -e /proc/sys/fs/binfmt_misc/register ] ||
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || {
        echo "check_aarch64: qemu-aarch64 is not registered with binfmt_misc" \
             "(Debian: qemu-user-static, binfmt-support)" >&2
        exit 1
    }
    if [ ! -x "$root/usr/bin/python3" ]; then
        debootstrap --arch=arm64 \
            --include=python3,python3-venv,python3-dev,gcc,git,ca-certificates \
            bookworm "$root" http://deb.debian.org/debian
    fi
    # this machine's resolver, certificates and pip settings (a proxy may re-sign TLS)
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    [ ! -e /etc/pip.conf ] || cp /etc/pip.conf "$root/etc/pip.conf"
    # /proc only: with the host's /sys, onnxruntime's cpuinfo reads x86 CPUs and crashes under qemu
    mountpoint -q "$root/proc" || mount --bind /proc "$root/proc"
    rm -rf "$root/root/a2r_edge"
    git clone -q "$src" "$root/root/a2r_edge"
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin /bin/bash -euc '
        cd /root/a2r_edge
        python3 -m venv /root/venv && . /root/venv/bin/activate
        python -m pip install -q --upgrade pip
        pip install -q -e ".[test]"
        python -m a2r_edge convert examples/astronaut_toon.png -o out/astronaut_photo.png
        python -m a2r_edge info | head -3
        cd tests && python -m pytest -q -n 2 -p no:cacheprovider $(cat kernel_tests.txt)'
    echo "check_aarch64: output picture: $root/root/a2r_edge/out/astronaut_photo.png"
}

case "${1:-}" in
    cross) cross ;;
    emulated) shift; emulated "$@" ;;
    *) echo "usage: tools/check_aarch64.sh cross | emulated [DIR]" >&2; exit 2 ;;
esac
