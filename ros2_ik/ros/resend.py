"""Responses the middleware could not deliver yet, sent again until they are.

A service client counts a server as available once the server's request reader matches the
client's request writer; the reply path (the server's reply writer to the client's reply
reader) is discovered separately and may match later, on a loaded machine hundreds of
milliseconds later. rmw_fastrtps waits 100 ms for that match when a response is sent, then
drops the response with "failed to send response (timeout): client will not receive
response", which rclpy reports as a RuntimeWarning, not an error: the first requests of a
client that starts while the node is busy were answered and never arrived.

:class:`Resender` notices that warning for a response the node sends (a ``warnings``
hook scoped to the sending thread) and sends the same response again from its own thread,
with a growing pause, until the middleware takes it (the reply path has matched), the
client is gone (rmw then drops the response silently: nothing left to do), or
:data:`RESEND_FOR` seconds have passed (an error in the log). The executor thread never waits
for it. No rclpy here (the service object is the caller's).
"""

from __future__ import annotations

import collections
import threading
import time
import warnings
from typing import Callable

__all__ = ["Resender", "RESEND_FOR", "send_watched"]

#: [s] how long a response is sent again before it is given up (logged as an error)
RESEND_FOR = 30.0
_TEXT = "failed to send response"
_state = threading.local()
_install_lock = threading.Lock()


def _show(message, category, filename, lineno, file=None, line=None):
    """``warnings.showwarning`` while installed (:func:`_ensure`): rclpy's "failed to send
    response" warning raised in a thread inside :func:`send_watched` is recorded for it, not
    printed; anything else goes where it went before."""
    if getattr(_state, "watching", False) and issubclass(category, RuntimeWarning) \
            and str(message).startswith(_TEXT):
        _state.failed = str(message)
        return
    _show.previous(message, category, filename, lineno, file, line)


_show.previous = warnings.showwarning


def _ensure() -> None:
    """The hook and an "always" filter for the warning in place (again, when something such as
    ``warnings.catch_warnings`` replaced them: the default filter would show, and so let us see,
    only the first warning of a call site)."""
    if warnings.showwarning is not _show:
        with _install_lock:
            if warnings.showwarning is not _show:
                _show.previous = warnings.showwarning
                warnings.showwarning = _show
    for f in warnings.filters:
        if f[0] == "always" and f[1] is not None and f[1].pattern == _TEXT:
            return
    warnings.filterwarnings("always", message=_TEXT, category=RuntimeWarning)


def send_watched(send: Callable[[], None]) -> str:
    """Run ``send()`` (one ``Service.send_response``); the middleware's complaint when it did
    not deliver the response (empty: sent)."""
    _ensure()
    _state.watching, _state.failed = True, ""
    try:
        send()
    finally:
        _state.watching = False
    return _state.failed


class Resender:
    """One daemon thread that sends again the responses the middleware could not deliver yet
    (see the module docstring). ``log(level, text)`` from that thread; ``counts`` for the
    diagnostics: ``resent`` (delivered late), ``lost`` (given up)."""

    def __init__(self, log: Callable[[str, str], None]):
        self._log = log
        self._queue: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.counts = {"resent": 0, "lost": 0}

    def add(self, srv, response, header, why: str) -> None:
        """A response that ``srv.send_response(response, header)`` could not deliver."""
        with self._cv:
            if self._closed:
                return
            now = time.monotonic()
            self._queue.append((srv, response, header, now, now + 0.02, 0.02, why))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="ros2_ik-resend")
                self._thread.start()
            self._cv.notify()

    def pending(self) -> int:
        with self._cv:
            return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
                item = min(self._queue, key=lambda it: it[4])
                delay = item[4] - time.monotonic()
                if delay > 0:
                    self._cv.wait(delay)
                    continue
                self._queue.remove(item)
            srv, response, header, first, _, pause, why = item
            try:
                failed = send_watched(lambda: srv.send_response(response, header))
            except Exception as exc:  # noqa: BLE001 - the service is gone (node stopping)
                failed = "" if self._closed else f"{type(exc).__name__}: {exc}"
                if failed:
                    self._give_up(srv, first, failed)
                continue
            now = time.monotonic()
            if not failed:
                self.counts["resent"] += 1
                self._log("info", f"a {srv.srv_name} response was delivered "
                          f"{now - first:.2f} s late (the client's reply path had not been "
                          f"discovered yet: {why})")
            elif now - first > RESEND_FOR:
                self._give_up(srv, first, failed)
            else:
                pause = min(2 * pause, 0.5)
                with self._cv:
                    if not self._closed:
                        self._queue.append((srv, response, header, first, now + pause, pause,
                                            why))

    def _give_up(self, srv, first: float, why: str) -> None:
        self.counts["lost"] += 1
        self._log("error", f"a {srv.srv_name} response could not be delivered for "
                  f"{time.monotonic() - first:.1f} s and was given up ({why}); the client "
                  "should call again (see the node page: clients that start under load)")

    def close(self, timeout: float = 2.0) -> None:
        with self._cv:
            self._closed = True
            self._queue.clear()
            self._cv.notify_all()
            t = self._thread
        if t is not None:
            t.join(timeout)
