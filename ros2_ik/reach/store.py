"""A study's folder: manifest, shard files written as they finish, merged results.

Layout of ``OUT``::

    OUT/manifest.json         what the study is (model digest, tip, targets digest, options)
    OUT/shards/shard-000012.npz   one per finished shard (written to a temporary name, then
                              renamed: a file that exists is complete)
    OUT/results.npz           every target, one array per column (study.COLUMNS), merged
    OUT/voxels.npz            every voxel (study.VOXEL_COLUMNS)
    OUT/summary.json          targets, reached, time, solves/s (this run)
    OUT/plots/*.png           heat maps of the reachability index

Format: NPZ, written by :func:`write_npz` with no compression and fixed zip timestamps, so the
same columns always give the same bytes (a resumed or a Ray-sharded study gives a file equal
to a single run's, byte for byte). NPZ rather than Parquet: it is columnar (one ``.npy`` per
column, read whole with ``np.load``), needs nothing but NumPy (also on the GPU machines, which
have no registry), keeps ``q`` as a 2-D float64 array, and adds no dependency; pandas reads it
with ``pd.DataFrame({k: v for k, v in np.load(f).items() if v.ndim == 1})``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from ..errors import InvalidInputError

__all__ = ["write_npz", "read_npz", "StudyStore", "model_digest", "FORMAT"]

FORMAT = "ros2_ik reach study v1"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def write_npz(path, arrays: dict) -> None:
    """Write ``arrays`` (name -> array) as an uncompressed NPZ whose bytes depend only on the
    names, order and contents; atomically (temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
            for name, value in arrays.items():
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.asarray(value), allow_pickle=False)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
                info.external_attr = 0o644 << 16
                zf.writestr(info, buf.getvalue())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read_npz(path) -> dict:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def model_digest(model) -> str:
    """sha256 of the arrays that define a model's kinematics (names, types, origins, limits)."""
    h = hashlib.sha256()
    for a in (model.link_names, model.joint_names, model.q_names):
        h.update("\0".join(a).encode())
    for a in (model.link_parent, model.joint_type, model.origin, model.axis, model.lower,
              model.upper, model.mimic_q, model.mimic_multiplier, model.mimic_offset,
              model.v_active):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(",".join(sorted(model.frozen)).encode())
    return h.hexdigest()


class StudyStore:
    """The files of one study in ``root`` (see the module docstring)."""

    def __init__(self, root, manifest: dict):
        self.root = Path(root)
        self.manifest = dict(manifest, format=FORMAT)
        self.shard_dir = self.root / "shards"

    # ------------------------------------------------------------------ opening
    def open(self, overwrite: bool = False) -> int:
        """Create the folder, or check that it holds this same study (then its finished shards
        are kept). Returns the number of shards already finished."""
        man = self.root / "manifest.json"
        if self.root.exists() and not self.root.is_dir():
            raise InvalidInputError(f"output path {str(self.root)!r} exists and is not a "
                                    "folder; give a folder for the study")
        if man.exists() and not overwrite:
            try:
                old = json.loads(man.read_text())
            except (OSError, ValueError) as exc:
                raise InvalidInputError(f"{man} cannot be read ({exc}); remove the folder or "
                                        "pass --overwrite") from None
            diff = sorted(k for k in set(old) | set(self.manifest)
                          if old.get(k) != self.manifest.get(k))
            if diff:
                raise InvalidInputError(
                    f"{self.root} holds a different study (it differs in: {', '.join(diff)}); "
                    "give another output folder, or pass --overwrite to start this one there")
        elif self.root.exists() and any(self.root.iterdir()) and not man.exists() \
                and not overwrite:
            raise InvalidInputError(f"output folder {str(self.root)!r} is not empty and holds "
                                    "no study; give an empty or new folder, or --overwrite")
        if overwrite:
            for old in list(self.shard_dir.glob("shard-*.npz")) if self.shard_dir.exists() else []:
                old.unlink()
            for name in ("results.npz", "voxels.npz", "summary.json"):
                if (self.root / name).exists():
                    (self.root / name).unlink()
        self.shard_dir.mkdir(parents=True, exist_ok=True)
        tmp = man.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.manifest, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, man)
        return len(self.finished())

    # ------------------------------------------------------------------ shards
    def shard_path(self, i: int) -> Path:
        return self.shard_dir / f"shard-{i:06d}.npz"

    def finished(self) -> set[int]:
        """Indices of the shards whose files exist (complete by construction)."""
        out = set()
        for p in self.shard_dir.glob("shard-*.npz"):
            try:
                out.add(int(p.stem.split("-")[1]))
            except (IndexError, ValueError):
                continue
        return out

    def write_shard(self, i: int, columns: dict) -> None:
        write_npz(self.shard_path(i), columns)

    def read_shard(self, i: int) -> dict:
        return read_npz(self.shard_path(i))

    # ------------------------------------------------------------------ results
    def write_results(self, results: dict, voxels: dict) -> None:
        write_npz(self.root / "results.npz", results)
        write_npz(self.root / "voxels.npz", voxels)

    def write_summary(self, summary: dict) -> None:
        tmp = self.root / "summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
        os.replace(tmp, self.root / "summary.json")
