"""Target poses of a reach study: generated on a voxel grid, or read from a file.

Every study sees its targets the same way: ``poses`` (N, 7) ``x y z qx qy qz qw`` in the
model's base frame [m], each target's voxel (an occupied cell of a regular grid of edge
``resolution`` [m]), and the grid itself (``origin`` + ``resolution`` * integer cell index), so
that per-voxel results can be drawn as heat maps whatever the targets came from.

Generated targets (:func:`grid_targets`): the grid points inside a box or a sphere, times N
orientations per point. The orientations are ``directions`` approach directions spread evenly on
the unit sphere by a spherical Fibonacci lattice (point k at height ``z_k = 1 - (2k + 1) / n``
and azimuth ``k * pi * (3 - sqrt 5)``: equal-area bands, near-uniform spacing, deterministic,
no point on the poles), times ``rolls`` rotations about the tool axis at ``2 pi j / rolls``. The
tool's z axis points along the approach direction; the rotation taking the base's z axis to it
is the shortest one (scipy.spatial.transform), then the roll about the new z axis.

File targets (:func:`load_targets`): CSV (columns ``x y z qx qy qz qw``, a header line is
allowed), NPZ (an array ``poses`` (N, 7) or ``poses`` (N, 4, 4)) or YAML (a list of
``{position: [x, y, z], orientation: [qx, qy, qz, qw]}`` or of 7-number lists, or a mapping with
such a list under ``poses``). They are binned on a grid of edge ``resolution`` anchored at 0.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputTypeError, InvalidInputError, ShapeError
from ..validate import as_float_array, check_int, check_number, check_transforms, describe

__all__ = ["Targets", "Box", "Sphere", "fibonacci_directions", "tool_orientations",
           "grid_points", "grid_targets", "load_targets", "from_poses", "MAX_TARGETS"]

#: Most targets one study takes (its results hold about 150 bytes per target).
MAX_TARGETS = 200_000_000
_GOLDEN_ANGLE = math.pi * (3.0 - math.sqrt(5.0))


@dataclass(frozen=True)
class Box:
    """Axis-aligned box ``lower`` .. ``upper`` [m] in the base frame."""

    lower: tuple[float, float, float]
    upper: tuple[float, float, float]

    def __post_init__(self):
        lo = _vec3(self.lower, "box lower corner")
        hi = _vec3(self.upper, "box upper corner")
        if np.any(hi < lo):
            raise InvalidInputError(f"box upper corner {_fmt(hi)} is below the lower corner "
                                    f"{_fmt(lo)} on some axis; give xmin ymin zmin xmax ymax "
                                    "zmax")
        object.__setattr__(self, "lower", tuple(lo))
        object.__setattr__(self, "upper", tuple(hi))


@dataclass(frozen=True)
class Sphere:
    """Ball of ``radius`` [m] around ``centre`` [m] in the base frame."""

    centre: tuple[float, float, float]
    radius: float

    def __post_init__(self):
        object.__setattr__(self, "centre", tuple(_vec3(self.centre, "sphere centre")))
        object.__setattr__(self, "radius", check_number(self.radius, "sphere radius", low=0.0))


@dataclass(frozen=True, eq=False)
class Targets:
    """The targets of one study (see the module docstring).

    ``poses`` (N, 7) [m, unit quaternion xyzw]; ``voxel`` (N,) index into ``cells``;
    ``cells`` (V, 3) integer grid index of each voxel; the centre of voxel v is
    ``origin + resolution * cells[v]``. ``orientations`` is the number of orientations per
    voxel for generated targets (targets are voxel-major: target ``v * orientations + o``), 0
    for file targets.
    """

    poses: np.ndarray
    voxel: np.ndarray
    cells: np.ndarray
    origin: np.ndarray
    resolution: float
    orientations: int = 0
    description: str = ""
    _digest: list = field(default_factory=list, repr=False)

    def __post_init__(self):
        n = self.poses.shape[0]
        if self.poses.shape != (n, 7) or self.voxel.shape != (n,):
            raise ShapeError(f"targets: poses must be (N, 7) and voxel (N,), got "
                             f"{self.poses.shape} and {self.voxel.shape}")
        for a in (self.poses, self.voxel, self.cells, self.origin):
            a.setflags(write=False)

    def __len__(self) -> int:
        return int(self.poses.shape[0])

    @property
    def num_voxels(self) -> int:
        return int(self.cells.shape[0])

    @property
    def centres(self) -> np.ndarray:
        """(V, 3) voxel centres [m] in the base frame."""
        return self.origin + self.resolution * self.cells

    def digest(self) -> str:
        """sha256 of the poses, voxels and grid: a resumed study must see the same targets."""
        if not self._digest:
            h = hashlib.sha256()
            for a in (self.poses, self.voxel, self.cells, self.origin,
                      np.float64(self.resolution)):
                h.update(np.ascontiguousarray(a).tobytes())
            self._digest.append(h.hexdigest())
        return self._digest[0]


# ---------------------------------------------------------------------- orientations
def fibonacci_directions(n: int) -> np.ndarray:
    """(n, 3) unit vectors spread evenly on the sphere (spherical Fibonacci lattice)."""
    n = check_int(n, "directions", low=1, high=100_000)
    k = np.arange(n, dtype=np.float64)
    z = 1.0 - (2.0 * k + 1.0) / n
    r = np.sqrt(np.maximum(0.0, 1.0 - z * z))
    phi = k * _GOLDEN_ANGLE
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def tool_orientations(directions: int, rolls: int) -> np.ndarray:
    """(directions * rolls, 4) quaternions (x, y, z, w), direction-major: the tool z axis along
    each Fibonacci direction, rolled about it by ``2 pi j / rolls``."""
    from scipy.spatial.transform import Rotation  # noqa: PLC0415 (SciPy only where needed)

    rolls = check_int(rolls, "rolls", low=1, high=10_000)
    d = fibonacci_directions(directions)
    ez = np.array([0.0, 0.0, 1.0])
    axis = np.cross(ez, d)  # |axis| = sin(angle); never 0 with angle pi (no lattice pole)
    s = np.linalg.norm(axis, axis=1, keepdims=True)
    angle = np.arctan2(s[:, 0], d[:, 2])
    unit = np.where(s > 1e-12, axis / np.where(s > 1e-12, s, 1.0), 0.0)
    align = Rotation.from_rotvec(unit * angle[:, None])
    roll = Rotation.from_rotvec(np.outer(2.0 * np.pi * np.arange(rolls) / rolls, ez))
    r = align[np.repeat(np.arange(len(d)), rolls)] * roll[np.tile(np.arange(rolls), len(d))]
    q = r.as_quat()
    return np.where(q[:, 3:4] < 0, -q, q)  # w >= 0: one quaternion per rotation


# ---------------------------------------------------------------------- grids
def grid_points(region: Box | Sphere, resolution: float) -> tuple[np.ndarray, np.ndarray]:
    """(origin (3,), cells (V, 3) int) of the grid points inside ``region``, z fastest.

    Box: ``lower + resolution * i`` for every i with the point at most ``upper`` (+1e-9 m).
    Sphere: the grid through the centre, points within the radius (+1e-9 m).
    """
    res = check_number(resolution, "resolution", low=0.0, low_open=True, high=1e3)
    if isinstance(region, Box):
        lo, hi = np.array(region.lower), np.array(region.upper)
        origin = lo
        counts = np.floor((hi - lo) / res + 1e-9).astype(np.int64) + 1
        first = np.zeros(3, np.int64)
    elif isinstance(region, Sphere):
        origin = np.array(region.centre)
        m = int(math.floor(region.radius / res + 1e-9))
        counts = np.full(3, 2 * m + 1, np.int64)
        first = np.full(3, -m, np.int64)
    else:
        raise InvalidInputError(f"region must be a Box or a Sphere, got {type(region).__name__}")
    if int(np.prod(counts)) > MAX_TARGETS:
        raise InvalidInputError(f"a grid of {' x '.join(map(str, counts))} points at resolution "
                                f"{res} m is too large; use a coarser resolution or a smaller "
                                "region")
    axes = [np.arange(c, dtype=np.int64) + f for c, f in zip(counts, first)]
    cells = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    if isinstance(region, Sphere):
        inside = np.linalg.norm(cells * res, axis=1) <= region.radius + 1e-9
        cells = cells[inside]
    return origin.astype(np.float64), cells


def grid_targets(region: Box | Sphere, resolution: float, directions: int,
                 rolls: int = 1) -> Targets:
    """Targets at every grid point of ``region`` x ``directions * rolls`` orientations."""
    origin, cells = grid_points(region, resolution)
    quats = tool_orientations(directions, rolls)
    V, O = len(cells), len(quats)
    if V == 0:
        raise InvalidInputError(f"{region} holds no grid point at resolution {resolution} m; "
                                "use a finer resolution or a larger region")
    if V * O > MAX_TARGETS:
        raise InvalidInputError(f"{V} voxels x {O} orientations = {V * O} targets exceeds "
                                f"{MAX_TARGETS}; use a coarser grid or fewer orientations")
    pos = origin + resolution * cells
    poses = np.empty((V, O, 7))
    poses[:, :, :3] = pos[:, None, :]
    poses[:, :, 3:] = quats[None, :, :]
    voxel = np.repeat(np.arange(V, dtype=np.int64), O)
    what = (f"box {_fmt(region.lower)} .. {_fmt(region.upper)}" if isinstance(region, Box)
            else f"sphere centre {_fmt(region.centre)} radius {region.radius:g}")
    return Targets(poses.reshape(-1, 7), voxel, cells, origin, float(resolution), O,
                   f"{what} m, resolution {resolution} m, {directions} directions x {rolls} "
                   "rolls")


# ---------------------------------------------------------------------- files
def from_poses(poses, resolution: float, description: str = "") -> Targets:
    """Targets from (N, 7) poses (or (N, 4, 4)), binned on a grid of edge ``resolution`` [m]
    anchored at the base origin. Quaternions are checked (unit norm within 1e-3) and
    normalized."""
    from ..kinematics import pose_to_pq  # noqa: PLC0415

    res = check_number(resolution, "resolution", low=0.0, low_open=True, high=1e3)
    if not isinstance(description, str):
        raise InputTypeError(f"description must be a str, got {describe(description)}")
    p = as_float_array(poses, "poses", "shape (N, 7) or (N, 4, 4)", np).astype(np.float64,
                                                                              copy=False)
    if p.ndim == 3 and p.shape[1:] == (4, 4):
        check_transforms(p, "poses")
        p = np.asarray(pose_to_pq(p))
    if p.ndim != 2 or p.shape[1] != 7:
        raise ShapeError(f"poses must have shape (N, 7) [x y z qx qy qz qw] or "
                         f"(N, 4, 4), got {p.shape}")
    if p.shape[0] == 0:
        raise InvalidInputError("poses is empty: no target poses given")
    if p.shape[0] > MAX_TARGETS:
        raise InvalidInputError(f"{p.shape[0]} targets exceeds {MAX_TARGETS}; split the study")
    bad = ~np.isfinite(p).all(axis=1)
    if bad.any():
        raise InvalidInputError(f"poses: target {int(np.argmax(bad))} has a NaN or infinite "
                                f"value: "
                                f"{p[np.argmax(bad)].tolist()}; fix or remove it")
    norm = np.linalg.norm(p[:, 3:], axis=1)
    off = np.abs(norm - 1.0) > 1e-3
    if off.any():
        i = int(np.argmax(off))
        raise InvalidInputError(f"poses: target {i}: quaternion {p[i, 3:].tolist()} has norm "
                                f"{norm[i]:.6g}, not 1 (+-1e-3); give unit quaternions in ROS "
                                "order (qx qy qz qw)")
    p = p.copy()
    p[:, 3:] /= norm[:, None]
    idx = np.round(p[:, :3] / res).astype(np.int64)
    cells, voxel = np.unique(idx, axis=0, return_inverse=True)
    return Targets(p, voxel.reshape(-1).astype(np.int64), cells, np.zeros(3), float(res), 0,
                   description or f"{len(p)} poses, binned at {res} m")


def load_targets(path, resolution: float = 0.05) -> Targets:
    """Targets from a CSV, NPZ or YAML file (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"target file {str(path)!r} does not exist (or is not a file); "
                                "give a .csv, .npz or .yaml file of poses")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            poses = _read_csv(path)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as f:
                if "poses" not in f.files:
                    raise InvalidInputError(f"{path}: no array named 'poses' (found "
                                            f"{f.files}); save the targets as poses=(N, 7)")
                poses = f["poses"]
        elif suffix in (".yaml", ".yml"):
            poses = _read_yaml(path)
        else:
            raise InvalidInputError(f"target file {str(path)!r}: unknown type {suffix!r}; use "
                                    ".csv, .npz or .yaml")
    except (OSError, ValueError) as exc:
        if isinstance(exc, InvalidInputError):
            raise
        raise InvalidInputError(f"cannot read target file {str(path)!r}: {exc}") from None
    try:
        return from_poses(poses, resolution, f"{len(poses)} poses from {path.name}, binned "
                          f"at {resolution} m")
    except InvalidInputError as exc:
        raise type(exc)(f"{path}: {exc}") from None


def _read_csv(path: Path) -> np.ndarray:
    rows = []
    with path.open() as f:
        for line_no, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            cols = [c for c in text.replace(";", ",").replace(",", " ").split() if c]
            try:
                values = [float(c) for c in cols]
            except ValueError:
                if not rows and line_no == 1:  # a header line
                    continue
                raise InvalidInputError(f"{path}:{line_no}: not a number in {text!r}; each "
                                        "line must be x y z qx qy qz qw") from None
            if len(values) != 7:
                raise InvalidInputError(f"{path}:{line_no}: {len(values)} values, expected 7 "
                                        "(x y z qx qy qz qw)")
            rows.append(values)
    return np.array(rows, dtype=np.float64).reshape(-1, 7)


def _read_yaml(path: Path) -> np.ndarray:
    import yaml  # noqa: PLC0415 (PyYAML comes with the ROS 2 wheels)

    data = yaml.safe_load(path.read_text())
    if isinstance(data, dict):
        data = data.get("poses")
    if not isinstance(data, list):
        raise InvalidInputError(f"{path}: expected a list of poses (or a mapping with 'poses:'), "
                                "each {position: [x, y, z], orientation: [qx, qy, qz, qw]} or "
                                "[x, y, z, qx, qy, qz, qw]")
    rows = []
    for i, item in enumerate(data):
        if isinstance(item, dict):
            row = list(item.get("position", ())) + list(item.get("orientation", ()))
        else:
            row = list(item) if isinstance(item, (list, tuple)) else []
        try:
            row = [float(v) for v in row]
        except (TypeError, ValueError):
            row = []
        if len(row) != 7:
            raise InvalidInputError(f"{path}: pose {i} is {item!r}; give position: [x, y, z] "
                                    "and orientation: [qx, qy, qz, qw] (or 7 numbers)")
        rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(-1, 7)


def _fmt(v) -> str:
    return "(" + ", ".join(f"{float(x):g}" for x in v) + ")"


def _vec3(v, name: str) -> np.ndarray:
    a = as_float_array(v, name, "3 finite numbers [m]", np).astype(np.float64, copy=False)
    if a.shape != (3,) or not np.isfinite(a).all():
        raise InvalidInputError(f"{name} must be 3 finite numbers [m], got {describe(v)}")
    return a
