"""README's table of ``make bench-cpu`` runs: each cell the range over the runs' JSON files.

    python bench/cpu_table.py build/cpu1.json build/cpu2.json build/cpu3.json

(``bench_cpu.py --json F`` writes one file per run.) Prints the Markdown table, one column per
arm, in the order of the first file.
"""

from __future__ import annotations

import json
import sys

ARM_TITLES = {"panda": "Panda", "ur5": "UR5", "kinova": "Kinova Gen2", "talos_arm": "Talos arm",
              "tiago_arm": "Tiago arm"}


def _rate(v: float) -> str:
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.1f}k"


def _span(values, fmt) -> str:
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def _pct(v: float) -> str:
    return f"{100 * v:.1f}".rstrip("0").rstrip(".")


def _find(row: dict, start: str):
    keys = [k for k in row if k.startswith(start)]
    if len(keys) != 1:
        raise KeyError(f"{len(keys)} rows start with {start!r}")
    return row[keys[0]]


def _col(rows, start):
    """The runs' values of one row, transposed: one list per number in the row."""
    return list(zip(*[_find(r, start) for r in rows]))


def cells(rows: list[dict]) -> list[tuple[str, str]]:
    us = lambda v: f"{v:.0f}"  # noqa: E731
    r2 = lambda v: f"{v:.2f}"  # noqa: E731
    r1 = lambda v: f"{v:.1f}"  # noqa: E731
    out = []
    for label, key in (("`ChainSolver`, 1 seed mid-range: median ros2_ik / rtb (ratio)",
                        "ChainSolver 1 seed mid:"),
                       ("`ChainSolver`, 1 seed random: median ros2_ik / rtb (ratio)",
                        "ChainSolver 1 seed random:")):
        a, b, r = _col(rows, key)
        out.append((label, f"{_span(a, us)} / {_span(b, us)} us ({_span(r, r2)})"))
    for label, key in (("single-seed success from mid-range: ros2_ik / rtb",
                        "single-seed success from mid:"),
                       ("single-seed success from random seeds: ros2_ik / rtb",
                        "single-seed success from random:")):
        a, b = _col(rows, key)
        out.append((label, f"{_span(a, _pct)} / {_span(b, _pct)} %"))
    a, r, _ = _col(rows, "solve_pose one goal, 1 seed mid:")
    out.append(("`solve_pose`, one goal per call, 1 seed: median (ratio to rtb)",
                f"{_span(a, us)} us ({_span(r, r2)})"))
    (a,) = _col(rows, "solve_pose overhead over the prepared solve")
    out.append(("`solve_pose` over the prepared solve (interleaved, medians)",
                f"+{_span(a, us)} us"))
    a, b, r = _col(rows, "restarts, prepared ChainSolver")
    (s,) = _col(rows, "restarts, prepared: success")
    out.append(("restarts through `ChainSolver`: 32 seeds, stall 5 / rtb `slimit=32`, blocks of "
                "25 calls alternating: median (ratio), success",
                f"{_span(a, us)} / {_span(b, us)} us ({_span(r, r2)}), {_span(s, _pct)} %"))
    a, b, r = _col(rows, "restarts (32 seeds")
    s, t = _col(rows, "restarts: success")
    out.append(("the same restarts through `solve_pose` / rtb, run one after the other: median "
                "(ratio), success ros2_ik / rtb",
                f"{_span(a, us)} / {_span(b, us)} us ({_span(r, r2)}), {_span(s, _pct)} / "
                f"{_span(t, _pct)} %"))
    for threads in ("1 thread", "2 thread"):
        a, x, _ = _col(rows, f"batch 10000 solve_pose 1 seed, {threads}")
        out.append((f"batch 10,000 through `solve_pose`, 1 seed, {threads}"
                    f"{'s' if threads[0] == '2' else ''}: solves/s (x rtb loop)",
                    f"{_span(a, _rate)} ({_span(x, r1)}x)"))
    for what, ratio in (("FK", "ros2_ik time / pin time"), ("Jacobian", "time ratio to pin")):
        a, b, c = _col(rows, f"{what} one configuration per call")
        (r,) = _col(rows, f"{what} one configuration: ros2_ik time / pin time")
        out.append((f"{what} of one configuration per call: calls/s ros2_ik / rtb / pin ({ratio}"
                    ", paired rounds)",
                    f"{_span(a, _rate)} / {_span(b, _rate)} / {_span(c, _rate)} ({_span(r, r2)})"))
        if what == "FK":
            a, b, c = _col(rows, "FK batch 10000, ros2_ik 1 thread")
            out.append(("FK, batch 10,000, 1 thread: configs/s ros2_ik / rtb / pin loop",
                        f"{_span(a, _rate)} / {_span(b, _rate)} / {_span(c, _rate)}"))
    a, b = _col(rows, "Jacobian batch 10000")
    out.append(("Jacobian, batch 10,000, 1 thread: configs/s ros2_ik / rtb loop",
                f"{_span(a, _rate)} / {_span(b, _rate)}"))
    return out


def main(argv=None) -> int:
    paths = (argv if argv is not None else sys.argv[1:])
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = [json.load(open(p)) for p in paths]
    arms = [a for a in runs[0] if all(a in r for r in runs)]
    columns = [cells([r[a] for r in runs]) for a in arms]
    print("| | " + " | ".join(ARM_TITLES.get(a, a) for a in arms) + " |")
    print("|---" * (len(arms) + 1) + "|")
    for i, (label, _) in enumerate(columns[0]):
        print(f"| {label} | " + " | ".join(c[i][1] for c in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
