#!/usr/bin/env python3
"""Writes a bbshim backend folder that hands each ATen op FlagGems implements to FlagGems' own function.

    scripts/flaggems_backend.py OUT [--ops relu,add.Tensor,...]

FlagGems (PyPI `flag-gems`) lists its operators in one table, `flag_gems._FULL_CONFIG`: entries
(ATen overload name, function[, condition]) that its `enable()` and `use_gems()` register over ATen's own
kernels through torch.library. That registration is never switched on here (a backend that overrides
ATen's kernels is flagged as a cheat): OUT gets one folder per op of the table that this torch has,
`<op>__<overload>/flaggems.py`, which imports `flag_gems`, looks the op up in the same table and registers
FlagGems' function for it with `@bbshim.kernel` (docs/backends.md, "FlagGems"). No FlagGems code is
copied; the files refer to its functions by the table's names.

The table is read from FlagGems' source (`flag_gems/__init__.py`, found without importing it: importing
FlagGems needs a GPU), so OUT can be written anywhere the package is installed. Each file checks, when
it is imported, that the FlagGems it finds is the version it was written from and that the table still
has its op, and says which version otherwise (the op then runs natively: docs/backends.md). A call
whose tensors are not on FlagGems' device, or whose entry's condition (e.g. a torch version) is false,
declines: native runs. Ops that bbshim cannot route at all (factories with their own BackendSelect kernel,
CompositeImplicitAutograd ops) get no folder, and are listed.

Exit status: 0 written; 1 FlagGems missing or its table unreadable (what and where is said); 2 usage.
"""
import argparse
import ast
import importlib.util
import shutil
import sys
from pathlib import Path

TEMPLATE = '''\
"""{op} -> FlagGems {version}'s `{function}` (written by scripts/flaggems_backend.py; do not edit)."""
import bbshim
import flag_gems

OP, NAME, VERSION = "{op}", "{name}", "{version}"

if getattr(flag_gems, "__version__", "?") != VERSION:
    raise ImportError(f"flag_gems {{getattr(flag_gems, '__version__', '?')}} is installed, this folder was "
                      f"written from flag_gems {{VERSION}}: run scripts/flaggems_backend.py again")
_entry = next((e for e in getattr(flag_gems, "_FULL_CONFIG", ()) if e and e[0] == NAME), None)
if _entry is None:
    raise ImportError(f"flag_gems {{VERSION}} has no {{NAME}} in its _FULL_CONFIG table")
_function = _entry[1]
_condition = _entry[2] if len(_entry) > 2 else None
_device = getattr(flag_gems, "device", "cuda")


def _tensors(values):
    for v in values:
        if hasattr(v, "device") and hasattr(v, "dtype"):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from _tensors(v)


@bbshim.kernel(OP)
def flaggems_kernel(*args, **kwargs):
    if _condition is not None and not _condition():
        raise bbshim.Decline(f"FlagGems {{VERSION}} does not register {{NAME}} here (its condition is false)")
    for t in _tensors(list(args) + list(kwargs.values())):
        if t.device.type != _device:
            raise bbshim.Decline(f"FlagGems runs on {{_device}} tensors, not {{t.device.type}}")
    return _function(*args, **kwargs)
'''


def read_package(init):
    """FlagGems' version and its table, (name, function name) per entry of _FULL_CONFIG, from
    flag_gems/__init__.py, parsed once."""
    version, entries = "unknown", None
    for node in ast.parse(init.read_text(), str(init)).body:
        if not isinstance(node, ast.Assign):
            continue
        names = {t.id for t in node.targets if isinstance(t, ast.Name)}
        if "__version__" in names and isinstance(node.value, ast.Constant):
            version = str(node.value.value)
        if "_FULL_CONFIG" in names and isinstance(node.value, (ast.Tuple, ast.List)):
            entries = []
            for e in node.value.elts:
                ok = isinstance(e, ast.Tuple) and len(e.elts) >= 2 and isinstance(e.elts[0], ast.Constant) \
                    and isinstance(e.elts[0].value, str)
                if not ok:
                    raise ValueError(f"{init}:{e.lineno}:{e.col_offset + 1}: an entry of _FULL_CONFIG that is not "
                                     "(\"op.overload\", function[, condition])")
                entries.append((e.elts[0].value, ast.unparse(e.elts[1])))
    if entries is None:
        raise ValueError(f"{init}: no _FULL_CONFIG = (...) table (this adapter reads FlagGems 5.0's)")
    return version, entries


def aten_has(name):
    """Whether the dispatcher has this overload (torch.ops also lists TorchScript's scalar ops, such as
    copysign's "default", that no kernel can be registered for)."""
    import torch
    op, _, overload = name.partition(".")
    try:
        torch._C._dispatch_find_schema_or_throw(f"aten::{op}", overload)
    except RuntimeError:
        return False
    return True


# Ops bbshim cannot route whatever the kernel (backends/loader.cpp's routing_obstacle), asked of the
# dispatcher: a folder for one would only fail every case as "not usable".
UNROUTABLE = (("BackendSelect", "factories with a BackendSelect kernel"),
              ("CompositeImplicitAutograd", "CompositeImplicitAutograd: they decompose above the routing point"))


def unroutable(name):
    import torch
    qualified = f"aten::{name}"
    for key, why in UNROUTABLE:
        if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key):
            return why
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="the backend folder to write (its FlagGems folders are replaced)")
    p.add_argument("--ops", help="only these table names, comma-separated (e.g. relu,add.Tensor)")
    a = p.parse_args()
    spec = importlib.util.find_spec("flag_gems")
    if spec is None or not spec.origin:
        print("flaggems_backend: flag_gems is not installed (pip install flag-gems==5.0.2; a GPU host without "
              "package access: the wheels in .deps/wheels, scripts/gpu-check)", file=sys.stderr)
        return 1
    init = Path(spec.origin)
    try:
        version, table = read_package(init)
    except (OSError, SyntaxError, ValueError) as e:
        print(f"flaggems_backend: {e}", file=sys.stderr)
        return 1
    wanted = set(a.ops.split(",")) if a.ops else None
    written, unknown, skipped = [], [], {}
    a.out.mkdir(parents=True, exist_ok=True)
    for name, function in table:
        if wanted is not None and name not in wanted:
            continue
        if not aten_has(name):
            unknown.append(name)
            continue
        if why := unroutable(name):
            skipped.setdefault(why, []).append(name)
            continue
        op, _, overload = name.partition(".")
        folder = a.out / f"{op}__{overload or 'default'}"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        (folder / "flaggems.py").write_text(TEMPLATE.format(op=f"aten::{name}", name=name, version=version,
                                                            function=function))
        written.append(name)
    for name in sorted((wanted or set()) - {n for n, _ in table}):
        print(f"flaggems_backend: {name} is not in FlagGems {version}'s table", file=sys.stderr)
    print(f"FlagGems {version} ({init.parent}): {len(written)} ops written to {a.out}"
          + (f"; {len(unknown)} not ATen ops of this torch: {', '.join(unknown)}" if unknown else "")
          + "".join(f"; {len(names)} that bbshim cannot route ({why}): {', '.join(names)}"
                    for why, names in skipped.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
