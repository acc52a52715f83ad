#!/usr/bin/env python3
# Lists every DAT_RETURN type and subtype constant of a dat_error.h as C++ table rows.
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 the fastdapl authors
"""Usage: gen_error_names.py DAT_ERROR_H OUTPUT_H
       gen_error_names.py --self-test

Writes kDatReturnTypes[] and kDatReturnSubtypes[], arrays of
{VALUE_EXPRESSION, "NAME"}, so that the dat_strerror test covers every
constant the header defines. The value expression is the constant itself;
the compiler evaluates it, so any spelling of the value works.

A constant may be written either way:
  * as an enumerator of `typedef enum [tag] { ... } DAT_RETURN_TYPE;` (or
    DAT_RETURN_SUBTYPE), or of `enum tag { ... };` with a separate
    `typedef enum tag DAT_RETURN_TYPE;`. Preprocessor conditionals inside
    the enum body (#ifdef DAT_EXTENSIONS ...) are copied into the output.
  * as an object-like `#define DAT_X value` with a numeric value: a
    multiple of 0x10000 up to 0x3FFF0000 is a type, a value up to 0xFFFF a
    subtype (0 is DAT_SUCCESS for types, a subtype otherwise). The class
    bits (DAT_CLASS_*), the masks (*_MASK) and aliases (a value that is
    just another name, e.g. DAT_NAME_NOT_FOUND) are not constants of their
    own. Each such row is wrapped in #ifdef NAME.
"""
import re
import sys

TYPE_ENUM = "DAT_RETURN_TYPE"
SUBTYPE_ENUM = "DAT_RETURN_SUBTYPE"
MIN_TYPES = 20      # sanity floor: the 2.0 header has 25 (26 with extensions)
MIN_SUBTYPES = 90   # and 104 subtypes


class GenError(Exception):
    pass


def strip_comments(text):
    """Removes /* */ and // comments, keeping line structure."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n") or " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return text.replace("\\\n", " ")  # join continued lines


def split_top_level(body):
    """Splits an enum body (without preprocessor lines) at top-level commas."""
    items, depth, cur = [], 0, []
    for c in body:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    items.append("".join(cur))
    return [i.strip() for i in items if i.strip()]


def find_enum_body(text, typedef_name):
    """The {...} body of the enum typedef'd as typedef_name, or None."""
    m = re.search(r"typedef\s+enum\s*(?:\w+\s*)?\{([^{}]*)\}\s*" + typedef_name + r"\s*;", text, flags=re.S)
    if m:
        return m.group(1)
    t = re.search(r"typedef\s+enum\s+(\w+)\s+" + typedef_name + r"\s*;", text)
    if t:
        m = re.search(r"\benum\s+" + t.group(1) + r"\s*\{([^{}]*)\}", text, flags=re.S)
        if m:
            return m.group(1)
    return None


def enum_rows(body):
    """[(kind, text)]: ('name', NAME) per enumerator, ('pp', line) per conditional."""
    rows, chunk = [], []

    def flush():
        for item in split_top_level("\n".join(chunk)):
            name = item.split("=")[0].strip()
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                raise GenError(f"cannot read enumerator '{item}'")
            rows.append(("name", name))
        chunk.clear()

    for line in body.splitlines():
        s = line.strip()
        if s.startswith("#"):
            flush()
            directive = re.sub(r"^#\s*", "#", s)
            if re.match(r"#(if|ifdef|ifndef|elif|else|endif)\b", directive):
                rows.append(("pp", directive))
            # other directives (#define, #pragma) inside an enum carry no constant
        else:
            chunk.append(line)
    flush()
    return rows


def c_int(literal):
    m = re.fullmatch(r"(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*", literal)
    if not m:
        return None
    return int(m.group(1), 0)


def eval_macro(value, known):
    """Numeric value of a #define body made of literals, known names, casts
    to DAT_* integer types, parentheses and | << + operators; None otherwise."""
    expr = re.sub(r"\(\s*DAT_U?INT(?:32|64)\s*\)", " ", value)
    expr = re.sub(r"\(\s*(?:unsigned|int|long|\s)+\)", " ", expr)
    out = []
    for tok in re.findall(r"0[xX][0-9a-fA-F]+[uUlL]*|[0-9]+[uUlL]*|[A-Za-z_]\w*|<<|>>|[()|+&]|\S", expr):
        if tok[0].isdigit():
            out.append(str(c_int(tok)))
        elif re.fullmatch(r"[A-Za-z_]\w*", tok):
            if tok not in known:
                return None
            out.append(str(known[tok]))
        elif tok in ("<<", ">>", "(", ")", "|", "+", "&"):
            out.append(tok)
        else:
            return None
    if not out:
        return None
    try:
        return int(eval(" ".join(out), {"__builtins__": {}}, {}))  # only digits and operators remain
    except Exception:
        return None


def macro_constants(text):
    """(types, subtypes): names of numeric #define constants, in file order."""
    known, types, subtypes = {}, [], []
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(DAT_\w+)[ \t]+([^\n]+)$", text, flags=re.M):
        name, value = m.group(1), m.group(2).strip()
        if re.fullmatch(r"\(?\s*[A-Za-z_]\w*\s*\)?", value):
            continue  # an alias of another name
        v = eval_macro(value, known)
        if v is None:
            continue
        known[name] = v
        if name.startswith("DAT_CLASS_") or name.endswith("_MASK"):
            continue
        if name == "DAT_SUCCESS":
            types.append(name)
        elif 0 <= v <= 0xFFFF:
            subtypes.append(name)
        elif v & 0xFFFF == 0 and v <= 0x3FFF0000:
            types.append(name)
    return types, subtypes


def collect(text):
    """{TYPE_ENUM: rows, SUBTYPE_ENUM: rows} for one header's text."""
    text = strip_comments(text)
    macro_types, macro_subtypes = macro_constants(text)
    result = {}
    for enum_name, macros in ((TYPE_ENUM, macro_types), (SUBTYPE_ENUM, macro_subtypes)):
        body = find_enum_body(text, enum_name)
        rows = enum_rows(body) if body is not None else []
        names = {n for k, n in rows if k == "name"}
        for n in macros:
            if n not in names:
                rows += [("pp", f"#ifdef {n}"), ("name", n), ("pp", "#endif")]
                names.add(n)
        result[enum_name] = rows
    return result


def check(rows_by_enum, source):
    floors = {TYPE_ENUM: MIN_TYPES, SUBTYPE_ENUM: MIN_SUBTYPES}
    seen = set()
    for enum_name, rows in rows_by_enum.items():
        names = [n for k, n in rows if k == "name"]
        if len(names) < floors[enum_name]:
            raise GenError(f"{source}: only {len(names)} {enum_name} constants found; is the header readable?")
        for n in names:
            if n in seen:
                raise GenError(f"{source}: {n} listed twice")
            seen.add(n)
    for required, enum_name in (("DAT_SUCCESS", TYPE_ENUM), ("DAT_NOT_IMPLEMENTED", TYPE_ENUM),
                                ("DAT_NO_SUBTYPE", SUBTYPE_ENUM), ("DAT_THREAD_SAFETY_NOT_FOUND", SUBTYPE_ENUM)):
        if ("name", required) not in rows_by_enum[enum_name]:
            raise GenError(f"{source}: {required} missing from {enum_name}")


def render(rows_by_enum, source):
    out = [f"// Generated by gen_error_names.py from {source}; do not edit.",
           "#pragma once",
           "#include <dat2/udat.h>",
           "",
           "struct DatConstantName {",
           "    DAT_UINT32 value;",
           "    const char* name;",
           "};",
           ""]
    for array, enum_name in (("kDatReturnTypes", TYPE_ENUM), ("kDatReturnSubtypes", SUBTYPE_ENUM)):
        out.append(f"inline constexpr DatConstantName {array}[] = {{")
        for kind, text in rows_by_enum[enum_name]:
            out.append(text if kind == "pp" else f'    {{static_cast<DAT_UINT32>({text}), "{text}"}},')
        out += ["};", ""]
    return "\n".join(out)


SELF_TEST_MACROS = "\n".join(
    ["#define DAT_CLASS_ERROR 0x80000000", "#define DAT_TYPE_MASK 0x3fff0000",
     "#define DAT_SUCCESS 0x00000000", "#define DAT_ABORT 0x00010000U",
     "#define DAT_BIG ((DAT_UINT32)0x3FFF0000)", "#define DAT_NAME_NOT_FOUND DAT_ABORT",
     "#define DAT_GET_TYPE(x) ((x) & DAT_TYPE_MASK)"]
    + [f"#define DAT_T{i} (0x{i + 2:x} << 16) /* c */" for i in range(MIN_TYPES)]
    + ["#define DAT_NO_SUBTYPE 0", "#define DAT_THREAD_SAFETY_NOT_FOUND 99"]
    + [f"#define DAT_S{i} {i + 1}" for i in range(MIN_SUBTYPES)]
    + ["#define DAT_NOT_IMPLEMENTED 0x3FFF0000"])

SELF_TEST_ENUMS = """
/* typedef enum { DAT_COMMENTED_OUT = 1 } DAT_RETURN_TYPE; */
enum dat_return_type { DAT_SUCCESS = 0, DAT_ABORT = (1 << 16), // trailing
#  ifdef DAT_EXTENSIONS
    DAT_EXTENSION_BASE = 0x10000000,
#endif
""" + "".join(f"    DAT_T{i} = 0x{i + 2:x}0000,\n" for i in range(MIN_TYPES)) + """
    DAT_NOT_IMPLEMENTED = 0x3FFF0000
};
typedef enum dat_return_type DAT_RETURN_TYPE;
typedef enum
{
    DAT_NO_SUBTYPE,
""" + "".join(f"    DAT_S{i},\n" for i in range(MIN_SUBTYPES)) + """    DAT_THREAD_SAFETY_NOT_FOUND
} DAT_RETURN_SUBTYPE;
"""


def self_test():
    def names(rows):
        return [n for k, n in rows if k == "name"]

    m = collect(SELF_TEST_MACROS)
    check(m, "macros")
    assert names(m[TYPE_ENUM]) == ["DAT_SUCCESS", "DAT_ABORT", "DAT_BIG"] + [
        f"DAT_T{i}" for i in range(MIN_TYPES)] + ["DAT_NOT_IMPLEMENTED"], names(m[TYPE_ENUM])
    assert names(m[SUBTYPE_ENUM]) == ["DAT_NO_SUBTYPE", "DAT_THREAD_SAFETY_NOT_FOUND"] + [
        f"DAT_S{i}" for i in range(MIN_SUBTYPES)], names(m[SUBTYPE_ENUM])
    e = collect(SELF_TEST_ENUMS)
    check(e, "enums")
    types = names(e[TYPE_ENUM])
    assert types[:3] == ["DAT_SUCCESS", "DAT_ABORT", "DAT_EXTENSION_BASE"] and "DAT_COMMENTED_OUT" not in types, types
    assert ("pp", "#ifdef DAT_EXTENSIONS") in e[TYPE_ENUM] and ("pp", "#endif") in e[TYPE_ENUM]
    assert len(names(e[SUBTYPE_ENUM])) == MIN_SUBTYPES + 2
    text = render(e, "self-test")
    assert '{static_cast<DAT_UINT32>(DAT_ABORT), "DAT_ABORT"},' in text
    try:
        check(collect("#define DAT_SUCCESS 0\n"), "empty")
    except GenError:
        pass
    else:
        raise AssertionError("a header without the constants was accepted")
    print("gen_error_names self-test: ok")


def main(argv):
    if argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    source, output = argv[1], argv[2]
    try:
        with open(source, encoding="utf-8", errors="replace") as f:
            rows = collect(f.read())
        check(rows, source)
    except (OSError, GenError) as e:
        sys.stderr.write(f"gen_error_names: {e}\n")
        return 1
    with open(output, "w", encoding="utf-8") as f:
        f.write(render(rows, source.replace("\\", "/").split("/include/")[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
