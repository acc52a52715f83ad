#!/usr/bin/env bash
# Host side of the Soft-RoCE VM harness: boots the QEMU guest of rxe-vm.sh
# (rdma_rxe "rxe0", no KVM needed) once and runs tests/vm/guest.sh in it:
# perftest, Debian's reference dapl and our libdat2 + libfastdapl side by
# side on rxe0; prints a latency/bandwidth table and a pass/fail list.
#
# usage: tests/vm/run.sh BUILD_DIR [RESULTS_DIR]
#   RESULTS_DIR (default BUILD_DIR/vm-rxe-results) is mounted read-write in
#   the guest and keeps run.log, results.tsv, metrics.tsv, logs/.
# Exit: 0 all of ours passed; 1 one of ours failed; 77 skipped (no qemu or
# no rxe-vm.sh); 99 the VM did not boot or timed out (meson: ERROR).
# Env: RXE_VM_SCRIPT (default /work/shared/tools/rxe-vm/rxe-vm.sh), and
# rxe-vm.sh's own knobs: RXE_VM_NETDEV (default here eth2, the netdev of the
# stock /etc/dat.conf entry ofa-v2-cma-roe-eth2), RXE_VM_TIMEOUT (default
# here 1100 s, under meson's 1200), RXE_VM_MEM, RXE_VM_SMP, RXE_VM_VERBOSE.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rxe_vm=${RXE_VM_SCRIPT:-/work/shared/tools/rxe-vm/rxe-vm.sh}

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 BUILD_DIR [RESULTS_DIR]" >&2; exit 2; }
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
    echo "SKIP: qemu-system-x86_64 not installed"; exit 77
fi
if [ ! -x "$rxe_vm" ]; then
    echo "SKIP: $rxe_vm not found (set RXE_VM_SCRIPT)"; exit 77
fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "FAIL: build dir $1 not found"; exit 1; }
for f in src/registry/libdat2.so.2 src/provider/libfastdapl.so.2; do
    [ -e "$build/$f" ] || { echo "FAIL: $build/$f missing: build the project first (ninja -C $build)"; exit 1; }
done
results=${2:-$build/vm-rxe-results}
mkdir -p "$results" || { echo "FAIL: cannot create $results"; exit 1; }
results=$(cd "$results" && pwd)
rm -rf "$results/logs" "$results"/{run.log,results.tsv,metrics.tsv,ours-dat.conf,reference-dat.conf}

export RXE_VM_RW=$results${RXE_VM_RW:+:$RXE_VM_RW}
export RXE_VM_NETDEV=${RXE_VM_NETDEV:-eth2}
export RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-1100}
echo "vm-rxe: booting the Soft-RoCE guest ($rxe_vm, netdev $RXE_VM_NETDEV); build $build; results $results"
t0=$(date +%s)
# the guest skips what is left once RXE_VM_TIMEOUT less 150 s (boot, table) is spent
"$rxe_vm" bash "$here/guest.sh" "$build" "$results" $((RXE_VM_TIMEOUT - 150)) 2>&1 | tee "$results/run.log"
rc=${PIPESTATUS[0]}
t1=$(date +%s)
echo "vm-rxe: VM run took $((t1 - t0)) s (boot included), exit $rc" | tee -a "$results/run.log"
case $rc in
0 | 1) exit "$rc" ;;
124) echo "ERROR: the VM timed out after ${RXE_VM_TIMEOUT}s"; exit 99 ;;
125) echo "ERROR: the VM or its rxe0 setup failed (RXE_VM_VERBOSE=1 shows the console)"; exit 99 ;;
*) echo "ERROR: guest.sh exited $rc"; exit 99 ;;
esac
