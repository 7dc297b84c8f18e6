"""The CPU figures of two revisions side by side, in one run (a change's "nothing moved" check;
not a test, not the product).

    python bench/bench_revisions.py BEFORE [AFTER] [--rounds 3] [--out FILE]

BEFORE and AFTER are git revisions of this repository (AFTER: the working tree when left out),
each exported by ``git archive`` into a temporary folder and run from there with this venv's
Python. The revisions' measurements alternate, round after round, so the machine's drift hits
both alike; each round is a fresh process (its kernels built or found in the cache first, not
timed). Measured, on the bundled robots with the node's restart options where they apply:

1. the prepared one-goal solve: ``ChainSolver(model, tip, IKConfig())``, 1 seed from mid-range,
   200 reachable goals (FK of uniform configurations), median per call [us] (panda, ur);
2. batch 10,000 through ``solve_pose``, 1 seed, 2 threads: solves/s, best of 3 (panda, ur);
3. the collision-aware batch: the panda, its self pairs and 20 world primitives
   (``bench_collision.world20``), 32 seeds, 5,000 goals from configurations 3 cm clear:
   solves/s, best of 3.

Prints the hardware, versions, load average, each round's numbers, and per row the medians over
the rounds and AFTER / BEFORE (> 1: AFTER faster for rates, slower for times). The answers'
success rates are printed too (they must match: the change is not meant to move them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))

from common import Report, banner, load_average

ROOT = Path(__file__).resolve().parents[1]

# One round in a child process, run from the revision's folder (only calls both sides have).
CHILD = r'''
import json, os, statistics, sys, time
os.environ["ROS2_IK_THREADS"] = "2"
sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
import numpy as np
from ros2_ik import IKConfig, IKSolver, fk_frames, load_robot, solve_pose
from ros2_ik.api import ChainSolver
from ros2_ik.ik.collision import clearance
from ros2_ik.model.collision import collision_model
from bench_collision import world20

out = {}
for name in ("panda", "ur"):
    m = load_robot(name)
    tip = {"panda": "panda_hand_tcp", "ur": "tool0"}[name]
    rng = np.random.default_rng(0)
    T = np.asarray(fk_frames(m, m.random_q(rng, 10_000), [tip]))[:, 0]
    mid = 0.5 * (m.lower + m.upper)
    cs = ChainSolver(m, tip, IKConfig())
    for i in range(20):
        cs.solve(T[i], seed=mid)
    ts, ok = [], 0
    for i in range(200):
        t = time.perf_counter()
        r = cs.solve(T[i], seed=mid)
        ts.append(time.perf_counter() - t)
        ok += bool(r.success if np.ndim(r.success) == 0 else r.success[0])
    out[f"one goal {name} [us]"] = 1e6 * statistics.median(ts)
    out[f"one goal {name} success"] = ok / 200
    cfg = IKConfig()
    solve_pose(m, T[:50], tips=tip, seeds=mid, config=cfg)
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        r = solve_pose(m, T, tips=tip, seeds=mid, config=cfg)
        best = min(best, time.perf_counter() - t)
    out[f"batch 10k {name} [solves/s]"] = len(T) / best
    out[f"batch 10k {name} success"] = float(np.mean(r.success))

m = load_robot("panda")
cm = collision_model(m)
world = world20()
rng = np.random.default_rng(0)
q = m.random_q(rng, 15_000)
q = q[clearance(m, cm, q, world)[0] > 0.03][:5000]
T = np.asarray(fk_frames(m, q, ["panda_hand_tcp"]))[:, 0]
cfg = IKConfig(num_seeds=32, stall_iterations=5, avoid_collisions=True)
solve_pose(m, T[:50], tips="panda_hand_tcp", config=cfg, world=world, collision=cm)
best = 1e9
for _ in range(3):
    t = time.perf_counter()
    r = solve_pose(m, T, tips="panda_hand_tcp", config=cfg, world=world, collision=cm)
    best = min(best, time.perf_counter() - t)
out["collision batch panda [solves/s]"] = len(T) / best
out["collision batch panda success"] = float(np.mean(r.success))
print("ROUND " + json.dumps(out))
'''


def export(rev: str | None, into: Path) -> str:
    """The revision's files in ``into`` (None: the working tree); its description."""
    if rev is None:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                               check=True, capture_output=True, text=True).stdout.split()
        for f in files:
            src = ROOT / f
            if src.is_file():
                (into / f).parent.mkdir(parents=True, exist_ok=True)
                (into / f).write_bytes(src.read_bytes())
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
        return f"the working tree (on {head})"
    arch = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=arch.stdout, check=True)
    log = subprocess.run(["git", "log", "-1", "--format=%h %cs", rev], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    return log


def round_of(folder: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD], cwd=folder, capture_output=True,
                       text=True, timeout=1800)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("ROUND ")]
    if p.returncode or not line:
        raise SystemExit(f"a round in {folder} failed:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return json.loads(line[-1][6:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None, help="append the report to this file")
    args = ap.parse_args()
    report = Report()
    say = report.say
    say(banner("bench_revisions: two revisions' CPU figures, alternating"))
    say(f"{load_average()} at start")
    with tempfile.TemporaryDirectory() as tmp:
        dirs, names = [], []
        for label, rev in (("before", args.before), ("after", args.after)):
            d = Path(tmp) / label
            d.mkdir()
            names.append(f"{label}: {export(rev, d)}")
            dirs.append(d)
        for n in names:
            say(n)
        rounds = [[], []]
        for k in range(args.rounds):
            for side in (0, 1) if k % 2 == 0 else (1, 0):
                r = round_of(dirs[side])
                rounds[side].append(r)
                say(f"round {k + 1} {('before', 'after')[side]}: "
                    + ", ".join(f"{key} {v:,.4g}" for key, v in r.items()))
    say("medians over the rounds (after / before):")
    for key in rounds[0][0]:
        b0 = statistics.median(r[key] for r in rounds[0])
        b1 = statistics.median(r[key] for r in rounds[1])
        say(f"  {key:36s} before {b0:12,.4g}  after {b1:12,.4g}  ratio {b1 / b0:.3f}")
    say(f"{load_average()} at the end")
    report.write(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
