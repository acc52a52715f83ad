#!/bin/sh
# The provider's gtests and dat_perf on the mlx5 direct path, over the
# software mlx5 device (libfake_mlx5_device.so, LD_PRELOADed): a sysfs tree
# for discovery, a dat.conf with the verbs IA fastdapl-mlx5_0-1, and the
# model's traps abort (a test fails) where real mlx5/rdma-core would
# misbehave silently. Then once without FASTDAPL_MLX5_DIRECT: the IA must
# say it takes the generic verbs path (whose data path the model lacks).
# usage: run.sh BUILD_ROOT SHIM DAT_INFO DAT_PERF PROVIDER_TEST_DIR
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
set -eu
build=$1 shim=$2 dat_info=$3 dat_perf=$4 tests=$5
# ThreadSanitizer's runtime need not come first (ASan's must): under it the
# direct path's hand-offs to the software device are checked too.
case "${FAKE_MLX5_SANITIZE:-none}" in
none | '' | thread) ;;
*) echo "skip: sanitizer runtimes must come first in the process, before an LD_PRELOADed shim"; exit 77 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ib=$tmp/sys/class/infiniband/mlx5_0
mkdir -p "$ib/ports/1/gid_attrs/ndevs" "$ib/ports/1/gid_attrs/types" "$ib/device" \
         "$tmp/sys/bus/pci/drivers/mlx5_core" "$tmp/sys/class/net/lo"
echo lo > "$ib/ports/1/gid_attrs/ndevs/0"
echo "RoCE v2" > "$ib/ports/1/gid_attrs/types/0"
ln -s ../../../../bus/pci/drivers/mlx5_core "$ib/device/driver"
echo 0 > "$tmp/sys/class/net/lo/dev_port"
# The tests open fastdapl-tcp and fastdapl-badif too (provider.conf).
cat "$tests/provider.conf" > "$tmp/dat.conf"
echo "fastdapl-mlx5_0-1 u2.0 nonthreadsafe default $build/src/provider/libfastdapl.so.2 fastdapl.0.1 \"verbs:mlx5_0:1\" \"\"" \
    >> "$tmp/dat.conf"

export DAT_OVERRIDE="$tmp/dat.conf" FASTDAPL_SYSFS_ROOT="$tmp/sys" FASTDAPL_TEST_IA=fastdapl-mlx5_0-1
export LD_LIBRARY_PATH="$build/src/registry${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset FASTDAPL_MLX5_DIRECT

data_path() {
    # This IA only: the softnic IAs of the same dat.conf say theirs too.
    LD_PRELOAD="$shim" "$dat_info" -q fastdapl-mlx5_0-1 2>&1 | sed -n 's/^.*FASTDAPL_DATA_PATH[ :=]*//p' | head -n 1
}

path=$(data_path)
echo "generic: FASTDAPL_DATA_PATH $path"
case "$path" in "generic verbs"*) ;; *) echo "FAIL: without FASTDAPL_MLX5_DIRECT the IA should take the generic path"; exit 1 ;; esac

export FASTDAPL_MLX5_DIRECT=1
path=$(data_path)
echo "direct: FASTDAPL_DATA_PATH $path"
case "$path" in "mlx5 direct"*) ;; *) echo "FAIL: FASTDAPL_MLX5_DIRECT=1 should select the mlx5 direct path"; exit 1 ;; esac

status=0
export FASTDAPL_PLACEMENT_REPS=20 # test_placement: the softnic runs its 100 in provider-placement
for t in test_provider_api test_notification test_connection_models test_srq test_ib_extensions test_placement test_rmr; do
    echo "== $t"
    LD_PRELOAD="$shim" "$tests/$t" || { echo "FAIL: $t"; status=1; }
done
echo "== test_ib_extensions on a device without atomics (FAKE_MLX5_NO_ATOMICS=1)"
FAKE_MLX5_NO_ATOMICS=1 LD_PRELOAD="$shim" "$tests/test_ib_extensions" || { echo "FAIL: test_ib_extensions without atomics"; status=1; }
echo "== test_rmr on a device without memory windows (FAKE_MLX5_NO_WINDOWS=1)"
FAKE_MLX5_NO_WINDOWS=1 LD_PRELOAD="$shim" "$tests/test_rmr" || { echo "FAIL: test_rmr without windows"; status=1; }
echo "== dat_perf (one process)"
LD_PRELOAD="$shim" "$dat_perf" -q -P fastdapl-mlx5_0-1 || { echo "FAIL: dat_perf"; status=1; }
exit $status
