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

Usage: check_layers.py [REPO_ROOT]   (default: two levels above this file)
"""
import os
import re
import sys

INCLUDE = re.compile(r'\s*#\s*include\s*[<"]([^>"]+)[>"]')
FLOOR_LINE = re.compile(r'^\s*(\d+)\s+([a-z_][a-z_0-9 ]*?)\s*\|')
ROOTS = ('src', 'include/mixprec', 'tools')  # tools/ is the folder `tools`


def read_floors(doc_path):
    """{folder: floor number} from the floors block of docs/ARCHITECTURE.md."""
    text = open(doc_path, encoding='utf-8').read().splitlines()
    try:
        start = next(i for i, l in enumerate(text) if l.strip().startswith('<!-- floors:'))
    except StopIteration:
        sys.exit(f'{doc_path}: no "<!-- floors: ... -->" line before the block of floors')
    fence = next((i for i in range(start + 1, len(text)) if text[i].startswith('```')), None)
    end = next((i for i in range(fence + 1, len(text)) if text[i].startswith('```')), None) \
        if fence is not None else None
    if fence is None or end is None:
        sys.exit(f'{doc_path}:{start + 1}: the floors line must be followed by a fenced block')
    floors, numbers = {}, []
    for i in range(fence + 1, end):
        m = FLOOR_LINE.match(text[i])
        if not m:
            continue
        number = int(m.group(1))
        numbers.append(number)
        for folder in m.group(2).split():
            if folder in floors:
                sys.exit(f'{doc_path}:{i + 1}: folder {folder} is listed twice')
            floors[folder] = number
    if not floors or numbers != list(range(len(numbers), 0, -1)):
        sys.exit(f'{doc_path}:{fence + 1}: floors must be numbered from the top down to 1, '
                 f'one line each; got {numbers}')
    return floors


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


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
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

    # The checker checks itself: a made-up upward include from the bottom floor must be caught.
    bottom = min(floors, key=floors.get)
    top = max((f for f in floors if f != 'tools'), key=floors.get)
    probe = [(f'src/{bottom}/probe.cpp', [f'#include "mixprec/{top}/probe.h"'])]
    if len(check(probe, floors, src_folders | {top})) != 1:
        sys.exit('check_layers.py: the checker missed a made-up upward include; fix the checker')

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
    for e in errors:
        print(e)
    if errors:
        print(f'{len(errors)} layer violation(s): includes must point down the floors of '
              f'docs/ARCHITECTURE.md ("Layers")')
        return 1
    print(f'layers: {len(files)} files, {len(floors)} folders on '
          f'{max(floors.values())} floors; every #include points down')
    return 0


if __name__ == '__main__':
    sys.exit(main())
