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
