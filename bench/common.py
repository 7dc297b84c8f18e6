"""Shared helpers of the benchmarks: hardware/version banner and a robust timer."""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time


def load_average() -> str:
    """The machine's load average (1, 5, 15 min) as the reports print it."""
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


class Report:
    """Lines printed as they come and kept, to append to a results file (:meth:`write`)."""

    def __init__(self):
        self.lines: list[str] = []

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def write(self, path) -> None:
        """Append the report to ``path`` (nothing when ``path`` is None or empty)."""
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write("\n".join(self.lines) + "\n\n")


def banner(title: str) -> str:
    import numpy as np

    lines = [f"== {title}", f"python {sys.version.split()[0]} on {platform.platform()}"]
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    lines.append(f"cpu {cpu} x{os.cpu_count()}")
    libs = [f"numpy {np.__version__}"]
    for mod in ("scipy", "cupy"):
        try:
            m = __import__(mod)
            libs.append(f"{mod} {m.__version__}")
        except Exception:  # noqa: BLE001 - a library that fails to import is left out
            pass
    lines.append("libs " + ", ".join(libs))
    try:
        import cupy

        dev = cupy.cuda.runtime.getDeviceProperties(0)
        lines.append(f"gpu {dev['name'].decode()} driver {cupy.cuda.runtime.driverGetVersion()}")
    except Exception:  # noqa: BLE001 - no CuPy, no driver or no device: all mean no GPU here
        lines.append("gpu none")
    from ros2_ik.api import compiled_status
    from ros2_ik.backends import host

    lines.append(f"{compiled_status()}; host batch threads {host.threads()}")
    return "\n".join(lines)


def _round(fn, min_time: float, sync=None) -> float:
    """Seconds per call of ``fn()`` (then ``sync()``) called until ``min_time`` has passed."""
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        if sync:
            sync()
        el = time.perf_counter() - t0
        if el >= min_time:
            return el / n


def paired(fa, fb, *, rounds: int = 12, min_time: float = 0.02):
    """``fa`` and ``fb`` timed in alternating rounds (a b b a a b ...) of at least ``min_time``
    seconds each, so that a shared machine's drift hits both alike: (median seconds per call of
    ``fa``, of ``fb``, median of the per-pair ratios a / b)."""
    fa(), fb()
    ta, tb = [], []
    for i in range(rounds):
        if i % 2 == 0:
            ta.append(_round(fa, min_time))
            tb.append(_round(fb, min_time))
        else:
            tb.append(_round(fb, min_time))
            ta.append(_round(fa, min_time))
    return (statistics.median(ta), statistics.median(tb),
            statistics.median(a / b for a, b in zip(ta, tb)))


def timeit(fn, *, min_time: float = 0.3, repeats: int = 5, sync=None) -> float:
    """Median seconds per call of ``fn()`` over ``repeats`` rounds of at least ``min_time``."""
    fn()
    if sync:
        sync()
    return statistics.median(_round(fn, min_time / repeats, sync) for _ in range(repeats))
