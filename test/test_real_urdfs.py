"""Every real URDF loads (issue 11): the robots of the PyPI package ``example-robot-data``.

Optional tier: the package is 130 MB, so it is not in scripts/requirements.txt; install it into
the venv to run this (``.venv/bin/python -m pip install --no-deps example-robot-data``).
"""

from __future__ import annotations

import warnings
from importlib import metadata

import numpy as np
import pytest

from ros2_ik import Model
from ros2_ik.kinematics import fk


def _urdf_files():
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        return []
    return sorted(str(dist.locate_file(f)) for f in (dist.files or ())
                  if str(f).endswith(".urdf"))


FILES = _urdf_files()


@pytest.mark.skipif(not FILES, reason="example-robot-data is not installed (optional, 130 MB: "
                                      "pip install --no-deps example-robot-data)")
@pytest.mark.parametrize("path", FILES or ["none"],
                         ids=[p.split("/robots/")[-1] for p in FILES] or ["none"])
def test_example_robot_data_urdf_loads(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if "<link" not in text:
        pytest.skip("no robot in this file (the package ships an empty ur3.urdf)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. a mimic on a fixed joint: loaded, warned
        m = Model.from_urdf(text)
    q = m.random_q(0, 4)
    T = fk(m, q)
    assert np.all(np.isfinite(T))
