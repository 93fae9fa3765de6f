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
