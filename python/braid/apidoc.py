"""The API reference of the package, generated from its docstrings and
signatures: ``python -m braid.apidoc > docs/python_api.md`` (the test suite
fails when the committed reference is stale)."""

from __future__ import annotations

import inspect
import re
import sys

import braid


def _clean(text: str) -> str:
    return re.sub(r"braid\._braid\.(?:nn\.|optim\.|data\.|comm\.|trainer\.)?", "braid.", text or "").strip()


def _split(doc: str, name: str):
    """(signatures, prose) of a docstring: nanobind writes its overloads'
    signatures first, then a blank line and the docstring."""
    lines = _clean(doc).splitlines()
    sigs = []
    while lines and re.match(rf"(def )?{re.escape(name)}\(", lines[0]):
        sigs.append(lines.pop(0).removeprefix("def "))
    return sigs, "\n".join(lines).strip()


def _entry(name: str, obj, out: list, prefix: str = "") -> None:
    doc = getattr(obj, "__doc__", None) or ""
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        try:
            sigs = [f"{name}{inspect.signature(obj)}"]
        except (TypeError, ValueError):
            sigs = [name]
        prose = inspect.cleandoc(doc) if doc else ""
    else:
        sigs, prose = _split(doc, name)
        if not sigs:
            sigs = [name]
    out.append("```python\n" + "\n".join(prefix + _clean(s) for s in sigs) + "\n```")
    if prose:
        out.append(prose)
    out.append("")


def _members(cls):
    for name, member in sorted(vars(cls).items()):
        if name.startswith("_") and name not in ("__init__", "__call__", "__getitem__", "__setitem__", "__dlpack__",
                                                 "__iter__", "__len__"):
            continue
        yield name, member


def _class(name: str, cls, out: list) -> None:
    out.append(f"### {name}\n")
    if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("):
        out.append(_clean(inspect.cleandoc(cls.__doc__)) + "\n")
    for mname, member in _members(cls):
        if isinstance(member, property) or type(member).__name__ == "nb_property":
            doc = _clean(getattr(member, "__doc__", "") or "")
            sig = doc.splitlines()[0] if doc.startswith("(") else ""
            rest = "\n".join(doc.splitlines()[1:]).strip() if sig else doc
            out.append(f"- `{mname}` (property{': ' + sig.split('->')[-1].strip() if '->' in sig else ''})"
                       + (f": {rest}" if rest else ""))
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if (getattr(member, "__doc__", "") or "").startswith("Initialize self"):
            continue  # no constructor of its own (made by factories)
        if callable(member):
            _entry(mname, member, out, prefix=f"{name}.")
    out.append("")


def _module(title: str, mod, names, out: list) -> None:
    out.append(f"## {title}\n")
    doc = inspect.getdoc(mod)
    if doc:
        out.append(_clean(doc) + "\n")
    for n in names:
        obj = getattr(mod, n)
        if inspect.isclass(obj):
            _class(f"{mod.__name__}.{n}" if mod is not braid else f"braid.{n}", obj, out)
        elif callable(obj):
            _entry(f"{mod.__name__}.{n}", obj, out)


def _public(mod, skip=()):
    return sorted(n for n, v in vars(mod).items()
                  if not n.startswith("_") and n not in skip and (callable(v) or inspect.isclass(v))
                  and not inspect.ismodule(v) and getattr(v, "__module__", "").startswith("braid"))


def reference() -> str:
    out = ["# braid's Python API (generated)\n",
           "Generated from the docstrings and signatures by `python -m braid.apidoc > docs/python_api.md`; "
           "docs/python.md is the guide. Type stubs with the same text ship beside the extension "
           "(braid/_braid/*.pyi), so editors complete and document the same names.\n"]
    top = _public(braid, skip={"Trainer", "Plan", "train", "config", "Mesh", "as_tensor"})
    _module("braid", braid, top + ["as_tensor"], out)
    _module("braid.nn", braid.nn, _public(braid.nn), out)
    _module("braid.optim", braid.optim, _public(braid.optim), out)
    _module("braid.data", braid.data, _public(braid.data), out)
    _module("braid.distributed", braid.distributed, _public(braid.distributed), out)
    training = sys.modules["braid.train"]  # the module (braid.train, the attribute, is its function)
    _module("Training: braid.train, braid.Trainer, braid.Plan", training, ["train", "config", "Trainer", "Plan"],
            out)
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
