#!/usr/bin/env bash
# Two hosts over Soft-RoCE: boots two QEMU guests joined by a virtual wire
# (rxe-vm-pair.sh: A 192.0.2.1 runs the servers, B 192.0.2.2 the clients,
# rxe0 on eth0 in each) and runs tests/vm/pair_guest.sh in both: dtest,
# dtestsrq, dapltest -T T and dat_perf on our libraries (fastdapl-rxe0-1)
# and on Debian's reference dapl (libdaplofa), on a clean link and with
# netem dropping 5% of the packets each way. Prints the table.
# usage: tests/vm/pair.sh BUILD_DIR [RESULTS_DIR]
#   RESULTS_DIR (default BUILD_DIR/vm-pair-results) is shared read-write
#   with both guests: results.tsv, logs/, sync/, A.log, B.log.
# Exit: 0 every test of ours passed; 1 one failed; 77 skipped (no qemu or
# no rxe-vm-pair.sh); 99 a guest did not boot or timed out. The reference's
# results are reported, never counted, except that a test of ours that
# fails with loss is excused where the reference passed it on the clean
# link and failed it with loss too: rxe's RC recovery (the guest kernel's)
# is then at fault, not the provider (under loss rxe waits about a second
# per lost packet, so the lossy steps run fewer iterations: README).
# A "race" (pair_guest.sh's judge says when: dtestsrq's server flushing
# its last send after its client saw every reply, or a client's disconnect
# request lost twice before it exited) is shown, not counted.
# Env: PAIR_ONLY, PAIR_ROUNDS, PAIR_OURS_ENV (see pair_guest.sh) repeat
# chosen steps;
# RXE_VM_PAIR_SCRIPT (default /work/shared/tools/rxe-vm/rxe-vm-pair.sh),
# and rxe-vm.sh's knobs (RXE_VM_TIMEOUT, default here 1700 s).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pair=${RXE_VM_PAIR_SCRIPT:-/work/shared/tools/rxe-vm/rxe-vm-pair.sh}
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 BUILD_DIR [RESULTS_DIR]" >&2; exit 2; }
command -v qemu-system-x86_64 >/dev/null 2>&1 || { echo "SKIP: qemu-system-x86_64 not installed"; exit 77; }
[ -x "$pair" ] || { echo "SKIP: $pair not found (set RXE_VM_PAIR_SCRIPT)"; exit 77; }
build=$(cd "$1" 2>/dev/null && pwd) || { echo "FAIL: build dir $1 not found"; exit 1; }
for f in src/registry/libdat2.so.2 src/provider/libfastdapl.so.2 tools/dat_perf/dat_perf; do
    [ -e "$build/$f" ] || { echo "FAIL: $build/$f missing: build the project first"; exit 1; }
done
results=${2:-$build/vm-pair-results}
rm -rf "$results" && mkdir -p "$results" && results=$(cd "$results" && pwd) || { echo "FAIL: cannot create $results"; exit 1; }

export RXE_VM_RW=$results${RXE_VM_RW:+:$RXE_VM_RW}
export RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-1700}
export RXE_PAIR_OUT=$results RXE_PAIR_GRACE=${RXE_PAIR_GRACE:-120}
echo "vm-pair: booting two Soft-RoCE guests ($pair); build $build; results $results"
t0=$SECONDS
knobs="PAIR_ONLY='${PAIR_ONLY:-*}' PAIR_ROUNDS=${PAIR_ROUNDS:-1} PAIR_OURS_ENV='${PAIR_OURS_ENV:-}'"
"$pair" "$knobs bash $here/pair_guest.sh A $build $results" "$knobs bash $here/pair_guest.sh B $build $results"
rc=$?
echo "vm-pair: the pair ran $((SECONDS - t0)) s (boot included), exit $rc"

tsv=$results/results.tsv
if [ -s "$tsv" ]; then
    echo
    echo "== test x provider x link (ok/FAIL; dtest: RDMA write ping-pong latency, bandwidth; dat_perf: median latency, RDMA write bandwidth at the largest size: 64 KiB clean, 8 KiB lossy)"
    awk -F'\t' '{ printf "  %-9s %-5s %-6s %-4s %s\n", $3, $1, $2, $4, $5 }' "$tsv" | sort -s -k1,1
    n_ok=$(awk -F'\t' '$1=="ours" && $4=="ok"' "$tsv" | wc -l)
    n_all=$(awk -F'\t' '$1=="ours"' "$tsv" | wc -l)
    n_race=$(awk -F'\t' '$1=="ours" && $4=="race"' "$tsv" | wc -l)
    echo "== ours: $n_ok/$n_all passed ($n_race lost to the test program's race under loss, not counted); reference: $(awk -F'\t' '$1=="ref" && $4=="ok"' "$tsv" | wc -l)/$(awk -F'\t' '$1=="ref"' "$tsv" | wc -l)"
    # ours failed: not excused unless loss broke the reference's run too
    failed=$(awk -F'\t' '{ v[$1 "/" $2 "/" $3] = $4 }
        $1 == "ours" && $4 != "ok" && $4 != "race" { f[$2 "/" $3] = 1 }
        END { for (k in f) { split(k, p, "/")
                  if (p[1] != "clean" && v["ref/clean/" p[2]] == "ok" && v["ref/" k] != "ok")
                      print "excused: ours " k " (the reference passed it clean and failed it with loss too)"
                  else print "FAILED: ours " k } }' "$tsv")
    [ -n "$failed" ] && echo "$failed"
    [ -n "${PAIR_ONLY:-}" ] || [ "$(awk -F'\t' '$1=="ours"' "$tsv" | wc -l)" = 8 ] || failed="FAILED: steps missing"
fi
case $rc in
0) [ -s "$tsv" ] || { echo "ERROR: no results"; exit 99; }
   ! grep -q '^FAILED' <<<"${failed:-}" ;;
124 | 125 | 143) echo "ERROR: a guest did not boot or timed out (rc $rc; RXE_VM_VERBOSE=1 shows the console)"; exit 99 ;;
*) echo "ERROR: the guests' scripts exited $rc"; exit 99 ;;
esac
