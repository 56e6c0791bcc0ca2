#!/usr/bin/env python3
"""Every #include points down: the layer test (ctest: layers.includes).

The floors are read from docs/ARCHITECTURE.md, section "Layers": the fenced block after the
line `<!-- floors: ... -->`, one floor per line, top floor first, written as

    <number>  <folder> [<folder> ...]  | what the floor holds

(floor 1 is the bottom). A file in folder F (src/F/..., include/mixprec/F/..., and tools/ as the
folder `tools`) may include its own folder and folders on lower floors; an include of a higher
floor, or of another folder on F's own floor, fails naming FILE:LINE and the edge. Files directly
in src/ or include/mixprec/ (the umbrella header mixprec.h) belong to no floor and are not
checked. The test also fails if a folder exists under src/ or include/mixprec/ that the
document does not list, or the document lists a folder that does not exist, so the drawing and
the tree cannot drift apart; and it checks itself on a made-up upward include first.

The rooms of the kernels floor are read from the same document, section "Rooms": the fenced
block after the line `<!-- rooms: ... -->`, one room per line, written as

    <room>  <room it may include> [...]  | what the room holds
    allow   <file> <include>             | why (an exception, named one include at a time)

`contracts` are the headers directly in src/kernels/, `entries` the sources directly in
src/kernels/ (backend.cpp, api_*.cpp), `above` every checked file outside src/kernels/ (the
floors above the kernels); every other room is a sub-folder of src/kernels/. An include of
kernels/... that names a room the including file's room does not list fails naming FILE:LINE,
the include and the rule; so does a sub-folder of src/kernels/ the block does not list. Includes
outside kernels/ are the floors' business.

Namespaces against folders (issue 38, deliverable 2): a file in a folder of a floor F
(src/F/..., include/mixprec/F/...) that opens `namespace mixprec::G` with G neither F nor
`detail` fails, unless the namespace block only forward-declares (`class X;`); there are no
exceptions (issue 38 moved the last ones, autograd:: and diagnostics::, to runtime::). And a file in a backend's
folder of src/kernels/ (ref, cpu, cuda, devsim) or in spec/ must not open a namespace named
after another backend (`namespace ref`, `mixprec::kernels::cpu`, ...). Only `namespace` lines
naming mixprec:: (or, in src/kernels/, any name) are read: a namespace opened as nested bare
blocks (`namespace mixprec {` then `namespace amp {`) is not seen.

Usage: check_layers.py [REPO_ROOT]   (default: two levels above this file)
"""
import os
import re
import sys

INCLUDE = re.compile(r'\s*#\s*include\s*[<"]([^>"]+)[>"]')
FLOOR_LINE = re.compile(r'^\s*(\d+)\s+([a-z_][a-z_0-9 ]*?)\s*\|')
ROOM_LINE = re.compile(r'^\s*([a-z_][a-z_0-9]*)\s+([^|]*?)\s*\|')
TOP_ROOMS = ('contracts', 'entries', 'above')  # not folders: see room_of
NAMESPACE = re.compile(r'^\s*namespace\s+([A-Za-z_][A-Za-z_0-9]*(?:::[A-Za-z_][A-Za-z_0-9]*)*)\s*\{(.*)$')
FORWARD = re.compile(r'^(class|struct|union|enum(\s+(class|struct))?)\s+[A-Za-z_]\w*(\s*:\s*[\w:]+)?\s*;')

ROOTS = ('src', 'include/mixprec', 'tools')  # tools/ is the folder `tools`


def fenced_block(doc_path, marker):
    """(first line number, lines) of the fenced block after the line starting with marker."""
    text = open(doc_path, encoding='utf-8').read().splitlines()
    try:
        start = next(i for i, l in enumerate(text) if l.strip().startswith(marker))
    except StopIteration:
        sys.exit(f'{doc_path}: no "{marker} ... -->" line before its fenced block')
    fence = next((i for i in range(start + 1, len(text)) if text[i].startswith('```')), None)
    end = next((i for i in range(fence + 1, len(text)) if text[i].startswith('```')), None) \
        if fence is not None else None
    if fence is None or end is None:
        sys.exit(f'{doc_path}:{start + 1}: the {marker} line must be followed by a fenced block')
    return fence + 2, text[fence + 1:end]


def read_floors(doc_path):
    """{folder: floor number} from the floors block of docs/ARCHITECTURE.md."""
    first, lines = fenced_block(doc_path, '<!-- floors:')
    floors, numbers = {}, []
    for i, line in enumerate(lines, first):
        m = FLOOR_LINE.match(line)
        if not m:
            continue
        number = int(m.group(1))
        numbers.append(number)
        for folder in m.group(2).split():
            if folder in floors:
                sys.exit(f'{doc_path}:{i}: folder {folder} is listed twice')
            floors[folder] = number
    if not floors or numbers != list(range(len(numbers), 0, -1)):
        sys.exit(f'{doc_path}:{first - 1}: floors must be numbered from the top down to 1, '
                 f'one line each; got {numbers}')
    return floors


def read_rooms(doc_path):
    """({room: set of rooms it may include}, {(file, include): why}) from the rooms block."""
    first, lines = fenced_block(doc_path, '<!-- rooms:')
    rooms, allowed = {}, {}
    for i, line in enumerate(lines, first):
        m = ROOM_LINE.match(line)
        if not m:
            continue
        name, rest = m.group(1), m.group(2).split()
        if name == 'allow':
            if len(rest) != 2:
                sys.exit(f'{doc_path}:{i}: an allow line names one file and one include')
            allowed[(rest[0], rest[1])] = line.split('|', 1)[1].strip()
            continue
        if name in rooms:
            sys.exit(f'{doc_path}:{i}: room {name} is listed twice')
        rooms[name] = set(rest) | ({name} if name not in ('above',) else set())
    for name, may in rooms.items():
        for other in sorted(may - set(rooms)):
            sys.exit(f'{doc_path}: room {name} may include {other}, which the block does not list')
    for name in TOP_ROOMS:
        if name not in rooms:
            sys.exit(f'{doc_path}: the rooms block must list {name}')
    return rooms, allowed


def room_of(path):
    """The room of a checked file: a sub-folder of src/kernels/, contracts (a header directly in
    src/kernels/), entries (any other file there) or above (every file outside src/kernels/)."""
    parts = path.split('/')
    if parts[:2] != ['src', 'kernels']:
        return 'above'
    if len(parts) > 3:
        return parts[2]
    return 'contracts' if parts[2].endswith(('.h', '.cuh')) else 'entries'


def room_target(include):
    """The room an include names (kernels/X.h: contracts; kernels/R/...: R), or None."""
    parts = include.split('/')
    if parts[0] != 'kernels' or len(parts) < 2:
        return None
    return 'contracts' if len(parts) == 2 else parts[1]


def check_rooms(files, rooms, allowed):
    """files: [(path, lines)]. Returns the violations of the rooms block, one message each."""
    errors = []
    for path, lines in files:
        room = room_of(path)
        may = rooms.get(room)
        if may is None:
            continue  # an unlisted sub-folder: reported once by main
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = room_target(m.group(1))
            if target is None or target in may or (path, m.group(1)) in allowed:
                continue
            rule = f'{room} may include only ' + ', '.join(sorted(may))
            errors.append(f'{path}:{number}: {room} includes {m.group(1)} (room {target}); '
                          f'rule: {rule} (docs/ARCHITECTURE.md, "Rooms")')
    return errors


def folder_of(path):
    """The floor folder of a repository-relative path, or None (no folder: not checked)."""
    parts = path.split('/')
    if parts[0] == 'tools':
        return 'tools'
    if parts[0] == 'src' and len(parts) > 2:
        return parts[1]
    if parts[:2] == ['include', 'mixprec'] and len(parts) > 3:
        return parts[2]
    return None


def target_of(include, src_folders):
    """The folder an include names: mixprec/F/... (public) or F/... (private, under src/)."""
    parts = include.split('/')
    if parts[0] == 'mixprec' and len(parts) > 2:
        return parts[1]
    if len(parts) > 1 and parts[0] in src_folders:
        return parts[0]
    return None


def check(files, floors, src_folders):
    """files: [(path, lines)]. Returns the violations, one message each."""
    errors = []
    for path, lines in files:
        folder = folder_of(path)
        if folder is None:
            continue
        here = floors[folder]
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = target_of(m.group(1), src_folders)
            if target is None or target == folder:
                continue
            where = f'{path}:{number}: {folder} includes {m.group(1)}'
            if target not in floors:
                errors.append(f'{where}, whose folder {target} docs/ARCHITECTURE.md does not list')
            elif floors[target] > here:
                errors.append(f'{where}, which is above it (floor {floors[target]} > floor {here})')
            elif floors[target] == here:
                errors.append(f'{where}, which is beside it on floor {here} (folders on one floor '
                              f'must not include each other)')
    return errors


def opened_namespaces(lines):
    """[(line number, name, forward_only)] of the `namespace NAME {` lines of one file; forward_only
    when the block holds nothing but forward declarations."""
    found = []
    for number, line in enumerate(lines, 1):
        m = NAMESPACE.match(line)
        if not m:
            continue
        body = [m.group(2)] + lines[number:]
        forward_only = False
        for text in body:
            text = text.split('//', 1)[0].strip()
            if not text:
                continue
            if text.startswith('}'):
                forward_only = True
                break
            inline = FORWARD.match(text)
            if not inline:
                break
            if text[inline.end():].strip().startswith('}'):  # namespace a { class X; }
                forward_only = True
                break
        found.append((number, m.group(1), forward_only))
    return found


def check_namespaces(files, floors, rooms):
    """files: [(path, lines)]. Returns the violations."""
    errors = []
    backends = {r for r in rooms if r not in TOP_ROOMS and r != 'spec'}
    for path, lines in files:
        folder = folder_of(path)
        room = room_of(path) if folder == 'kernels' else None
        for number, name, forward_only in opened_namespaces(lines):
            parts = name.split('::')
            if room in backends or room == 'spec':
                others = sorted((set(parts) & backends) - {room})
                if others:
                    errors.append(f'{path}:{number}: namespace {name} in src/kernels/{room}/ names '
                                  f'the backend {others[0]}; rule: a backend (or the spec) opens '
                                  f'no other backend\'s namespace (docs/ARCHITECTURE.md, "Rooms")')
            if parts[0] != 'mixprec' or len(parts) < 2 or folder in (None, 'tools'):
                continue
            topic = parts[1]
            if topic in (folder, 'detail') or forward_only:
                continue
            errors.append(f'{path}:{number}: namespace {name} in folder {folder}; rule: a file '
                          f'in folder F opens mixprec::F (or mixprec::detail), not mixprec::'
                          f'{topic}')
    return errors


def check_namespace_floors(files, floors):
    """files: [(path, lines)]. A namespace mixprec::X (forward declarations and detail aside)
    lives on one floor: the violations, one message per namespace opened on two or more."""
    where = {}  # topic -> {floor: first path}
    for path, lines in files:
        folder = folder_of(path)
        if folder is None or folder == 'tools':
            continue
        for _, name, forward_only in opened_namespaces(lines):
            parts = name.split('::')
            if parts[0] != 'mixprec' or len(parts) < 2 or parts[1] == 'detail' or forward_only:
                continue
            where.setdefault(parts[1], {}).setdefault(floors[folder], path)
    errors = []
    for topic, on in sorted(where.items()):
        if len(on) > 1:
            spots = ', '.join(f'floor {f} ({p})' for f, p in sorted(on.items()))
            errors.append(f'namespace mixprec::{topic} is opened on {len(on)} floors: {spots}; '
                          f'rule: a namespace lives on one floor (docs/ARCHITECTURE.md, "Layers")')
    return errors


MAP_MARKER = '<!-- map: generated by tests/layers/check_layers.py --map'
MAP_DOC = 'docs/internals.md'


def code_map(files, floors, rooms):
    """The floors as the code has them, one line per floor from the top: its folders and the
    namespaces their files open (X of mixprec::X, or mixprec itself; forward declarations and
    detail aside), then the rooms of the kernels floor. What docs/internals.md shows under
    MAP_MARKER."""
    opened = {}  # folder -> {namespace}
    for path, lines in files:
        folder = folder_of(path)
        if folder is None:
            continue
        for _, name, forward_only in opened_namespaces(lines):
            parts = name.split('::')
            if parts[0] != 'mixprec' or forward_only:
                continue
            # the top-level namespace itself (core's and tensor's) shows as mixprec
            topic = parts[1] if len(parts) > 1 else 'mixprec'
            if topic != 'detail':
                opened.setdefault(folder, set()).add(topic)
    out = [f'{"floor":>5}  {"folders":<22}namespaces']
    for number in sorted(set(floors.values()), reverse=True):
        folders = sorted(f for f, n in floors.items() if n == number)
        names = sorted(set().union(*(opened.get(f, set()) for f in folders)))
        out.append(f'{number:>5}  {" ".join(folders):<22}{" ".join(names) or "-"}')
    out.append('')
    out.append('kernels rooms: ' + ' '.join(sorted(r for r in rooms if r not in TOP_ROOMS)))
    return out


def check_map(files, floors, rooms):
    """The violation, if docs/internals.md's generated map differs from code_map()."""
    if not os.path.isfile(MAP_DOC):
        return [f'{MAP_DOC}: missing (it holds the generated map of the floors)']
    _, lines = fenced_block(MAP_DOC, MAP_MARKER)
    want = code_map(files, floors, rooms)
    if [l.rstrip() for l in lines] != [l.rstrip() for l in want]:
        return [f'{MAP_DOC}: the map of the floors differs from the code; regenerate it with '
                f'`python3 tests/layers/check_layers.py --map` and paste the output into the '
                f'fenced block after "{MAP_MARKER}"']
    return []


def main():
    args = [a for a in sys.argv[1:] if a != '--map']
    print_map = '--map' in sys.argv[1:]
    root = os.path.abspath(args[0] if args else
                           os.path.join(os.path.dirname(__file__), '..', '..'))
    os.chdir(root)
    floors = read_floors('docs/ARCHITECTURE.md')
    errors = []
    present = set()
    for base in ('src', 'include/mixprec'):
        for entry in sorted(os.listdir(base)):
            if os.path.isdir(os.path.join(base, entry)):
                present.add(entry)
                if entry not in floors:
                    errors.append(f'{base}/{entry}/: a folder that docs/ARCHITECTURE.md ("Layers") '
                                  f'does not place on a floor')
    if os.path.isdir('tools'):
        present.add('tools')
    for folder in sorted(set(floors) - present):
        errors.append(f'docs/ARCHITECTURE.md lists folder {folder}, which exists neither under '
                      f'src/ nor under include/mixprec/')
    src_folders = {e for e in os.listdir('src') if os.path.isdir(os.path.join('src', e))}
    rooms, allowed = read_rooms('docs/ARCHITECTURE.md')
    kernel_dirs = {e for e in os.listdir('src/kernels')
                   if os.path.isdir(os.path.join('src/kernels', e))}
    for entry in sorted(kernel_dirs - set(rooms)):
        errors.append(f'src/kernels/{entry}/: a folder that docs/ARCHITECTURE.md ("Rooms") does '
                      f'not list')
    for room in sorted(set(rooms) - kernel_dirs - set(TOP_ROOMS)):
        errors.append(f'docs/ARCHITECTURE.md ("Rooms") lists room {room}, which is no folder of '
                      f'src/kernels/')
    for (path, include), why in sorted(allowed.items()):
        if not os.path.isfile(path):
            errors.append(f'docs/ARCHITECTURE.md ("Rooms") allows {path} to include {include}, '
                          f'but {path} does not exist: remove the allow line')

    # The checker checks itself: a made-up upward include from the bottom floor must be caught.
    bottom = min(floors, key=floors.get)
    top = max((f for f in floors if f != 'tools'), key=floors.get)
    probe = [(f'src/{bottom}/probe.cpp', [f'#include "mixprec/{top}/probe.h"'])]
    if len(check(probe, floors, src_folders | {top})) != 1:
        sys.exit('check_layers.py: the checker missed a made-up upward include; fix the checker')
    # ... and on the rooms: one backend including another's header, the spec including a
    # backend, a contract including a backend, and a floor above the kernels including a
    # backend must each be caught; an allowed include must not be.
    backends = sorted(r for r in rooms if r not in TOP_ROOMS and r != 'spec')
    if len(backends) >= 2:
        a, b = backends[0], backends[1]
        probe = [(f'src/kernels/{a}/probe.cpp', [f'#include "kernels/{b}/probe.h"',
                                                  '#include "kernels/spec/probe.h"',
                                                  f'#include "kernels/{a}/probe.h"']),
                 ('src/kernels/spec/probe.h', [f'#include "kernels/{a}/probe.h"']),
                 ('src/kernels/probe.h', [f'#include "kernels/{a}/probe.h"']),
                 (f'src/{top}/probe.cpp', [f'#include "kernels/{a}/probe.h"',
                                           '#include "kernels/probe.h"']),
                 ('src/kernels/probe_allowed.cpp', ['#include "kernels/nowhere/probe.h"'])]
        probe_allowed = {('src/kernels/probe_allowed.cpp', 'kernels/nowhere/probe.h'): 'probe'}
        if len(check_rooms(probe, rooms, probe_allowed)) != 4:
            sys.exit('check_layers.py: the checker missed (or invented) a made-up include '
                     'between rooms of src/kernels/; fix the checker')
        probe = [(f'src/kernels/{a}/probe.cpp', [f'namespace mixprec::kernels::{b} {{', '}']),
                 ('src/kernels/spec/probe.h', [f'namespace {a} {{', 'void f();', '}']),
                 (f'src/{bottom}/probe.cpp', [f'namespace mixprec::{top} {{', 'void f();', '}']),
                 (f'src/{bottom}/probe.h', [f'namespace mixprec::{top} {{', 'class X;', '}',
                                            f'namespace mixprec::{top} {{ struct Y; }}',
                                            f'namespace mixprec::{bottom} {{', 'void f();', '}'])]
        if len(check_namespaces(probe, floors, rooms)) != 3:
            sys.exit('check_layers.py: the checker missed (or invented) a made-up namespace '
                     'that is not its folder\'s; fix the checker')
        # ... and a namespace opened on two floors must be
        # caught once, while one opened on a single floor, or only forward-declared, must not.
        probe = [(f'src/{bottom}/a.cpp', [f'namespace mixprec::{bottom} {{', 'int x;', '}']),
                 (f'src/{top}/b.cpp', [f'namespace mixprec::{bottom} {{', 'int y;', '}']),
                 (f'src/{top}/c.h', [f'namespace mixprec::{top} {{', 'int z;', '}',
                                     f'namespace mixprec::{bottom} {{ class W; }}'])]
        if len(check_namespace_floors(probe, floors)) != 1:
            sys.exit('check_layers.py: the checker missed (or invented) a namespace opened on '
                     'two floors; fix the checker')

    files = []
    for base in ROOTS:
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                if folder_of(path) in floors:
                    with open(path, encoding='utf-8', errors='replace') as f:
                        files.append((path, f.read().splitlines()))
                elif folder_of(path) is not None:
                    pass  # its folder was reported above
    errors += check(files, floors, src_folders)
    errors += check_rooms(files, rooms, allowed)
    errors += check_namespaces(files, floors, rooms)
    errors += check_namespace_floors(files, floors)
    if print_map:
        print('\n'.join(code_map(files, floors, rooms)))
        return 0
    errors += check_map(files, floors, rooms)
    for e in errors:
        print(e)
    if errors:
        print(f'{len(errors)} layer violation(s): includes must point down the floors of '
              f'docs/ARCHITECTURE.md ("Layers") and stay in the rooms of its kernels ("Rooms")')
        return 1
    print(f'layers: {len(files)} files, {len(floors)} folders on '
          f'{max(floors.values())} floors, {len(rooms)} rooms of the kernels; every #include '
          f'points down and stays in its rooms; each namespace lives on one floor and matches '
          f'its folder')
    return 0


if __name__ == '__main__':
    sys.exit(main())
