"""construct: the target imports and builds a module for the configurations mha-check needs.

An import error, or a constructor that raises for valid sizes, is the student's failure.  A constructor argument
mha-check has no value for, sizes read from module-level globals, or several equally likely classes in the file
are mha-check's limits: *cannot tell*, with the option that helps.  So is a refusal caused by mha-check's own
inputs, which the child shows on evidence (harness.child.construct.ours): a setting its config object lacks, or a
parameter it left at its default that, set from the configuration, lets the class build.

A class that refuses the lesson's narrow heads by design (`assert head_dim % 8 == 0`) but builds every required
configuration with wider heads and the same numbers of heads is checked there: every check then uses heads that wide
(Context.head_width).  Inverted divisibility is named only on its numbers: the class refuses the divisible width at
every head width tried and builds one the heads do not divide.  A class that builds nothing mha-check makes, with a
guard of its own, is cannot-tell.  Only a class that refuses pays for these builds.
"""
import os
import re

from checks import cannot_tell, check, failed, passed
from harness.wire import raised
from harness.wire.config import Config
from harness.wire.errors import CannotDrive, TargetFailure, limit_help
from harness.wire.target import Target

ARG = re.compile(r"--arg (?!NAME=)[\w.]+=[@\w.]+")  # a named one: the generic advice says NAME=VALUE
COMPILED_FIX = ("Hand in the source (.py) of your code and of every module it imports: compiled files (.pyc, .so) "
                "are never run, since nobody can read them; the message says which were left out.")
FACTORY_HELP = ("write a factory function in your file, e.g. `def make_attention(d, heads, context_length): return "
                "MyAttn(...)`, and check file.py:make_attention")


@check(
    id="construct",
    claim="the target imports and builds a torch.nn.Module for valid configurations",
    explanation="""Every other check needs a module to test. mha-check imports your file and calls your class (or
    factory) with the width, number of heads and context length spelt the way your constructor names them.""",
    fix="""Make the file import without errors and the constructor accept the width, the number of heads and the
    context length (any usual names work); for anything unusual pass --arg NAME=VALUE.""",
    example="""built for the required configs: d = 6, H = 2, context_length = 7; d = 12, H = 3, context_length = 5;
      d = 8, H = 4, context_length = 64 (with separate widths d_in = 5, 7 and 6)
    the names are matched to your constructor: d / d_model / embed_dim / n_embd ..., nheads / num_heads /
      n_head ..., context_length / block_size / max_len ..., head_dim / head_size (= d / H), or a config object
    pass: every call returns an nn.Module
    fail: the file does not import, or the constructor raises for valid sizes
    cannot tell: it needs an argument with an unknown name: __init__(self, d, heads, ctx, rope_base) ->
      'mha-check has no value for required parameter(s) rope_base', fixed with --arg rope_base=10000""",
)
def construct(ctx):
    try:
        loaded = ctx.load()
    except TargetFailure as e:
        left_out = ctx.compiled_left_out  # a module it imports may be one: say so where the failure is read
        grade = ctx.grading
        export, elsewhere = _notebook_export(ctx, e), None if grade else _data_elsewhere(ctx, e)  # (a grade's
        # trusted side never looks up a path the submission named)
        if (export or elsewhere) and not grade:  # a student's own run: what stopped the import is how
            # mha-check runs the file, not the layer (a grade's submission must import as handed in: it fails there)
            said, help_ = export or elsewhere
            return cannot_tell(said, help=help_, finding="load:elsewhere", stage="import")
        ran_in = _ran_in(ctx, e)
        return failed(f"could not load the target: {e.message}" + (f"; {ran_in}" if ran_in else "") +
                      (f"; {left_out}" if left_out else ""),
                      finding=f"load:{e.stage}", fix=COMPILED_FIX if left_out else
                      export[1] if export else _load_fix(e), **_raised(e),
                      **({"command_line": True} if _named_nothing(e) and not ctx.load_notes else {}))
        # (a notebook whose cells were left out, notes say which, may define the class in one of them: the report)
    except CannotDrive as e:
        return cannot_tell(e.message, help="name the class to check: file.py:ClassName", finding="load:ambiguous")
    if loaded.settings:
        read = ", ".join(f"{k} = {v}" for k, v in loaded.settings.items())
        return cannot_tell(f"{loaded.name} reads its sizes from module-level settings ({read}), so mha-check cannot "
                           "build it with its own widths, heads and context lengths", help=_settings_help(loaded))
    found = _build_required(ctx, loaded)
    if not isinstance(found, tuple):
        return found
    built, note = found
    sig = loaded.signature
    spelt = ", ".join([f"{p}=the {KEY_WORDS.get(k, k)}" for k, p in sig.accepts.items()] +
                      [f"{p}=the {KEY_WORDS.get(k, k)}" for p, k in sig.derived.items()])
    if sig.config_param:
        spelt += (", " if spelt else "") + f"{sig.config_param}=an object holding every setting"
    given = _given(ctx.overrides, sig)
    spelt += (", " if spelt and given else "") + given
    return passed(f"built {loaded.name} ({spelt or 'no arguments'}){note}", built=built)


IPYTHON_ONLY = re.compile(r"NameError: name 'get_ipython' is not defined|SyntaxError in [^:]+: [^:]+: [%!]")
MISSING_FILE = re.compile(r"FileNotFoundError: \[Errno 2\] [^:]*: '([^'\n]+)'")


def _file_target(ctx) -> tuple[str, str] | None:
    """(the target file as typed, the folder it is in on this machine), or None for a module target."""
    target = Target.parse(ctx.spec)
    if not target.is_file:
        return None
    return target.where, os.path.dirname(os.path.join(ctx.search_dir, target.where))


def _notebook_export(ctx, e: TargetFailure) -> tuple[str, str] | None:
    """(what happened, what helps) for a file that stopped at IPython's own code (`get_ipython()`, a `%magic`): a
    notebook exported to Python (a student's trial: "FAIL: your code raised NameError ... 'get_ipython'").  The
    notebook itself is checked with its defining cells only, its magics read: say how, by the notebook's name."""
    if e.stage != "import" or not IPYTHON_ONLY.search(e.message):
        return None
    place = _file_target(ctx)
    name = Target.parse(ctx.spec).name or "Class"
    typed, folder = place if place else ("your_file.py", "")
    notebook = _notebook_beside(typed, folder)
    said = (f"{os.path.basename(typed)} looks like a notebook exported to Python: importing it raised "
            f"{e.message.removeprefix('importing the file raised ')}, IPython's own code (get_ipython(), a %magic), "
            "which runs only inside Jupyter, not under `python`")
    help_ = (f"check the notebook itself: `mha-check {notebook}:{name}` (mha-check runs a notebook's defining "
             "cells only: imports, functions, classes, constants, its magics read), or take the get_ipython() and "
             "% lines out of the .py file")
    return said, help_


def _notebook_beside(typed: str, folder: str) -> str:
    """The notebook beside an exported file, as it can be typed: the one of the same name, else the only one there,
    else a placeholder."""
    try:
        books = sorted(f for f in os.listdir(folder) if f.lower().endswith(".ipynb")) if folder else []
    except OSError:
        books = []
    stem = os.path.splitext(os.path.basename(typed))[0]
    same = [b for b in books if os.path.splitext(b)[0] == stem]
    chosen = same[0] if same else books[0] if len(books) == 1 else "your_notebook.ipynb"
    return os.path.join(os.path.dirname(typed), chosen)


def _data_elsewhere(ctx, e: TargetFailure) -> tuple[str, str] | None:
    """(what happened, what helps) for a file that opens a data file by a relative path at import, which is there
    from the folder mha-check was run in but not from the file's own (a student's trial: `open("the-verdict.txt")`
    in misuse/lab_export2.py, run from the folder holding the-verdict.txt).  `python misuse/lab_export2.py` finds it
    there; mha-check runs the file in a copy of its own folder, its working folder, and never shows the child the
    rest of the disk (the walls: harness.sandbox)."""
    missing, place = MISSING_FILE.search(e.message), _file_target(ctx)
    if e.stage != "import" or missing is None or place is None or os.path.isabs(missing[1]):
        return None
    typed, folder = place
    data, here = missing[1], ctx.search_dir
    if os.path.abspath(folder) == os.path.abspath(here) or not os.path.exists(os.path.join(here, data)):
        return None
    where = os.path.dirname(typed) or "."
    said = (f"importing {os.path.basename(typed)} raised "
            f"{e.message.removeprefix('importing the file raised ')}: mha-check runs your file in a copy of its own "
            f"folder ({where}/), with that copy as the working folder, and the relative path {data!r} is not "
            f"there; it is in the folder you ran mha-check from, which is where `python {typed}` looks")
    help_ = (f"read data files only under `if __name__ == \"__main__\":` (the class does not need them), or put "
             f"{data} beside {os.path.basename(typed)}")
    return said, help_


def _ran_in(ctx, e: TargetFailure) -> str:
    """For a relative data file that is not there: where mha-check looked for it (the copy of the file's folder)."""
    missing, place = MISSING_FILE.search(e.message), _file_target(ctx)
    if e.stage != "import" or missing is None or place is None or os.path.isabs(missing[1]):
        return ""
    folder = f" ({os.path.dirname(place[0])}/)" if os.path.dirname(place[0]) else ""
    return (f"mha-check runs your file in a copy of its own folder{folder} as the working folder, and the relative "
            f"path {missing[1]!r} is not there")


def _named_nothing(e: TargetFailure) -> bool:
    """The target names a class or function its file does not define (`_lookup`'s "attn.py has no 'MyAtn'"): on a
    student's own run a command line to correct (harness.frontends.single_report), in a grade the student's failure."""
    return e.stage == "lookup" and re.match(r".+ has no '[\w.]+'\.", e.message) is not None


def _given(overrides: dict, sig) -> str:
    """The constructor arguments the run's --arg gave, as the pass says them ("breite=the width (--arg)", "p=0.1
    (--arg)"): a student's trial read "built KausaleAufmerksamkeit (no arguments)" of a class built with three."""
    out = []
    for name, value in overrides.items():
        if name in sig.derived:  # said with the configuration's values already
            continue
        bound = isinstance(value, str) and value.startswith("@")
        out.append(f"{name}=the {KEY_WORDS.get(value[1:], value[1:])} (--arg)" if bound else
                   f"{name}={value!r} (--arg)")
    return ", ".join(out)


def _settings_help(loaded) -> str:
    """What lets mha-check build a class that reads module-level sizes: the sizes as constructor arguments.  A
    factory function alone does not (trial8: it builds the same class, which reads the same settings, and was told
    the same cannot-tell with the same advice)."""
    names = list(loaded.settings)
    shown, many = ", ".join(names), len(names) > 1
    args = "constructor arguments" if many else "a constructor argument"
    return (f"pass {shown} to your class{'es' if many else ''} as {args} "
            f"(`def __init__(self, ..., {shown})`, kept as `self.{names[0]} = {names[0]}`) and use "
            f"{'them' if many else 'it'} instead of the module-level value{'s' if many else ''}: mha-check then "
            "passes its own sizes (a factory function alone does not help: the class still reads the module's)")


def _build_required(ctx, loaded):
    """(the configurations built, a note), or the outcome that ends construct: every required configuration is
    built, as square widths where the class refuses d_in != d_out, and with wider heads where it refuses the
    lesson's narrow ones by design (_wider_heads)."""
    built, note = [], ""
    ctx.build_ahead([ctx.built(cfg) for cfg in ctx.required_configs()])  # one round trip
    for i in range(len(ctx.required_configs())):
        cfg = ctx.required_configs()[i]
        try:
            ctx.built(cfg).info  # noqa: B018 - built now: a constructor that raises is judged here
        except CannotDrive as e:
            if limit_help(e) is not None:
                return cannot_tell(e.message, help=limit_help(e))
            named = ARG.findall(e.message)  # the options that help, when the child found which (construct.ours);
            bound = [a for a in named if "=@" in a]  # all the sizes to bind, not a number the message quotes
            return cannot_tell(f"mha-check could not call {loaded.name}(...): {e.message}",
                               help=" ".join(bound) if bound else named[0] if named else
                               "--arg NAME=VALUE (or NAME=@d_out to bind it to the width), or " + FACTORY_HELP)
        except TargetFailure as e:
            if ctx.separate_widths and _square_works(ctx, i):
                note = f"; it refuses d_in != d_out ({e.message[:160]}), so every check uses d_in = d_out"
                cfg = ctx.required_configs()[i]
            elif ctx.head_width is None and _wider_heads(ctx):
                found = _build_required(ctx, loaded)
                if not isinstance(found, tuple):
                    return found
                return found[0], found[1] + (
                    f"; it refuses heads of width {cfg.head_width} ({_said(e)}) and builds heads of width "
                    f"{ctx.head_width} with the same numbers of heads, so every check uses heads that wide")
            else:
                return _refused(ctx, loaded, cfg, e)
        built.append(cfg.describe())
    return built, note


WIDER = (8, 16, 32, 64, 128)  # head widths tried, keeping the heads, when the lesson's narrow heads are refused


def _wider_heads(ctx) -> bool:
    """Does the class build every required configuration with wider heads (the same numbers of heads and key/value
    heads)?  Then it refuses narrow heads by design (`assert head_dim % 8 == 0`, a kernel's tile), and every check
    runs at the narrowest width it builds (Context.head_width).  Paid only by a class that refused: one round trip
    per width tried, up to the first it builds."""
    for wide in WIDER:
        ctx.head_width = wide
        configs = ctx.required_configs()
        ctx.build_ahead([ctx.built(cfg) for cfg in configs])
        try:
            for cfg in configs:
                ctx.built(cfg).info  # noqa: B018 - built now, to see whether it raises
            return True
        except (TargetFailure, CannotDrive):
            continue
    ctx.head_width = None
    return False


DELIBERATE = ("ValueError", "AssertionError", "NotImplementedError")  # a guard's refusal, not a crash


def _refused(ctx, loaded, cfg, e: TargetFailure):
    """The verdict on a constructor that refused a valid configuration at every head width tried, from what else it
    builds.  Inverted divisibility (catalogued: divisibility-inverted) only on its numbers: it refuses the divisible
    width and builds an indivisible one.  A class that builds some valid configurations and refuses others fails
    (a bug of its own, nothing named).  A class that refuses everything mha-check tried, divisible or not, with a
    guard of its own is cannot-tell: its sizes are not ones mha-check makes, which says nothing of its math."""
    probe = indivisible(ctx)[0]
    try:
        ctx.built(probe).info  # noqa: B018 - built now, to see whether it raises
        inverted = True
    except (TargetFailure, CannotDrive):
        inverted = False
    if inverted or any(_builds(ctx, other) for other in ctx.required_configs() if other != cfg):
        finding = "refuses valid widths as not divisible" if inverted and "divisible" in e.message else \
            "refuses valid widths"
        also = f"; it builds {probe.d_out} with {probe.heads} heads, which do not divide it" if inverted else ""
        return failed(f"{loaded.name}(...) failed for {cfg.describe()}: {e.message}{also}", config=cfg,
                      finding=finding, **_raised(e))
    read = raised.parse(e.message)
    if read is None or read.kind.rsplit(".", 1)[-1] not in DELIBERATE:
        return failed(f"{loaded.name}(...) failed for {cfg.describe()}: {e.message}", config=cfg,
                      finding="refuses valid widths", **_raised(e))
    return cannot_tell(
        f"{loaded.name}(...) refuses every configuration mha-check makes: {cfg.describe()} ({_said(e)}), the same "
        f"numbers of heads with heads of width {', '.join(map(str, WIDER))}, and a width the heads do not divide "
        f"({probe.d_out} with {probe.heads} heads); its own guard decides which sizes it takes, which says nothing "
        "of its math",
        help="--arg NAME=VALUE for the setting of your class that lets it build heads of width 2 to 128 (or "
             "NAME=@d_out to bind it to the width), or " + FACTORY_HELP)


def indivisible(ctx) -> list[Config]:
    """Widths the heads do not divide: d_out = 8 with 3 heads and 10 with 4 (heads of width 2, two features left
    over).  Where the class refuses narrow heads by design (Context.head_width, e.g. a multiple of 8), the heads
    are that wide and two features are left over (d_out = 26 with 3 heads, 34 with 4): a class whose only guard is
    on the head width `d_out // H` builds them, as it would build 8 with 3 heads if it took narrow heads."""
    sep, wide = ctx.separate_widths, getattr(ctx, "head_width", None) or 2
    return [Config(d_in=5 if sep else heads * wide + 2, d_out=heads * wide + 2, heads=heads, context_length=6,
                   batch=2, n=3) for heads in (3, 4)]


def _builds(ctx, cfg) -> bool:
    try:
        ctx.built(cfg).info  # noqa: B018 - built now, to see whether it raises
        return True
    except (TargetFailure, CannotDrive):
        return False


def _said(e: TargetFailure) -> str:
    return e.message.split(" (at ")[0][:160]


KEY_WORDS = {"d_in": "input width", "d_out": "output width", "width": "width", "heads": "number of heads",
             "context_length": "context length", "dropout": "dropout rate", "qkv_bias": "Q/K/V bias flag",
             "head_width": "head width", "kv_heads": "number of key/value heads", "kv_group": "query heads per "
             "key/value head", "all_bias": "bias flag (every projection)", "causal": "causal flag",
             "rope_theta": "rotary base", "rope_fraction": "whole head (1.0) for the rotary embedding",
             "max_batch": "largest batch a check sends (64)"}
# how a student would say them (a student's trial read "bias=the all_bias")


def _raised(e: TargetFailure) -> dict:
    """The exception the student's code raised while imported or built, for a verdict that headlines it (nothing
    when the failure is not one: no such file, no such class)."""
    read = raised.parse(e.message) if e.stage not in ("lookup",) else None
    return {"raised": read.to_dict()} if read is not None else {}


def _load_fix(e: TargetFailure) -> str:
    """What to do when the file cannot even be loaded: the constructor advice (and --arg, which a student graded on
    a course platform cannot pass) would mislead.  Read from the stage and the start of the message."""
    if e.stage == "lookup":
        return ("Define the class the assignment names at the top level of your file (not inside a function or an "
                "`if`), spelt exactly as asked; the message says what your file defines.")
    if e.message.startswith("no such file"):
        return ("Hand in your code under the file name the assignment asks for; the message says what your "
                "submission holds.")
    missing = _MISSING.search(e.message)
    if missing and "mha-check's own" not in e.message:  # a package the student has, but not the Python mha-check runs
        top = missing.group(1).split(".")[0]
        return (f"Your file imports {top}, which mha-check cannot find (`python your_file.py` may still work where "
                f"you run it): if it is a file of yours, put {top}.py beside this file, or its code into this file; "
                f"if it is a package, install it into mha-check's environment (in a clone of mha-check: "
                f"`.venv/bin/pip install {top}`; the package may be named otherwise on PyPI), or write the layer "
                "without it: a course's grader has torch and what the course installs.")
    return ("Make the file import without errors: run `python your_file.py` and fix the first error it shows. "
            "Code outside functions and classes runs on import: keep training, downloads and prints under "
            "`if __name__ == \"__main__\":`.")


_MISSING = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z_][\w.]*)'")  # (a student's trial: einops,
# installed where they ran their notebook, not in mha-check's virtual environment, read "run python your_file.py")


def _square_works(ctx, i: int) -> bool:
    """Does the constructor accept the same configuration with d_in = d_out?  Then check with square widths."""
    ctx.square_only = True
    try:
        ctx.built(ctx.required_configs()[i]).info  # noqa: B018 - built now, to see whether it raises
        return True
    except TargetFailure:
        ctx.square_only = False
        return False
