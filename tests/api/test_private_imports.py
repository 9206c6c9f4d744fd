"""No private name crosses a module boundary in the package (CONTRIBUTING.md): a helper two modules
need is public, and documented, in the lower one.

Read from the source (``ast``), every module of ``attention_np``: ``from M import _name``, or
``M._name`` on an imported module, where M is another module of the package, is a private import.
So is importing another module's public name under a private alias (``from M import f as _f``): the
reader is told the name belongs to this module when it does not. A private *module* (``_checks``,
``paper/_validate``) may be imported: it holds public names for the package's own use.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "attention_np"

# Only what other changes still own, each (file, "from-module import name"); an entry that no
# longer occurs fails the last test, so the list shrinks as they land.
ALLOWED: set = set()    # nothing: a private name another module needs is made public there


def _module_name(path: Path) -> str:
    parts = ["attention_np", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: Path) -> list[str]:
    """Each private import across modules in the file at ``path``, as ``"M import _name"`` (or
    ``"M import name as _alias"``, or ``"M._name"`` for an attribute of an imported module), with
    its line number."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    modules: dict[str, str] = {}              # a local name -> the package module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "attention_np":
                    modules[a.asname or "attention_np"] = a.name if a.asname else "attention_np"
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "attention_np" or source == me:
                continue
            for a in node.names:
                if _is_module(f"{source}.{a.name}"):
                    modules[a.asname or a.name] = f"{source}.{a.name}"
                elif _private(a.name):
                    found.append((node.lineno, f"{source} import {a.name}"))
                elif a.asname and _private(a.asname):
                    found.append((node.lineno, f"{source} import {a.name} as {a.asname}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, base = [], node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                owner = ".".join([modules[base.id], *reversed(chain)])
                if owner != me and _is_module(owner):
                    found.append((node.lineno, f"{owner}.{node.attr}"))
    return [f"{line}: {what}" for line, what in sorted(found)]


FILES = sorted(PACKAGE.rglob("*.py"))


def test_no_private_import_across_modules():
    found = [f"attention_np/{rel}:{f}" for p in FILES for rel in [p.relative_to(PACKAGE).as_posix()]
             for f in private_imports(p) if (rel, f.split(": ", 1)[1]) not in ALLOWED]
    assert not found, ("private names imported from other modules (make each public, with a docstring, "
                       "in the lower module):\n  " + "\n  ".join(found))


def test_the_allow_list_names_only_what_still_occurs():
    occurring = {(p.relative_to(PACKAGE).as_posix(), f.split(": ", 1)[1])
                 for p in FILES for f in private_imports(p)}
    assert ALLOWED <= occurring, f"remove from ALLOWED, it no longer occurs: {sorted(ALLOWED - occurring)}"


def test_the_check_sees_each_kind_of_private_import(tmp_path, monkeypatch):
    """The detector itself, on a small package laid out like attention_np: each form is found, and
    what is allowed (a module's own privates, a private module, public names) is not."""
    pkg = tmp_path / "attention_np"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_checks.py").write_text("def check(): ...\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "low.py").write_text("def _helper(): ...\ndef helper(): ...\n")
    code = ("import attention_np.sub.low as low\n"
            "from attention_np import _checks\n"
            "from attention_np._checks import check\n"
            "from attention_np.sub import low as low2\n"
            "from attention_np.sub.low import _helper\n"
            "from .low import helper as _h\n"
            "from .low import helper\n"
            "def _mine(): ...\n"
            "x = low._helper, low2._helper, low.helper, _mine, _checks.check\n")
    (pkg / "sub" / "high.py").write_text(code)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    assert private_imports(pkg / "sub" / "high.py") == [
        "5: attention_np.sub.low import _helper",
        "6: attention_np.sub.low import helper as _h",
        "9: attention_np.sub.low._helper",
        "9: attention_np.sub.low._helper",
    ]
    (pkg / "sub" / "low.py").write_text("def _helper(): ...\nx = _helper()\n")
    assert private_imports(pkg / "sub" / "low.py") == []
