"""The node's plumbing, shared by every handler module: threads, contexts, answers, statistics.

- Every rcl call (taking a request, sending a response, publishing, accepting and finishing a
  goal, taking joint_states) happens on the executor thread. Work for it from another thread
  is handed over with :meth:`Wiring.post`: kept in a queue the node owns and run in the order
  it was handed over (an executor may run its own tasks in any order; Jazzy's runs them newest
  first), so solutions are published in goal order on every distribution.
- Solves run in worker pools (:meth:`Wiring.pool`): services, the goal topic (one worker: in
  order), actions; a request small enough (a one-goal IK) is answered on the executor thread.
- A request's :class:`~.request.Context` is made on the executor thread when the request is
  taken: the model and parameters in use then, and the joint states known then (drained from
  the subscription there, so that no worker ever touches rclpy).
- :meth:`Wiring.serve` runs a handler, records its statistics and turns any exception into the
  response's error code and message: exactly one response per request, whatever happened.
"""

from __future__ import annotations

import collections
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from rclpy.logging import LoggingSeverity
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from ..api import waiting_for_builds
from ..errors import IKError
from . import codes
from .codes import RequestError, code_of_exception
from .executor import arrival, defer_service
from .logs import AT
from .request import Context, stamp_model
from .resend import Resender, send_watched

__all__ = ["Wiring", "SERVICE_QOS", "CLIENT_QOS", "POOL_SIZES"]

#: QoS of the services: reliable, with a history deep enough that a response is never
#: replaced in the writer's history before a slow client has taken it (the default depth 10 is
#: shared by every client of a service)
SERVICE_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
#: QoS for service clients of a busy node (the demo's, the tests'; recommended to any client).
#: With Fast DDS every client of a service reads every response on the service's reply topic and
#: keeps its own by writer id; at rclpy's default depth of 10, a client that is slow to take (a
#: loaded machine) can see its own response pushed out by ten others: measured with 8 client
#: processes x 200 requests, 0-8 answers were lost per run at depth 10 (the node had sent every
#: one), none in 3 runs at depth 1000.
CLIENT_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.VOLATILE)
#: worker threads per pool: services (a long request leaves the others free), the goal topic
#: (one: solutions in goal order), trajectory goals, reach studies, base placements, the rviz
#: goal handle
POOL_SIZES = {"services": 4, "goal": 1, "actions": 2, "reach": 1, "placement": 1,
              "interactive": 1}



class Wiring:
    """The node's plumbing (see the module docstring). ``settings()``, ``robot()``, ``xp()``
    and ``seeds()`` give the parameter snapshot, the model, the array module and a joint-states
    snapshot in use now; ``stopping()`` is True once the node shuts down."""

    def __init__(self, node, stats, *, settings: Callable, robot: Callable, xp: Callable,
                 seeds: Callable, stopping: Callable):
        self.node = node
        self.stats = stats
        self.settings = settings
        self.robot = robot
        self.xp = xp
        self.seeds = seeds
        self.stopping = stopping
        self.taken = self.answered = 0  # service requests (executor thread only)
        self._queue: collections.deque = collections.deque()
        self._closed = False
        self._pools = {n: ThreadPoolExecutor(k, thread_name_prefix=f"ros2_ik-{n}")
                       for n, k in POOL_SIZES.items()}
        self._bg_lock = threading.Lock()
        #: responses the middleware could not deliver yet, sent again (:mod:`.resend`)
        self.resender = Resender(self.log)
        self.world_state = None  # the planning scene's handler (handlers.world), set by the node
        #: whether a model change is pending, and the wait for it (the node's model source):
        #: a request taken while one is waits for the new model (Context.require_robot)
        self.model_pending: Callable[[], bool] = lambda: False
        self.wait_model: Callable | None = None

    # ------------------------------------------------------------------ threads
    def pool(self, name: str) -> ThreadPoolExecutor:
        return self._pools[name]

    def post(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the executor thread, after everything posted before it; dropped
        once the node is closed. (Before the node spins on an executor, what is posted waits
        for its first turn: the node's tick, :meth:`run_posted`.)"""
        if self._closed:
            return
        self._queue.append((fn, args))
        ex = self.node.executor
        if ex is not None:
            try:
                ex.create_task(self.run_posted)
            except Exception:  # noqa: BLE001 - the executor is shutting down: nothing runs now
                pass

    def run_posted(self) -> None:
        """Everything posted so far, in the order it was posted (any task drains them all)."""
        while not self._closed:
            try:
                fn, args = self._queue.popleft()
            except IndexError:
                return
            try:
                fn(*args)
            except Exception as exc:  # noqa: BLE001 - one failing hand-off never stops the rest
                self.node.get_logger().warning(
                    f"{getattr(fn, '__name__', fn)} on the executor thread failed: {exc}")

    def log(self, level: str, text: str) -> None:
        """Log from any thread: on the executor thread (a log call publishes on /rosout), and
        never once the node is being destroyed. (One call site per severity: rclpy refuses a
        call site whose severity changes between calls, and drops the message.)"""
        self.post(self._log_at, level, text)

    def _log_at(self, level: str, text: str) -> None:
        AT[level](self.node.get_logger(), text)

    def publish(self, pub, msg) -> None:
        """Publish ``msg`` on ``pub`` from any thread (on the executor thread, in order)."""
        self.post(self._publish, pub, msg)

    def _publish(self, pub, msg) -> None:
        try:
            pub.publish(msg)
        except Exception as exc:  # noqa: BLE001  (e.g. while shutting down)
            self.node.get_logger().warning(f"could not publish on {pub.topic_name}: {exc}")

    def close(self) -> None:
        """No more hand-offs; the pools finish what runs (and drop what waits)."""
        self._closed = True
        self.resender.close()
        for p in self._pools.values():
            p.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------ requests
    def context(self, should_stop=None, inline: bool = False,
                arrived: float | None = None) -> Context:
        """The context of a request taken now (on the executor thread), which ``arrived`` then
        (:func:`ros2_ik.ros.executor.arrival`). While a model change is pending, the request's
        model is the new one, waited for in its worker (never on the executor thread: an
        ``inline`` request gets the model in use)."""
        ws = self.world_state
        settings = self.settings()
        wait = None
        if self.wait_model is not None and not inline and self.model_pending():
            wait_model, limit = self.wait_model, settings.model_wait
            wait = lambda: wait_model(limit)  # noqa: E731
        return Context(robot=self.robot(), settings=settings, xp=self.xp(),
                       seed_base=self.seeds(), should_stop=should_stop or self.stopping,
                       inline=inline, scene=ws.scene if ws is not None else None,
                       model_wait=wait, arrived=arrived)

    def fail(self, kind: str, exc: BaseException) -> tuple[int, str]:
        """Code and message for an exception from a handler; logs it."""
        code = code_of_exception(exc)
        if isinstance(exc, RequestError):
            message = exc.message
        elif isinstance(exc, IKError):
            message = str(exc)
        else:
            message = (f"internal error ({type(exc).__name__}: {exc}); the node keeps serving. "
                       "Please report this together with the request.")
            self.log("error", f"{kind}: {message}\n{traceback.format_exc()}")
        self.log("warning", f"{kind} rejected: {codes.name_of(code)}: {message}")
        return code, message

    def serve(self, kind: str, handler, ctx: Context, req, resp, response_type):
        """``handler(ctx, req, resp)`` with statistics; (response, outcome or None)."""
        t0 = time.perf_counter()
        try:
            with waiting_for_builds(False):  # kernels not built yet: the reference answers
                out = handler(ctx, req, resp)
        except Exception as exc:  # noqa: BLE001  (no exception may escape a callback)
            code, message = self.fail(kind, exc)
            resp = response_type()
            resp.error_code.val = code
            resp.message = message
            stamp_model(resp, ctx.robot if ctx.model_wait is None else None)
            self.stats.record(kind, code, message=message)
            return resp, None
        stamp_model(resp, ctx.robot if ctx.model_wait is None else None)
        code = int(resp.error_code.val)
        problems = getattr(out, "problems", None) if out is not None else None
        solved = getattr(out, "solved", None) if out is not None else None
        if isinstance(out, int):
            problems, solved = out, out
        self.stats.record(kind, code, problems or 0, solved or 0, message=resp.message)
        if code != codes.SUCCESS:
            self.log("info", f"{kind}: {codes.name_of(code)}: {resp.message}")
        logger = self.node.get_logger()
        if logger.is_enabled_for(LoggingSeverity.DEBUG):  # (formatting costs a one-goal call)
            logger.debug(f"{kind} answered in {1e3 * (time.perf_counter() - t0):.2f} ms")
        return resp, out

    def service(self, srv_type, name: str, answer, inline=None, callback_group=None):
        """A service whose requests get their context on the executor thread and are answered
        by ``answer(ctx, request, response) -> response`` in the services' pool, or at once on
        the executor thread when ``inline(request)`` is true (small ones: a hand-off would cost
        more than the work); the response is sent on the executor thread, exactly once."""
        srv = self.node.create_service(srv_type, name, self._inline_only(answer, srv_type),
                                       qos_profile=SERVICE_QOS, callback_group=callback_group)

        def defer(request, header) -> None:
            self.taken += 1
            # (without the middleware's time: from the take, the wait for a worker included)
            arrived = arrival(header) if self.settings().timeout_from_arrival else \
                time.perf_counter()
            if inline is not None and not self.model_pending() and inline(request):
                ctx = self.context(inline=True, arrived=arrived)
                self._send(srv, self._answer(answer, ctx, request, srv_type), header)
                return
            ctx = self.context(arrived=arrived)

            def job():
                self.post(self._send, srv, self._answer(answer, ctx, request, srv_type), header)
            try:
                self._pools["services"].submit(job)
            except RuntimeError:  # the pool is shut down: the node is stopping
                response = srv_type.Response()
                _set_failure(response, "the node is shutting down")
                self._send(srv, response, header)

        return defer_service(srv, defer)

    def _inline_only(self, answer, srv_type):
        """The plain callback (a stock executor, which answers inline)."""
        def callback(request, response):
            return self._answer(answer, self.context(inline=True), request, srv_type, response)
        return callback

    def _answer(self, answer, ctx, request, srv_type, response=None):
        """``answer``'s response, or a failure response: exactly one per request."""
        try:
            with waiting_for_builds(False):  # kernels not built yet: the reference answers
                response = answer(ctx, request, response or srv_type.Response())
        except Exception as exc:  # noqa: BLE001 - (answers catch their own; this is a bug)
            self.fail(srv_type.__name__, exc)
            response = None
        if response is None:
            response = srv_type.Response()
            _set_failure(response, "internal error: the handler returned nothing; the node "
                         "keeps serving")
        return response

    def _send(self, srv, response, header) -> None:
        try:
            failed = send_watched(lambda: srv.send_response(response, header))
            self.answered += 1
        except Exception as exc:  # noqa: BLE001  (the client may be gone)
            self.node.get_logger().warning(f"could not send a {srv.srv_name} response: {exc}")
            return
        if failed:  # the client's reply path is not matched yet: sent again until it is
            self.resender.add(srv, response, header, failed)


def _set_failure(response, message: str) -> None:
    if hasattr(response, "error_code"):
        response.error_code.val = codes.FAILURE
    if hasattr(response, "message"):
        response.message = message
