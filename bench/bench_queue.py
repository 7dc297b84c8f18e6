"""A request's timeout counted from its arrival: MoveIt's GetPositionIK in bursts on the node.

    python bench/bench_queue.py [--robot panda] [--bursts 20] [--burst 8] [--timeout-ms 20]

The node (a subprocess, the bundled robot) gets bursts of GetPositionIK requests sent at once,
each for a goal out of reach (the node's num_seeds 2,000: its seeds run until the timeout) with
the same short timeout, as
several MoveIt clients might send them. Each request waits in the node's queue behind the ones
before it. Per request: the time from its send to its answer, less the timeout (the overrun),
and its code; once with ``timeout_from_arrival`` true (the default: the wait counts) and once
false (the timeout counts from when the executor takes the request). Needs moveit_msgs
(`make bench-queue` sources scripts/test-env.sh for the test packages where no real ones are
installed). Prints the hardware, versions and load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test"))

from common import banner, load_average


def _request(model, tip, timeout_ms: float):
    from moveit_msgs.srv import GetPositionIK

    req = GetPositionIK.Request()
    ik = req.ik_request
    ik.ik_link_name = tip
    ik.pose_stamped.header.frame_id = model.base
    ik.pose_stamped.pose.position.x = 3.0  # out of reach: the seeds run until the timeout
    ik.pose_stamped.pose.orientation.w = 1.0
    ik.timeout.nanosec = int(timeout_ms * 1e6)
    return req


def run(robot: str, from_arrival: bool, bursts: int, burst: int, timeout_ms: float,
        urdf: str = "") -> dict:
    from ros_testing import Client, NodeProcess, random_domain_id

    from ros2_ik import load_robot
    from ros2_ik.model import Model
    from ros2_ik.ros.robot import default_tip_of

    model = Model.from_file(urdf) if urdf else load_robot(robot)
    tip = default_tip_of(model)
    # the node's kernels built beforehand (into the shared kernel cache): while they build
    # the node answers with the reference, which is not what this measures
    from ros2_ik import IKConfig, IKSolver
    from ros2_ik.api import ChainSolver

    IKSolver(model, [tip], IKConfig(), backend="host")
    ChainSolver(model, tip, IKConfig())
    domain = random_domain_id()
    # (many seeds: a goal out of reach runs until its timeout)
    source = {"urdf_file": urdf} if urdf else {"robot": robot}
    node = NodeProcess(domain, params={**source, "timeout_from_arrival": from_arrival,
                                       "num_seeds": 2000})
    client = Client(domain)
    from moveit_msgs.srv import GetPositionIK

    try:
        client.wait_for_server(60)
        cli = client.node.create_client(GetPositionIK, "/ros2_ik/solve_ik")
        if not cli.wait_for_service(timeout_sec=30):
            raise RuntimeError("no GetPositionIK service")
        req = _request(model, tip, timeout_ms)
        client.call(cli, req, timeout=30)  # warm
        over, codes = [], []
        for _ in range(bursts):
            done = threading.Event()
            times = []

            def answered(fut, t0):
                times.append((time.perf_counter() - t0, fut.result().error_code.val))
                if len(times) == burst:
                    done.set()

            for _ in range(burst):
                t0 = time.perf_counter()
                cli.call_async(req).add_done_callback(lambda f, t0=t0: answered(f, t0))
            if not done.wait(120):
                raise RuntimeError("a burst was not answered within 120 s")
            for dt, code in times:
                over.append(1e3 * dt - timeout_ms)
                codes.append(int(code))
        return {"over": over, "codes": codes}
    finally:
        client.close()
        node.stop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", default="panda")
    ap.add_argument("--bursts", type=int, default=20)
    ap.add_argument("--burst", type=int, default=8)
    ap.add_argument("--timeout-ms", type=float, default=20.0)
    ap.add_argument("--urdf", default="", help="a URDF file instead of a bundled robot (e.g. "
                    "example-robot-data's panda)")
    args = ap.parse_args(argv)
    print(banner("GetPositionIK bursts: the timeout counted from the request's arrival"))
    print(f"robot {args.urdf or args.robot}, {args.bursts} bursts of {args.burst} requests at "
          f"once, goals out of reach, timeout {args.timeout_ms:g} ms")
    print(f"{'timeout_from_arrival':>22} {'median':>8} {'p90':>8} {'max':>8}  "
          "overrun past the timeout [ms]; codes")
    for from_arrival in (True, False):
        r = run(args.robot, from_arrival, args.bursts, args.burst, args.timeout_ms, args.urdf)
        o = sorted(r["over"])
        p90 = o[min(len(o) - 1, int(0.9 * len(o)))]
        counts = {c: r["codes"].count(c) for c in sorted(set(r["codes"]))}
        print(f"{str(from_arrival):>22} {statistics.median(o):8.1f} {p90:8.1f} {o[-1]:8.1f}  "
              f"{counts}")
    print(load_average())
    return 0


if __name__ == "__main__":
    sys.exit(main())
