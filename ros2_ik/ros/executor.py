"""The node's threading: every rcl call on one executor thread, every solve in a worker pool.

- :class:`NodeExecutor` is a SingleThreadedExecutor that hands a request of a *deferred*
  service (see :func:`defer_service`) to that service's ``defer(request, header)`` instead of
  calling its callback and answering at once; the answer is sent later with
  :meth:`Service.send_response` from a task queued on this same executor
  (:meth:`Executor.create_task` is thread safe and wakes the executor).
- :class:`WorkerActionServer` runs a goal's work in a worker pool and hands the terminal state
  and the result back to the executor thread the same way.

One thread builds one wait set per message or request: rclpy's handler would wake it once more
after every callback (for other threads, of which there are none here; see
:meth:`NodeExecutor._make_handler`).

So requests are taken, answered, goals accepted and finished, and messages published from one
thread; rclpy and the RMW never see two threads on one service. Each taken request gets exactly
one response: its worker job ends in ``finally`` by queueing one. On a stock executor a
deferred service still works: its callback is then called and answers inline.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from rclpy.action import ActionServer
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.executors import SingleThreadedExecutor
from rclpy.exceptions import InvalidHandle

from ..api import waiting_for_builds

__all__ = ["NodeExecutor", "WorkerActionServer", "defer_service", "goal_finisher",
           "quiet_events"]

_DEFER_ATTR = "_ros2_ik_defer"


#: [s] the oldest reception time a request's header is believed for (an older or future one
#: is read on another clock than the system's: the executor's take time is used instead)
MAX_QUEUE_AGE = 60.0


def arrival(header) -> float:
    """When a request arrived, on ``time.perf_counter``'s clock: the middleware's reception
    time (``rmw_service_info_t.received_timestamp``, the system clock's nanoseconds) where it
    gives a believable one, else now (when the executor took it)."""
    now = time.perf_counter()
    ns = getattr(header, "received_timestamp", 0) or 0
    if ns > 0:
        age = (time.time_ns() - ns) * 1e-9
        if 0.0 <= age <= MAX_QUEUE_AGE:
            return now - age
    return now


def defer_service(service, defer: Callable[[Any, Any], None]):
    """Mark ``service``: on a :class:`NodeExecutor` its requests go to ``defer(request,
    header)``, which must make sure ``service.send_response(response, header)`` is called once,
    on the executor thread."""
    setattr(service, _DEFER_ATTR, defer)
    return service


def quiet_events(publisher: bool):
    """Event callbacks without rclpy's default ones (a log line on an incompatible QoS or
    type), for the node's publishers (a subscriber that does not match logs it in its own
    process) and a subscription no publisher's QoS can be incompatible with (best effort,
    volatile): each default handler is one more waitable that every wait set the executor
    builds (per request, per message) walks, which the one-goal round trip pays for."""
    cls = PublisherEventCallbacks if publisher else SubscriptionEventCallbacks
    return cls(use_default_callbacks=False)


class _QuietGuard:
    """Stands in for the executor's guard condition in a handler (see
    :meth:`NodeExecutor._make_handler`): its ``trigger`` does nothing."""

    @staticmethod
    def trigger() -> None:
        pass


class NodeExecutor(SingleThreadedExecutor):
    """A SingleThreadedExecutor that hands deferred services' requests over (see module). Its
    thread never waits for a compiler: kernels not built yet are built in the background
    while the reference answers (:func:`ros2_ik.api.waiting_for_builds`)."""

    def spin_once(self, timeout_sec: float | None = None) -> None:
        with waiting_for_builds(False):  # (this call only: the thread may be a caller's)
            super().spin_once(timeout_sec)

    def spin_once_until_future_complete(self, future, timeout_sec=None) -> None:
        with waiting_for_builds(False):
            super().spin_once_until_future_complete(future, timeout_sec)

    def spin_until(self, stop: Callable[[], bool]) -> None:
        """Spin until ``stop()`` is true, the executor is shut down or the context is: checked
        after every callback and whenever :meth:`wake` wakes a wait (rclpy's wait loop goes
        back to waiting after a wake with nothing to run, unless its condition holds; and
        ``spin_once_until_future_complete`` would add a done callback to the future at every
        call, without bound on a node that runs for weeks)."""
        with waiting_for_builds(False):
            while not stop() and not self._is_shutdown and self._context.ok():
                self._spin_once_impl(None, stop)

    def _make_handler(self, entity, node, take_from_wait_list):
        # rclpy's handler triggers the executor's guard condition after taking and after
        # running a callback, so that *other* threads put the entity (or its callback group)
        # back into their wait sets. One thread has no other: it builds its next wait set after
        # the handler has run anyway. The trigger only made that next wait return at once with
        # nothing to do, an extra wait set built and waited on per message or request (about
        # half a millisecond with this node's entities). The guard is replaced for the handler
        # only; tasks, wake() and shutdown still trigger the real one.
        real = self._guard
        self._guard = _QuietGuard
        try:
            return super()._make_handler(entity, node, take_from_wait_list)
        finally:
            self._guard = real

    def _take_service(self, srv):
        defer = getattr(srv, _DEFER_ATTR, None)
        if defer is None:
            return super()._take_service(srv)
        try:
            with srv.handle:
                request, header = srv.handle.service_take_request(srv.srv_type.Request)
        except InvalidHandle:
            return None

        async def _execute() -> None:
            if header is not None:
                defer(request, header)
        return _execute


class WorkerActionServer(ActionServer):
    """An ActionServer whose goals execute in ``submit(fn)`` (a worker pool).

    ``context()`` is called on the executor thread when a goal starts executing (the model,
    parameters and joint states the goal is answered with); ``work(goal_handle, ctx)`` runs in
    the worker with it and returns ``finish(goal_handle) -> result``, which runs on the executor
    thread: it sets the terminal state and returns the result.
    """

    def __init__(self, node, action_type, action_name, work, submit, post, context, **kwargs):
        self._work = work
        self._submit = submit
        self._post = post
        self._context = context
        super().__init__(node, action_type, action_name, self._never_called, **kwargs)

    @staticmethod
    def _never_called(goal_handle):  # pragma: no cover
        raise RuntimeError("WorkerActionServer runs goals through notify_execute")

    def notify_execute(self, goal_handle, execute_callback) -> None:
        # goal_handle.execute() calls this on the executor thread once the goal is EXECUTING
        ctx = self._context()

        def job():
            finish = None
            try:
                finish = self._work(goal_handle, ctx)
            finally:
                if finish is None:  # the work itself failed: abort with an empty result
                    def finish(gh):
                        if gh.is_active:
                            gh.abort()
                        return self.action_type.Result()
                self._post(ActionServer.notify_execute, self, goal_handle, finish)
        self._submit(job)


def goal_finisher(result, code: int, finished: str) -> Callable:
    """``finish(goal_handle) -> result`` for a :class:`WorkerActionServer` work function that
    ended with ``code`` (an IKErrorCode value): CANCELED when a cancel was asked for or the
    work was preempted (the result's code then PREEMPTED; ``finished`` says what had been
    done when the cancel came after the end), SUCCEEDED on SUCCESS, else ABORTED."""
    from . import codes  # noqa: PLC0415

    def finish(gh):
        if not gh.is_active:
            return result
        if gh.is_cancel_requested or code == codes.PREEMPTED:
            if code != codes.PREEMPTED:
                result.error_code.val = codes.PREEMPTED
                result.message = f"cancelled after {finished}" + (
                    f"; {result.message}" if result.message else "")
            gh.canceled()
        elif code == codes.SUCCESS:
            gh.succeed()
        else:
            gh.abort()
        return result
    return finish
