"""One client process of the concurrency stress test (test_ros_stress.py); not a test module.

    python test/stress_client.py DOMAIN_ID REQUESTS RNG_SEED

Sends REQUESTS ComputeIK calls one after the other (alternately 1 goal with the node's default
seeds and 100 goals with 4 seeds), each with a timeout, and checks every answer: the solution
rows belong to a bundled robot (named by ``joint_names``: the node's model may be swapped
meanwhile), the arrays have the right sizes, and every success is verified by FK against the
goal at that robot's default tip. Prints one JSON line: sent, answered, lost, wrong, codes.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter

import numpy as np

from ros2_ik import load_robot
from ros2_ik.kinematics import fk_frames, pose_error, pose_to_pq, pq_to_pose
from ros2_ik.ros import codes
from ros2_ik.ros.conversions import as_f64
from ros2_ik.ros.robot import default_tip_of
from ros_testing import Client, ik_request

CALL_TIMEOUT = 30.0  # [s] an answer later than this counts as lost
POS_TOL, ROT_TOL = 1e-4, 1e-3


def main() -> int:
    domain, n_req, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    models = {m.q_names: m for m in (load_robot("panda"), load_robot("ur"))}
    panda = load_robot("panda")
    rng = np.random.default_rng(seed)
    client = Client(domain, node_name=f"stress_client_{seed}", executor="single")
    out = {"sent": 0, "answered": 0, "lost": 0, "wrong": 0, "solved": 0, "codes": Counter(),
           "errors": []}
    try:
        client.wait_for_server(60)
        for i in range(n_req):
            n = 1 if i % 2 == 0 else 100
            q = panda.random_q(rng, n)
            pq = pose_to_pq(np.asarray(fk_frames(panda, q, [default_tip_of(panda)]))[:, 0])
            req = ik_request(pq, compact_response=True, num_seeds=0 if n == 1 else 4)
            out["sent"] += 1
            try:
                resp = client.call(client.ik, req, timeout=CALL_TIMEOUT)
            except TimeoutError:
                out["lost"] += 1
                out["errors"].append(f"request {i} ({n} goals): no answer in {CALL_TIMEOUT} s")
                continue
            out["answered"] += 1
            out["codes"][codes.name_of(resp.error_code.val)] += 1
            problem = check(models, pq, resp)
            if problem:
                out["wrong"] += 1
                out["errors"].append(f"request {i} ({n} goals): {problem}")
            else:
                out["solved"] += int(np.sum(np.asarray(resp.status) == codes.SUCCESS))
            time.sleep(float(rng.uniform(0, 0.004)))
    finally:
        client.close()
    out["codes"] = dict(out["codes"])
    out["errors"] = out["errors"][:10]
    print(json.dumps(out), flush=True)
    return 0


def check(models, pq, resp) -> str:
    """'' when the answer is right, else what is wrong with it."""
    names = tuple(resp.joint_names)
    model = next((m for qn, m in models.items() if names[:len(qn)] == qn), None)
    if model is None:
        return f"joint_names {names} are no bundled robot's"
    n = pq.shape[0]
    status = np.asarray(resp.status)
    if status.shape != (n,):
        return f"{status.shape} status values for {n} goals"
    if resp.error_code.val not in (codes.SUCCESS, codes.NO_IK_SOLUTION, codes.TIMED_OUT):
        return f"code {codes.name_of(resp.error_code.val)}: {resp.message}"
    Q = as_f64(resp.compact_solutions)
    if Q.size != n * len(names):
        return f"{Q.size} solution values for {n} x {len(names)}"
    ok = status == codes.SUCCESS
    if not ok.any():
        return ""
    Q = Q.reshape(n, len(names))[ok][:, :model.nq]
    T = np.asarray(fk_frames(model, Q, [default_tip_of(model)]))[:, 0]
    pe, re = pose_error(pq_to_pose(pq[ok]), T)
    if np.any(pe > POS_TOL * 1.0001) or np.any(re > ROT_TOL * 1.0001):
        return (f"a success is off by {pe.max():.3g} m / {re.max():.3g} rad at "
                f"{model.name}'s tip")
    return ""


if __name__ == "__main__":
    sys.exit(main())
