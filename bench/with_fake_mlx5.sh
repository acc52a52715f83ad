#!/bin/sh
# Runs a command on the software mlx5 device, set up as
# tests/fake_mlx5/run.sh sets it up: a sysfs tree with mlx5_0 port 1 (RoCE
# v2 on lo) for discovery, a dat.conf with the build's IAs plus
# fastdapl-mlx5_0-1 ("verbs:mlx5_0:1"), FASTDAPL_MLX5_DIRECT=1 (the mlx5
# direct path) and the shim LD_PRELOADed. The IA to open is
# fastdapl-mlx5_0-1. Valgrind passes LD_PRELOAD on to its client, so
#   with_fake_mlx5.sh build build/tests/fake_mlx5/libfake_mlx5_device.so \
#       valgrind --tool=callgrind ... build/bench/post_dequeue post 200 fastdapl-mlx5_0-1
# counts the direct path.
# usage: with_fake_mlx5.sh BUILD_ROOT SHIM COMMAND [ARGS...]
# Exits 77 (skip) where the shim is missing or sanitizers are on
# (FAKE_MLX5_SANITIZE), as run.sh does.
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
set -eu
if [ $# -lt 3 ]; then
    echo "usage: with_fake_mlx5.sh BUILD_ROOT SHIM COMMAND [ARGS...]" >&2; exit 2
fi
build=$1 shim=$2
shift 2
case "${FAKE_MLX5_SANITIZE:-none}" in
none | '') ;;
*) echo "with_fake_mlx5: skip: sanitizer runtimes must come first in the process, before an LD_PRELOADed shim"; exit 77 ;;
esac
if [ ! -f "$shim" ]; then
    echo "with_fake_mlx5: skip: no software mlx5 device at $shim"; exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ib=$tmp/sys/class/infiniband/mlx5_0
mkdir -p "$ib/ports/1/gid_attrs/ndevs" "$ib/ports/1/gid_attrs/types" "$ib/device" \
         "$tmp/sys/bus/pci/drivers/mlx5_core" "$tmp/sys/class/net/lo"
echo lo > "$ib/ports/1/gid_attrs/ndevs/0"
echo "RoCE v2" > "$ib/ports/1/gid_attrs/types/0"
ln -s ../../../../bus/pci/drivers/mlx5_core "$ib/device/driver"
echo 0 > "$tmp/sys/class/net/lo/dev_port"
if [ -f "$build/dat.conf" ]; then cat "$build/dat.conf" > "$tmp/dat.conf"; else : > "$tmp/dat.conf"; fi
echo "fastdapl-mlx5_0-1 u2.0 nonthreadsafe default $build/src/provider/libfastdapl.so.2 fastdapl.0.1 \"verbs:mlx5_0:1\" \"\"" \
    >> "$tmp/dat.conf"

export DAT_OVERRIDE="$tmp/dat.conf" FASTDAPL_SYSFS_ROOT="$tmp/sys" FASTDAPL_MLX5_DIRECT=1
export LD_LIBRARY_PATH="$build/src/registry${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
LD_PRELOAD="$shim" "$@" || status=$?
exit $status
