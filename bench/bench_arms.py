"""Every arm users have (issue 47), robot by robot: example-robot-data's arms from their URDFs,
SRDFs and meshes, each in a process of its own, printed as a table:

- the collision model: spheres, links, links with missing geometry (none expected), pairs left
  out as always within the margin, the worst overshoot past a link's hull (support functions),
  the fit's time and the process's peak memory (a fresh sphere cache: ``--cache``);
- collision-aware solves (32 seeds, a 1 cm margin, a table the robot stands on, a box and a
  post) of goals whose known answer is 1.5 cm clear on the meshes (the judge alone picks them,
  not the spheres: a goal a loose fit cannot answer counts), free and 0-10 cm above the
  table: the success rate, the solves a second, and how many SUCCESS collide on the meshes
  judged by Pinocchio + coal (``test/test_real_robots.Judge``: 0 expected). The table's top
  is the lowest point of the links rigid with the base (an arm's foot), or where the hand
  reaches down to when that is out of its reach (a humanoid's feet: the tip's 10th percentile
  of height); the box and the post stand on it; the joints a solve holds (the other arm, a hand) are
  seeded where the known answer has them (the robot's state: clear), the solved ones at
  mid-range.

    python bench/bench_arms.py [--robots panda ur5 ...] [--free 100] [--near 60]
                               [--cache DIR] [--out bench/results/arms.txt]

Prints the hardware, versions and load average; appends the table to ``--out``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "test"))

#: robot: (URDF, SRDF or None, base, tip) under example-robot-data's robots/
ARMS = {
    "panda": ("panda_description/urdf/panda.urdf",
              "panda_description/srdf/panda.srdf", "panda_link0", "panda_hand_tcp"),
    "ur5": ("ur_description/urdf/ur5_robot.urdf",
            "ur_description/srdf/ur5.srdf", "base_link", "tool0"),
    "xarm7": ("xarm_description/urdf/xarm7.urdf",
              "xarm_description/srdf/xarm7.srdf", "link_base", "link_eef"),
    "kinova": ("kinova_description/robots/kinova.urdf",
               "kinova_description/srdf/kinova.srdf", "j2s6s200_link_base",
               "j2s6s200_end_effector"),
    "z1": ("z1_description/urdf/z1.urdf",
           "z1_description/srdf/z1.srdf", "link00", "gripperStator"),
    "so101": ("so_arm_description/urdf/so101.urdf",
              None, "base_link", "gripper_frame_link"),
    "centauro_arm": ("centauro_description/urdf/centauro.urdf",
                     "centauro_description/srdf/centauro.srdf", "torso_2", "ball1_tip"),
    "talos_left_arm": ("talos_data/robots/talos_reduced.urdf",
                       "talos_data/srdf/talos.srdf", "torso_2_link", "gripper_left_base_link"),
    "tiago": ("tiago_description/robots/tiago.urdf",
              None, "torso_lift_link", "arm_tool_link"),
    "tiago_pro_left": ("tiago_pro_description/robots/tiago_pro.urdf",
                       None, "torso_lift_link", "arm_left_tool_link"),
    "baxter_left": ("baxter_description/urdf/baxter.urdf",
                    "baxter_description/srdf/baxter_manipulation.srdf", "torso", "left_gripper"),
    "pr2_right": ("pr2_description/urdf/pr2.urdf",
                  "pr2_description/srdf/pr2.srdf", "torso_lift_link", "r_gripper_tool_frame"),
    "romeo_left": ("romeo_description/urdf/romeo.urdf",
                   "romeo_description/srdf/romeo.srdf", "torso", "l_wrist"),
    "icub_left": ("icub_description/robots/icub_reduced.urdf",
                  "icub_description/srdf/icub.srdf", "chest", "l_hand"),
    "alex_left": ("alex_description/urdf/alex_nub_hands.urdf",
                  "alex_description/srdf/alex_nub_hands.srdf", "Torso", "LeftGripperYawLink"),
    "g1_left": ("g1_description/urdf/g1_29dof_rev_1_0.urdf",
                None, "torso_link", "left_wrist_yaw_link"),
}


def _lifted(pose, z: float, level):
    """``pose`` (in the level frame: the base's origin, the URDF root's axes) moved up by
    ``z``, in the base frame (``level``: the base <- level rotation, 3x3)."""
    out = np.array(pose)
    out[2, 3] += z
    L = np.eye(4)
    L[:3, :3] = level
    return L @ out


def one(name: str, n_free: int, n_near: int) -> dict:
    """The row of one robot (run in a process of its own: its peak memory is its own)."""
    import test_real_robots as T  # noqa: N812 - the judge and the world of the real-robot tier

    from ros2_ik import IKConfig, IKSolver, fk_frames
    from ros2_ik.ik.collision import default_collision_model
    from ros2_ik.ik.collision_geometry import sphere_centers
    from ros2_ik.ik.seeds import movable_coordinates
    from ros2_ik.kinematics.fk import fk
    from ros2_ik.model import Model
    from ros2_ik.world import Obstacle, World
    from ros2_ik.model.collision import full_tree, sphere_placements
    from ros2_ik.model.meshes import element_shape
    from ros2_ik.model.spheres import overshoot

    urdf, srdf, base, tip = ARMS[name]
    row = {"robot": name}
    try:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = Model.from_urdf((T.ROBOTS / urdf).read_text(), base=base, tips=[tip])
            cm = default_collision_model(m, (T.ROBOTS / srdf).read_text() if srdf else None,
                                         within=T.MARGIN, search_path=[str(T.SHARE)])
        row["fit_s"] = round(time.perf_counter() - t0, 1)
        row["peak_MB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        row["spheres"], row["links"] = int(len(cm.radius)), len(cm.link_names)
        row["missing"] = [l for l, _ in cm.missing]
        row["pruned"] = [f"{a}/{b}" for a, b, w in cm.disabled if w == "Always"]
        full, worst = full_tree(m), 0.0
        for c, link in enumerate(cm.link_names):
            sl = cm.spheres_of(c)
            _, Ts = sphere_placements(m, full, link, {}, [])
            V = [element_shape(d, [str(T.SHARE)])[0] for d in m.desc.collisions
                 if d.link == link]
            V = [s.vertices @ Tt[:3, :3].T + Tt[:3, 3] for Tt in Ts for s in V if s is not None]
            if V:
                worst = max(worst, overshoot(np.asarray(cm.center[sl]),
                                             np.asarray(cm.radius[sl]), np.concatenate(V)))
        row["overshoot_mm"] = round(1e3 * worst, 2)
        # "up" is the URDF root's z (a humanoid's torso frame may lie on its side: iCub's
        # chest has z sideways): heights along it, the world level with it
        Tb = fk(full, full.neutral_q()[None], check=False)[0, full.link_index(base)]
        level = Tb[:3, :3].T  # (base <- level: the root's axes at the base's origin)
        up = level[:, 2]
        # the table under what the robot stands on: the lowest point of the links rigid with
        # the base (an arm's foot: about 0; a torso's bottom for a humanoid's arm)
        P = np.asarray(sphere_centers(m, cm, fk(m, m.neutral_q()[None])))[0]
        still = cm.static[cm.sphere_link]
        table = float((P[still] @ up - cm.radius[still]).min()) if still.any() else 0.0
        # a humanoid's feet are out of its hand's reach: the table is then where the hand
        # reaches down to (the tip's 10th lowest percentile of height; the links rigid with
        # the base, which the table may cut, are never checked against the world)
        tip_z = np.asarray(fk_frames(m, m.random_q(np.random.default_rng(5), 4000),
                                     [tip]))[:, 0, :3, 3] @ up
        if np.mean(tip_z <= table + 0.10) < 0.05:
            table = float(np.quantile(tip_z, 0.10))
        row["table_z"] = round(table, 3)
        world = World([Obstacle(o.id, o.shape, o.size, _lifted(o.pose, table, level), o.touch)
                       for o in T.WORLD])
        # the promise, judged on the meshes: ``d`` from the world and the checked pairs, but
        # the pairs checked for contact only (an allowance), which must not touch
        judged = T.judging(T.Judge(T.ROBOTS / urdf, {}, base=base, world=world), m, cm)

        cfg = IKConfig(num_seeds=32, stall_iterations=5, avoid_collisions=True,
                       collision_margin=T.MARGIN, timeout=None)
        s = IKSolver(m, [tip], cfg, collision=cm)
        mov = movable_coordinates(m, [tip])
        row["held"] = int((~mov).sum())
        for key, near, n in (("free", False, n_free), ("near_table", True, n_near)):
            # (judged on the meshes alone: a goal whose known answer only the spheres
            # find near is one the user has, and counts)
            G, Qk = T._goals(m, tip, cm, judged, n, seed=31 + near, near_table=near,
                             world=world, table=table, with_q=True, spheres_first=False,
                             up=up)
            if not len(G):
                row[key] = "no goals"
                continue
            # the joints a solve holds (the other arm, a hand) where the robot has them: the
            # known answer's values (clear); the solved ones from mid-range
            seeds = np.array(Qk)
            seeds[:, mov] = m.neutral_q()[mov]
            t = time.perf_counter()
            r = s.solve(G, seeds=seeds, world=world)
            dt = time.perf_counter() - t
            ok = np.asarray(r.success)
            bad = sum(1 for i in np.nonzero(ok)[0] if not judged(r.q[i], T.MARGIN - T.SLACK))
            row[key] = f"{100 * ok.mean():.1f} % of {len(G)}, {bad} colliding, {len(G) / dt:.0f}/s"
    except Exception as exc:  # noqa: BLE001 - the table says what failed, and goes on
        row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return row


def main(argv=None) -> int:
    import argparse

    from common import Report, banner, load_average

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robots", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--free", type=int, default=100, help="free goals a robot")
    ap.add_argument("--near", type=int, default=60, help="goals 0-10 cm above the table")
    ap.add_argument("--cache", help="sphere cache for the fits (default: a fresh one here)")
    ap.add_argument("--out", help="append the table to this file")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print("ROW " + json.dumps(one(args.one, args.free, args.near)), flush=True)
        return 0
    rep = Report()
    rep.say(banner("every arm: collision models and collision-aware solves on real robots"))
    rep.say(load_average())
    cache = args.cache or str(Path("build") / f"bench-arms-spheres-{os.getpid()}")
    env = dict(os.environ, ROS2_IK_SPHERE_CACHE=cache)
    for name in args.robots:
        t = time.perf_counter()
        r = subprocess.run([sys.executable, __file__, "--one", name, "--free", str(args.free),
                            "--near", str(args.near)], capture_output=True, text=True, env=env)
        rows = [ln[4:] for ln in r.stdout.splitlines() if ln.startswith("ROW ")]
        row = json.loads(rows[-1]) if rows else {"robot": name, "error": r.stderr[-300:]}
        row["wall_s"] = round(time.perf_counter() - t, 1)
        rep.say(json.dumps(row))
    rep.say(load_average())
    rep.write(args.out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    warnings.simplefilter("ignore")
    sys.exit(main())
