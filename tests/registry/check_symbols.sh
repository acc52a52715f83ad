#!/usr/bin/env bash
# libdat2.so.2 exports exactly the uDAPL 2.0 entry points, all under DAT_2.0,
# a superset of the reference's, and nothing else (no C++ symbols leak).
# usage: check_symbols.sh OUR_LIBDAT2 [REFERENCE_LIBDAT2]
set -euo pipefail
ours=$1
ref=${2:-/usr/lib/x86_64-linux-gnu/libdat2.so.2}
fail=0
soname=$(objdump -p "$ours" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = "libdat2.so.2" ] || { echo "soname is '$soname', want libdat2.so.2"; fail=1; }

# "<version> <name>" of every defined dynamic symbol.
defined() { objdump -T "$1" | awk '$2 ~ /g/ && $0 !~ /\*UND\*/ && NF >= 7 {print $(NF-1), $NF}' | sort -u; }
mine=$(defined "$ours")
wrong_version=$(echo "$mine" | awk '$1 != "DAT_2.0" {print}')
[ -z "$wrong_version" ] || { echo "symbols outside DAT_2.0:"; echo "$wrong_version"; fail=1; }
foreign=$(echo "$mine" | awk '$2 !~ /^dat_/ && $2 != "dats_get_ia_handle" && $2 != "DAT_2.0" {print}')
[ -z "$foreign" ] || { echo "unexpected exported symbols:"; echo "$foreign"; fail=1; }

expected_extra="dat_cno_fd_create dat_cno_trigger dat_csp_create dat_csp_free dat_csp_query dat_ep_common_connect
dat_ep_post_rdma_read_to_rmr dat_ep_post_send_with_invalidate dat_ia_open dat_registry_providers_related dat_rmr_create_for_ep"
names=$(echo "$mine" | awk '$2 != "DAT_2.0" {print $2}' | sort)
count=$(echo "$names" | wc -l)
if [ -f "$ref" ]; then
    ref_names=$(defined "$ref" | awk '$2 != "DAT_2.0" {print $2}' | sort)
    missing=$(comm -13 <(echo "$names") <(echo "$ref_names"))
    [ -z "$missing" ] || { echo "exported by the reference but not by ours:"; echo "$missing"; fail=1; }
    extra=$(comm -23 <(echo "$names") <(echo "$ref_names") | tr '\n' ' ' | sed 's/ $//')
    want=$(echo $expected_extra | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')
    [ "$extra" = "$want" ] || { echo "extra symbols: '$extra'"; echo "expected:      '$want'"; fail=1; }
    echo "reference exports $(echo "$ref_names" | wc -l), ours $count"
else
    [ "${CI:-}" != "true" ] || { echo "reference $ref missing (required under CI)"; exit 1; }
    echo "reference $ref not found: checked versions and names only"
    [ "$count" -eq 85 ] || { echo "expected 85 exported functions, found $count"; fail=1; }
fi
exit $fail
