"""Headless Chromium driven over the DevTools protocol: open the viewer's page as a person
would, wait until the picture is stable, take screenshots, drag with the mouse. Used by the
browser test tier (``test/test_viewer_browser.py``) and to take the documentation's screenshot
(``python -m ros2_ik.viewer.browser --out docs/images/viewer.png``).

Needs the ``chromium`` binary (Debian: ``apt-get install chromium``) and ``websocket-client``.
WebGL runs on Chromium's software renderer (SwiftShader), whose frames are the same from run
to run.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

__all__ = ["Chromium", "find_chromium", "project"]

FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
         "--enable-unsafe-swiftshader", "--hide-scrollbars", "--mute-audio",
         "--no-first-run", "--no-default-browser-check", "--remote-allow-origins=*"]


def find_chromium() -> str | None:
    """The Chromium binary on PATH (chromium, chromium-browser, google-chrome), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _until(pred, timeout: float, what: str, step: float = 0.05):
    end = time.monotonic() + timeout
    while True:
        out = pred()
        if out:
            return out
        if time.monotonic() > end:
            raise TimeoutError(f"{what}: not within {timeout:g} s")
        time.sleep(step)


class Chromium:
    """One headless Chromium with one page (``with Chromium() as c: c.open(url)``)."""

    def __init__(self, width: int = 1280, height: int = 800, binary: str | None = None,
                 timeout: float = 60.0):
        import websocket  # noqa: PLC0415 - websocket-client

        binary = binary or find_chromium()
        if binary is None:
            raise FileNotFoundError("chromium is not installed (Debian: apt-get install "
                                    "chromium)")
        self.width, self.height, self.timeout = width, height, timeout
        self.profile = tempfile.mkdtemp(prefix="ros2_ik_chromium_")
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--window-size={width},{height}", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            port_file = Path(self.profile) / "DevToolsActivePort"
            text = _until(lambda: port_file.exists() and port_file.read_text().strip(),
                          timeout, "Chromium's DevTools port")
            port = int(text.splitlines()[0])

            def page():
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                return pages[0]["webSocketDebuggerUrl"] if pages else None
            self.ws = websocket.create_connection(_until(page, timeout, "a Chromium page"),
                                                  timeout=timeout, suppress_origin=True)
        except BaseException:
            self.close()
            raise
        self._ids = itertools.count(1)
        self.call("Page.enable")

    def call(self, method: str, **params) -> dict:
        """One DevTools command; its result (events that arrive meanwhile are dropped)."""
        i = next(self._ids)
        self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def hide_notices(self) -> None:
        """Remove the page's notices (the "Software WebGL rendering detected" one), for a
        clean picture."""
        self.call("Runtime.evaluate", expression=(
            "document.querySelectorAll('.mantine-Notification-root, [class*=Notification]')"
            ".forEach(e => e.remove())"))

    def screenshot(self) -> np.ndarray:
        """The page as an (H, W, 3) uint8 image."""
        from PIL import Image  # noqa: PLC0415 - matplotlib's dependency

        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))

    def stable_screenshot(self, period: float = 0.5, timeout: float | None = None) -> np.ndarray:
        """A screenshot once two in a row, ``period`` apart, are equal (the scene arrived)."""
        end = time.monotonic() + (timeout or self.timeout)
        last = self.screenshot()
        while True:
            time.sleep(period)
            img = self.screenshot()
            if np.array_equal(img, last):
                return img
            if time.monotonic() > end:
                raise TimeoutError("the page did not settle")
            last = img

    def drag(self, start, end, steps: int = 10) -> None:
        """A left-button drag from pixel ``start`` (x, y) to ``end``."""
        x0, y0 = (float(v) for v in start)
        x1, y1 = (float(v) for v in end)
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x0, y=y0)
        self.call("Input.dispatchMouseEvent", type="mousePressed", x=x0, y=y0, button="left",
                  buttons=1, clickCount=1)
        for t in np.linspace(0, 1, steps + 1)[1:]:
            self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x0 + t * (x1 - x0),
                      y=y0 + t * (y1 - y0), button="left", buttons=1)
            time.sleep(0.03)
        self.call("Input.dispatchMouseEvent", type="mouseReleased", x=x1, y=y1, button="left",
                  buttons=1, clickCount=1)

    def click(self, at) -> None:
        """A left-button click at pixel ``at`` (x, y)."""
        x, y = (float(v) for v in at)
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        self.call("Input.dispatchMouseEvent", type="mousePressed", x=x, y=y, button="left",
                  buttons=1, clickCount=1)
        time.sleep(0.05)
        self.call("Input.dispatchMouseEvent", type="mouseReleased", x=x, y=y, button="left",
                  buttons=0, clickCount=1)

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            try:
                ws.close()
            except Exception:  # noqa: BLE001
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
                self.proc.wait(10)
            except Exception:  # noqa: BLE001
                self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def project(camera, points, width: int, height: int) -> np.ndarray:
    """Pixels (N, 2) of world points (N, 3) seen by a viser client camera (+z forward, +y down
    in the camera frame; ``fov`` vertical)."""
    from ..kinematics import quat_to_matrix  # noqa: PLC0415

    w, x, y, z = (float(v) for v in camera.wxyz)
    R = np.asarray(quat_to_matrix(np.array([x, y, z, w])))
    p = (np.atleast_2d(points) - np.asarray(camera.position)) @ R
    f = (height / 2) / np.tan(float(camera.fov) / 2)
    return np.stack([width / 2 + f * p[:, 0] / p[:, 2], height / 2 + f * p[:, 1] / p[:, 2]], 1)


def main(argv=None) -> int:
    """Screenshot of the viewer on a bundled robot, as a person opens it."""
    import argparse  # noqa: PLC0415

    p = argparse.ArgumentParser(prog="python -m ros2_ik.viewer.browser",
                                description=main.__doc__)
    p.add_argument("--robot", default="panda", help="a bundled robot")
    p.add_argument("--urdf", default=None, help="a URDF file instead (its meshes: --mesh-path)")
    p.add_argument("--mesh-path", default="", help="':'-separated mesh directories")
    p.add_argument("--placement", default=None, metavar="DIR",
                   help="a base placement's output folder: its map on the floor, the robot at "
                   "the best base")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    from PIL import Image  # noqa: PLC0415

    from .. import load_robot, robots  # noqa: PLC0415
    from ..model import Model  # noqa: PLC0415
    from .app import Viewer  # noqa: PLC0415

    if args.urdf:
        urdf = Path(args.urdf).read_text(encoding="utf-8")
        model = Model.from_urdf(urdf)
    else:
        urdf = robots.urdf_string(args.robot)
        model = load_robot(args.robot)
    viewer = Viewer(model, urdf, port=0,
                    mesh_path=[d for d in args.mesh_path.split(":") if d])
    try:
        if args.placement:
            return _placement_shot(viewer, args.placement, args.out)
        viewer.frame_camera()
        with Chromium() as c:
            c.open(viewer.url)
            _until(lambda: viewer.server.get_clients(), 60, "the page's connection")
            tip = viewer.tips[0]
            T = viewer.goals[tip].copy()
            T[:3, 3] += (0.05, 0.15, -0.1)
            viewer.set_goal(tip, T)
            viewer.show_seed.value = True
            viewer.seed_robot.visible = True
            c.stable_screenshot()
            c.hide_notices()
            img = c.stable_screenshot()
        Image.fromarray(img).save(args.out)
        print(f"wrote {args.out}: {viewer.answer.summary().splitlines()[0]}")
    finally:
        viewer.close()
    return 0


def _placement_shot(viewer, folder: str, out: str) -> int:
    from PIL import Image  # noqa: PLC0415

    view = viewer.show_placement(folder)
    with Chromium() as c:
        c.open(viewer.url)
        _until(lambda: viewer.server.get_clients(), 60, "the page's connection")
        c.stable_screenshot()
        c.hide_notices()
        img = c.stable_screenshot()
    Image.fromarray(img).save(out)
    print(f"wrote {out}: {view.md.content}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
