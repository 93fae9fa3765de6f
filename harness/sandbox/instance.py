"""Trusted side: one module built in the child, as the engine holds it (`Instance`).

Kept apart from the process that holds it (`harness.sandbox.subject.Subject`): an instance only states what it
needs sent (its Build, the weights waiting to be written, its requests) and takes the replies back; how a round trip
is framed, timed and survived is the subject's business, reached through one method (`Channel.frame_or_raise`).
"""
from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from harness.wire import messages as m
from harness.wire.config import Config


class Channel(Protocol):
    """What an instance needs of its subject: one round trip for the requests of several instances."""

    def frame_or_raise(self, groups: list[tuple[Instance, list[m.Request]]]) -> list[list[m.Reply]]: ...


class Instance:
    """One module built in the child; `layout` and `style` say how weights and extra forward arguments are given
    (chosen by the engine's proof of the mapping).

    The trusted side numbers its instances itself, so the Build need not travel alone: it waits for the first
    request on the instance and goes in front of it, in the same round trip (a round trip is worth about a
    forward pass of these small layers).  What the child answers (`info`: parameters, layouts, call styles) is
    asked for on first use, in a round trip of its own where nothing else is waiting.  A constructor that raises
    therefore raises at that first use, which a caller that must know at once (construct, divisibility) forces by
    reading `info`."""

    def __init__(self, subject: Channel, cfg: Config, handle: int, build: m.Build):
        self.subject, self.cfg, self.handle = subject, cfg, handle
        self.style = 0  # how forward is called (index in info.call_styles), chosen by the proof
        self._build: m.Build | None = build  # not yet sent (or sent and refused: sent again at the next use)
        self._info: m.Built | None = None
        self._refusal: Exception | None = None  # what the constructor raised when its Build went ahead
        self._pending: dict | None = None  # weights to write with the next request (saves a round trip)
        self._layout: int | None = None
        self._choose_layout = None  # (Instance) -> layout index, asked once the layout is wanted (it reads `info`)
        self.head_order = None  # heads merged in another order (harness.engine.head_order.HeadOrder): the lesson's
        # roles are placed in the parameters, and read back, in that order; None: the plain order
        self.head_order_known = False  # the order was decided for this instance (Context.build)

    @property
    def info(self) -> m.Built:
        if self._info is None:
            self.calls([])
        return self._info

    @property
    def answered_info(self) -> m.Built | None:
        """What the child already said about the instance, without asking (None when its Build is not answered):
        for reading a failure after the fact, when another round trip would be one too many."""
        return self._info

    @property
    def unbuilt(self) -> bool:
        return self._build is not None and self._refusal is None

    def refused(self, failure: Exception) -> None:
        self._refusal = failure

    def _raise_refusal(self) -> None:
        """A Build sent ahead (in a frame of several) that the constructor refused raises at the instance's next
        use, once, as it would have raised there had it been sent then: the constructor does not run twice."""
        refusal, self._refusal = self._refusal, None
        if refusal is not None:
            raise refusal

    @property
    def layouts(self) -> list[m.LayoutInfo]:
        return self.info.layouts

    @property
    def layout(self) -> int | None:
        """The layout index chosen by the proof."""
        if self._choose_layout is not None:
            choose, self._choose_layout = self._choose_layout, None
            self._layout = choose(self)
        return self._layout

    @layout.setter
    def layout(self, value: int | None) -> None:
        self._layout, self._choose_layout = value, None

    def choose_layout_later(self, choose) -> None:
        """`choose(instance)` picks the layout when it is first wanted: picking reads the Build's answer."""
        self._choose_layout = choose

    def before_next(self, build: bool = True) -> list[m.Request]:
        """What must run before this instance's next requests: its Build, if not sent (and `build`: not already
        in the same frame), then the weights to transplant (`take_weights`)."""
        return ([self._build] if build and self._build is not None else []) + self.take_weights()

    def take_weights(self) -> list[m.WriteWeights]:
        """The transplant waiting for the next request, as a request of its own (none waiting: none)."""
        if self._pending is None:
            return []
        write, self._pending = m.WriteWeights(self.handle, self.layout, self._pending), None
        return [write]

    def answered(self, prefix: list[m.Request], replies: list[m.Reply]) -> None:
        """The child's replies to `before_next()`'s requests (all, up to a failure, or none): a Build answered is
        done; a Build refused or not reached is sent again next time, and so are weights not written."""
        for i, request in enumerate(prefix):
            reply = replies[i] if i < len(replies) else None
            if isinstance(request, m.Build) and isinstance(reply, m.Built):
                self._info, self._build = reply, None
            elif isinstance(request, m.WriteWeights) and not isinstance(reply, m.Done) and self._pending is None:
                self._pending = request.weights

    def calls(self, requests: list[m.Request]) -> list[m.Reply]:
        """Several requests on this instance in one round trip (with its Build and pending weights first)."""
        self._raise_refusal()
        (replies,) = self.subject.frame_or_raise([(self, list(requests))])
        return replies

    def call(self, request: m.Request) -> m.Reply:
        return self.calls([request])[0]

    def write_request(self, weights: dict[str, np.ndarray]) -> m.WriteWeights:
        """A transplant to place between requests of one round trip (`write_weights` puts one before the next)."""
        return m.WriteWeights(self.handle, self.layout, self._placed(weights))

    def _placed(self, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The lesson's roles as this module holds them (its heads' order, `head_order`)."""
        return self.head_order.placed(weights) if self.head_order is not None else dict(weights)

    def _read(self, held: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """What the module's parameters (or their gradients) are as the lesson's roles (`head_order`)."""
        return self.head_order.read(held) if self.head_order is not None and held else held

    def forward_request(self, x: np.ndarray, mode: str = "eval", **how) -> m.Forward:
        return m.Forward(self.handle, x, mode, style=self.style, **how)

    def vjp_request(self, x: np.ndarray, gy: np.ndarray, mode: str = "eval") -> m.Vjp:
        return m.Vjp(self.handle, x, gy, mode, self.layout, self.style)

    def jacobian_request(self, x: np.ndarray, r: np.ndarray, mode: str = "eval", token_axis: int = 0,
                         hide_nothing: bool = False, spare_mask: int | None = None) -> m.Jacobian:
        return m.Jacobian(self.handle, x, r, mode, self.style, token_axis, hide_nothing, spare_mask)

    def forward(self, x: np.ndarray, mode: str = "eval", noncontig: bool = False) -> np.ndarray:
        return self.call(self.forward_request(x, mode, noncontig=noncontig)).y

    def forward_many(self, xs: list[np.ndarray], mode: str = "eval") -> list[np.ndarray]:
        """Forward passes of several inputs in one round trip."""
        return [r.y for r in self.calls([self.forward_request(x, mode) for x in xs])]

    def vjp(self, x: np.ndarray, gy: np.ndarray, mode: str = "eval") -> m.Gradients:
        return self.gradients(self.call(self.vjp_request(x, gy, mode)))

    def gradients(self, reply: m.Reply) -> m.Reply:
        """A reply to `vjp_request` with its gradients read as the lesson's roles, as `vjp` returns it."""
        if isinstance(reply, m.Gradients) and reply.grads:
            reply = dataclasses.replace(reply, grads=self._read(reply.grads))
        return reply

    def jacobian(self, x: np.ndarray, r: np.ndarray, mode: str = "eval") -> m.JacobianResult:
        return self.call(self.jacobian_request(x, r, mode))

    def read_weights_many(self, layouts: list[int]) -> list[dict[str, np.ndarray]]:
        """The weights as each of these layouts reads them, in one round trip."""
        return [self._read(r.weights) for r in self.calls([m.ReadWeights(self.handle, i) for i in layouts])] \
            if layouts else []

    def write_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Transplant before the next request, every time: the student's forward may have changed its own
        parameters since the last one."""
        self._pending = self._placed(weights)

    def meta_forward(self, shape) -> m.MetaResult:
        return self.call(m.MetaForward(self.handle, list(shape), self.style))

    def devices(self, x: np.ndarray) -> m.DevicesResult:
        return self.call(m.Devices(self.handle, x, self.style))

    def trace(self, x: np.ndarray, limit: int = 400, mode: str = "eval", chunks: list[int] | None = None,
              reset: bool = True, style: int | None = None) -> m.TraceResult:
        """Every torch operation of one forward pass, recorded in the child (see harness.child.recorders).  An
        instance not built yet is built noting where its constructor made each tensor (`Build.origins`), so that
        the child need not run the constructor a second time to learn the lines.  `chunks`: x decoded with the
        layer's KV cache in these chunks (after its reset, where `reset`), the last call recorded.  `style`: another
        way of calling forward than the proven one (its default mask left out: causal-leakage's default-mask probe)."""
        if self._build is not None and not self._build.origins:
            self._build = dataclasses.replace(self._build, origins=True)
        return self.call(m.Trace(self.handle, x, limit, self.style if style is None else style, mode,
                                 list(chunks or ()), reset))
