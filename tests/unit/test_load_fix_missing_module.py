"""construct's fix for a file that imports a package mha-check's environment lacks (student10's trial: einops,
installed where the student ran the notebook, read "run `python your_file.py` and fix the first error", which
showed none)."""
from checks.construct import _load_fix
from harness.wire.errors import TargetFailure


def test_a_missing_package_is_named_with_where_to_install_it():
    fix = _load_fix(TargetFailure("import", "importing the file raised ModuleNotFoundError: No module named "
                                            "'einops.layers' (at attn.py:3 in <module>: from einops.layers import x)"))
    assert "imports einops," in fix and ".venv/bin/pip install einops`" in fix, fix


def test_a_module_of_mha_checks_own_keeps_the_usual_fix():
    fix = _load_fix(TargetFailure("import", "importing the file raised ModuleNotFoundError: No module named "
                                            "'reference' in your submission (mha-check's own 'reference' is not "
                                            "for submissions)"))
    assert "pip install" not in fix and fix.startswith("Make the file import without errors"), fix


def test_a_notebook_export_is_sent_to_the_notebook_beside_it(tmp_path):
    """A student's trial: a notebook exported to .py stopped at get_ipython() (or a %magic left in): said as an
    export, with the notebook beside it as the target to check (its own name first, else the only one there)."""
    from types import SimpleNamespace

    from checks.construct import _notebook_export

    ctx = SimpleNamespace(spec="hw/lab_export.py:Attn", search_dir=str(tmp_path))  # what construct reads (Context)
    (tmp_path / "hw").mkdir()
    (tmp_path / "hw" / "lab.ipynb").write_text("{}")
    for message in ("importing the file raised NameError: name 'get_ipython' is not defined (at lab_export.py:9 in "
                    "<module>: get_ipython().run_line_magic('matplotlib', 'inline'))",
                    "SyntaxError in lab_export.py, line 9: invalid syntax: %matplotlib inline"):
        said, help_ = _notebook_export(ctx, TargetFailure("import", message))
        assert said.startswith("lab_export.py looks like a notebook exported to Python"), said
        assert "`mha-check hw/lab.ipynb:Attn`" in help_, help_
    assert _notebook_export(ctx, TargetFailure("import", "importing the file raised NameError: name 'x' is not "
                                                         "defined")) is None
