"""Where a URDF's mesh files are, and its geometry elements as triangle meshes.

One look-up for every entry point (the core, the node, the viewer, reach studies), so that a
robot's meshes are found the same way wherever it is used (:func:`resolve_mesh`):

- ``package://pkg/rel``: ``<share of pkg>/rel`` from the ament index (when
  ``ament_index_python`` is importable and knows ``pkg``), then ``dir/pkg/rel`` and ``dir/rel``
  for each directory of the search path;
- ``file:///abs`` and absolute paths as given; a relative path under each search directory.

The search path is the caller's directories, then those of ``$ROS2_IK_MESH_PATH`` (':'
separated, as ``$AMENT_PREFIX_PATH``): :func:`search_path`.

:func:`element_shape` turns one ``<collision>`` (or ``<visual>``) element into a
:class:`~ros2_ik.model.spheres.Shape` in its link's frame, or says why it cannot.
"""

from __future__ import annotations

import os
import warnings as _warnings
from pathlib import Path

import numpy as np

__all__ = ["resolve_mesh", "search_path", "element_shape", "MAX_MESH_BYTES", "MESH_PATH_ENV"]

#: largest mesh file read [bytes]
MAX_MESH_BYTES = 64 * 1024 * 1024
#: the environment variable whose directories every look-up searches after the caller's
MESH_PATH_ENV = "ROS2_IK_MESH_PATH"


def search_path(dirs=()) -> list:
    """``dirs`` (a list, or one ':'-separated string) followed by ``$ROS2_IK_MESH_PATH``'s
    directories, each once, as :class:`Path`."""
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [d for d in str(dirs).split(":") if d]
    out = []
    for d in list(dirs) + [d for d in os.environ.get(MESH_PATH_ENV, "").split(":") if d]:
        p = Path(d)
        if p not in out:
            out.append(p)
    return out


def resolve_mesh(filename: str, search=()) -> Path | None:
    """The file a URDF mesh name refers to (see the module docstring), or None."""
    dirs = search_path(search)
    candidates: list[Path] = []
    if filename.startswith("package://"):
        rest = filename[len("package://"):]
        pkg, _, rel = rest.partition("/")
        try:
            from ament_index_python.packages import (  # noqa: PLC0415
                get_package_share_directory)

            candidates.append(Path(get_package_share_directory(pkg)) / rel)
        except Exception:  # noqa: BLE001 - no ament index here, or the package is not in it
            pass
        for d in dirs:
            candidates += [d / pkg / rel, d / rel]
    else:
        rel = filename[len("file://"):] if filename.startswith("file://") else filename
        p = Path(rel)
        candidates.append(p)
        if not p.is_absolute():
            candidates += [d / rel for d in dirs]
    for c in candidates:
        try:
            if c.is_file():
                return c
        except OSError:  # a name too long for the file system, a path through a file
            continue
    return None


def _rpy_xyz(xyz, rpy) -> np.ndarray:
    from .tree_build import rpy_xyz_to_matrix  # noqa: PLC0415

    return rpy_xyz_to_matrix(xyz, rpy)


def element_shape(desc, search=()):
    """``(Shape, None)`` for a URDF geometry element (a
    :class:`~ros2_ik.model.urdf.CollisionDesc`) in its link's frame, or ``(None, why)`` when its
    mesh cannot be found or read (``why`` names the file and what was tried)."""
    import trimesh  # noqa: PLC0415 - the collision model only

    from .spheres import Shape  # noqa: PLC0415

    if desc.problem:  # an element the URDF parser could not read
        return None, desc.problem
    T = _rpy_xyz(desc.xyz, desc.rpy)
    if desc.shape == "box":
        m = trimesh.creation.box(extents=desc.size)
        prim = ("box", T, tuple(0.5 * np.asarray(desc.size)))
    elif desc.shape == "cylinder":
        m = trimesh.creation.cylinder(radius=desc.size[0], height=desc.size[1], sections=64)
        prim = ("cylinder", T, (desc.size[0], 0.5 * desc.size[1]))
    elif desc.shape == "capsule":
        m = trimesh.creation.capsule(height=desc.size[1], radius=desc.size[0], count=[32, 32])
        prim = ("capsule", T, (desc.size[0], 0.5 * desc.size[1]))
    elif desc.shape == "sphere":
        m = trimesh.creation.icosphere(subdivisions=3, radius=desc.size[0])
        prim = ("sphere", T, (desc.size[0],))
    else:
        path = resolve_mesh(desc.filename, search)
        if path is None:
            tried = [str(d) for d in search_path(search)]
            return None, (f"mesh {desc.filename!r} not found (looked in the ament index and "
                          f"{tried or 'no search directory'})")
        try:
            if os.path.getsize(path) > MAX_MESH_BYTES:
                raise ValueError(f"larger than {MAX_MESH_BYTES} bytes")
            with _warnings.catch_warnings():
                _warnings.simplefilter("ignore")
                m = trimesh.load(str(path), force="mesh", process=False)
            if not hasattr(m, "vertices") or len(m.vertices) == 0 or len(m.faces) == 0:
                raise ValueError("no triangles in it")
            v = np.asarray(m.vertices, dtype=np.float64) * np.asarray(desc.scale)
            if not np.all(np.isfinite(v)) or np.abs(v).max() > 1e3:
                raise ValueError("vertices that are not finite or beyond 1 km")
            f = np.asarray(m.faces, dtype=np.int64)
            if f.min() < 0 or f.max() >= len(v):
                raise ValueError("faces that name vertices it does not have")
        except Exception as exc:  # noqa: BLE001 - any unreadable file is reported, not raised
            return None, (f"mesh {desc.filename!r} ({path}) could not be read as a mesh "
                          f"({type(exc).__name__}: {exc})")
        if np.linalg.det(np.diag(desc.scale)) < 0:
            f = f[:, ::-1]
        m = trimesh.Trimesh(vertices=v, faces=f, process=False)
        prim = None
    V = np.asarray(m.vertices, dtype=np.float64) @ T[:3, :3].T + T[:3, 3]
    return Shape(V, np.asarray(m.faces, dtype=np.int64), prim), None
