"""World files as the command-line tools take them (``--world``): obstacles in YAML
(:func:`ros2_ik.world.world_from_yaml`), an octomap (``.bt`` binary, ``.ot`` full, as OctoMap
writes them), a point cloud (``.pcd`` ascii or binary, ``.ply``, ``.npz`` with an array
``points`` (N, 3), ``.xyz`` text) or a mesh (``.stl``, ``.obj``, ``.off``, ``.glb``; a
``.ply`` with faces). Octomaps, clouds and meshes become the boxes of their cells
(:mod:`ros2_ik.world.voxels`): an octomap's occupied leaves, the cells of
``cloud_resolution`` a cloud's points fall in, the cells of ``mesh_resolution`` a mesh passes
through. Everything is in the world's frame (the model's base frame, or the task frame of a
base placement)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InvalidInputError
from . import World, octomap, voxels, world_from_yaml

__all__ = ["load_world", "read_points", "CLOUDS", "MESHES", "OCTOMAPS"]

OCTOMAPS = (".bt", ".ot")
CLOUDS = (".pcd", ".npz", ".xyz")
MESHES = (".stl", ".obj", ".off", ".glb", ".gltf", ".dae", ".ply")


def load_world(path, *, cloud_resolution: float = 0.02, mesh_resolution: float = 0.005,
               version: int = 0, label: str = "world file") -> World:
    """The world in file ``path`` (see the module docstring); ``label`` names it in errors
    (e.g. the option that gave it)."""
    p = Path(path)
    ext = p.suffix.lower()
    what = f"{label} {str(p)!r}"
    if ext in OCTOMAPS:
        leaves, _ = octomap.read_file(p)
        return World(octomap.obstacles(*octomap.boxes(leaves, what)), version)
    if ext in CLOUDS or ext in MESHES:
        if not p.is_file():
            raise InvalidInputError(f"{what} cannot be read: No such file")
        if ext in CLOUDS:
            return _cells(voxels.cloud_cells(read_points(p), cloud_resolution, what), what,
                          "cloud", version)
        import trimesh  # noqa: PLC0415

        try:
            geom = trimesh.load(str(p), force=None)
        except Exception as exc:  # noqa: BLE001 - any reader error is a bad file
            raise InvalidInputError(f"{what} cannot be read as a mesh or cloud: {exc}") from None
        if isinstance(geom, trimesh.Scene):
            geom = geom.to_mesh() if len(geom.geometry) else None
        faces = getattr(geom, "faces", None)
        V = np.asarray(getattr(geom, "vertices", np.zeros((0, 3))), dtype=np.float64)
        if faces is not None and len(faces):
            return _cells(voxels.mesh_cells(V, faces, mesh_resolution, what), what, "mesh",
                          version)
        if len(V):  # a .ply of points
            return _cells(voxels.cloud_cells(V, cloud_resolution, what), what, "cloud", version)
        raise InvalidInputError(f"{what} holds no triangles and no points")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{what} cannot be read: {exc}; give a YAML world, an octomap "
                                f"({', '.join(OCTOMAPS)}), a cloud ({', '.join(CLOUDS)}) or a "
                                f"mesh ({', '.join(MESHES)})") from None
    return world_from_yaml(text, version)


def _cells(leaves, what, prefix, version) -> World:
    return World(voxels.obstacles(*voxels.boxes(leaves, what), prefix=prefix), version)


def read_points(path) -> np.ndarray:
    """(N, 3) the points of a ``.pcd`` (ascii or binary; x y z as F 4 or 8), ``.npz``
    (array ``points``) or ``.xyz`` (3 numbers a line) file; NaN points dropped."""
    p = Path(path)
    what = f"point cloud {p.name!r}"
    ext = p.suffix.lower()
    try:
        if ext == ".npz":
            with np.load(p) as z:
                if "points" not in z:
                    raise InvalidInputError(f"{what}: no array 'points' (it has "
                                            f"{sorted(z.files)})")
                P = np.asarray(z["points"], dtype=np.float64)
        elif ext == ".xyz":
            P = np.loadtxt(p, dtype=np.float64, ndmin=2)[:, :3]
        else:
            P = _pcd(p.read_bytes(), what)
    except InvalidInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader error is a bad file
        raise InvalidInputError(f"{what} cannot be read: {exc}") from None
    if P.ndim != 2 or P.shape[1] < 3:
        raise InvalidInputError(f"{what}: points must be (N, 3), got shape {P.shape}")
    P = P[:, :3]
    return P[np.all(np.isfinite(P), axis=1)]


def _pcd(raw: bytes, what: str) -> np.ndarray:
    fields: dict = {}
    pos = 0
    while True:
        end = raw.find(b"\n", pos)
        if end < 0 or pos > 4096:
            raise InvalidInputError(f"{what}: no PCD header ending in a DATA line")
        line = raw[pos:end].decode("ascii", "replace").strip()
        pos = end + 1
        if line and not line.startswith("#"):
            k, _, v = line.partition(" ")
            fields[k.upper()] = v.split()
            if k.upper() == "DATA":
                break
    names = fields.get("FIELDS", [])
    sizes = [int(s) for s in fields.get("SIZE", [])]
    types = fields.get("TYPE", [])
    counts = [int(c) for c in fields.get("COUNT", ["1"] * len(names))]
    n = int(fields.get("POINTS", ["0"])[0])
    if not all(c in names for c in "xyz") or len(sizes) != len(names) or len(types) != len(names):
        raise InvalidInputError(f"{what}: the header needs FIELDS with x y z, and SIZE and TYPE "
                                "for each")
    mode = fields["DATA"][0].lower()
    if mode == "ascii":
        rows = np.loadtxt(raw[pos:].decode("ascii", "replace").splitlines(), ndmin=2)
        col = np.cumsum([0] + counts)
        return np.stack([rows[:, col[names.index(c)]] for c in "xyz"], axis=1)
    if mode != "binary":
        raise InvalidInputError(f"{what}: DATA {mode} is not read; save it as ascii or binary")
    dtype = np.dtype([(f"f{k}", {"F": "<f", "I": "<i", "U": "<u"}[t] + str(s), (c,))
                      for k, (t, s, c) in enumerate(zip(types, sizes, counts))])
    body = np.frombuffer(raw, dtype=np.uint8, offset=pos)
    if body.size < n * dtype.itemsize:
        raise InvalidInputError(f"{what}: {body.size} bytes of data for {n} points of "
                                f"{dtype.itemsize} bytes (truncated)")
    rec = body[:n * dtype.itemsize].view(dtype)
    return np.stack([rec[f"f{names.index(c)}"][:, 0].astype(np.float64) for c in "xyz"], axis=1)
