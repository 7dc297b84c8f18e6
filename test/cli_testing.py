"""Running the reach commands as a user does, for the tests (not installed)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def interrupt_after_shards(argv: list, out: Path, what: str, shards: int = 2,
                           timeout: float = 240.0) -> tuple[int, str]:
    """Start the command ``argv`` (writing its shards under ``out``/shards), press Ctrl-C once
    ``shards`` shard files are there, and return its (exit status, stderr). Fails if the
    command ends before then (``what``: what ran, for the message)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    try:
        end = time.monotonic() + timeout
        while time.monotonic() < end and p.poll() is None:
            if len(list((out / "shards").glob("shard-*.npz"))) >= shards:
                break
            time.sleep(0.02)
        assert p.poll() is None, f"the {what} ended before it could be interrupted"
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(5)
    return p.returncode, err
