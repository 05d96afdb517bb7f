#!/usr/bin/env python3
"""The largest contributors to a wasm module, by crate: the code bytes of each function, grouped by
the crate its (mangled) name starts with, and the data segments. Reads the module's name section,
so run it on cargo's output (before wasm-opt strips the names).

Usage: python3 dev/wasm_contributors.py FILE.wasm [TOP]
"""

import re
import sys
from collections import Counter


def leb(data, i):
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def sections(data):
    assert data[:4] == b"\0asm", "not a wasm module"
    i = 8
    while i < len(data):
        kind = data[i]
        size, i = leb(data, i + 1)
        yield kind, data[i:i + size]
        i += size


def imported_functions(body):
    count, i = leb(body, 0)
    functions = 0
    for _ in range(count):
        for _ in range(2):  # module and field names
            n, i = leb(body, i)
            i += n
        kind = body[i]
        i += 1
        if kind == 0:  # function: a type index
            _, i = leb(body, i)
            functions += 1
        elif kind == 1:  # table: element type, limits
            i += 1
            flags, i = leb(body, i)
            _, i = leb(body, i)
            if flags & 1:
                _, i = leb(body, i)
        elif kind == 2:  # memory: limits
            flags, i = leb(body, i)
            _, i = leb(body, i)
            if flags & 1:
                _, i = leb(body, i)
        elif kind == 3:  # global: type, mutability
            i += 2
        else:
            raise ValueError("unknown import kind %d" % kind)
    return functions


def function_names(body):
    i, names = 0, {}
    while i < len(body):
        kind = body[i]
        size, i = leb(body, i + 1)
        if kind == 1:
            j = i
            count, j = leb(body, j)
            for _ in range(count):
                index, j = leb(body, j)
                n, j = leb(body, j)
                names[index] = body[j:j + n].decode("utf-8", "replace")
                j += n
        i += size
    return names


def crate_of(name):
    """The first path segment of a legacy-mangled name; an impl (`<Type as Trait>`) by its type's crate."""
    if name.startswith("_R"):  # v0 mangling: the first crate root, `C` [disambiguator] length name
        m = re.search(r"C(?:s[0-9A-Za-z]*_)?(\d+)", name)
        return name[m.end():m.end() + int(m.group(1))] if m else "(v0: %s)" % name[:40]
    m = re.match(r"_ZN(\d+)", name)
    if not m:
        return "(not Rust: %s)" % name[:40]
    n = int(m.group(1))
    segment = name[m.end():m.end() + n]
    if segment.startswith("_$LT$"):
        segment = re.split(r"\.\.|\$", segment[5:])[0] or "?"
    return segment


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    data = open(path, "rb").read()
    imports, names, bodies, data_bytes = 0, {}, [], 0
    for kind, body in sections(data):
        if kind == 2:
            imports = imported_functions(body)
        elif kind == 10:
            count, i = leb(body, 0)
            for _ in range(count):
                size, i = leb(body, i)
                bodies.append(size)
                i += size
        elif kind == 11:
            data_bytes = len(body)
        elif kind == 0:
            n, i = leb(body, 0)
            if body[i:i + n] == b"name":
                names = function_names(body[i + n:])
    by_crate = Counter()
    for k, size in enumerate(bodies):
        by_crate[crate_of(names.get(imports + k, "?"))] += size
    total = sum(bodies)
    print("%s: %d bytes, code %d bytes in %d functions, data %d bytes" % (path, len(data), total, len(bodies), data_bytes))
    for crate, size in by_crate.most_common(top):
        print("%9d  %5.1f%%  %s" % (size, 100.0 * size / total, crate))


if __name__ == "__main__":
    main()
