"""The installed mha-check packed as a wheel: what an autograder zip carries to a machine that has no copy of this
repository (Gradescope builds its image from the zip alone, and mha-check is not on PyPI).

It is packed from what is installed rather than rebuilt from a source tree, so that it works alike for an
editable install from a clone, a `pip install .` and an install from a wheel, needs no build backend and no
network, and ships exactly the code the instructor ran: a dry run on this machine checks the code Gradescope will
run.  Name, version, dependencies and entry points are the installed distribution's own metadata.  The archive is
byte-for-byte reproducible (fixed timestamps, sorted entries).
"""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import zipfile
from importlib import metadata
from pathlib import Path

DIST = "mha-check"
NEEDED = ("mutants/catalogue.json",)  # package data read at run time: a wheel without it cannot diagnose
WHEEL_TEXT = "Wheel-Version: 1.0\nGenerator: mha-check autograder\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
EPOCH = (1980, 1, 1, 0, 0, 0)


class WheelError(RuntimeError):
    """The installed mha-check cannot be packed (a broken or partial installation): the message says what."""


def _files(package: str):
    """(name in the wheel, path) for every file of an installed top-level package, bytecode left out."""
    spec = importlib.util.find_spec(package)  # found, not imported: reference/ and mutants/ may import torch
    if spec is None or not spec.submodule_search_locations:
        raise WheelError(f"the installed mha-check has no package {package!r}; reinstall it")
    root = Path(list(spec.submodule_search_locations)[0])
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_file() and path.suffix not in (".pyc", ".pyo") and not any(
                p == "__pycache__" or p.startswith(".") for p in parts):
            yield f"{package}/{'/'.join(parts)}", path


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build(folder: Path) -> Path:
    """Write mha_check-VERSION-py3-none-any.whl into `folder`; return its path."""
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        raise WheelError("mha-check is not installed as a package here (pip install -e . from its folder)") from None
    version = dist.version
    packages = (dist.read_text("top_level.txt") or "").split()
    if not packages:
        raise WheelError("the installed mha-check does not list its packages (top_level.txt); reinstall it")
    entries = {name: path.read_bytes() for package in sorted(packages) for name, path in _files(package)}
    missing = [n for n in NEEDED if n not in entries]
    if missing:
        raise WheelError(f"the installed mha-check lacks {', '.join(missing)}; reinstall it")
    info = f"mha_check-{version}.dist-info"
    for name in ("METADATA", "entry_points.txt"):
        text = dist.read_text(name)
        if text is None:
            raise WheelError(f"the installed mha-check has no {name}; reinstall it")
        entries[f"{info}/{name}"] = text.encode()
    entries[f"{info}/top_level.txt"] = ("\n".join(sorted(packages)) + "\n").encode()
    entries[f"{info}/WHEEL"] = WHEEL_TEXT.encode()
    record = [_record_line(n, d) for n, d in entries.items()] + [f"{info}/RECORD,,"]
    entries[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = Path(folder) / f"mha_check-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as whl:
        for name, data in entries.items():  # dist-info last, RECORD at the very end (the wheel format's order)
            entry = zipfile.ZipInfo(name, EPOCH)
            entry.external_attr = 0o644 << 16
            whl.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return path
