"""Red team 15, left open: a reply's texts (a reading's `how` and notes, a crash's words, the lines a trace records,
a parameter's name, a recorded operation's keys) were bounded only by the frame's header, 1 MB; the parent reads,
parses and prints each of them.  A reply holding a text longer than MAX_TEXT is refused now, as a corrupted channel
(tests/hostile/text_flood.py), and the honest worker cuts a longer text of its own first, with a visible mark."""
import io
import time

import pytest

from harness.wire import messages as m
from harness.wire import protocol

LONG = "x raised (at a.py:1 in f: " * 400  # 10,400 characters


def _frame_of(header_items: list) -> tuple[dict, dict]:
    """A frame as a patched worker sends it, past the honest worker's cut."""
    return protocol.decode(io.BytesIO(protocol.encode({"batch": header_items})))


def _built(**more) -> dict:
    fields = dict(type="Built", handle=0, param_count=0, params=[], buffers=[], state_dict=[], plain_tensors=[],
                  containers=[], dropout_modules=0, layouts=[{"roles": {"wq": "W_query.weight"}, "how": "named"}])
    return {**fields, **more}


@pytest.mark.parametrize("item", [
    {"type": "Failed", "stage": "forward", "message": "ValueError: " + LONG},
    {"type": "Failed", "stage": "load", "message": "x", "notes": [LONG]},
    _built(layouts=[{"roles": {"wq": "W_query.weight"}, "how": LONG}]),
    _built(layouts=[{"roles": {"wq": "W_query.weight"}, "how": "named", "notes": [LONG]}]),
    _built(params=[{"name": LONG, "shape": [8, 8]}]),
    {"type": "TraceResult", "ops": [{"op": "linear", LONG: 1}], "lines": [{"at": "a.py:1", "code": "y"}]},
    {"type": "TraceResult", "ops": [], "lines": [{"at": "a.py:1", "code": LONG}]},
    {"type": "TraceResult", "ops": [{"in": [[[{"name": LONG}]]]}]},  # deep in a JSON value
    {"type": "TestOutcome", "id": "t.py::test_a", "outcome": "failed", "message": LONG},
])
def test_a_reply_holding_a_text_longer_than_our_worker_sends_is_refused(item):
    header, arrays = _frame_of([item])
    with pytest.raises(protocol.ProtocolError, match=f"a text {len(LONG) + 12 * ('ValueError' in str(item))} "
                                                     f"characters long sent, where mha-check's worker sends at most "
                                                     f"{m.MAX_TEXT}"):
        m.decode_replies(header, arrays)


def test_a_text_of_max_text_characters_is_read_as_it_is():
    header, arrays = _frame_of([{"type": "Failed", "stage": "forward", "message": "e" * m.MAX_TEXT}])
    assert m.decode_replies(header, arrays)[0].message == "e" * m.MAX_TEXT


def _round_trip(reply):
    return m.decode_replies(*protocol.decode(io.BytesIO(m.encode_batch([reply]))))[0]


def test_the_honest_worker_cuts_a_longer_text_with_a_mark_and_the_parent_reads_it():
    """Cut where it is sent (every reply goes through encode_batch), never refused: a long line or name of the
    student's is no corrupted channel.  Two names differing only past the cut stay two names."""
    a, b = "q" * 40_000 + "a", "q" * 40_000 + "b"
    built = m.Built(handle=0, param_count=0, params=[m.Param(a, [8, 8]), m.Param(b, [8, 8])], buffers=[],
                    state_dict=[a, b], plain_tensors=[], containers=[], dropout_modules=0,
                    layouts=[m.LayoutInfo(roles={"wq": a}, how="named " + a, notes=[b])])
    m.frame_size(built)  # the worker measures a description first: the measured fields are cut as the sent ones
    got = _round_trip(built)
    names = [p.name for p in got.params]
    assert all(len(n) <= m.MAX_TEXT for n in names) and names[0] != names[1]
    assert names[0].startswith("q" * 8000) and "…[40,001 characters, cut by mha-check; " in names[0]
    assert got.layouts[0].how.startswith("named qqq") and "cut by mha-check" in got.layouts[0].notes[0]
    failed = _round_trip(m.Failed("forward", "ValueError: " + "y" * 20_000))
    assert len(failed.message) == m.MAX_TEXT and failed.message.startswith("ValueError: yyy")
    trace = _round_trip(m.TraceResult(ops=[{"op": "linear", "in": [{"name": a}]}], lines=[{"at": "a.py:1",
                                                                                            "code": b}]))
    assert "cut by mha-check" in trace.ops[0]["in"][0]["name"] and "cut by mha-check" in trace.lines[0]["code"]
    short = m.Failed("forward", "ValueError: boom")
    assert _round_trip(short) == short


def test_a_request_s_texts_are_never_cut():
    """The instructor's test files (RunTests.files) are the parent's and may be long: only replies are bounded."""
    source = "def test_a():\n    assert True\n" * 2000
    request = m.RunTests(spec="a.py:A", search_dir="/s", files={"test_a.py": source})
    header, arrays = protocol.decode(io.BytesIO(m.encode_batch([request])))
    assert m.decode_requests(header, arrays)[0].files["test_a.py"] == source


def test_checking_a_full_header_of_short_texts_takes_little_time():
    """The check walks every text of every reply: a description of 20,000 parameters costs it milliseconds."""

    item = _built(params=[{"name": f"p.{i}", "shape": [8]} for i in range(20_000)],
                  state_dict=[f"p.{i}" for i in range(20_000)])
    header, arrays = _frame_of([item])
    start = time.thread_time()
    assert len(m.decode_replies(header, arrays)[0].params) == 20_000
    assert time.thread_time() - start < 1.0
