"""The viewer as a person uses it: its page opened in headless Chromium (software WebGL), a
goal gizmo dragged with the mouse, the answer checked by FK, and screenshots that show the
robot. An optional tier: skipped when Chromium is not installed (Debian: ``apt-get install
chromium``)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("viser", reason="the viewer extra is not installed")
pytest.importorskip("websocket", reason="websocket-client is not installed")

from ros2_ik import load_robot, robots
from ros2_ik.ik import IKConfig
from ros2_ik.kinematics import fk, fk_frames, pose_error
from ros2_ik.viewer.app import Viewer
from ros2_ik.viewer.browser import Chromium, _until, find_chromium, project

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def page():
    model = load_robot("panda")
    viewer = Viewer(model, robots.urdf_string("panda"), port=0)
    try:
        with Chromium() as c:
            c.open(viewer.url)
            clients = _until(lambda: viewer.server.get_clients(), 60, "the page's connection")
            client = next(iter(clients.values()))
            _until(lambda: client.camera.fov > 0, 30, "the page's camera")
            yield viewer, c, client
    finally:
        viewer.close()


def _changed(a, b) -> np.ndarray:
    return np.any(np.abs(a.astype(int) - b.astype(int)) > 8, axis=2)


def test_the_page_shows_the_robot(page):
    """Hiding the robot changes many pixels, and they lie where the camera sees the robot's
    links (their projection through the page's own camera)."""
    viewer, c, client = page
    with_robot = c.stable_screenshot()
    viewer.robot.visible = False
    try:
        without = c.stable_screenshot()
    finally:
        viewer.robot.visible = True
    changed = _changed(with_robot, without)
    assert changed.sum() > 1500, changed.sum()
    H, W = with_robot.shape[:2]
    links = np.asarray(fk(viewer.model, viewer.q[None]))[0][:, :3, 3]
    px = project(client.camera, links, W, H)
    lo, hi = px.min(0) - 80, px.max(0) + 80
    ys, xs = np.nonzero(changed)
    inside = (xs >= lo[0]) & (xs <= hi[0]) & (ys >= lo[1]) & (ys <= hi[1])
    assert inside.mean() > 0.95, (lo, hi, inside.mean())
    # and the scene is not empty: the robot's pixels are not the background's
    assert len(np.unique(with_robot[changed].reshape(-1, 3), axis=0)) > 3


def test_a_mouse_drag_of_the_gizmo_is_solved(page):
    """A drag on the gizmo's x arrow, with the mouse: the page sends the new pose, the viewer
    solves it, and the answer reaches it (FK here) and shows on the page."""
    viewer, c, client = page
    model, tip = viewer.model, viewer.tips[0]
    before = c.stable_screenshot()
    H, W = before.shape[:2]
    T = viewer.goals[tip].copy()
    n = viewer.answers
    for off in (0.1, 0.14, 0.06, 0.17):  # points along the x arrow (the gizmo is 0.2 m)
        p0 = T[:3, 3] + off * T[:3, 0]
        a, b = project(client.camera, np.stack([p0, p0 + 0.1 * T[:3, 0]]), W, H)
        c.drag(a, b)
        if viewer.wait_answers(n + 1, 10):
            break
    else:
        pytest.fail("no drag of the x arrow reached the viewer")
    assert viewer.wait_answers(viewer.answers, 30)
    ans = viewer.answer
    moved = ans.goals[tip]
    assert abs(float((moved[:3, 3] - T[:3, 3]) @ T[:3, 0])) > 0.005  # along the arrow
    assert ans.success, ans.summary()
    reached = np.asarray(fk_frames(model, ans.q[None], [tip]))[0, 0]
    pe, oe = pose_error(moved[None], reached[None])
    assert float(pe[0]) <= IKConfig().position_tolerance
    assert float(oe[0]) <= IKConfig().orientation_tolerance
    after = c.stable_screenshot()
    assert _changed(before, after).sum() > 200
