"""One client process of the model-swap test (test_ros_model_swap.py); not a test module.

    python test/swap_client.py DOMAIN_ID RATE_HZ SECONDS RNG_SEED OUT_JSON

Once the node answers, prints ``ready`` and sends one-goal ComputeIK requests (the default tip,
goals from the bundled panda's and ur's workspaces in turn) at RATE_HZ for SECONDS, each with a
timeout, and writes one JSON object: for every request its wall-clock send time, the goal, and
the answer as it came (model digest and version, backend, codes, joint names, solution), or
``lost``. The test judges the answers; this process only records them.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from ros2_ik import load_robot
from ros2_ik.kinematics import fk_frames, pose_to_pq
from ros2_ik.ros.conversions import as_f64
from ros2_ik.ros.robot import default_tip_of
from ros_testing import Client, ik_request

CALL_TIMEOUT = 30.0  # [s] an answer later than this counts as lost


def main() -> int:
    domain, rate, seconds, seed, out_path = (int(sys.argv[1]), float(sys.argv[2]),
                                             float(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    rng = np.random.default_rng(seed)
    goals = []
    for name in ("panda", "ur"):
        m = load_robot(name)
        T = np.asarray(fk_frames(m, m.random_q(rng, 200), [default_tip_of(m)]))[:, 0]
        goals.append(pose_to_pq(T))
    client = Client(domain, node_name=f"swap_client_{seed}", executor="single")
    records = []
    try:
        client.wait_for_server(120)
        print("ready", flush=True)
        t_end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < t_end:
            t_next = time.monotonic() + 1.0 / rate
            pq = goals[i % 2][(i // 2) % 200]
            req = ik_request(pq[None], compact_response=True, timeout=5.0)
            rec = {"i": i, "sent": time.time(), "goal": pq.tolist()}
            try:
                r = client.call(client.ik, req, timeout=CALL_TIMEOUT)
                rec.update(answered=time.time(), code=int(r.error_code.val),
                           status=[int(s) for s in r.status], digest=r.model_digest,
                           version=int(r.model_version), backend=r.backend,
                           names=list(r.joint_names), q=as_f64(r.compact_solutions).tolist(),
                           message=r.message[:300])
            except TimeoutError:
                rec["lost"] = True
            records.append(rec)
            i += 1
            time.sleep(max(0.0, t_next - time.monotonic()))
    finally:
        with open(out_path, "w") as f:
            json.dump(records, f)
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
