"""Heat maps of a study's reachability index (matplotlib, Agg backend, PNG files).

- ``reach_projections.png``: the index seen from above (XY), the front (XZ) and the side (YZ):
  the largest index along the hidden axis (where can the tool get, with its best orientation
  count), and next to each the mean over the voxels studied along that axis.
- ``reach_slices_z.png``: horizontal slices (up to 9, evenly spaced through the grid's z range),
  one panel each, the voxel grid drawn cell by cell.
- ``manipulability_projections.png``: the largest mean manipulability along each axis.

Voxels with no target are blank (white); an index of 0 is the colour map's lowest colour.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .targets import Targets

__all__ = ["save_plots", "dense_grid", "warm"]

AXES = ("x", "y", "z")


def dense_grid(targets: Targets, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(grid (nx, ny, nz) with NaN where no voxel, lower corner cell (3,)) of per-voxel values."""
    cells = targets.cells
    lo = cells.min(axis=0)
    shape = tuple(int(s) for s in cells.max(axis=0) - lo + 1)
    grid = np.full(shape, np.nan)
    i = cells - lo
    grid[i[:, 0], i[:, 1], i[:, 2]] = values
    return grid, lo


def _extent(targets: Targets, lo: np.ndarray, shape, a: int, b: int):
    r = targets.resolution
    o = targets.origin + r * lo
    return (o[a] - r / 2, o[a] + r * (shape[a] - 0.5), o[b] - r / 2, o[b] + r * (shape[b] - 0.5))


def _reduce(grid: np.ndarray, axis: int, how: str) -> np.ndarray:
    have = np.isfinite(grid).any(axis=axis)
    filled = np.where(np.isfinite(grid), grid, -np.inf if how == "max" else 0.0)
    if how == "max":
        out = filled.max(axis=axis)
    else:
        out = filled.sum(axis=axis) / np.maximum(np.isfinite(grid).sum(axis=axis), 1)
    return np.where(have, out, np.nan)


def _panel(ax, img: np.ndarray, extent, cmap, vmax: float, title: str, a: int, b: int,
           world=None):
    """One heat map: ``img`` indexed (axis a, axis b), a to the right and b up; the world's
    obstacles drawn over it (:func:`_draw_world`)."""
    im = ax.imshow(img.T, origin="lower", cmap=cmap, vmin=0.0, vmax=vmax, extent=extent,
                   interpolation="nearest", aspect="equal")
    ax.set_title(title)
    ax.set_xlabel(f"{AXES[a]} [m]")
    ax.set_ylabel(f"{AXES[b]} [m]")
    if world is not None and len(world):
        _draw_world(ax, world, a, b, extent)
    return im


def _corners(ob) -> np.ndarray | None:
    """The 8 corners of a box around an obstacle, in the base frame (None: a half-space)."""
    s = ob.size
    half = {"sphere": (s[0],) * 3 if s else None, "box": tuple(0.5 * v for v in s),
            "cylinder": (s[0], s[0], 0.5 * s[1]) if s else None,
            "capsule": (s[0], s[0], 0.5 * s[1] + s[0]) if s else None}.get(ob.shape)
    if half is None:
        return None
    h = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half
    return h @ ob.pose[:3, :3].T + ob.pose[:3, 3]


def _draw_world(ax, world, a: int, b: int, extent) -> None:
    """Each obstacle as the outline of its extent in the panel's plane (a half-space: its
    boundary line where the panel shows it edge on, else a note)."""
    from matplotlib.patches import Rectangle  # noqa: PLC0415

    for ob in world:
        c = _corners(ob)
        if c is None:  # a half-space: a line where its plane is seen edge on
            n, p = ob.pose[:3, 2], ob.pose[:3, 3]
            hidden = 3 - a - b
            if abs(n[hidden]) > 1e-9 or abs(n[b]) < 1e-9:
                continue
            xs = np.array(extent[:2])
            ys = p[b] - (n[a] * (xs - p[a])) / n[b]
            ax.plot(xs, ys, color="black", lw=1.5)
            ax.fill_between(xs, ys, extent[2] if n[b] > 0 else extent[3], color="black",
                            alpha=0.15, lw=0)
            continue
        lo, hi = c.min(axis=0), c.max(axis=0)
        ax.add_patch(Rectangle((lo[a], lo[b]), hi[a] - lo[a], hi[b] - lo[b], fill=False,
                               edgecolor="black", lw=1.2))
        ax.annotate(ob.id, ((lo[a] + hi[a]) / 2, hi[b]), fontsize=7, ha="center",
                    va="bottom")


def warm():
    """Import matplotlib (Agg) ahead of :func:`save_plots` (about 1 s; a study does it while
    its shards solve)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def save_plots(targets: Targets, voxels: dict, out_dir, title: str = "",
               world=None) -> list[Path]:
    """Write the PNG heat maps of a finished study into ``out_dir`` (the ``world``'s obstacles
    drawn over the projections); returns their paths."""
    plt = warm()

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    reach, lo = dense_grid(targets, voxels["reachability"])
    manip, _ = dense_grid(targets, voxels["mean_manipulability"])
    cmap = plt.get_cmap("viridis").with_extremes(bad="white")
    made = []
    views = ((2, 0, 1, "top (XY)"), (1, 0, 2, "front (XZ)"), (0, 1, 2, "side (YZ)"))

    # projections of the index: max and mean along each axis
    fig, axs = plt.subplots(2, 3, figsize=(15, 9.5),
                            gridspec_kw={"wspace": 0.35, "hspace": 0.3})
    for col, (hidden, a, b, name) in enumerate(views):
        for row, how in enumerate(("max", "mean")):
            im = _panel(axs[row, col], _reduce(reach, hidden, how),
                        _extent(targets, lo, reach.shape, a, b), cmap, 1.0,
                        f"{name}: {how} over {AXES[hidden]}", a, b, world)
    fig.colorbar(im, ax=axs, shrink=0.8, label="reachability index (fraction of orientations)")
    fig.suptitle(f"Reachability {title}".strip())
    made.append(out_dir / "reach_projections.png")
    fig.savefig(made[-1], dpi=90)
    plt.close(fig)

    # horizontal slices
    nz = reach.shape[2]
    ks = np.unique(np.linspace(0, nz - 1, min(9, nz)).round().astype(int))
    cols = min(3, len(ks))
    rows = -(-len(ks) // cols)
    fig, axs = plt.subplots(rows, cols, figsize=(5 * cols, 4.6 * rows), squeeze=False,
                            gridspec_kw={"wspace": 0.35, "hspace": 0.3})
    z0 = targets.origin[2] + targets.resolution * lo[2]
    for ax in axs.flat[len(ks):]:
        ax.set_visible(False)
    for ax, k in zip(axs.flat, ks):
        im = _panel(ax, reach[:, :, k], _extent(targets, lo, reach.shape, 0, 1), cmap, 1.0,
                    f"z = {z0 + targets.resolution * k:.3f} m", 0, 1)
    fig.colorbar(im, ax=axs, shrink=0.8, label="reachability index")
    fig.suptitle(f"Reachability, horizontal slices {title}".strip())
    made.append(out_dir / "reach_slices_z.png")
    fig.savefig(made[-1], dpi=90)
    plt.close(fig)

    # manipulability
    top = np.nanmax(manip) if np.isfinite(manip).any() else 1.0
    mcmap = plt.get_cmap("magma").with_extremes(bad="white")
    fig, axs = plt.subplots(1, 3, figsize=(15, 4.8), gridspec_kw={"wspace": 0.35})
    for ax, (hidden, a, b, name) in zip(axs, views):
        im = _panel(ax, _reduce(manip, hidden, "max"), _extent(targets, lo, manip.shape, a, b),
                    mcmap, top, f"{name}: max over {AXES[hidden]}", a, b, world)
    fig.colorbar(im, ax=axs, shrink=0.8, label="mean manipulability sqrt(det(J J^T))")
    fig.suptitle(f"Manipulability {title}".strip())
    made.append(out_dir / "manipulability_projections.png")
    fig.savefig(made[-1], dpi=90)
    plt.close(fig)
    return made
