"""The floor plan, enforced: the trust boundary, the layer order (exactly the table in docs/architecture.md), no
import circles, and function-local imports only where a comment says why (an optional dependency, or start-up
time)."""
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engine import rewrite

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "checks", "reference", "mutants")

# the sandbox's confinement, which a forked child applies to itself (harness.child.zygote): the only part of the
# trusted sandbox the child side may import, and so made of the standard library, wire and itself alone
CONFINEMENT = tuple(f"harness.sandbox.{m}" for m in ("confine", "seccomp", "landlock", "syscalls",
                                                     "policy", "limits"))
# what each part may import from the project (a prefix matches the module and its submodules): the table of
# docs/architecture.md, row by row ("harness" is harness/__init__ alone, which every part may import)
ALLOWED = {
    "harness.wire": ("harness.wire", "harness"),
    "harness.child": ("harness.child", "harness.wire", "harness", "harness.warmup", *CONFINEMENT),  # never the rest
    # of the sandbox; warmup only inside the zygote's rehearsal (a function's import, forgotten before any fork)
    "harness.warmup": ("harness.warmup", "harness.child", "harness.wire", "harness"),
    "harness.sandbox": ("harness.sandbox", "harness.wire", "harness"),  # never the child side
    "reference": ("reference",),
    "mutants": ("mutants", "reference", "harness.engine.trace.detectors"),  # MutantInfo checks `trace=` at import
    "checks": ("checks", "harness.engine.context", "harness.engine.compare", "harness.engine.search",
               "harness.engine.leakage", "harness.engine.mapping", "harness.engine.trace", "harness.wire", "harness",
               "reference"),  # trace: contiguity reads one recorded forward to tell a transpose from a slice
    "harness.engine": ("harness.engine", "harness.sandbox", "harness.wire", "harness", "checks", "reference",
                       "mutants"),
    "harness.render": ("harness.render", "harness.engine.report", "harness.engine.leakage", "harness.engine.trace",
                       "harness.wire", "harness"),
    "harness.frontends": ("harness.frontends", "harness.render", "harness.engine", "harness.sandbox", "harness.wire",
                          "harness", "checks", "reference", "mutants"),
}
# the trace detectors and what they are made of, which the mutants import: pure (no process, no catalogue, no wire),
# so that importing a mutant never loads the side of the trace that reads the mutants' catalogue
TRACE_PURE = tuple(f"harness.engine.trace.{m}" for m in ("vocabulary", "naming", "registry", "detect_layout",
                                                         "detect_rope", "detect_scores", "detect_mask",
                                                         "detect_output", "detect_params", "detect_widths",
                                                         "detect_cache", "detectors"))
ALLOWED.update(dict.fromkeys(TRACE_PURE, TRACE_PURE))
ALLOWED["harness.engine.trace.detect_widths"] = (*TRACE_PURE, "harness.engine.rewrite")  # the student's line parsed
ALLOWED["harness.engine.trace.detect_cache"] = (*TRACE_PURE, "harness.engine.rewrite")  # (as detect_widths)
# through rewrite.parse (one AST at a time); rewrite itself is pure: it imports only the trace's vocabulary
ALLOWED["harness.engine.trace.detect_rope"] = (*TRACE_PURE, "reference.rotary")  # the rotary frequencies a table's
# values are read against (pure numpy)
ALLOWED.update(dict.fromkeys(CONFINEMENT, (*CONFINEMENT, "harness.wire", "harness")))
LOCAL_IMPORT_REASONS = ("optional dependency", "start-up", "PLC0415")  # what the comment on the line must say


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


MODULES = modules()


def _project(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(path: Path, module: str) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function) for every import statement."""
    tree = rewrite.parse(path.read_text())
    found = []

    def visit(node, local):
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            names = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [f"{child.module}.{a.name}" for a in child.names] or [child.module]
            for n in names:
                target = _project(n)
                if target and target != module:
                    found.append((target, child.lineno, local))
            visit(child, inner)

    visit(tree, False)
    return found


def _part(module: str) -> str:
    return max((p for p in ALLOWED if module == p or module.startswith(p + ".")), key=len)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "harness"))
def test_layer_order(module):
    allowed = ALLOWED[_part(module)]
    bad = [t for t, _, _ in imports(MODULES[module], module)  # "harness" allows harness/__init__ only, not below
           if not any(t == a or (a != "harness" and t.startswith(a + ".")) for a in allowed) and t != "harness"]
    assert bad == [], f"{module} may import only {allowed}"


def test_no_import_circles():
    graph = {m: {t for t, _, _ in imports(p, m) if not t.startswith(m + ".") and not m.startswith(t + ".")}
             for m, p in MODULES.items()}
    index, low, stack, on, circles = {}, {}, [], set(), []

    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    assert circles == []


def test_function_local_imports_say_why():
    """Only an optional dependency (matplotlib) or start-up time justifies importing a project module inside a
    function; the line says so."""
    unexplained = []
    for module, path in MODULES.items():
        lines = path.read_text().splitlines()
        for target, lineno, local in imports(path, module):
            if local and not any(r in lines[lineno - 1] for r in LOCAL_IMPORT_REASONS) and module != "harness":
                unexplained.append(f"{module}:{lineno} imports {target}")
    assert unexplained == []


def test_the_trusted_side_never_imports_torch():
    """Everything but the child side (and the zygote the children fork from, with its rehearsal) imports without
    torch."""
    trusted = [m for m in MODULES if not m.startswith(("harness.child", "harness.warmup"))
               and m not in ("reference.causal_mha", "reference.causal_attention", "reference.rotary_mha",
                             "reference.cached_mha", "reference.grouped_mha", "reference.cached_rotary_mha")
               and not (m.startswith("mutants.") and not m.startswith("mutants._"))
               and m != "harness.frontends.catalogue"]
    code = ("import importlib, sys\n"
            f"for name in {trusted!r}:\n    importlib.import_module(name)\n"
            "import checks; checks.all_checks()\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]


def test_nothing_in_the_product_runs_code_in_process_but_tests_and_mutation_testing():
    users = [m for m, p in MODULES.items() if any(t == "harness.child.inprocess" for t, _, _ in imports(p, m))]
    assert users == []


def test_the_child_side_never_imports_the_trusted_side():
    """The child holds no verdict and no process control: nothing of the engine, the checks, the reference values,
    the catalogue, the front ends, nor of the sandbox but its confinement, directly or through what it imports (the
    imports a module makes when it is imported: a function's own, run only when called, aside)."""
    graph = {m: {t for t, _, local in imports(p, m) if not local} for m, p in MODULES.items()}
    reached, todo = set(), [m for m in MODULES if m.startswith("harness.child")]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += graph.get(module, ())
    allowed = ALLOWED["harness.child"]
    outside = sorted(m for m in reached if m != "harness" and not any(m == a or m.startswith(a + ".")
                                                                      for a in allowed if a != "harness"))
    assert outside == [], f"the child side reaches {outside}"


# the words the table of docs/architecture.md names the parts by
PARTS = {"wire": "harness.wire", "child": "harness.child", "warmup": "harness.warmup",
         "sandbox": "harness.sandbox", "engine": "harness.engine",
         "render": "harness.render", "frontends": "harness.frontends", "checks": "checks", "reference": "reference",
         "mutants": "mutants"}


def _table() -> dict[str, str]:
    """{layer: its "may import" cell} from the Layers table of docs/architecture.md."""
    section = (ROOT / "docs" / "architecture.md").read_text().split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[re.match(r"`([\w/]+)`", cells[0]).group(1).replace("/", ".")] = cells[1]
    return rows


def _part_of(module: str) -> str:
    return next(p for p in PARTS.values() if module == p or module.startswith(p + "."))


@pytest.mark.parametrize("layer", sorted(_table()))
def test_the_layer_rules_are_the_table_of_the_architecture(layer):
    """ALLOWED says what the table says, no more and no less: the parts a row names are the parts its layer may
    import; where it names modules of a part ("the engine's report, leakage and trace"), exactly those; and a
    single module it names elsewhere (the trace detectors) by its path."""
    cell = _table()[layer]
    allowed = [a for a in ALLOWED[layer] if a != "harness" and _part_of(a) != layer]
    assert {PARTS[w] for w in re.findall(r"\w+", cell) if w in PARTS} - {layer} == {_part_of(a) for a in allowed}
    listed = {}
    for owner, names in re.findall(r"the (\w+)'s ([^;(]*)", cell):
        listed[PARTS[owner]] = {f"{PARTS[owner]}.{n.strip('` ')}" for n in re.split(r",\s*|\s+and\s+", names.strip())}
    for part, modules in listed.items():
        assert modules == {a for a in allowed if a.startswith(part + ".")}, (layer, part)
    for module in allowed:
        if module not in PARTS.values() and _part_of(module) not in listed:
            assert module.replace(".", "/") in cell, (layer, module)


def test_every_layer_has_its_row_in_the_table():
    assert set(_table()) == set(ALLOWED) - set(TRACE_PURE) - set(CONFINEMENT)


def test_a_check_reaches_the_child_only_through_its_context():
    """A check reads as its claim: what it asks of the child goes through `Context` (build, built, frame, load ...),
    never through the sandbox's subject, its process control (issue 30 item 1's rule, which context.py states)."""
    reaching = []
    for module, path in MODULES.items():
        if module == "checks" or module.startswith("checks."):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in ("subject", "meta_subject"):
                    reaching.append(f"{module}:{node.lineno}")
    assert reaching == []


def test_a_check_states_one_configuration_and_the_engine_sends_them_together():
    """Issue 30 item 1: a check's property is straight-line code about one configuration (`ctx.find_failure`);
    batching its configurations into frames is the engine's (harness.engine.together), so no check names the
    machinery that does it, nor the ask/judge pair it replaced."""
    machinery = {"find_failure_at_once", "Together", "together", "frame_now", "gather"}
    naming = []
    for module, path in MODULES.items():
        if module == "checks" or module.startswith("checks."):
            for node in ast.walk(ast.parse(path.read_text())):
                name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else \
                    None
                names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else [name]
                naming += [f"{module}:{node.lineno} {n}" for n in names if n in machinery]
    assert naming == []
