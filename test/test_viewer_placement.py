"""A base placement on the viewer (through its Python API, what the page's clicks call): the
map's cells and colours, a click on a cell (a ray on the floor) stands the robot at that
cell's best candidate with answers that reach the task poses from there (FK here), the best
candidates' dropdown, a finished search's folder; the browser's own click:
``test_viewer_browser.py``."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

pytest.importorskip("viser", reason="the viewer extra is not installed (pip install "
                                    "'ros2_ik[viewer]')")

from ros2_ik import fk_frames, load_robot, robots
from ros2_ik.kinematics import pose_error, pq_to_pose
from ros2_ik.reach.placement import base_poses, rank, run_placement
from ros2_ik.viewer.app import Viewer
from ros2_ik.viewer.placement import TILE_Z, fraction_color
from test_placement import _placement, cell  # noqa: F401

pytestmark = pytest.mark.timeout(300)
TIP = "panda_hand_tcp"


@pytest.fixture(scope="module")
def shown(cell, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("placement")
    pl = _placement(cell)
    res = run_placement(pl, out)
    viewer = Viewer(load_robot("panda"), robots.urdf_string("panda"), port=0)
    try:
        view = viewer.show_placement(pl, res)
        yield types.SimpleNamespace(viewer=viewer, view=view, placement=pl, result=res, out=out)
    finally:
        viewer.close()


def _reaches(model, row, poses) -> None:
    """Every reached pose of a shown candidate: FK from its base reaches it."""
    ok = np.asarray(row["success"], dtype=bool)
    assert ok.any()
    Tb = base_poses(row["base"])[0]
    got = Tb @ np.asarray(fk_frames(model, np.asarray(row["q"])[ok], [TIP]))[:, 0]
    pe, oe = pose_error(got, np.asarray(pq_to_pose(poses))[ok])
    assert np.all(np.asarray(pe) <= 1e-4 + 1e-9) and np.all(np.asarray(oe) <= 1e-3 + 1e-9)


def test_the_map_and_the_best_candidate(shown):
    v, view, res = shown.viewer, shown.view, shown.result
    assert len(view.cells) == 4 * 4  # x-y cells of the coarse grid
    # each cell's colour: its best candidate's fraction (over yaws), red to green
    coarse = res.coarse
    for j, (x, y) in enumerate(view.cells):
        here = np.nonzero(np.all(np.isclose(coarse["base"][:, :2], (x, y)), axis=1))[0]
        assert view.cell_fraction[j] == coarse["fraction"][here].max()
    np.testing.assert_array_equal(fraction_color(np.array([0.0, 1.0])),
                                  [[230, 30, 30], [40, 200, 60]])
    # it opens on the best candidate, the robot standing there
    best = res.candidates["base"][0]
    np.testing.assert_allclose(v.robot_root.position, best[:3], atol=1e-9)
    assert v.robot_root.wxyz[3] == pytest.approx(math.sin(best[3] / 2))
    assert view.selected["fraction"] == res.candidates["fraction"][0]
    _reaches(v.model, view.selected, shown.placement.poses)
    assert "reaches" in view.md.content and all(not g.visible for g in v.gizmos.values())
    # the dropdown: the second best
    n = view.selections
    view.pick.value = "2"
    assert view.wait_selections(n + 1, 10)
    np.testing.assert_allclose(v.robot_root.position, res.candidates["base"][1][:3])


def test_a_click_on_a_cell_stands_the_robot_there(shown):
    v, view, res = shown.viewer, shown.view, shown.result
    coarse = res.coarse
    # the cell with the most reached, not the best candidate's cell
    j = int(np.argmax(view.cell_fraction))
    x, y = view.cells[j]
    n = view.selections
    origin = np.array([x - 1.0, y - 0.5, 2.0])
    target = np.array([x, y, TILE_Z])
    event = types.SimpleNamespace(ray_origin=tuple(origin),
                                  ray_direction=tuple((target - origin) / np.linalg.norm(
                                      target - origin)))
    view._clicked(event)
    assert view.wait_selections(n + 1, 60)
    sel = view.selected
    here = np.nonzero(np.all(np.isclose(coarse["base"][:, :2], (x, y)), axis=1))[0]
    expect = coarse["base"][here[rank({k: coarse[k][here] for k in coarse})[0]]]
    np.testing.assert_allclose(sel["base"], expect)
    np.testing.assert_allclose(v.robot_root.position, expect[:3], atol=1e-9)
    _reaches(v.model, sel, shown.placement.poses)
    # off the map: nothing happens
    assert view.select_cell(x + 10.0, y) is None


def test_a_finished_search_folder(shown):
    v = shown.viewer
    view = v.show_placement(shown.out)
    np.testing.assert_allclose(view.result.candidates["base"], shown.result.candidates["base"])
    np.testing.assert_allclose(v.robot_root.position, shown.result.candidates["base"][0][:3])
    with pytest.raises(Exception, match="no finished base placement"):
        v.show_placement(shown.out / "shards")
