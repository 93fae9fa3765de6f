"""Name collisions, ended in one place: our top-level packages have the names students give their own files.

mha-check is four top-level packages, `harness`, `checks`, `reference` and `mutants` (OURS), and a student may hand
in `checks.py`, a helper `reference.py` or a helper package `reference/`, a folder `harness/`...  Python keeps one
module per name in a process and imports the first one sys.path offers, so each process that could meet both has a
defence, and each defence is here or names this module:

1. The trusted process (the command line, `grade`) must never import a student's file: it decides the verdict.  The
   console script does not put the working folder on sys.path; `python -m harness.frontends.cli` does (Python's
   rule), and a student's `checks.py` there was imported, so run, by `harness.engine.report`'s `from checks import
   ...` before a line of the command ran.  `trusted_path()` takes the working folder off sys.path, and the command
   line calls it before it imports anything that imports CHILD_HIDDEN.  A student's `harness.py` in the working
   folder is out of reach: under `python -m` Python imports it before any code of ours runs (use `mha-check`).
2. The child's interpreter starts with `python -I` (no working folder, no PYTHONPATH) and `boot()` puts our root
   first on sys.path: its `harness` is ours before the student's folder is added, after ours.
3. The child loads the student's file from its path under the file's own name, or under `student_module()`'s when
   that name is taken (their `harness.py` must not replace the worker's package in sys.modules), and puts their
   folder last on sys.path.  Then an import hook (harness.child.target) makes `import reference` (any of
   CHILD_HIDDEN) find the student's own module in their folder, or nothing: never ours, which holds the answer key
   (a class that subclassed it scored full marks) and which once shadowed a student's helper `reference.py` (the
   student scored 0).  A module of `harness` that the worker has not imported is refused to the submission too.
4. What a submission's child sees on disk (harness.sandbox.policy): `harness` alone of ours (SUBMISSION_VISIBLE),
   never a correct layer to load by its path; our own code (a mutant, the reference: `own_code` below, decided by
   where its file really is, which no submission can write to) sees all of OURS.
5. Telling the student's files from ours by path: the trace's "your line" must never point into our packages, should
   the student's folder be the one that holds them (`is_ours`); a regrade stamp covers all of OURS (stamps).
6. The notebook API and the pytest plugin run in the student's own process, where their modules and ours share one
   sys.modules: a student's `reference.py` found first on sys.path would be imported in place of ours.
   `require_ours()` says so in one sentence, before anything of ours is imported, instead of a traceback of ours;
   only renaming our packages would let both live in one process.
"""
from __future__ import annotations

import importlib.machinery
import os
import sys

from harness import PACKAGES_ROOT

OURS = ("harness", "checks", "reference", "mutants")  # our top-level packages, all in PACKAGES_ROOT
CHILD_HIDDEN = ("checks", "reference", "mutants")  # never a submission's to import: in its child these names are the
# student's own modules or nothing (defence 3)
SUBMISSION_VISIBLE = ("harness",)  # what of ours a submission's child sees on disk: the worker (defence 4)
OWN_CODE_FOLDERS = (*CHILD_HIDDEN, "tests")  # a target whose file lies here is our own (our tests check classes
# they define)
STUDENT_MODULE_PREFIX = "mha_student_"


def trusted_path() -> None:
    """Defence 1: the working folder off sys.path in the trusted process (only our own root may stay)."""
    here = os.path.abspath(os.getcwd())
    if here != os.path.abspath(PACKAGES_ROOT):
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]


def boot(statement: str) -> str:
    """Defence 2: the `python -I -c` code of one of our interpreters: our root first, then `statement`.  `harness`
    is loaded from its own folder by path, not found by listing the root: a child under Landlock, which may list
    harness/ but not a checkout's root, starts so (a rule to list the root covered every folder below it, and a
    submission listed an export kept in the clone, classmates' names and all: red team 8)."""
    package = os.path.join(PACKAGES_ROOT, "harness")
    return (f"import sys, importlib.util as _u; sys.path.insert(0, {PACKAGES_ROOT!r}); "
            f"_s = _u.spec_from_file_location('harness', {os.path.join(package, '__init__.py')!r}, "
            f"submodule_search_locations=[{package!r}]); _m = sys.modules['harness'] = _u.module_from_spec(_s); "
            f"_s.loader.exec_module(_m); del _s, _m, _u; {statement}")


def student_module(stem: str, path: str) -> str:
    """Defence 3: the name a student's file is loaded under: its own, unless that name is taken in this process
    (ours: harness, or a module the worker imported) or is no identifier."""
    return stem if stem not in sys.modules and stem.isidentifier() else \
        f"{STUDENT_MODULE_PREFIX}{abs(hash(path))}_{stem}"


def own_code(where: str, path: str | None) -> bool:
    """Defence 4: is the target mha-check's own code (a mutant, the reference), which may import our packages?
    `path`: the target's file (None for a module target), judged both by the path as given and by where it really
    is: a submission's `attention.py` that is a symbolic link to reference/causal_mha.py really is there, and was
    given the unhidden view and full marks (a red team, issue 27); a link is the student's, wherever it leads."""
    if path is None:
        return where.partition(".")[0] in CHILD_HIDDEN
    given, real = os.path.abspath(path), os.path.realpath(path)
    roots = {os.path.abspath(PACKAGES_ROOT), os.path.realpath(PACKAGES_ROOT)}  # an install reached by a link
    inside = lambda p: any(p.startswith(os.path.join(root, d) + os.sep) for root in roots for d in OWN_CODE_FOLDERS)
    return inside(given) and inside(real)


def is_ours(path: str) -> bool:
    """Defence 5: does this absolute path lie in one of our packages?"""
    return any(path.startswith(os.path.join(PACKAGES_ROOT, p) + os.sep) for p in OURS)


def shadowing() -> list[str]:
    """Defence 6: the student's modules that this process would import in place of ours ("reference.py in
    /home/ann/lab"), loaded already or first on sys.path."""
    found = []
    for name in CHILD_HIDDEN:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None) if module is not None else None
        if module is None:
            spec = importlib.machinery.PathFinder.find_spec(name)
            where = spec.origin if spec is not None else None
        root = os.path.join(os.path.realpath(PACKAGES_ROOT), name) + os.sep
        if where and not os.path.realpath(where).startswith(root):  # real paths: an install reached by a link
            rel = os.path.relpath(where)
            found.append(where if rel.startswith("..") else rel)
    return found


def require_ours() -> None:
    """Defence 6: refuse, in one sentence, to import our engine where a student's module would stand in for ours."""
    found = shadowing()
    if found:
        raise ImportError(f"mha-check cannot run in this Python process: {', '.join(found)} would be imported in "
                          f"place of mha-check's own package{'s' * (len(found) > 1)} of that name (Python keeps one "
                          "module per name). Rename your file, or check from a terminal: mha-check your_file.py")
