"""Which exceptions are a limit of torch where mha-check runs code (CPU, meta device), not the student's mistake:
harness.child.torch_limits, on real exceptions raised by torch and by code written like a student's."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness.child.torch_limits import is_torch_limit, summary


def _raised(fn) -> BaseException:
    with pytest.raises(BaseException) as got:
        fn()
    return got.value


def test_flex_attention_without_a_cpu_backward_is_a_limit_of_torch():
    flex = pytest.importorskip("torch.nn.attention.flex_attention").flex_attention
    q = torch.randn(1, 1, 3, 2, requires_grad=True)
    exc = _raised(lambda: flex(q, q, q))
    assert isinstance(exc, NotImplementedError) and is_torch_limit(exc)
    assert summary(exc, __file__).startswith("NotImplementedError: FlexAttention does not support backward on CPU")


def test_flex_attention_on_the_meta_device_is_a_limit_of_torch():
    flex = pytest.importorskip("torch.nn.attention.flex_attention").flex_attention
    q = torch.randn(1, 1, 3, 2, device="meta")
    assert is_torch_limit(_raised(lambda: flex(q, q, q)))


def test_a_mask_left_on_the_cpu_is_the_students_device_bug_not_a_limit():
    x = torch.randn(3, 3, device="meta")
    assert not is_torch_limit(_raised(lambda: x.masked_fill(torch.ones(3, 3, dtype=torch.bool), 0.0)))


def test_a_module_without_forward_and_the_students_own_not_implemented_are_theirs():
    class NoForward(nn.Module):
        pass

    assert not is_torch_limit(_raised(lambda: NoForward()(torch.randn(2))))

    def todo(x):
        raise NotImplementedError("TODO: the backward on CPU")

    assert not is_torch_limit(_raised(lambda: todo(1)))


def test_torch_refusing_a_wrong_call_is_not_a_limit():
    """NotImplementedError from inside torch that says nothing of a device or backend: a misuse, as on a GPU."""
    assert not is_torch_limit(_raised(lambda: F.pad(torch.randn(3), (1, 1), mode="reflect")))
    assert not is_torch_limit(_raised(lambda: torch.randn(2, 3) @ torch.randn(2, 3)))


def test_an_exception_whose_str_never_returns_is_read_without_calling_it():
    class Evil(BaseException):
        def __str__(self):
            raise AssertionError("the student's __str__ ran")

        __repr__ = __str__

    def forward():
        raise Evil("boom")

    exc = _raised(forward)
    assert not is_torch_limit(exc) and "Evil: boom (at " in summary(exc, __file__)
