#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
"""ABI conformance check: our <dat2/...> headers against a reference tree.

    abi_check.py [options] OURS_INCLUDE_ROOT REFERENCE_INCLUDE_ROOT

Both roots hold a dat2/ directory. For each tree separately, the list of
names is generated from the headers reached from <dat2/udat.h>,
<dat2/dat_registry.h> and <dat2/dat_ib_extensions.h> (nothing is typed by
hand):

  * clang's JSON AST gives every struct/union (with every field, members of
    nested and anonymous structs/unions included), enum type and constant,
    typedef, function and variable declared in a file of that tree's dat2/;
  * `clang -E -dD` gives every macro defined in one of those files;
  * a second clang pass gives canonical types (typedefs resolved) of
    functions, fields, variables and typedefs, and tells which object-like
    macros are integer constant expressions (pedantic C rules);
  * a generated C probe, compiled against that tree and run, prints sizes,
    alignments, field offsets, signedness and constant values.

The two sets of facts are compared key by key; a name present in one tree
only is a difference as well, and so is a dat2/ header that our tree lacks
(it would otherwise be picked up silently from the system's include path).
Finally our headers must compile without any diagnostic located in them
under -Wall -Wextra -pedantic: the probe with clang -std=c99, a minimal
consumer with gcc -std=c99 and with a C++ compiler as C++20 (each where
found; --no-warnings skips this part).

Exit status: 0 conforming, 1 differences or errors, 77 skipped (reference
tree or clang missing; a failure instead when the environment has CI=true).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT_HEADERS = ("dat2/udat.h", "dat2/dat_registry.h", "dat2/dat_ib_extensions.h")
# dat_ib_extensions.h uses struct sockaddr_in6 without including its header
# (consumers include it first); the reference needs it, so both trees get it.
PREAMBLE = ("sys/socket.h", "netinet/in.h")
# C standard the facts are taken under (the pedantic check uses c99).
STD = "-std=gnu11"
MAX_PASSES = 4
KIND_ORDER = ("header", "record", "field", "enumtype", "enum", "typedef",
              "function", "variable", "macro", "warning")

FLOAT_BUILTINS = {"float", "double", "long double", "__float128", "_Float16",
                  "__fp16", "__bf16", "__ibm128"}
SUGAR_KINDS = {"TypedefType", "ElaboratedType", "ParenType", "TypeOfType",
               "MacroQualifiedType", "AttributedType", "BTFTagAttributedType",
               "UsingType", "SubstTemplateTypeParmType"}


class CheckError(Exception):
    """A tree could not be analysed (e.g. its headers do not compile)."""


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def first_lines(text, n=40):
    lines = text.strip().splitlines()
    return "\n".join(lines[:n] + ([f"... ({len(lines) - n} more lines)"] if len(lines) > n else []))


def tu_text(extra=""):
    lines = [f"#include <{h}>" for h in PREAMBLE + ROOT_HEADERS]
    return "\n".join(lines) + "\n" + extra


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --------------------------------------------------------------------------
# Canonical type strings from clang's JSON type trees.

def _quals(node):
    q = node.get("qualifiers", "")
    return [x for x in q.split() if x]


def _join(base, decl):
    return base + (" " + decl if decl else "")


def canonical(t, decl="", quals=(), hint=None, unqualified=False):
    """C spelling of the canonical type of the JSON type node `t`, with every
    typedef resolved. `hint` is the typedef name that directly names `t` (used
    to label anonymous structs/unions/enums, which have no tag); with
    `unqualified`, top-level qualifiers are dropped (as for the parameters
    of a function type)."""
    kind = t.get("kind")
    inner = t.get("inner") or []
    quals = sorted(set(quals))
    qprefix = " ".join(quals) + " " if quals else ""
    if kind == "QualType":
        return canonical(inner[0], decl, list(quals) + ([] if unqualified else _quals(t)), hint, unqualified)
    if kind in SUGAR_KINDS:
        if kind == "TypedefType":
            hint = t.get("decl", {}).get("name") or hint
        if not inner:
            return _join(qprefix + t["type"]["qualType"], decl)
        return canonical(inner[-1] if kind == "AttributedType" else inner[0], decl, quals, hint, unqualified)
    if kind in ("DecayedType", "AdjustedType"):
        orig = inner[0]
        # Strip sugar to see what decays.
        base = orig
        while base.get("kind") in SUGAR_KINDS and base.get("inner"):
            base = base["inner"][0]
        if base.get("kind") in ("ConstantArrayType", "IncompleteArrayType",
                                "VariableArrayType", "DependentSizedArrayType"):
            return canonical({"kind": "PointerType", "inner": [base["inner"][0]]}, decl, quals)
        if base.get("kind") in ("FunctionProtoType", "FunctionNoProtoType"):
            return canonical({"kind": "PointerType", "inner": [base]}, decl, quals)
        return canonical(orig, decl, quals, hint)
    if kind == "BuiltinType":
        return _join(qprefix + t["type"]["qualType"], decl)
    if kind in ("RecordType", "EnumType"):
        qt = t["type"]["qualType"]
        keyword = "enum" if kind == "EnumType" else ("union" if qt.startswith("union") else "struct")
        name = t.get("decl", {}).get("name")
        if not name:
            name = f"<{hint}>" if hint else "<anonymous>"
        return _join(f"{qprefix}{keyword} {name}", decl)
    if kind == "PointerType":
        d = "*" + (" ".join(quals) + (" " if decl else "") if quals else "") + decl
        pointee = inner[0]
        base = pointee
        while base.get("kind") in SUGAR_KINDS | {"QualType"} and base.get("inner"):
            base = base["inner"][0]
        if base.get("kind", "").endswith("ArrayType") or base.get("kind", "").startswith("Function"):
            d = "(" + d + ")"
        return canonical(pointee, d, (), None)
    if kind == "ConstantArrayType":
        return canonical(inner[0], f"{decl}[{t.get('size')}]", quals, hint)
    if kind == "IncompleteArrayType":
        return canonical(inner[0], f"{decl}[]", quals, hint)
    if kind == "FunctionProtoType":
        params = [canonical(p, unqualified=True) for p in inner[1:]]
        if t.get("variadic"):
            params.append("...")
        plist = ", ".join(params) if params else "void"
        return canonical(inner[0], f"{decl}({plist})", (), None)
    if kind == "FunctionNoProtoType":
        return canonical(inner[0], f"{decl}()", (), None)
    if kind == "TypeOfExprType" and inner and "type" in inner[0]:
        # typeof(expression): clang gives the expression's type as a string
        # only; its top level is desugared, which is enough for constants.
        et = inner[0]["type"]
        return _join(qprefix + et.get("desugaredQualType", et["qualType"]), decl)
    # Anything else (vectors, _Atomic, ...): clang's spelling.
    return _join(qprefix + t.get("type", {}).get("qualType", f"<{kind}>"), decl)


def type_tree_is(t, pred):
    """Applies pred to the first non-sugar node of a type tree."""
    while t.get("kind") in SUGAR_KINDS | {"QualType"} and t.get("inner"):
        t = t["inner"][0]
    return pred(t)


def is_integer_tree(t):
    def pred(n):
        k = n.get("kind")
        if k == "EnumType":
            return True
        if k == "BuiltinType":
            name = n["type"]["qualType"]
            return name not in FLOAT_BUILTINS and name != "void" and "nullptr" not in name
        return False
    return type_tree_is(t, pred)


def is_sized_tree(t):
    """Whether sizeof can apply (not a function, void or incomplete array)."""
    def pred(n):
        k = n.get("kind")
        if k in ("FunctionProtoType", "FunctionNoProtoType", "IncompleteArrayType"):
            return False
        if k == "BuiltinType" and n["type"]["qualType"] == "void":
            return False
        return True
    return type_tree_is(t, pred)


# --------------------------------------------------------------------------
# Pass 1: the declarations of one tree, from the JSON AST.

class Decls:
    def __init__(self):
        self.records = {}      # label -> (RecordDecl node, C spelling)
        self.enumtypes = {}    # "enum tag" -> node
        self.enum_consts = {}  # name -> enclosing enum label
        self.typedefs = {}     # name -> TypedefDecl node
        self.functions = {}    # name -> FunctionDecl node
        self.variables = {}    # name -> VarDecl node
        self.anon = {}         # id of an anonymous record -> RecordDecl node


class AstReader:
    """Walks clang's JSON AST in output order. clang writes a location's file
    only when it differs from the previous location written, so the current
    file is tracked through every location, in order."""

    def __init__(self, dat2_dir):
        self.dat2 = os.path.realpath(dat2_dir) + os.sep
        self.file = None
        self._real = {}
        self.decls = Decls()

    def in_tree(self, path):
        if path is None:
            return False
        r = self._real.get(path)
        if r is None:
            r = self._real[path] = os.path.realpath(path)
        return r.startswith(self.dat2)

    def _loc(self, loc):
        if not isinstance(loc, dict):
            return
        if "spellingLoc" in loc or "expansionLoc" in loc:
            for key in loc:
                if key in ("spellingLoc", "expansionLoc"):
                    self._loc(loc[key])
        elif "file" in loc:
            self.file = loc["file"]

    def walk(self, node, ctx):
        """ctx: 'top' for translation-unit children, 'record' inside a
        record in our files, None elsewhere."""
        here = None
        kind = node.get("kind")
        for key, value in node.items():
            if key == "loc":
                self._loc(value)
                here = self.file
            elif key == "range":
                self._loc(value.get("begin"))
                self._loc(value.get("end"))
            elif key == "inner":
                child_ctx = None
                if kind == "TranslationUnitDecl":
                    child_ctx = "top"
                elif kind in ("RecordDecl", "EnumDecl") and ctx in ("top", "record") and self.in_tree(here):
                    child_ctx = "record" if kind == "RecordDecl" else "enum"
                for child in value:
                    self.walk(child, child_ctx)
                    if child_ctx == "enum" and child.get("kind") == "EnumConstantDecl":
                        self.decls.enum_consts[child["name"]] = node.get("name") or ""
            elif isinstance(value, (dict, list)) and key not in ("type", "decl", "referencedDecl",
                                                                  "ownedTagDecl", "includedFrom"):
                for child in (value if isinstance(value, list) else [value]):
                    if isinstance(child, dict):
                        self.walk(child, None)
        if ctx in ("top", "record") and self.in_tree(here) and not node.get("isImplicit"):
            self._collect(node, kind, ctx)

    def _collect(self, node, kind, ctx):
        d = self.decls
        name = node.get("name")
        if kind == "RecordDecl" and node.get("completeDefinition"):
            if name:
                label = f"{node.get('tagUsed', 'struct')} {name}"
                d.records[label] = (node, label)
            elif ctx == "top":
                d.anon[node["id"]] = node
        elif kind == "EnumDecl" and name:
            d.enumtypes[f"enum {name}"] = node
        elif ctx == "top" and kind == "TypedefDecl" and name:
            d.typedefs.setdefault(name, node)
        elif ctx == "top" and kind == "FunctionDecl" and name:
            d.functions.setdefault(name, node)
        elif ctx == "top" and kind == "VarDecl" and name:
            d.variables.setdefault(name, node)


def anonymous_record_names(decls):
    """Anonymous top-level structs/unions named by a typedef get that name."""
    for tname, td in sorted(decls.typedefs.items()):
        t = (td.get("inner") or [None])[0]
        while t is not None and t.get("kind") in ("ElaboratedType", "ParenType"):
            owned = t.get("ownedTagDecl")
            if owned and owned.get("id") in decls.anon:
                node = decls.anon.pop(owned["id"])
                decls.records[tname] = (node, tname)
                break
            t = (t.get("inner") or [None])[0]
        if t is not None and t.get("kind") == "RecordType":
            rid = t.get("decl", {}).get("id")
            if rid in decls.anon:
                decls.records[tname] = (decls.anon.pop(rid), tname)


INLINE_RE = re.compile(r"\((?:unnamed|anonymous)(?: (?:struct|union))? at ")


def record_fields(node, prefix=""):
    """[(path, FieldDecl or None, inline_kind)] for every field of a record;
    members of nested unnamed structs/unions are listed under the field that
    holds them (`u.x`) or, for anonymous members, as members of the
    enclosing record (C11), which is how offsetof names them."""
    out = []
    last_unnamed = None
    for ch in node.get("inner") or []:
        kind = ch.get("kind")
        if kind == "RecordDecl":
            if not ch.get("name") and ch.get("completeDefinition"):
                last_unnamed = ch
            continue
        if kind != "FieldDecl":
            continue
        qt = ch.get("type", {}).get("qualType", "")
        name = ch.get("name")
        if last_unnamed is not None and INLINE_RE.search(qt):
            dims = re.findall(r"\[(\d+)\]", qt[qt.rfind(")"):])
            tag = last_unnamed.get("tagUsed", "struct")
            if name:
                out.append((prefix + name, ch, f"{tag} <inline>" + "".join(f"[{n}]" for n in dims)))
                sub = prefix + name + "".join("[0]" for _ in dims) + "."
            else:
                sub = prefix
            out += record_fields(last_unnamed, sub)
        elif name:
            out.append((prefix + name, ch, None))
    return out


def ast_pass(clang, root, work, tag):
    src = os.path.join(work, f"tu_{tag}.c")
    with open(src, "w") as f:
        f.write(tu_text())
    r = run([clang, STD, "-I", root, "-fsyntax-only", "-Xclang", "-ast-dump=json", src])
    if r.returncode != 0:
        raise CheckError(f"clang cannot compile the headers under {root}:\n{first_lines(r.stderr)}")
    reader = AstReader(os.path.join(root, "dat2"))
    reader.walk(json.loads(r.stdout), None)
    anonymous_record_names(reader.decls)
    return reader.decls


# --------------------------------------------------------------------------
# Macros and included files, from the preprocessor.

def preprocess(clang, root, work, tag):
    """(macros, headers): macros maps name -> ('object', body) or
    ('function', params) for the macros defined in our dat2 files and still
    defined at the end; headers is the set of dat2 files included."""
    src = os.path.join(work, f"tu_{tag}.c")
    with open(src, "w") as f:
        f.write(tu_text())
    r = run([clang, STD, "-I", root, "-E", "-dD", src])
    if r.returncode != 0:
        raise CheckError(f"clang cannot preprocess the headers under {root}:\n{first_lines(r.stderr)}")
    dat2 = os.path.realpath(os.path.join(root, "dat2")) + os.sep
    current, mine = None, False
    macros, headers, foreign = {}, set(), set()
    for line in r.stdout.splitlines():
        if line.startswith("# "):
            m = re.match(r'^# \d+ "([^"]*)"', line)
            if m:
                current = m.group(1)
                real = os.path.realpath(current)
                mine = real.startswith(dat2)
                if mine:
                    headers.add(os.path.basename(real))
                elif "/dat2/" in real:
                    foreign.add(real)
            continue
        if not line.startswith("#"):
            continue
        m = re.match(r"^#define ([A-Za-z_]\w*)(\(([^)]*)\))?(?:\s(.*))?$", line)
        if m:
            name = m.group(1)
            if mine:
                if m.group(2) is not None:
                    params = [p.strip() for p in m.group(3).split(",") if p.strip()]
                    macros[name] = ("function", params)
                else:
                    macros[name] = ("object", (m.group(4) or "").strip())
            else:
                macros.pop(name, None)
            continue
        m = re.match(r"^#undef ([A-Za-z_]\w*)", line)
        if m:
            macros.pop(m.group(1), None)
    return macros, headers, foreign


# --------------------------------------------------------------------------
# Pass 2: canonical types and integer-constant macros.

def compile_dropping(cmd_for, lines, marker, src):
    """Compiles `lines` (written to src) with cmd_for(src); lines marked
    with `marker` that cause errors are dropped, in at most MAX_PASSES
    passes. Returns (completed process, kept lines, dropped markers)."""
    dropped = set()
    for _ in range(MAX_PASSES):
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = run(cmd_for(src))
        if r.returncode == 0:
            return r, lines, dropped
        bad = set()
        other = []
        for m in re.finditer(r"^(.*?):(\d+):\d+: (?:fatal )?error: (.*)$", r.stderr, re.M):
            if os.path.realpath(m.group(1)) == os.path.realpath(src):
                bad.add(int(m.group(2)) - 1)
            else:
                other.append(m.group(0))
        droppable = {i for i in bad if 0 <= i < len(lines) and marker in lines[i]}
        if other or not droppable or len(droppable) != len(bad):
            raise CheckError(f"cannot compile {src}:\n{first_lines(r.stderr)}")
        for i in droppable:
            dropped.add(lines[i].rsplit(marker, 1)[1].strip(" */"))
        lines = [l for i, l in enumerate(lines) if i not in droppable]
    raise CheckError(f"{src}: no clean compile after {MAX_PASSES} passes")


def type_pass(clang, root, work, tag, decls, macros):
    """Returns (types, ice, strings, pointers): canonical type strings keyed
    by fact key, and the object-like macros that are integer constant
    expressions, string literals and foldable pointer constants."""
    lines = tu_text().rstrip("\n").split("\n")
    wanted = {}  # typedef name in the pass -> fact key
    n = 0

    def want(key, spelled):
        nonlocal n
        if INLINE_RE.search(spelled):
            return
        tname = f"__abi_t{n}"
        n += 1
        wanted[tname] = key
        lines.append(f"typedef __typeof__({spelled}) {tname}; /*ABI type {key}*/")

    for name, node in sorted(decls.functions.items()):
        want(f"function {name}", node["type"]["qualType"])
    for name, node in sorted(decls.variables.items()):
        want(f"variable {name}", node["type"]["qualType"])
    for label, (node, _) in sorted(decls.records.items()):
        for path, fd, inline in record_fields(node):
            if inline is None:
                want(f"field {label}.{path}", fd["type"]["qualType"])
    # Object-like macros. Besides integer constants, string literals and
    # pointer constants that the compiler can fold (integers cast to a
    # pointer type, such as a null handle) get their values compared; the
    # rest (types, keywords, function names, expressions naming undeclared
    # things) only their presence.
    candidates = sorted(n for n, (form, body) in macros.items() if form == "object" and body)
    for name in candidates:
        want(f"macro {name}", name)
    for name in candidates:
        lines.append(f"enum {{ __abi_p_{name} = ((__UINTPTR_TYPE__)(const void *)({name}) != 0) }};"
                     f" /*ABI ptr {name}*/")
    # Integer constant expressions, by C's rules: folding anything else to a
    # constant is an extension, which -Wpedantic turns into an error here.
    lines.append('#pragma clang diagnostic error "-Wpedantic"')
    lines.append('#pragma clang diagnostic error "-Wgnu-folding-constant"')
    for name in candidates:
        lines.append(f"enum {{ __abi_m_{name} = (({name}) == 0) }}; /*ABI ice {name}*/")
        lines.append(f"static const char __abi_s_{name}[] = {name}; /*ABI str {name}*/")
    src = os.path.join(work, f"types_{tag}.c")
    cmd = lambda s: [clang, STD, "-I", root, "-fsyntax-only", "-ferror-limit=0",
                     "-fno-caret-diagnostics", "-fmacro-backtrace-limit=1",
                     "-Xclang", "-ast-dump=json", "-Xclang", "-ast-dump-filter=__abi_t", s]
    r, _, dropped = compile_dropping(cmd, lines, "/*ABI ", src)
    types = {}
    dec = json.JSONDecoder()
    text, pos = r.stdout, 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        if not text.startswith("{", pos):  # "Dumping name:" headers, if any
            pos = text.find("\n", pos) + 1 or len(text)
            continue
        node, pos = dec.raw_decode(text, pos)
        key = wanted.get(node.get("name"))
        if key and node.get("kind") == "TypedefDecl":
            types[key] = canonical(node["inner"][0])
    for marker in dropped:
        what, key = marker.split(" ", 1)
        if what == "type" and not key.startswith("macro "):
            types[key] = "<unparsed>"
    ice = {c for c in candidates if f"ice {c}" not in dropped}
    strings = {c for c in candidates if f"str {c}" not in dropped} - ice
    pointers = {c for c in candidates if f"ptr {c}" not in dropped} - ice - strings
    return types, ice, strings, pointers


# --------------------------------------------------------------------------
# The probe: sizes, offsets, signedness and values, from a compiled program.

PROBE_HEAD = r"""
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define ABI_ALIGNOF(T) ((unsigned long)_Alignof(T))
#else
#define ABI_ALIGNOF(T) ((unsigned long)__alignof__(T))
#endif
#define ABI_SIZE(x) ((unsigned long)sizeof(x))
static void abi_u(const char *key, const char *attr, unsigned long v)
{
    printf("%s\t%s=%lu\n", key, attr, v);
}
static void abi_int(const char *key, int neg, long long s, unsigned long long u, unsigned long size)
{
    if (neg)
        printf("%s\tvalue=%lld\n%s\tsize=%lu\n%s\tsigned=1\n", key, s, key, size, key);
    else
        printf("%s\tvalue=%llu\n%s\tsize=%lu\n%s\tsigned=0\n", key, u, key, size, key);
}
#define ABI_INT(key, e) abi_int(key, (0 ? (e) : -1) < 0, (long long)(e), (unsigned long long)(e), ABI_SIZE(e))
#define ABI_SIGNED(key, T) abi_u(key, "signed", (unsigned long)((T)-1 < (T)0))
static void abi_str(const char *key, const char *s, unsigned long size)
{
    printf("%s\tstring=\"", key);
    for (; *s; s++)
        printf((*s >= 0x20 && *s < 0x7f && *s != '"' && *s != '\\') ? "%c" : "\\x%02x", (unsigned char)*s);
    printf("\"\n%s\tsize=%lu\n", key, size);
}
/* A bit-field's place: set it to all ones in a zeroed object, see which
 * bits of the object changed. */
static void abi_bits(const char *key, const unsigned char *p, unsigned long n)
{
    unsigned long i, first = 0, count = 0;
    for (i = 0; i < n * 8; i++)
        if ((p[i / 8] >> (i % 8)) & 1) {
            if (!count)
                first = i;
            count++;
        }
    printf("%s\tbitoffset=%lu\n%s\tbitwidth=%lu\n", key, first, key, count);
}
static void abi_ptr(const char *key, const void *p)
{
    printf("%s\tpointer=%#llx\n", key, (unsigned long long)(size_t)p);
}
int main(void)
{
"""


def probe_lines(decls, ice, strings, pointers):
    """C statements, one a line, each tagged with the fact key it feeds."""
    out = []

    def add(stmt, key):
        out.append(f"    {stmt} /*ABI {key}*/")

    for label, (node, spelled) in sorted(decls.records.items()):
        key = f"record {label}"
        k = c_string(key)
        add(f'abi_u({k}, "size", ABI_SIZE({spelled}));', key)
        add(f'abi_u({k}, "align", ABI_ALIGNOF({spelled}));', key)
        for path, fd, inline in record_fields(node):
            key = f"field {label}.{path}"
            k = c_string(key)
            if fd.get("isBitfield"):
                add(f"{{ {spelled} abi_v; memset(&abi_v, 0, sizeof abi_v); abi_v.{path} = ~0; "
                    f"abi_bits({k}, (const unsigned char *)&abi_v, ABI_SIZE(abi_v)); }}", key)
                continue
            add(f'abi_u({k}, "offset", (unsigned long)offsetof({spelled}, {path}));', key)
            if inline:
                add(f'abi_u({k}, "align", (unsigned long)__alignof__((({spelled} *)0)->{path}));', key)
            if not re.search(r"\[\]$", fd["type"].get("desugaredQualType", fd["type"]["qualType"])):
                add(f'abi_u({k}, "size", ABI_SIZE((({spelled} *)0)->{path}));', key)
    for label in sorted(decls.enumtypes):
        key = f"enumtype {label}"
        k = c_string(key)
        add(f'abi_u({k}, "size", ABI_SIZE({label}));', key)
        add(f"ABI_SIGNED({k}, {label});", key)
    for name in sorted(decls.enum_consts):
        add(f'ABI_INT({c_string("enum " + name)}, {name});', f"enum {name}")
    for name, node in sorted(decls.typedefs.items()):
        key = f"typedef {name}"
        k = c_string(key)
        tree = node["inner"][0]
        if is_sized_tree(tree):
            add(f'abi_u({k}, "size", ABI_SIZE({name}));', key)
            add(f'abi_u({k}, "align", ABI_ALIGNOF({name}));', key)
        if is_integer_tree(tree):
            add(f"ABI_SIGNED({k}, {name});", key)
    for name in sorted(ice):
        add(f'ABI_INT({c_string("macro " + name)}, ({name}));', f"macro {name}")
    for name in sorted(strings):
        add(f'abi_str({c_string("macro " + name)}, {name}, ABI_SIZE({name}));', f"macro {name}")
    for name in sorted(pointers):
        add(f'abi_ptr({c_string("macro " + name)}, (const void *)({name}));', f"macro {name}")
    return out


def build_probe(clang, root, work, tag, decls, ice, strings, pointers):
    head = tu_text().rstrip("\n").split("\n") + PROBE_HEAD.strip("\n").split("\n")
    lines = head + probe_lines(decls, ice, strings, pointers) + ["    return 0;", "}"]
    src = os.path.join(work, f"probe_{tag}.c")
    exe = os.path.join(work, f"probe_{tag}")
    cmd = lambda s: [clang, STD, "-w", "-ferror-limit=0", "-fno-caret-diagnostics",
                     "-I", root, "-o", exe, s]
    _, _, dropped = compile_dropping(cmd, lines, "/*ABI ", src)
    r = run([exe])
    if r.returncode != 0:
        raise CheckError(f"probe for {root} failed ({r.returncode}): {r.stderr[-2000:]}")
    facts = {}
    for line in r.stdout.splitlines():
        key, attr = line.split("\t", 1)
        a, v = attr.split("=", 1)
        facts.setdefault(key, {})[a] = v
    for key in dropped:
        facts.setdefault(key, {})["probe"] = "does-not-compile"
    return facts, src


# --------------------------------------------------------------------------

def tree_facts(clang, root, work, tag):
    """Every fact about one tree: {key: {attribute: value}}."""
    macros, headers, foreign = preprocess(clang, root, work, tag)
    decls = ast_pass(clang, root, work, tag)
    types, ice, strings, pointers = type_pass(clang, root, work, tag, decls, macros)
    facts, probe_src = build_probe(clang, root, work, tag, decls, ice, strings, pointers)

    def f(key):
        return facts.setdefault(key, {})

    for h in headers:
        f(f"header {h}")["included"] = "yes"
    for path in foreign:
        f(f"header {os.path.basename(path)}")["included"] = f"from {path}, not from this tree"
    for label, (node, _) in decls.records.items():
        f(f"record {label}")
        for path, fd, inline in record_fields(node):
            attrs = f(f"field {label}.{path}")
            if inline:
                attrs["type"] = inline
            elif fd.get("isBitfield"):
                attrs["type"] = types.get(f"field {label}.{path}", fd["type"]["qualType"])
            else:
                attrs["type"] = types.get(f"field {label}.{path}", "<unknown>")
    for label in decls.enumtypes:
        f(f"enumtype {label}")
    for name in decls.enum_consts:
        f(f"enum {name}")
    for name, node in decls.typedefs.items():
        f(f"typedef {name}")["type"] = canonical(node["inner"][0], hint=name)
    for name in decls.functions:
        f(f"function {name}")["type"] = types.get(f"function {name}", "<unknown>")
    for name in decls.variables:
        f(f"variable {name}")["type"] = types.get(f"variable {name}", "<unknown>")
    for name, (form, body) in macros.items():
        attrs = f(f"macro {name}")
        if form == "function":
            attrs["function-like"] = f"{len(body)} parameter(s)"
        elif not body:
            attrs["object-like"] = "empty"
        elif name not in ice and name not in strings and name not in pointers:
            attrs["object-like"] = "not a constant"
            attrs["expands-to"] = "'" + " ".join(TOKEN_RE.findall(body)) + "'"
        if f"macro {name}" in types:
            attrs["type"] = types[f"macro {name}"]
        if form == "object" and body in decls.functions:
            # An alias of a function: its canonical type.
            attrs["type"] = types.get(f"function {body}", attrs.get("type"))
    return facts, probe_src


TOKEN_RE = re.compile(r"""[A-Za-z_]\w*|\.?\d(?:[eEpP][+-]|[\w.])*|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'"""
                      r"|##|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!~<>=?:;,.()\[\]{}#]")

ATTR_ORDER = ("included", "type", "offset", "size", "align", "bitoffset", "bitwidth", "value", "signed",
              "string", "pointer",
              "function-like", "object-like", "expands-to", "probe")


def render(attrs):
    if attrs is None:
        return "(absent)"
    keys = sorted(attrs, key=lambda a: (ATTR_ORDER.index(a) if a in ATTR_ORDER else 99, a))
    return " ".join(f"{a}={attrs[a]}" if a != "type" else f"type='{attrs[a]}'" for a in keys) or "(present)"


# --------------------------------------------------------------------------
# Warnings from our headers under strict compilers.

def header_warnings(ours, work, probe_src, tools):
    """Diagnostics whose location is in our dat2/ files."""
    dat2 = os.path.realpath(os.path.join(ours, "dat2")) + os.sep
    found = {}
    consumer = os.path.join(work, "consumer.c")
    with open(consumer, "w") as f:
        f.write(tu_text("int main(void) { return 0; }\n"))
    consumer_cc = os.path.join(work, "consumer.cc")
    with open(consumer_cc, "w") as f:
        f.write(tu_text("int main() { return 0; }\n"))
    jobs = []
    c99 = ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-fsyntax-only", "-I", ours]
    if tools.get("clang"):
        jobs.append(("clang -std=c99", [tools["clang"]] + c99 + [probe_src]))
    if tools.get("gcc"):
        jobs.append(("gcc -std=c99", [tools["gcc"]] + c99 + [consumer]))
    if tools.get("cxx"):
        jobs.append(("c++ -std=c++20", [tools["cxx"], "-std=c++20", "-Wall", "-Wextra", "-pedantic",
                                        "-fsyntax-only", "-I", ours, consumer_cc]))
    for label, cmd in jobs:
        r = run(cmd)
        for m in re.finditer(r"^(.*?):(\d+):(\d+): (warning|error): (.*)$", r.stderr, re.M):
            if os.path.realpath(m.group(1)).startswith(dat2):
                where = f"{os.path.basename(m.group(1))}:{m.group(2)}"
                msgs = found.setdefault(f"warning {where}", {}).setdefault(label, [])
                if m.group(5) not in msgs:
                    msgs.append(m.group(5))
        if r.returncode != 0 and not found:
            found[f"warning {label}"] = {"error": [r.stderr.strip().splitlines()[-1] if r.stderr else "failed"]}
    return found


# --------------------------------------------------------------------------

def load_allowlist(path):
    allowed = {}
    if not path or not os.path.exists(path):
        return allowed
    with open(path) as f:
        for n, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            entry, _, reason = text.partition("#")
            entry, reason = " ".join(entry.split()), reason.strip()
            if not reason:
                raise CheckError(f"{path}:{n}: allowlist entry without a reason: {text}")
            allowed[entry] = reason
    return allowed


def skip(msg):
    if os.environ.get("CI") == "true":
        print(f"abi_check: FAIL: {msg} (CI=true: the check may not be skipped)")
        sys.exit(1)
    print(f"abi_check: SKIP: {msg}")
    sys.exit(77)


def find_tool(given, names):
    if given is not None:
        return shutil.which(given) if given else None
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours", help="include root of our headers (holds dat2/)")
    ap.add_argument("reference", help="include root of the reference headers (holds dat2/)")
    ap.add_argument("--allowlist", help="deliberate differences: '<kind> <name>  # reason' a line")
    ap.add_argument("--clang", help="clang to use (default: clang, clang-14 from PATH)")
    ap.add_argument("--gcc", help="gcc for the extra warning check ('' to skip)")
    ap.add_argument("--cxx", help="C++ compiler for the C++20 warning check ('' to skip)")
    ap.add_argument("--no-warnings", action="store_true", help="skip the header warning check")
    ap.add_argument("--dump", metavar="DIR", help="write the facts of each tree to DIR/{ours,reference}.txt")
    ap.add_argument("--keep", action="store_true", help="keep the generated sources (path is printed)")
    args = ap.parse_args()

    started = time.monotonic()
    if not os.path.isfile(os.path.join(args.reference, "dat2", "udat.h")):
        skip(f"reference headers not found: {os.path.join(args.reference, 'dat2', 'udat.h')}")
    clang = find_tool(args.clang, ("clang", "clang-14"))
    if not clang:
        skip("clang not found")
    try:
        allowed = load_allowlist(args.allowlist)
    except CheckError as e:
        print(f"abi_check: {e}")
        return 1
    if not os.path.isfile(os.path.join(args.ours, "dat2", "udat.h")):
        print(f"abi_check: FAIL: {os.path.join(args.ours, 'dat2', 'udat.h')} does not exist")
        return 1

    work = tempfile.mkdtemp(prefix="abi_check.")
    try:
        try:
            ref, _ = tree_facts(clang, args.reference, work, "ref")
        except CheckError as e:
            print(f"abi_check: ERROR: the reference tree cannot be analysed: {e}")
            return 1
        try:
            ours, probe_src = tree_facts(clang, args.ours, work, "ours")
        except CheckError as e:
            print(f"abi_check: FAIL: our tree cannot be analysed: {e}")
            return 1
        warnings = {}
        if not args.no_warnings:
            tools = {"clang": clang,
                     "gcc": find_tool(args.gcc, ("gcc", "cc")),
                     "cxx": find_tool(args.cxx, ("clang++", "g++", "c++"))}
            warnings = header_warnings(args.ours, work, probe_src, tools)
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)
            for name, facts in (("ours", ours), ("reference", ref)):
                with open(os.path.join(args.dump, f"{name}.txt"), "w") as f:
                    for key in sorted(facts):
                        f.write(f"{key}: {render(facts[key])}\n")
    finally:
        if args.keep:
            print(f"abi_check: generated files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    counts = {}
    for key in set(ours) | set(ref):
        kind = key.split(" ", 1)[0]
        counts[kind] = counts.get(kind, 0) + 1
    diffs, allowed_hits = [], []
    for key in sorted(set(ours) | set(ref), key=lambda k: (KIND_ORDER.index(k.split(" ", 1)[0]), k)):
        a, b = ours.get(key), ref.get(key)
        if a == b:
            continue
        if key in allowed:
            allowed_hits.append(key)
            continue
        diffs.append((key, render(a), render(b)))
    for key in sorted(warnings):
        diffs.append((key, "; ".join(f"{t}: {' / '.join(m)}" for t, m in warnings[key].items()), "(none)"))

    summary = ", ".join(f"{counts[k]} {k}" for k in KIND_ORDER if k in counts)
    print(f"abi_check: ours {args.ours} vs reference {args.reference}")
    print(f"abi_check: compared {summary}")
    for key in allowed_hits:
        print(f"abi_check: allowed: {key}  ({allowed[key]})")
    for key in sorted(set(allowed) - set(allowed_hits)):
        print(f"abi_check: note: allowlist entry matches no difference: {key}")
    elapsed = time.monotonic() - started
    if diffs:
        print(f"abi_check: FAIL: {len(diffs)} difference(s) ({elapsed:.1f}s):")
        by_kind = {}
        for key, a, b in diffs:
            print(f"  {key}\n      ours:      {a}\n      reference: {b}")
            by_kind[key.split(" ", 1)[0]] = by_kind.get(key.split(" ", 1)[0], 0) + 1
        print("abi_check: FAIL: differences by kind: "
              + ", ".join(f"{by_kind[k]} {k}" for k in KIND_ORDER if k in by_kind))
        return 1
    print(f"abi_check: PASS ({elapsed:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
