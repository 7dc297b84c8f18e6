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


# ---------------------------------------------------------------------- base placement
@pytest.fixture(scope="module")
def placement_page():
    from ros2_ik.reach.placement import run_placement
    from test_placement import _placement, make_cell

    pl = _placement(make_cell())
    res = run_placement(pl)
    viewer = Viewer(load_robot("panda"), robots.urdf_string("panda"), port=0)
    try:
        view = viewer.show_placement(pl, res)
        with Chromium() as c:
            c.open(viewer.url)
            clients = _until(lambda: viewer.server.get_clients(), 60, "the page's connection")
            client = next(iter(clients.values()))
            _until(lambda: client.camera.fov > 0, 30, "the page's camera")
            yield viewer, view, c, client
    finally:
        viewer.close()


def test_a_click_on_the_placement_map_stands_the_robot_there(placement_page):
    """A mouse click on a cell of the map (a tile on the floor, where the page's camera shows
    it): the viewer stands the robot at that cell's best candidate, and the page shows it
    there."""
    from ros2_ik.viewer.placement import TILE_Z

    viewer, view, c, client = placement_page
    before = c.stable_screenshot()
    H, W = before.shape[:2]
    best = view.result.candidates["base"][0]
    # a cell away from the best candidate's, whose best candidate reaches something
    d = np.hypot(view.cells[:, 0] - best[0], view.cells[:, 1] - best[1])
    j = int(np.argmax(np.where(view.cell_fraction > 0, d, -1)))
    x, y = view.cells[j]
    n = view.selections
    for dx, dy in ((0, 0), (0.03, 0.03), (-0.03, 0.03)):  # the tile's centre, then beside it
        px = project(client.camera, np.array([[x + dx, y + dy, TILE_Z]]), W, H)[0]
        assert 0 <= px[0] < W and 0 <= px[1] < H, px
        c.click(px)
        if view.wait_selections(n + 1, 30):
            break
    else:
        pytest.fail("no click on the map reached the viewer")
    sel = view.selected
    np.testing.assert_allclose(sel["base"][:2], (x, y), atol=1e-9)
    np.testing.assert_allclose(viewer.robot_root.position, sel["base"][:3], atol=1e-9)
    assert np.asarray(sel["success"]).any()
    after = c.stable_screenshot()
    assert _changed(before, after).sum() > 1500
    # the page shows the robot where it now stands: hiding it changes pixels only around the
    # projection of its links at the new base, in the configuration shown
    from ros2_ik.reach.placement import base_poses

    viewer.robot.visible = False
    try:
        without = c.stable_screenshot()
    finally:
        viewer.robot.visible = True
    changed = _changed(after, without)
    assert changed.sum() > 1000, changed.sum()
    Tb = base_poses(sel["base"])[0]
    links = (Tb @ np.asarray(fk(viewer.model, view.shown_q[None]))[0])[:, :3, 3]
    px = project(client.camera, links, W, H)
    lo, hi = px.min(0) - 120, px.max(0) + 120  # (meshes beyond the links' origins, shadows)
    ys, xs = np.nonzero(changed)
    inside = (xs >= lo[0]) & (xs <= hi[0]) & (ys >= lo[1]) & (ys <= hi[1])
    assert inside.mean() > 0.9, (lo, hi, inside.mean())
