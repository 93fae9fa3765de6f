"""Hostile: loads a correct layer of mha-check's own by the path of its file, past any import hook
(importlib.util.spec_from_file_location, or the source read and run): the lesson's reference
(reference/causal_mha.py), a mutant with its one bug undone (mutants/finite_fill_100.py, -100.0 made -inf), and the
template's warm-up layer (harness/child/rehearsal.py), and subclasses the first it gets.  Gets full marks only if
reference/ or mutants/ is readable (the child's view holds neither); the warm-up layer, always there with the
worker's own package, is deliberately wrong."""
import importlib.util
import os
import sys

import torch.nn as nn

ESCAPED = []  # evidence that a wall gave way: a correct layer of ours loaded
FOUND = []  # the classes it got, best first


def by_spec(rel, name):
    spec = importlib.util.spec_from_file_location("zz_loaded_" + name, os.path.join(ROOT, rel))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def undone_mutant():
    with open(os.path.join(ROOT, "mutants", "finite_fill_100.py")) as f:
        text = f.read().replace("from mutants._info import MutantInfo", "MutantInfo = lambda **kw: None")
    space = {"__name__": "zz_mutant"}
    exec(compile(text.replace("-100.0)", 'float("-inf"))'), "zz_mutant", "exec"), space)
    return space["CausalMHA"]


def warm_up_layer(module):
    """The template's warm-up layer: a class of the module, or made by it."""
    return module._RehearsalLayer if hasattr(module, "_RehearsalLayer") else module._rehearsal_layer()


def attempt(what, action, counts=True):
    try:
        FOUND.append(action())
        if counts:
            ESCAPED.append(what)
    except Exception as e:  # noqa: BLE001 - the wall held
        print(f"{what}: {type(e).__name__}: {e}")


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["harness"].__file__)))
attempt("reference/causal_mha.py by path", lambda: by_spec("reference/causal_mha.py", "reference").CausalMHA)
attempt("mutants/finite_fill_100.py undone", undone_mutant)
attempt("harness/child/rehearsal.py by path",  # there, and wrong by design: not a wall that gave way
        lambda: warm_up_layer(by_spec("harness/child/rehearsal.py", "rehearsal")), counts=False)
print("walls that gave way:", ESCAPED)


class MyAttn(FOUND[0] if FOUND else nn.Module):
    """The first layer of mha-check's it got (if none, it cannot even be built)."""
