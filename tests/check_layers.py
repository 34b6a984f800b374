#!/usr/bin/env python3
"""The layer rule of docs/architecture.md, checked: a file includes headers of its own layer and of the layers
below it only, a CMake target links libraries of those layers only, and a target that links no torch includes
no torch header. The layers and what each uses are read from the table under "## Layers" (its first and last
columns), so the rule and its statement cannot part. Prints every breach with its file and line; exit status 1
when there is one, 0 when there is none. CPU only, a second or less (ctest `layers`).

    python3 tests/check_layers.py [ROOT]      ROOT: the source tree (default: this file's ../)
"""
import re
import sys
from pathlib import Path

SOURCES = (".c", ".cc", ".cpp", ".cu", ".h", ".hpp", ".cuh")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)
TORCH_HEADER = re.compile(r"^(ATen|c10|torch|caffe2)/")
TORCH_TARGETS = {"bb::torch", "bb::c10_cuda"}


def read_layers(root):
    """{layer folder: [folders it uses]} from the table under "## Layers", in the table's order."""
    text = (root / "docs" / "architecture.md").read_text()
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    layers = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not re.fullmatch(r"`[^`]+/`", cells[0]):
            continue
        layers[cells[0].strip("`").rstrip("/")] = [u.rstrip("/") for u in re.findall(r"`([^`]+/)`", cells[-1])]
    return layers


def below(layers):
    """{layer: the layers it may include}: itself and every layer it reaches through "uses"."""
    reach = {}
    for layer in layers:
        seen, todo = set(), list(layers[layer])
        while todo:
            u = todo.pop()
            if u not in seen:
                seen.add(u)
                todo.extend(layers.get(u, []))
        reach[layer] = seen | {layer}
    return reach


def layer_of(path, layers):
    """The deepest layer folder holding `path` (relative, with /), or None."""
    best = None
    for layer in layers:
        if (path == layer or path.startswith(layer + "/")) and (best is None or len(layer) > len(best)):
            best = layer
    return best


def resolve(root, source, bracket, name):
    """The project file an #include names (relative to root), or None for a header from outside."""
    if name.startswith("bb/"):
        return "backends/include/" + name
    if bracket == '"':
        if (root / name.split("/")[0]).is_dir() and (root / name).exists():
            return name
        beside = (root / source).parent / name
        if beside.exists():
            return str(beside.resolve().relative_to(root.resolve()))
    return None


def includes(root, path):
    """(line number, bracket, name) of each #include of a file."""
    text = (root / path).read_text(errors="replace")
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(1), m.group(2)) for m in INCLUDE.finditer(text)]


def uses_text(layers, layer):
    return ", ".join(u + "/" for u in layers[layer]) or "nothing of ours"


def check_includes(root, layers, reach, errors):
    for f in all_sources(root, layers):
        path = str(f.relative_to(root))
        own = layer_of(path, layers)
        for line, bracket, name in includes(root, path):
            target = resolve(root, path, bracket, name)
            if target is None:
                continue
            theirs = layer_of(target, layers)
            if theirs is None:
                errors.append(f"{path}:{line}: includes {name}, which is in no layer of docs/architecture.md")
            elif theirs not in reach[own]:
                errors.append(f"{path}:{line}: includes {name}: {own}/ may not include {theirs}/ "
                              f"(docs/architecture.md: {own}/ uses {uses_text(layers, own)})")


def all_sources(root, layers):
    """Every C, C++ and CUDA file under the layers' folders, once."""
    files = {f for layer in layers for f in (root / layer).rglob("*") if f.suffix in SOURCES and f.is_file()}
    return sorted(files)


def cmake_commands(text):
    """(name, [arguments]) of each command of a CMakeLists.txt, comments stripped."""
    text = re.sub(r"#[^\n]*", "", text)
    commands, i = [], 0
    for m in re.finditer(r"\b(\w+)\s*\(", text):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        i = j
        commands.append((m.group(1).lower(), re.findall(r'"[^"]*"|[^\s()]+', text[m.end():j - 1])))
    return commands


def read_targets(root, layers):
    """{target: (layer, [source files])} and {target: [what it links]} of the CMakeLists.txt of the layers' folders
    and of every folder under them (a subfolder may add sources to a target declared above it: target_sources)."""
    targets, links = {}, {}
    lists = {p for layer in layers for p in (root / layer).rglob("CMakeLists.txt")}
    for cml in sorted(lists):
        folder = str(cml.parent.relative_to(root))
        for name, args in cmake_commands(cml.read_text()):
            if name in ("add_library", "add_executable") and args:
                if any(a in ("ALIAS", "IMPORTED", "INTERFACE") for a in args[1:]):
                    continue
                srcs = [f"{folder}/{a}" for a in args[1:] if a.endswith(SOURCES) and "$" not in a]
                owner = layer_of(srcs[0], layers) if srcs else layer_of(folder, layers)
                earlier = targets.get(args[0], (owner, []))[1]  # defined in both branches of an if()
                targets[args[0]] = (owner, earlier + srcs)
            elif name == "target_sources" and args:
                srcs = [f"{folder}/{a}" for a in args[1:] if a.endswith(SOURCES) and "$" not in a]
                owner, earlier = targets.get(args[0], (layer_of(folder, layers), []))
                targets[args[0]] = (owner, earlier + srcs)
            elif name == "target_link_libraries" and args:
                scopes = ("PUBLIC", "PRIVATE", "INTERFACE")
                links.setdefault(args[0], []).extend(a for a in args[1:] if a not in scopes)
    return targets, links


def check_links(targets, links, reach, errors):
    for t, linked in sorted(links.items()):
        if t not in targets:
            continue
        own = targets[t][0]
        for u in linked:
            if u in targets and targets[u][0] not in reach[own]:
                errors.append(f"{own}/CMakeLists.txt: {t} links {u}: {own}/ may not include {targets[u][0]}/")


def links_torch(t, links, seen=None):
    seen = seen if seen is not None else set()
    for u in links.get(t, []):
        if u in TORCH_TARGETS:
            return True
        if u not in seen:
            seen.add(u)
            if links_torch(u, links, seen):
                return True
    return False


def check_torch_free(root, layers, targets, links, errors):
    """A target that links no torch includes no torch header, through our headers too."""
    for t, (_, srcs) in sorted(targets.items()):
        if links_torch(t, links):
            continue
        seen, todo = set(), list(srcs)
        while todo:
            path = todo.pop()
            if path in seen or not (root / path).exists():
                continue
            seen.add(path)
            for line, bracket, name in includes(root, path):
                if TORCH_HEADER.match(name):
                    errors.append(f"{path}:{line}: includes {name}, but {t} links no torch")
                target = resolve(root, path, bracket, name)
                if target:
                    todo.append(target)


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    layers = read_layers(root)
    errors = []
    if len(layers) < 5:
        errors.append(f"docs/architecture.md: found {len(layers)} layers in the table under '## Layers'")
    for layer, uses in layers.items():
        errors += [f"docs/architecture.md: {layer}/ uses {u}/, which is no layer" for u in uses if u not in layers]
    reach = below(layers)
    errors += [f"docs/architecture.md: {l}/ reaches itself through its uses (a cycle)"
               for l in layers if any(l in reach[u] for u in layers[l] if u in reach)]
    check_includes(root, layers, reach, errors)
    targets, links = read_targets(root, layers)
    check_links(targets, links, reach, errors)
    check_torch_free(root, layers, targets, links, errors)
    for e in errors:
        print(e)
    print(f"check_layers: {len(layers)} layers, {len(all_sources(root, layers))} files, {len(targets)} targets: "
          f"{len(errors) or 'no'} breaches of docs/architecture.md's rule")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
