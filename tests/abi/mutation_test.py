#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
"""Self-test of abi_check.py: it must pass on the reference against itself,
and name exactly the four planted differences when run on a mutated copy.

    mutation_test.py [--checker abi_check.py] [--clang CLANG] REFERENCE_INCLUDE_ROOT

The copy of REFERENCE/dat2 gets: one field's type changed without changing
its size (struct dat_provider_info.dapl_version_minor: DAT_UINT32 ->
DAT_COUNT), one enum constant removed (DAT_EVD_RMR_BIND_FLAG, which has an
explicit value, so no other constant moves), one macro's value changed
(DAT_IA_FIELD_IA_MAX_PZS), and one function parameter's type changed
(dat_registry_list_providers' first, DAT_COUNT -> DAT_UINT32).

Exit status: 0 as expected, 1 otherwise, 77 when the reference or clang is
missing (1 instead when CI=true).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# (file, pattern, replacement): each pattern must match exactly once.
MUTATIONS = [
    ("dat.h", r"(struct dat_provider_info\s*\{[^}]*?)DAT_UINT32(\s+dapl_version_minor;)",
     r"\1DAT_COUNT\2"),
    ("dat.h", r"\n\s*DAT_EVD_RMR_BIND_FLAG\s*=\s*0x080,", ""),
    ("dat.h", r"(#define DAT_IA_FIELD_IA_MAX_PZS\s+UINT64_C\()0x000020000\)", r"\g<1>0x000040000)"),
    ("dat.h", r"(dat_registry_list_providers\s*\(\s*IN\s+)DAT_COUNT,", r"\1DAT_UINT32,"),
]
EXPECTED = {
    "field struct dat_provider_info.dapl_version_minor",
    "enum DAT_EVD_RMR_BIND_FLAG",
    "macro DAT_IA_FIELD_IA_MAX_PZS",
    "function dat_registry_list_providers",
}


def skip(msg):
    if os.environ.get("CI") == "true":
        print(f"mutation_test: FAIL: {msg} (CI=true: may not be skipped)")
        sys.exit(1)
    print(f"mutation_test: SKIP: {msg}")
    sys.exit(77)


def run_checker(args, ours, ref):
    cmd = [sys.executable, args.checker, ours, ref, "--no-warnings"]
    if args.clang is not None:
        cmd += ["--clang", args.clang]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reference", help="include root of the reference headers (holds dat2/)")
    ap.add_argument("--checker", default=os.path.join(HERE, "abi_check.py"))
    ap.add_argument("--clang")
    args = ap.parse_args()
    if not os.path.isfile(os.path.join(args.reference, "dat2", "udat.h")):
        skip(f"reference headers not found under {args.reference}")

    ok = True
    rc, out = run_checker(args, args.reference, args.reference)
    if rc == 77:
        print(out.strip())
        skip("the checker skipped")
    print("== reference against itself:")
    print(out.rstrip())
    if rc != 0:
        print("mutation_test: FAIL: the reference does not conform to itself")
        ok = False

    work = tempfile.mkdtemp(prefix="abi_mutation.")
    try:
        mutated = os.path.join(work, "dat2")
        shutil.copytree(os.path.join(args.reference, "dat2"), mutated)
        for name, pattern, repl in MUTATIONS:
            path = os.path.join(mutated, name)
            with open(path) as f:
                text = f.read()
            text, n = re.subn(pattern, repl, text, flags=re.S)
            if n != 1:
                print(f"mutation_test: FAIL: mutation {pattern!r} matched {n} times in {name}")
                return 1
            with open(path, "w") as f:
                f.write(text)
        rc, out = run_checker(args, work, args.reference)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("== mutated copy against the reference:")
    print(out.rstrip())
    reported = set(re.findall(r"^  (\S.*)$", out, re.M))
    if rc != 1:
        print(f"mutation_test: FAIL: the checker exited {rc} on the mutated copy (expected 1)")
        ok = False
    if reported != EXPECTED:
        print("mutation_test: FAIL: reported differences are not the planted ones")
        for key in sorted(EXPECTED - reported):
            print(f"  missed:     {key}")
        for key in sorted(reported - EXPECTED):
            print(f"  unexpected: {key}")
        ok = False
    print("mutation_test: PASS" if ok else "mutation_test: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
