#!/usr/bin/env python3
# Compares the ABI of two dat2 header trees (ours and the Linux reference's).
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
"""ABI conformance check for the uDAPL headers.

For each tree, the list of names is generated from the headers themselves:
clang's JSON AST gives every record, field, typedef, enum constant and
function declared in a dat2/ header, and `clang -E -dD` every macro defined
in one. A C++ probe is then generated per tree and run; it prints one line
per fact (sizes, alignments, field offsets and types, constant values,
canonical types of functions and typedefs as mangled names). The two outputs
are compared name by name; a name present in one tree only is a difference.

Exit 0: identical. Exit 1: differences (listed). Exit 77: skipped because a
tool or the reference is missing (an error instead when CI=true).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT_INCLUDES = ["dat2/udat.h", "dat2/dat_registry.h", "dat2/dat_ib_extensions.h"]
MAX_FIELD_DEPTH = 4


def skip(msg):
    if os.environ.get("CI") == "true":
        print(f"abi_check: {msg} (required when CI=true)", file=sys.stderr)
        sys.exit(1)
    print(f"abi_check: SKIP: {msg}")
    sys.exit(77)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def tu_source():
    # dat_ib_extensions.h uses struct sockaddr_in6 without including its
    # header, in the reference as in consumers' code: provide it first.
    return "#include <sys/socket.h>\n#include <netinet/in.h>\n" + "".join(
        f"#include <{h}>\n" for h in ROOT_INCLUDES)


def in_dat2(path):
    return path is not None and "/dat2/" in path.replace("\\", "/")


class AstWalker:
    """Walks clang's JSON AST in print order; clang writes a location's file
    only when it changes, so the current file is tracked along the way."""

    def __init__(self):
        self.file = None
        self.records = {}    # spelled name -> record node
        self.typedefs = {}   # name -> node
        self.enum_consts = []
        self.functions = []

    def _loc(self, loc):
        if not isinstance(loc, dict):
            return
        for key in ("spellingLoc", "expansionLoc"):
            if key in loc:
                self._loc(loc[key])
        if "file" in loc:
            self.file = loc["file"]

    def _node_file(self, node):
        self._loc(node.get("loc"))
        here = self.file
        rng = node.get("range", {})
        self._loc(rng.get("begin"))
        self._loc(rng.get("end"))
        return here

    def walk(self, node, top=True):
        here = self._node_file(node)
        kind = node.get("kind")
        mine = in_dat2(here)
        if mine and not node.get("isImplicit"):
            name = node.get("name")
            if kind == "RecordDecl" and node.get("completeDefinition") and name:
                self.records[f"{node.get('tagUsed', 'struct')} {name}"] = node
            elif kind == "TypedefDecl" and name:
                self.typedefs[name] = node
            elif kind == "EnumConstantDecl" and name:
                self.enum_consts.append(name)
            elif kind == "FunctionDecl" and name:
                self.functions.append(name)
        for child in node.get("inner", []) or []:
            self.walk(child, top=False)


def ast_names(clang, include_root, workdir):
    src = os.path.join(workdir, "tu.c")
    with open(src, "w") as f:
        f.write(tu_source())
    r = run([clang, "-x", "c", "-std=gnu11", "-I", include_root, "-Xclang", "-ast-dump=json", "-fsyntax-only", src])
    if r.returncode != 0:
        raise RuntimeError(f"clang cannot parse the headers under {include_root}:\n{r.stderr[-4000:]}")
    walker = AstWalker()
    walker.walk(json.loads(r.stdout))
    return walker


def macro_names(clang, include_root, workdir):
    src = os.path.join(workdir, "tu.c")
    r = run([clang, "-x", "c", "-std=gnu11", "-I", include_root, "-E", "-dD", src])
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-4000:])
    current = None
    names = []
    functionlike = {}
    for line in r.stdout.splitlines():
        m = re.match(r'^# \d+ "([^"]*)"', line)
        if m:
            current = m.group(1)
            continue
        m = re.match(r"^#define ([A-Za-z_][A-Za-z0-9_]*)(\(([^)]*)\))?", line)
        if m and in_dat2(current):
            if m.group(2):
                params = [p for p in m.group(3).split(",") if p.strip()]
                functionlike[m.group(1)] = f"params={len(params)}"
            else:
                names.append(m.group(1))
    return sorted(set(names)), functionlike


def field_paths(record_node, prefix=""):
    """(path, is_bitfield) for every field. An unnamed struct or union is
    followed in the AST by the field that uses it: with a name (`union {..} u;`)
    its members are listed as u.x; without one (an anonymous member) they
    count as members of the enclosing record."""
    out = []
    pending = None
    for child in record_node.get("inner", []) or []:
        kind = child.get("kind")
        if kind == "RecordDecl" and child.get("completeDefinition") and not child.get("name"):
            pending = child
            continue
        if kind != "FieldDecl":
            continue
        name = child.get("name")
        qual = child.get("type", {}).get("qualType", "")
        unnamed_type = pending is not None and ("unnamed" in qual or "anonymous" in qual)
        if name:
            out.append((prefix + name, child.get("isBitfield", False)))
            if unnamed_type:
                out += field_paths(pending, prefix + name + ".")
        elif unnamed_type:
            out += field_paths(pending, prefix)
        pending = None
    return out


def cpp_escape(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


def generate_probe(walker, macros, enum_consts):
    lines = [tu_source(), "#include <cstdio>", "#include <cstdint>", "#include <cstddef>", "#include <typeinfo>",
             "#include <type_traits>",
             "template <class T> static void constant(const char* n, T v) {",
             "  if constexpr (std::is_same_v<std::decay_t<T>, const char*> || std::is_same_v<std::decay_t<T>, char*>)",
             '    std::printf("const %s str:%s\\n", n, v);',
             "  else if constexpr (std::is_function_v<std::remove_pointer_t<T>>)",
             '    std::printf("const %s function:%s\\n", n, typeid(T).name());',
             "  else if constexpr (std::is_pointer_v<T>)",
             '    std::printf("const %s ptr:%llu\\n", n, (unsigned long long)(std::uintptr_t)v);',
             "  else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>)",
             '    std::printf("const %s int:%lld\\n", n, (long long)v);',
             "}",
             "#define TYPE_OF(x) typeid(x).name()",
             "int main() {"]
    # Records: size, alignment, fields (offset, size, type); descend into
    # fields whose type is itself a record, so nested layouts are covered.
    for spelled, node in sorted(walker.records.items()):
        if spelled.split(" ", 1)[1].startswith("("):
            continue
        t = spelled
        label = spelled.replace(" ", ":")
        lines.append(f'  std::printf("record {label} size=%zu align=%zu\\n", sizeof({t}), alignof({t}));')
        for path, bitfield in field_paths(node):
            if bitfield:
                lines.append(f'  std::printf("field {label}.{path} bitfield\\n");')
                continue
            lines.append(
                f'  std::printf("field {label}.{path} offset=%zu size=%zu type=%s\\n", offsetof({t}, {path}), '
                f"sizeof(((({t}*)0)->{path})), TYPE_OF(decltype((({t}*)0)->{path})));")
    for name, node in sorted(walker.typedefs.items()):
        lines.append(f"  {{ using T_ = {name};")
        lines.append("    if constexpr (std::is_function_v<T_> || std::is_void_v<T_>) "
                     f'std::printf("typedef {name} type=%s\\n", TYPE_OF(T_));')
        lines.append("    else if constexpr (std::is_integral_v<T_> || std::is_enum_v<T_>) "
                     f'std::printf("typedef {name} size=%zu signed=%d type=%s\\n", sizeof(T_), (int)std::is_signed_v<T_>, TYPE_OF(T_));')
        lines.append(f'    else std::printf("typedef {name} size=%zu type=%s\\n", sizeof(T_), TYPE_OF(T_)); }}')
    for name in sorted(set(walker.functions)):
        lines.append(f'  std::printf("function {name} type=%s\\n", TYPE_OF(decltype(&{name})));')
    for i, name in enumerate(sorted(set(enum_consts) | set(macros))):
        lines.append(f'  constant("{name}", ({name})); /*CONST {name}*/')
    lines.append("  return 0;\n}")
    return "\n".join(lines) + "\n"


def build_probe(cxx, include_root, source, workdir, tag):
    """Compiles the probe; constants that are not values (empty macros,
    type names, keywords) fail to compile and are dropped, in a few passes."""
    src = os.path.join(workdir, f"probe_{tag}.cpp")
    exe = os.path.join(workdir, f"probe_{tag}")
    lines = source.split("\n")
    for _ in range(6):
        with open(src, "w") as f:
            f.write("\n".join(lines))
        r = run([cxx, "-std=c++20", "-w", "-fpermissive", "-I", include_root, "-o", exe, src, "-Wl,--unresolved-symbols=ignore-all"])
        if r.returncode == 0:
            return exe
        bad = set()
        for m in re.finditer(re.escape(src) + r":(\d+):\d+: error", r.stderr):
            bad.add(int(m.group(1)) - 1)
        droppable = {i for i in bad if "/*CONST " in lines[i]}
        if not droppable:
            raise RuntimeError(f"probe for {include_root} does not compile:\n{r.stderr[-6000:]}")
        lines = [l for i, l in enumerate(lines) if i not in droppable]
    raise RuntimeError("probe did not converge")


def facts(clang, cxx, include_root, workdir, tag):
    walker = ast_names(clang, include_root, workdir)
    macros, functionlike = macro_names(clang, include_root, workdir)
    exe = build_probe(cxx, include_root, generate_probe(walker, macros, walker.enum_consts), workdir, tag)
    r = run([exe])
    if r.returncode != 0:
        raise RuntimeError(f"probe for {include_root} failed: {r.stderr}")
    out = {}
    for line in r.stdout.splitlines():
        kind, name, *rest = line.split(" ", 2)
        out[f"{kind} {name}"] = rest[0] if rest else ""
    # Macros that are not values are still names of the API: record them
    # so that one missing from a tree is noticed.
    for m in macros:
        out.setdefault(f"const {m}", "(not a value)")
    for m, arity in functionlike.items():
        out[f"macro {m}"] = arity
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours", help="include root of our headers (holds dat2/)")
    ap.add_argument("reference", help="include root of the reference headers (holds dat2/)")
    ap.add_argument("--allowlist", help="file of allowed differences: '<kind> <name>  # reason'")
    ap.add_argument("--clang", default=shutil.which("clang") or "clang")
    ap.add_argument("--cxx", default=shutil.which("clang++") or shutil.which("g++") or "g++")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    for root in (args.ours, args.reference):
        if not os.path.isfile(os.path.join(root, "dat2", "udat.h")):
            skip(f"no dat2/udat.h under {root}")
    if not shutil.which(args.clang):
        skip("clang not found")

    # A header missing from our tree would silently fall back to the system's
    # copy through the default include path: require every file by name.
    ref_files = sorted(f for f in os.listdir(os.path.join(args.reference, "dat2")) if f.endswith(".h"))
    missing = [f for f in ref_files if not os.path.isfile(os.path.join(args.ours, "dat2", f))]
    if missing:
        print("ABI differences: headers missing from our tree: " + ", ".join(missing))
        return 1

    allowed = set()
    if args.allowlist and os.path.exists(args.allowlist):
        for line in open(args.allowlist):
            line = line.split("#", 1)[0].strip()
            if line:
                allowed.add(line)

    with tempfile.TemporaryDirectory() as work:
        ours = facts(args.clang, args.cxx, args.ours, work, "ours")
        ref = facts(args.clang, args.cxx, args.reference, work, "ref")

    diffs = []
    for key in sorted(set(ours) | set(ref)):
        a, b = ours.get(key), ref.get(key)
        if a != b and key not in allowed:
            diffs.append((key, a, b))
    counts = {}
    for key in ref:
        kind = key.split(" ", 1)[0]
        counts[kind] = counts.get(kind, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    if args.verbose:
        for key in sorted(ref):
            print(f"{key}: {ref[key]}")
    if diffs:
        print(f"ABI differences ({len(diffs)}), ours vs reference:")
        for key, a, b in diffs:
            print(f"  {key}\n      ours:      {a if a is not None else '(missing)'}\n"
                  f"      reference: {b if b is not None else '(missing)'}")
        print(f"compared: {summary}")
        return 1
    print(f"ABI identical: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
