"""What crosses the process boundary: frames (protocol) and typed messages, strict on decode."""
import dataclasses
import io

import numpy as np
import pytest

from harness.wire import messages as m
from harness.wire import protocol
from harness.wire.config import Config
from harness.wire.fields import to_fields


def _round_trip(messages):
    header, arrays = protocol.decode(io.BytesIO(m.encode_batch(messages)))
    decode = m.decode_requests if isinstance(messages[0], m.Request) else m.decode_replies
    return decode(header, arrays)


def test_protocol_round_trip_and_strictness():
    arrays = {"x": np.arange(6, dtype=np.float64).reshape(2, 3), "m": np.array([True, False])}
    header, back = protocol.decode(io.BytesIO(protocol.encode({"op": "t"}, arrays)))
    assert header == {"op": "t"} and np.array_equal(back["x"], arrays["x"]) and back["m"].dtype == bool
    frame = protocol.encode({"op": "t"}, {"x": np.ones(4)})
    with pytest.raises(EOFError):
        protocol.decode(io.BytesIO(frame[:-3]))  # truncated payload
    bad = b'{"arrays": [{"name": "x", "dtype": "O", "shape": [1]}]}'
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(io.BytesIO(len(bad).to_bytes(4, "big") + bad))  # no object arrays, ever
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(io.BytesIO((protocol.MAX_HEADER + 1).to_bytes(4, "big")))


def test_a_header_nested_thousands_deep_is_refused_not_a_crash():
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(protocol.ProtocolError, match="nested"):
        protocol.decode(io.BytesIO(len(deep).to_bytes(4, "big") + deep))


def test_a_huge_integer_or_an_overflowing_shape_is_refused_not_a_crash():
    """Found by an attacker: a reply whose header holds an integer of 5000 digits (past Python's limit for
    int()) or whose array sizes multiply past 2**63 crashed the trusted side with ValueError."""
    huge = b'{"op": "t", "zz": ' + b"1" * 5000 + b"}"
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.decode(io.BytesIO(len(huge).to_bytes(4, "big") + huge))
    wrap = b'{"arrays": [{"name": "x", "dtype": "f8", "shape": [2147483647, 2147483647, 2147483647, 4]}]}'
    with pytest.raises(protocol.ProtocolError, match="too large"):
        protocol.decode(io.BytesIO(len(wrap).to_bytes(4, "big") + wrap))


def test_requests_and_replies_round_trip_typed():
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    requests = [m.Load("a.py:A", "/tmp", {"rope": 3}, {"q": "W"}), m.Build(Config(4, 4, 2, 5).to_dict(), 1, None),
                m.Forward(0, x, "train", True, style=2), m.WriteWeights(0, 1, {"wq": np.eye(4)})]
    back = _round_trip(requests)
    assert [type(r) for r in back] == [type(r) for r in requests]
    assert back[0].overrides == {"rope": 3} and back[2].mode == "train" and back[2].style == 2
    assert np.array_equal(back[2].x, x) and np.array_equal(back[3].weights["wq"], np.eye(4))
    replies = [m.Built(0, 10, [m.Param("q.weight", [4, 4])], [m.Param("mask", [5, 5])], ["q.weight"], [], [], 0,
                       [m.LayoutInfo({"wq": "q.weight"}, "by names", [], True)], "", ["forward(x)"]),
               m.Gradients(y=x, gx=x, grads={"wq": np.eye(4)}, unused=["p"]), m.Failed("forward", "boom")]
    got = _round_trip(replies)
    assert got[0].layouts[0].certain and got[0].params[0].shape == [4, 4] and got[1].unused == ["p"]
    assert got[2] == m.Failed("forward", "boom")


@pytest.mark.parametrize("header, words", [
    ({"batch": [{"type": "Output"}]}, "y"),  # a required array missing
    ({"batch": [{"type": "Built", "handle": "0"}]}, "handle"),  # a string where an int belongs
    ({"batch": [{"type": "Nope"}]}, "unknown type"),
    ({"batch": []}, "non-empty"),
    ({"batch": [{"type": "MetaResult", "device": "meta", "shape": [1, "2"]}]}, "shape"),
])
def test_a_reply_that_does_not_fit_its_type_is_refused(header, words):
    with pytest.raises(protocol.ProtocolError, match=words):
        m.decode_replies(header, {})


def test_an_array_must_be_float64():
    frame = protocol.encode({"batch": [{"type": "Output", "contiguous_input": True}]}, {"0:y": np.ones(3, dtype=bool)})
    with pytest.raises(protocol.ProtocolError, match="float64"):
        m.decode_replies(*protocol.decode(io.BytesIO(frame)))


def test_a_reply_of_the_wrong_kind_for_its_request_is_refused():
    with pytest.raises(protocol.ProtocolError):
        m.check_answer(m.Forward(0, np.zeros((1, 1, 1))), m.Done())
    assert m.check_answer(m.Forward(0, np.zeros((1, 1, 1))), m.Failed("forward", "x"))


def test_a_description_larger_than_our_worker_gives_is_refused():
    """The parent tries every reading of the parameters with every way to call forward: a patched worker offering
    thousands of them made it spend minutes of its own CPU (a red team's trial)."""
    layout = m.LayoutInfo(how="named", roles={"wq": "W_query.weight"})
    def built(layouts, styles):
        return m.Built(handle=0, param_count=0, params=[], buffers=[], state_dict=[], plain_tensors=[], containers=[],
                       dropout_modules=0, layouts=[layout] * layouts, call_styles=["x"] * styles)
    build = m.Build({"d_in": 8})
    for layouts, styles in ((m.MAX_LAYOUTS + 1, 1), (1, m.MAX_CALL_STYLES + 1), (64, 64)):
        with pytest.raises(protocol.ProtocolError, match="readings of the parameters"):
            m.check_answer(build, built(layouts, styles))
    assert m.check_answer(build, built(16, 68)).layouts  # the zoos' largest: 16 readings; 68 styles (position ids)


def test_a_reading_longer_than_our_worker_writes_is_refused():
    """Red team 15: a patched worker's reading with a role of 800,000 characters was shown whole, twice, in the
    report (1.6 MB of JSON), and the parent's work on it grew with it."""
    def built(role):
        return m.Built(handle=0, param_count=0, params=[], buffers=[], state_dict=[], plain_tensors=[], containers=[],
                       dropout_modules=0, layouts=[m.LayoutInfo(how="named", roles={"wq": role})], call_styles=["x"])
    build = m.Build({"d_in": 8})
    with pytest.raises(protocol.ProtocolError, match="8193 characters long"):
        m.check_answer(build, built("W_query.weight" + "[" * (m.MAX_ROLE_TEXT - 13)))
    heads = " + ".join(f"transformer.blocks.0.attention.heads.{h}.query_projection.weight" for h in range(64))
    assert m.check_answer(build, built(heads)).layouts  # 64 heads of long names: 4,211 characters


def test_a_bad_item_is_named_by_its_exact_place():
    header = {"batch": [{"type": "MetaResult", "device": "meta", "shape": [1, "2"]}]}
    with pytest.raises(protocol.ProtocolError, match=r"reply 0 \(MetaResult\)\.shape\[1\]: expected int, got str"):
        m.decode_replies(header, {})


@pytest.mark.parametrize("key", ["01:y", "\u0661:y", "1:y", "y", "-0:y"])
def test_arrays_named_for_no_item_are_ignored_not_a_crash(key):
    """Arrays travel as "<item>:<field>"; a name that fits no item of the frame belongs to nothing."""
    header = {"batch": [{"type": "Output", "contiguous_input": True}]}
    with pytest.raises(protocol.ProtocolError, match="array 'y' missing"):
        m.decode_replies(header, {key: np.ones(3)})
    assert m.decode_replies(header, {"0:y": np.ones(3), key: np.zeros(3)})[0].y.tolist() == [1, 1, 1]


def test_an_answer_that_came_while_the_grader_was_stopped_is_read_not_timed_out():
    """A grader stopped past its deadline (SIGSTOP, a paused container) once raised TimeoutError at once, without
    looking: a correct submission whose child had answered long before got "your code did not finish within 30 s".
    Past the deadline it now looks once more; only a channel with nothing to read times out."""
    import socket
    import time

    from harness.sandbox import channel

    ours, theirs = socket.socketpair()
    theirs.sendall(protocol.encode({"n": 1}, {"a": np.eye(2)}))
    late = time.monotonic() - 5  # the deadline passed while the grader was not running
    assert protocol.decode(channel.DeadlineReader(ours.fileno(), late))[0] == {"n": 1}
    with pytest.raises(TimeoutError):
        protocol.decode(channel.DeadlineReader(ours.fileno(), late))
    channel.write_until(ours.fileno(), b"x", late)  # room to write: written, not a time-out
    assert theirs.recv(1) == b"x"
    ours.close()
    theirs.close()


def test_a_message_s_header_is_each_record_s_fields_in_order_as_the_generic_walk_gives():
    """`_plain` reads each record type's field names once (issue 27): the header is the one the generic walk over
    dataclasses.fields gives, nested records (a Built's Params, LayoutInfos, NormInfos) and their order included."""
    def generic(value):
        if dataclasses.is_dataclass(value):
            return {f.name: generic(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, (list, tuple)):
            return [generic(v) for v in value]
        if isinstance(value, dict):
            return {k: generic(v) for k, v in value.items()}
        return value

    built = m.Built(handle=2, param_count=264, params=[m.Param("q.weight", [8, 8]), m.Param("q.bias", [8])],
                    buffers=[m.Param("mask", [4, 4])], state_dict=["q.weight", "q.bias", "mask"], plain_tensors=[],
                    containers=["heads"], dropout_modules=1,
                    layouts=[m.LayoutInfo({"wq": "q.weight"}, "by parameter names", ["a note"], True, 4)],
                    norms=[m.NormInfo("norm", "layer", ["norm.weight"])], config_reads={"n_head": "heads"},
                    init_at={"at": "a.py:3", "code": "def __init__(self, d):"})
    header, arrays = to_fields(built)
    assert header == {f.name: generic(getattr(built, f.name)) for f in dataclasses.fields(built)} and not arrays
    assert list(header["params"][0]) == ["name", "shape"] and header["layouts"][0]["kv_width"] == 4
    assert _round_trip([built]) == [built]


def test_a_measured_description_is_sent_as_the_same_bytes_its_fields_made_once():
    """The worker measures a module's description (`Built`) before sending it (harness.child.worker._describable):
    `frame_size` is the size of the frame `encode_batch` then sends, byte for byte the frame of an unmeasured one, in
    a frame of several replies too; the fields it made are used once (issue 27: not made twice)."""
    def built():
        return m.Built(handle=0, param_count=72, params=[m.Param("w_q", [8, 8]), m.Param("b", [8])], buffers=[],
                       state_dict=["w_q", "b"], plain_tensors=[], containers=[], dropout_modules=0,
                       layouts=[m.LayoutInfo({"wq": "w_q"}, "by parameter names")])

    measured, plain = built(), built()
    assert m.frame_size(measured) == len(m.encode_batch([plain]))
    assert m.MEASURED in measured.__dict__
    others = [m.Done(), m.Output(np.ones((1, 2, 3)))]
    assert m.encode_batch([*others, measured]) == m.encode_batch([*others, plain])
    assert m.MEASURED not in measured.__dict__ and _round_trip([measured]) == [plain]
