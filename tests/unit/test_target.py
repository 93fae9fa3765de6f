"""The one parse of a target (harness.wire.target), which both processes and every front end use."""
import pytest

from harness.wire.target import Target


@pytest.mark.parametrize("spec,where,name,is_file", [
    ("examples/attention.py:CausalMHA", "examples/attention.py", "CausalMHA", True),
    ("attention.py", "attention.py", None, True),
    ("lab.ipynb:Attn", "lab.ipynb", "Attn", True),
    ("pkg.mod:Attn", "pkg.mod", "Attn", False),
    ("pkg.mod", "pkg.mod", None, False),
    ("C:attention.py", "C:attention.py", None, True),  # a drive letter, not a separator
    ("hw3/attention.py:", "hw3/attention.py", None, True),
    ("my:attn.py", "my:attn.py", None, True),  # a colon is legal in a file name: attn.py is no class
    ("my:attn.py:Attn", "my:attn.py", "Attn", True),
    ("hw:3/lab.IPYNB:Outer.Inner", "hw:3/lab.IPYNB", "Outer.Inner", True),
    ("week 3:attention.py", "week 3:attention.py", None, True),
    ("pkg.mod:Outer.Inner", "pkg.mod", "Outer.Inner", False),
    (None, "", None, False),
])
def test_a_target_is_split_at_its_last_colon(spec, where, name, is_file):
    target = Target.parse(spec)
    assert (target.where, target.name, target.is_file) == (where, name, is_file)


def test_a_target_moves_with_its_class_and_prints_as_given():
    target = Target.parse("hw3/attention.py:Attn")
    assert str(target) == "hw3/attention.py:Attn" and target.file_name == "attention.py"
    assert str(target.at("/scratch/attention.py")) == "/scratch/attention.py:Attn"
    assert str(Target.parse("attention.py").at("x/attention.py")) == "x/attention.py"
    assert Target.parse("pkg.mod:Attn").file_name == ""


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_file_is_said_to_be_empty(tmp_path, text):
    """Instructor trial 10: an empty `attention.py` was "attention.py has no 'MyAttn'", which `grade` reads as a class
    named otherwise and sends to review ("a student who named the layer otherwise"); it is a file that does not load,
    said as it is, with what to hand in."""
    from harness.child.target import TargetError, load_target
    (tmp_path / "attention.py").write_text(text)
    with pytest.raises(TargetError) as e:
        load_target(str(tmp_path / "attention.py") + ":MyAttn", str(tmp_path), submission=True)
    assert e.value.kind == "import" and "attention.py is empty" in str(e.value), (e.value.kind, str(e.value))


def test_a_missing_file_names_what_the_folder_holds_instead(tmp_path):
    """Instructor trial 10: a Moodle student who handed in online text only (`onlinetext.html`, the code pasted in)
    was "no such file: attention.py (that folder has no .py or .ipynb file)", which did not say what she handed in."""
    from harness.child.target import TargetError, load_target
    (tmp_path / "onlinetext.html").write_text("<p>class MyAttn(nn.Module): ...</p>")
    with pytest.raises(TargetError) as e:
        load_target(str(tmp_path / "attention.py") + ":MyAttn", str(tmp_path), submission=True)
    assert str(e.value) == "no such file: attention.py (that folder has no .py or .ipynb file: it has onlinetext.html)"


def test_an_exceptions_arguments_are_shown_when_plain_and_never_run_the_students_code():
    """A dtype (Sockeye's KeyError(torch.float64)) or a shape (ValueError(x.shape)) is shown; an object of the
    student's is not, even inside a list: its repr would be the student's code, run in the report's words."""
    import torch

    from harness.child.target import safe_message

    class Evil:
        def __repr__(self):
            raise AssertionError("the student's repr ran")

    assert safe_message(KeyError(torch.float64)) == "torch.float64"
    shown = safe_message(ValueError("bad shape", torch.Size([2, 3]), (4, 5.5)))
    assert shown == "bad shape, torch.Size([2, 3]), (4, 5.5)"
    assert safe_message(ValueError([Evil()])) == safe_message(ValueError(Evil())) == \
        "(exception arguments not shown: they are not plain text)"


def test_a_missing_files_name_is_kept_in_the_message():
    """A student's trial: `open('the-verdict.txt')` at import was said "FileNotFoundError: 2, No such file or
    directory", without the file's name (an OSError's filename is no argument of it)."""
    from harness.child.target import safe_message

    with pytest.raises(OSError) as raised:
        open("surely-not-here-the-verdict.txt").close()
    assert safe_message(raised.value) == "[Errno 2] No such file or directory: 'surely-not-here-the-verdict.txt'"

    class Sly(FileNotFoundError):  # a student's exception: nothing of theirs runs while it is described
        @property
        def __class__(self):
            raise SystemExit("ran the student's code")

    assert safe_message(Sly(2, "gone", "data.txt")) == "[Errno 2] gone: 'data.txt'"
    assert safe_message(FileNotFoundError(2, "gone")) == "2, gone"  # no file name: its arguments, as before


def test_a_typed_target_that_names_no_file_says_what_can_be_typed(tmp_path):
    """harness.frontends.typed_target: a student's own run's command line to correct, in one line."""
    from harness.frontends.typed_target import problem

    (tmp_path / "f01_functional.py").write_text("import torch.nn as nn\n\n\nclass FuncAttn(nn.Module):\n    pass\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "lab.ipynb").write_text("{}")
    cwd = str(tmp_path)
    assert problem("f01_functional.py:FuncAttn", cwd) is None
    assert problem("f01_functonal.py:FuncAttn", cwd) == \
        "no such file: f01_functonal.py (did you mean f01_functional.py:FuncAttn?)"
    assert problem("sub/lab.ipynbx", cwd) == "no such file: sub/lab.ipynbx (did you mean sub/lab.ipynb?)"
    assert problem("nope/a.py", cwd) == "no such folder: nope (for the file nope/a.py)"
    assert problem("./", cwd).endswith("e.g. f01_functional.py:FuncAttn")
    assert problem("sub", cwd).endswith("e.g. sub/lab.ipynb")
    assert problem("some.module:Attn", cwd) is None  # a module: importing it says more
    for i in range(9):
        (tmp_path / f"z{i}.py").write_text("x = 1\n")
    assert problem("qqqq.py", cwd).endswith(", …)")
