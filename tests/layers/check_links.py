#!/usr/bin/env python3
"""The layer test at link time: no floor calls up, and no floor defines what a lower floor declares.

check_layers.py keeps every #include pointing down the floors of docs/ARCHITECTURE.md ("Layers").
An include is not the only way up: a function declared in core/ and defined in kernels/, or a
Tensor method declared in tensor.h and defined in ops/, compiles with every include pointing
down, yet the lower floor cannot be linked, read or replaced without the higher one. This script
reads the symbol tables of libmixprec's object files (nm) and fails on:

  upward call        an object of floor f references a symbol that no object of floor <= f
                     defines and an object of a higher floor does;
  upward definition  an object of floor g defines a member function of a class, or a function,
                     that a header of a lower floor declares (the class's or the function's
                     header names the floor; see declared_floor()).

Each violation is printed with the object, the symbol and the rule. Floors come from
check_layers.py's reading of the floors block; an object's floor is its source's top folder
(src/<folder>/...). Functions of anonymous namespaces, templates' implicit instantiations and
inline functions (weak symbols) belong to whoever includes them and are not counted.

Usage: check_links.py REPO_ROOT BUILD_DIR [NM]   (NM defaults to `nm`)
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import read_floors  # noqa: E402  (one reading of the floors block)

OBJECT_DIRS = ('CMakeFiles/mixprec.dir', 'CMakeFiles/mixprec_cuda.dir')
STRONG = set('TDBR')  # text, data, bss, read-only: one definition per program
CLASS_LINE = re.compile(r'^\s*(?:template\s*<[^>]*>\s*)?(class|struct)\s+(?:\[\[[^\]]*\]\]\s*)?'
                        r'(?:MIXPREC_\w+\s+)?([A-Za-z_]\w*)\s*(?:final\s*)?(?::[^;{]*)?\{')
NAMESPACE_LINE = re.compile(r'^\s*namespace\s+([A-Za-z_][\w:]*)\s*\{')
# A function declaration at namespace scope: `... name(params) [const] [noexcept];`, one line or
# continued; read from the header with comments stripped.
FUNCTION_DECL = re.compile(r'(?:^|[\s*&>])([A-Za-z_]\w*)\s*\(([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*)\)'
                           r'\s*(?:const\s*)?(?:noexcept\s*)?(?:->\s*[\w:<>]+\s*)?;')


def floor_of_path(rel, floors):
    """The floor of a path under src/ or include/mixprec/ (None outside the floors)."""
    parts = rel.replace(os.sep, '/').split('/')
    if parts[0] == 'src' and len(parts) > 2:
        return floors.get(parts[1])
    if parts[:2] == ['include', 'mixprec'] and len(parts) > 3:
        return floors.get(parts[2])
    return None


def unity_sources(path, repo):
    """The sources (relative to the repo) that a unity object's source includes (CMake's
    Unity/unity_*.cxx beside the object, MIXPREC_UNITY_BUILD; cmake/unity.cmake keeps one floor
    per group)."""
    text = open(path[:-2], encoding='utf-8').read()
    return [os.path.relpath(inc, repo) for inc in re.findall(r'^#include "([^"]+)"', text, re.M)]


def objects(build, repo, floors):
    """[(path, source path relative to the repo)] of libmixprec's objects. A unity object is
    named by its first source, with the count of the others; its sources must share one floor."""
    found = []
    for d in OBJECT_DIRS:
        root = os.path.join(build, d)
        for dirpath, _, names in os.walk(root):
            for n in names:
                if n.endswith('.o'):
                    path = os.path.join(dirpath, n)
                    rel = os.path.relpath(path, root)[:-2]  # src/ops/view_ops.cpp
                    if rel.startswith('Unity' + os.sep):
                        sources = unity_sources(path, repo)
                        if len({floor_of_path(s, floors) for s in sources}) != 1:
                            sys.exit(f'{rel}: a unity object whose sources are not of one floor: '
                                     f'{", ".join(sources)}')
                        rel = sources[0] + (f' (+{len(sources) - 1} in {n[:-2]})'
                                            if len(sources) > 1 else '')
                    found.append((path, rel))
    return sorted(found)


def symbols(nm, path):
    """(defined strong {mangled}, undefined {mangled}) of one object."""
    out = subprocess.run([nm, '-P', path], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        if kind == 'U':
            undefined.add(name)
        elif kind in STRONG:
            defined.add(name)
    return defined, undefined


def demangle(names):
    names = sorted(names)
    if not names:
        return {}
    out = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, out))


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def scoped_lines(text):
    """Yields (enclosing scope names, line) with namespaces and classes tracked by braces."""
    stack = []  # (name or None, depth at which it opened)
    depth = 0
    for line in text.splitlines():
        opened = None
        m = NAMESPACE_LINE.match(line)
        if m:
            opened = m.group(1)
        else:
            m = CLASS_LINE.match(line)
            if m:
                opened = m.group(2)
        yield [s for s, _ in stack if s], line, opened
        for ch in line:
            if ch == '{':
                depth += 1
                stack.append((opened, depth) if opened else (None, depth))
                opened = None
            elif ch == '}':
                if stack:
                    stack.pop()
                depth -= 1


def declarations(repo, floors):
    """({qualified class: floor}, {(qualified namespace, function name): {floors}}) of the headers."""
    classes, functions = {}, {}
    for top in ('include/mixprec', 'src'):
        for dirpath, _, names in os.walk(os.path.join(repo, top)):
            for n in names:
                if not n.endswith('.h'):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, n), repo)
                floor = floor_of_path(rel, floors)
                if floor is None:
                    continue
                text = strip_comments(open(os.path.join(repo, rel), encoding='utf-8').read())
                for scope, line, opened in scoped_lines(text):
                    if opened and CLASS_LINE.match(line):
                        name = '::'.join(scope + [opened])
                        classes[name] = min(floor, classes.get(name, floor))
                    elif scope and all(s.startswith('mixprec') or '::' in s or s.islower()
                                       for s in scope[:1]):
                        for m in FUNCTION_DECL.finditer(line):
                            key = ('::'.join(scope), m.group(1))
                            functions.setdefault(key, set()).add(floor)
    return classes, functions


def split_function(demangled):
    """('mixprec::ops', 'name') of 'mixprec::ops::name(args) const', or None."""
    head = demangled.split('(', 1)[0]
    if '(' not in demangled or '<' in head or 'anonymous namespace' in demangled:
        return None
    parts = head.split('::')
    if len(parts) < 2 or parts[0] != 'mixprec':
        return None
    return '::'.join(parts[:-1]), parts[-1]


def declared_floor(qualifier, name, floor, classes, functions):
    """The floor declaring qualifier::name, defined on `floor`: the class's header for a member;
    for a function, the lowest floor whose headers declare one of that name, unless a header of
    `floor` declares one too (an overload of a lower floor's name, as name(MemoryFormat) beside
    name(DType), is the defining floor's own). None if no header declares it."""
    if qualifier in classes:
        return classes[qualifier]
    found = functions.get((qualifier, name))
    if not found or floor in found:
        return None
    return min(found)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    repo, build = sys.argv[1], sys.argv[2]
    nm = sys.argv[3] if len(sys.argv) > 3 else 'nm'
    floors = read_floors(os.path.join(repo, 'docs', 'ARCHITECTURE.md'))
    objs = objects(build, repo, floors)
    if not objs:
        sys.exit(f'{build}: no object files of libmixprec under {", ".join(OBJECT_DIRS)}; '
                 'build the library first')
    defined_at = {}  # mangled -> {floor}
    table = []
    for path, rel in objs:
        floor = floor_of_path(rel, floors)
        if floor is None:
            sys.exit(f'{rel}: object of a source outside the floors')
        defined, undefined = symbols(nm, path)
        table.append((rel, floor, defined, undefined))
        for s in defined:
            defined_at.setdefault(s, set()).add(floor)
    names = demangle(set(defined_at) | {u for *_, und in table for u in und if u in defined_at})
    classes, functions = declarations(repo, floors)

    errors = []
    for rel, floor, defined, undefined in table:
        for s in sorted(undefined):
            where = defined_at.get(s)
            if where and min(where) > floor:
                errors.append(f'{rel}: calls {names.get(s, s)}, defined only on floor '
                              f'{min(where)} above its floor {floor} (rule: upward call)')
        for s in sorted(defined):
            parts = split_function(names.get(s, s))
            if not parts:
                continue
            lower = declared_floor(parts[0], parts[1], floor, classes, functions)
            if lower is not None and lower < floor:
                errors.append(f'{rel}: defines {names.get(s, s)}, declared on floor {lower} '
                              f'below its floor {floor} (rule: upward definition)')
    for e in errors:
        print(e)
    print(f'check_links: {len(objs)} objects, {len(errors)} violation(s)')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
