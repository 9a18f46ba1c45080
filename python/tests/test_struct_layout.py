"""The ctypes Structures mirror include/flashcl.h exactly.

Two independent checks, each able to fail on its own kind of drift:
1. the header's field names, parsed from each `typedef struct`, in order,
   equal the Structure's (a field added, removed, renamed or moved, even one
   that would fit in tail padding);
2. sizeof and every field's offset and size, as the C compiler computes
   them (tests/struct_layout.c, built by CMake beside the library), equal
   ctypes' (a type changed)."""
import ctypes
import os
import re
import subprocess

import pytest

from flashcl import _lib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def header_fields(name):
    text = open(os.path.join(ROOT, "include", "flashcl.h")).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), text, re.S)
    assert body, "struct %s not found in the header" % name
    names = []
    for decl in body.group(1).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        # "const char *a, *b" / "size_t x[3]" / "fcl_layout q, k": the names
        first, *rest = decl.split(",")
        for d in [first.split()[-1]] + rest:
            names.append(re.sub(r"\[.*\]", "", d).strip().lstrip("*"))
    return names


@pytest.mark.parametrize("name", sorted(_lib.STRUCTS))
def test_fields_match_the_header(name):
    assert [f for f, _ in _lib.STRUCTS[name]._fields_] == header_fields(name)


def compiled_layout():
    tool = os.environ.get("FLASHCL_STRUCT_LAYOUT") or os.path.join(
        os.path.dirname(_lib.library_path), "tests", "struct_layout")
    if not os.path.exists(tool):
        pytest.fail("the C layout helper %s is missing: build the tests (CMake "
                    "FLASHCL_BUILD_TESTS) or set FLASHCL_STRUCT_LAYOUT" % tool)
    out = subprocess.run([tool], check=True, capture_output=True, text=True).stdout
    return [line.split() for line in out.splitlines()]


def test_offsets_and_sizes_match_the_compiler():
    seen = set()
    for struct, field, offset, size in compiled_layout():
        mirror = _lib.STRUCTS[struct]
        if field == "-":
            assert ctypes.sizeof(mirror) == int(offset), "sizeof(%s)" % struct
            seen.add(struct)
            continue
        f = getattr(mirror, field)
        assert (f.offset, f.size) == (int(offset), int(size)), "%s.%s" % (struct, field)
    assert seen == set(_lib.STRUCTS), "the helper does not cover every mirrored struct"
