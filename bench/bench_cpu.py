"""Issue 14's table in one run: ros2_ik on the CPU against Robotics Toolbox's ``ik_LM`` (C++)
and Pinocchio (C++ kinematics) on real arms of example-robot-data.

    python bench/bench_cpu.py [--arms panda,ur5,kinova,talos_arm,tiago_arm] [--problems 200]
                              [--batch 10000] [--json FILE]
    make bench-cpu            (the peers and example-robot-data: make bench-peers-setup)

Protocol. Per arm (URDF from example-robot-data, the chain base -> tip as ros2_ik, RTB and
Pinocchio each build it): ``--problems`` targets by FK of joint vectors drawn uniformly within
the limits (fixed RNG seed); seeds mid-range (``neutral_q``) or uniform random. Every answer of
every solver is judged by Pinocchio's FK (reduced to the same chain): position error <= 1e-4 m,
orientation error <= 1e-3 rad, q within the limits. Solvers run single-threaded (RTB and
Pinocchio are), except the rows that say "2 threads". Timings are medians of per-call wall
clock; FK/Jacobian rates are calls per second of one call in a loop (``common.timeit``): ros2_ik
``fk_frames`` / ``jacobian`` of the tip (timed against Pinocchio's in alternating rounds,
:func:`common.paired`; the ratio is the median of the rounds'), RTB ``ETS.eval`` (its fastest
FK: an ndarray, also for a batch) / ``ETS.jacob0``, Pinocchio ``framesForwardKinematics`` /
``computeFrameJacobian``. RTB's
restarts are its own (``slimit``, random restarts inside its C++ loop); ros2_ik's are the node's
defaults (32 seeds, stall_iterations 5), through ``solve_pose`` and through the prepared
``ChainSolver``. The prepared ``ChainSolver`` rows (1 seed, and restarts) are timed in blocks
of 25 calls alternating with RTB's (:func:`blocks`); the ``solve_pose`` restarts row runs the
two one after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np

import peers as peerlib
from common import banner, paired, timeit
from ros2_ik import Model
from ros2_ik.api import ChainSolver, IKSolver, compiled_status, fk_frames, jacobian, solve_pose
from ros2_ik.backends import host
from ros2_ik.ik import IKConfig

POS_TOL, ORI_TOL = 1e-4, 1e-3
LIMIT_SLACK = 1e-12
#: arm: (URDF under example-robot-data's robots/, base link, tip link)
ARMS = {
    "panda": ("panda_description/urdf/panda.urdf", "panda_link0", "panda_link8"),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", "base_link", "tool0"),
    "kinova": ("kinova_description/robots/kinova.urdf", "j2s6s200_link_base",
               "j2s6s200_end_effector"),
    "talos_arm": ("talos_data/robots/talos_left_arm.urdf", "arm_left_1_link",
                  "wrist_left_ft_tool_link"),
    "tiago_arm": ("tiago_description/robots/tiago.urdf", "torso_lift_link", "arm_tool_link"),
}
NODE_SEEDS = 32  # the node's default num_seeds, with stall_iterations 5
BLOCK = 25       # calls per block where ros2_ik's and a peer's calls alternate
BATCH_REPEATS = 5  # the batch rows: the median of this many timed calls


def robots_dir() -> str:
    from importlib import metadata

    dist = metadata.distribution("example-robot-data")
    for f in dist.files or ():
        if str(f).endswith("panda_description/urdf/panda.urdf"):
            return str(dist.locate_file(f)).split("panda_description")[0]
    raise RuntimeError("example-robot-data has no robots/ folder")


def kinematic_urdf(path: str, name: str) -> str:
    """A copy of the URDF without visual/collision/gazebo/transmission elements (their
    ``package://`` meshes stop RTB's xacro pass), in build/bench-urdf/; its path."""
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag in ("visual", "collision", "gazebo", "transmission"):
                parent.remove(child)
    out = os.path.join(os.path.dirname(__file__), "..", "build", "bench-urdf", f"{name}.urdf")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    ET.ElementTree(root).write(out)
    return os.path.abspath(out)


def judge(pin, model, targets, q):
    """(n,) bool: Pinocchio's FK of q within the tolerances of the targets, q within limits."""
    ok = np.zeros(len(q), dtype=bool)
    for i, (T, qi) in enumerate(zip(targets, q)):
        if qi is None or not np.all(np.isfinite(qi)):
            continue
        F = pin.fk(qi)
        dp = np.linalg.norm(F[:3, 3] - T[:3, 3])
        c = (np.trace(F[:3, :3].T @ T[:3, :3]) - 1.0) / 2.0
        dr = float(np.arccos(np.clip(c, -1.0, 1.0)))
        inside = np.all((qi >= model.lower - LIMIT_SLACK) & (qi <= model.upper + LIMIT_SLACK))
        ok[i] = dp <= POS_TOL and dr <= ORI_TOL and inside
    return ok


def per_call(n, call):
    """Call ``call(i) -> q`` for i < n: (answers, wall-clock seconds of each call)."""
    q, t = [], np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        q.append(call(i))
        t[i] = time.perf_counter() - t0
    return q, t


def blocks(n, call_a, call_b):
    """``call_a(i)`` and ``call_b(i) -> q`` for i < n in blocks of :data:`BLOCK` calls, a's
    block then b's: drifts of a shared machine hit both alike, and each block runs with its
    own code and data in the caches (calls interleaved one by one slow rtb's down by a third
    here). Returns (a's answers, a's seconds per call, b's answers, b's seconds)."""
    qa, ta, qb, tb = [None] * n, np.empty(n), [None] * n, np.empty(n)
    for a in range(0, n, BLOCK):
        for call, q, t in ((call_a, qa, ta), (call_b, qb, tb)):
            for i in range(a, min(n, a + BLOCK)):
                t0 = time.perf_counter()
                q[i] = call(i)
                t[i] = time.perf_counter() - t0
    return qa, ta, qb, tb


def rtb_call(rtb, T, q0, slimit=1):
    s = rtb.ets.ik_LM(T, q0=q0, ilimit=100, slimit=slimit, tol=0.5 * (0.1 * POS_TOL) ** 2,
                      joint_limits=True)
    return np.asarray(s.q, dtype=float)


def set_threads(n: int) -> None:
    """Worker threads of ros2_ik's batches (the host backend reads ROS2_IK_THREADS per call)."""
    os.environ["ROS2_IK_THREADS"] = str(n)


def run_arm(name, args, out):
    path, base, tip = ARMS[name]
    path = kinematic_urdf(os.path.join(robots_dir(), path), name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = Model.from_file(path, base=base, tips=[tip])
        rng = np.random.default_rng(args.rng_seed)
        ref = lambda qq: fk_frames(model, qq[None], [tip])[0, 0]  # noqa: E731
        rtb = peerlib.make("rtb", model, name, [tip], path, ref, rng)
        pin = peerlib.make("pin", model, name, [tip], path, ref, rng)
    n, B = args.problems, args.batch
    q_true = model.random_q(rng, max(n, B))
    targets = np.ascontiguousarray(fk_frames(model, q_true, [tip])[:, 0])
    rand = model.random_q(rng, n)
    mid = model.neutral_q()
    print(f"\n-- {name}: {model.nq} DOF, {base} -> {tip}; FK deviation rtb "
          f"{rtb.fk_deviation:.1e}, pin {pin.fk_deviation:.1e}", flush=True)
    row = {}

    def show(label, value):
        values = [float(v) for v in (value if isinstance(value, tuple) else (value,))]
        row[label] = values
        print(f"{name:10s} {label:70s} " + " / ".join(f"{v:.4g}" for v in values), flush=True)

    set_threads(1)
    cfg1 = IKConfig()
    cs = ChainSolver(model, tip, cfg1)
    cs.solve(targets[0], seed=mid)
    rtb_call(rtb, targets[0], mid)
    for label, seeds in (("mid", [mid] * n), ("random", rand)):
        qo, to, qr, tr = blocks(n, lambda i: cs.solve(targets[i], seed=seeds[i]).q[0],
                                lambda i: rtb_call(rtb, targets[i], seeds[i]))
        so, sr = judge(pin, model, targets[:n], qo), judge(pin, model, targets[:n], qr)
        show(f"ChainSolver 1 seed {label}: median us ros2_ik / rtb / ratio",
             (1e6 * np.median(to), 1e6 * np.median(tr), np.median(to) / np.median(tr)))
        show(f"single-seed success from {label}: ros2_ik / rtb", (so.mean(), sr.mean()))
        if label == "mid":
            t_rtb_mid, rate_rtb = np.median(tr), n / tr.sum()

    # one goal through solve_pose and through the prepared solver, interleaved call by call
    qs, ts, tc = [], np.empty(n), np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        cs.solve(targets[i], seed=mid)
        t1 = time.perf_counter()
        qs.append(solve_pose(model, targets[i:i + 1], tips=tip, seeds=mid, config=cfg1).q[0])
        tc[i], ts[i] = t1 - t0, time.perf_counter() - t1
    show("solve_pose one goal, 1 seed mid: median us / ratio to rtb / success",
         (1e6 * np.median(ts), np.median(ts) / t_rtb_mid, judge(pin, model, targets[:n],
                                                                  qs).mean()))
    show("solve_pose overhead over the prepared solve (interleaved): median us",
         1e6 * (np.median(ts) - np.median(tc)))

    cfgN = IKConfig(num_seeds=NODE_SEEDS, stall_iterations=5)
    qn, tn = per_call(n, lambda i: solve_pose(model, targets[i:i + 1], tips=tip, seeds=mid,
                                              config=cfgN).q[0])
    qR, tR = per_call(n, lambda i: rtb_call(rtb, targets[i], mid, slimit=NODE_SEEDS))
    show(f"restarts ({NODE_SEEDS} seeds / rtb slimit {NODE_SEEDS}): median us ros2_ik / rtb "
         f"/ ratio", (1e6 * np.median(tn), 1e6 * np.median(tR), np.median(tn) / np.median(tR)))
    show("restarts: success ros2_ik / rtb",
         (judge(pin, model, targets[:n], qn).mean(), judge(pin, model, targets[:n], qR).mean()))
    # the same restarts through the prepared solver (the goal's "prepared solver, node's restart
    # settings"), in blocks alternating with rtb's
    csN = ChainSolver(model, tip, cfgN)
    csN.solve(targets[0], seed=mid)
    qp, tp, _, tR2 = blocks(n, lambda i: csN.solve(targets[i], seed=mid).q[0],
                            lambda i: rtb_call(rtb, targets[i], mid, slimit=NODE_SEEDS))
    show(f"restarts, prepared ChainSolver ({NODE_SEEDS} seeds; blocks alternating with rtb "
         f"slimit {NODE_SEEDS}): median us ros2_ik / rtb / ratio (goal <= 0.5)",
         (1e6 * np.median(tp), 1e6 * np.median(tR2), np.median(tp) / np.median(tR2)))
    show("restarts, prepared: success ros2_ik", judge(pin, model, targets[:n], qp).mean())

    seedsB = np.tile(mid, (B, 1))
    for threads in (1, os.cpu_count() or 1):
        set_threads(threads)
        solve_pose(model, targets[:B], tips=tip, seeds=seedsB, config=cfg1)  # builds, warms
        els = []
        for _ in range(BATCH_REPEATS):
            t0 = time.perf_counter()
            r = solve_pose(model, targets[:B], tips=tip, seeds=seedsB, config=cfg1)
            els.append(time.perf_counter() - t0)
        el = float(np.median(els))
        ok = judge(pin, model, targets[:2000], r.q[:2000]).mean()
        show(f"batch {B} solve_pose 1 seed, {threads} thread(s): solves/s / x rtb loop / "
             f"success (first 2000)", (B / el, B / el / rate_rtb, ok))
    set_threads(1)
    s = IKSolver(model, [tip], cfg1)
    lanes = getattr(s._impl, "lanes", 0)
    print(f"{name:10s} backend {s.backend}" + (f" ({s.reason})" if s.reason else "")
          + (f"; batch rows {lanes} side by side" if lanes else "; batch rows one at a time"))

    # FK and Jacobian of the tip
    pm, pd, fid, pinm = pin.pm, pin.pd, pin.fid, pin.pin
    q1 = q_true[0]
    pq = pin.pin_q(q1)
    t_ours, t_pin, ratio = paired(lambda: fk_frames(model, q1, [tip]),
                                  lambda: pinm.framesForwardKinematics(pm, pd, pq))
    show("FK one configuration per call: calls/s ros2_ik / rtb / pin",
         (1 / t_ours, 1 / timeit(lambda: rtb.ets.eval(q1)), 1 / t_pin))
    show("FK one configuration: ros2_ik time / pin time, paired rounds (goal <= 2)", ratio)
    Q = np.ascontiguousarray(q_true[:B])
    pQ = [pin.pin_q(q) for q in Q[:1000]]

    def pin_loop():
        for p in pQ:
            pinm.framesForwardKinematics(pm, pd, p)
    for threads in (1,):
        r_ours = B / timeit(lambda: fk_frames(model, Q, [tip]), repeats=3)
        show(f"FK batch {B}, ros2_ik {threads} thread(s): configs/s ros2_ik / rtb / pin loop",
             (r_ours, B / timeit(lambda: rtb.ets.eval(Q), repeats=3),
              1000 / timeit(pin_loop, repeats=3)))
    t_ours, t_pin, ratio = paired(lambda: jacobian(model, q1, tip),
                                  lambda: pinm.computeFrameJacobian(pm, pd, pq, fid,
                                                                    pinm.LOCAL_WORLD_ALIGNED))
    show("Jacobian one configuration per call: calls/s ros2_ik / rtb / pin",
         (1 / t_ours, 1 / timeit(lambda: rtb.ets.jacob0(q1)), 1 / t_pin))
    show("Jacobian one configuration: ros2_ik time / pin time, paired rounds (goal <= 2)", ratio)

    def rtb_jloop():
        for q in Q[:1000]:
            rtb.ets.jacob0(q)
    r_ours = B / timeit(lambda: jacobian(model, Q, tip), repeats=3)
    show(f"Jacobian batch {B}, 1 thread: configs/s ros2_ik / rtb loop",
         (r_ours, 1000 / timeit(rtb_jloop, repeats=3)))
    out[name] = row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--problems", type=int, default=200)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--rng-seed", type=int, default=0)
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    site = peerlib.add_peer_site()
    print(banner("bench_cpu (issue 14's table)"))
    print(f"peers from {site}")
    print("load average %.2f %.2f %.2f at start" % os.getloadavg())
    t0 = time.perf_counter()
    print(compiled_status())
    print(f"host threads for batches: {host.threads()} (ROS2_IK_THREADS)")
    out = {}
    for name in args.arms.split(","):
        try:
            run_arm(name, args, out)
        except peerlib.Skip as e:
            print(f"{name:10s} skipped: {e}", flush=True)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; load average %.2f %.2f %.2f at the end"
          % os.getloadavg())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
