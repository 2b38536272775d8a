#!/usr/bin/env python3
"""The layer rule of src/core: a folder includes only itself and the folders to its left; and no
file of the front end (src/cli) shares its name with one of the library.

Reads every `#include "..."` of src/core and of the public headers and prints each one that climbs,
with its file and line; exits 1 if there is any. A public header, include/ffn_trace/NAME.hpp,
belongs to the folder that holds NAME.cpp (or NAME.cpp.in), else to a folder called NAME.
Usage: check_layers.py SOURCE_DIR
"""
import pathlib
import re
import sys

# Left to right: a folder may include the folders before it. tokenizer/ and forward/ may be absent.
LAYERS = ["base", "json", "model", "checkpoint", "tokenizer", "forward", "example", "analysis",
          "document", "views", "tools", "exercises"]
# Header-only public headers, which no NAME.cpp places.
HEADER_ONLY = {"matrix": "base"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    core = root / "src" / "core"
    public = root / "include" / "ffn_trace"
    problems = []

    folders = {p.name for p in core.iterdir() if p.is_dir()}
    for folder in sorted(folders - set(LAYERS)):
        problems.append(f"src/core/{folder}/: a folder the layer rule does not know; add it to LAYERS in {sys.argv[0]}")

    def owner_of_public(name: str):
        if name in HEADER_ONLY:
            return HEADER_ONLY[name]
        for layer in LAYERS:
            folder = core / layer
            if (folder / f"{name}.cpp").is_file() or (folder / f"{name}.cpp.in").is_file():
                return layer
        return name if name in folders else None

    def layer_of(path: pathlib.Path):
        if path.is_relative_to(public):
            return owner_of_public(path.stem)
        return path.relative_to(core).parts[0]

    sources = sorted(p for p in core.rglob("*") if p.suffix in {".cpp", ".hpp", ".in"})
    sources += sorted(public.rglob("*.hpp"))
    for path in sources:
        here = layer_of(path)
        shown = path.relative_to(root)
        if here is None:
            problems.append(f"{shown}: no folder of src/core holds its {path.stem}.cpp")
            continue
        if here not in LAYERS:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1)
            if target.startswith("ffn_trace/"):
                there = owner_of_public(pathlib.PurePath(target).stem)
                if there is None:
                    problems.append(f"{shown}:{number}: no folder of src/core holds the code of {target}")
                    continue
            elif path.is_relative_to(public):
                problems.append(f"{shown}:{number}: an installed header includes {target}, which is not installed")
                continue
            elif "/" in target:
                there = target.split("/")[0]
            else:
                continue  # a file generated into the build folder
            if there in LAYERS and LAYERS.index(there) > LAYERS.index(here):
                problems.append(f"{shown}:{number}: {here}/ includes {target}, of {there}/, a layer to its right")

    # The front end's code files are named apart from the library's (edit_command.cpp beside the
    # library's edit.cpp), so that a name says which side a file is on.
    code = {".cpp", ".hpp", ".in"}
    library_names = {p.name for p in [*core.rglob("*"), *public.rglob("*")] if p.suffix in code}
    for path in sorted((root / "src" / "cli").rglob("*")):
        if path.suffix in code and path.name in library_names:
            problems.append(f"{path.relative_to(root)}: a file name the library uses too")

    for problem in problems:
        print(problem)
    if problems:
        print(f"layer rule: {len(problems)} problem(s); the order is {' → '.join(LAYERS)}")
        return 1
    print(f"layer rule: {len(sources)} files, no include climbs ({' → '.join(LAYERS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
