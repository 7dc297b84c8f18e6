"""The simplest ComputeIK server a user could write around the same prepared solve, for
bench_node's baseline (not a test, not the product).

    python bench/bare_ik_server.py ROBOT

rclpy's SingleThreadedExecutor, one service ``/bare_ik/compute_ik``, one goal per request
(compact form): ``ChainSolver.solve`` with the node's default options, the answer in
``compact_solutions``. No parameters, joint_states, checks or diagnostics: what is left of a
round trip is rclpy and the middleware, so node minus this is what the node adds. Beside it,
``/bare_ik/trigger`` (``std_srvs/Trigger``, answers at once): the round trip of the smallest
service, rclpy's and the middleware's floor on this machine.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from ros2_ik_interfaces.srv import ComputeIK
from std_srvs.srv import Trigger

from ros2_ik import load_robot
from ros2_ik.ros.conversions import as_f64, f64_array
from ros2_ik.ros.node import SERVICE_QOS
from ros2_ik.ros.params import Settings, ik_config
from ros2_ik.ros.robot import default_tip_of
from ros2_ik.api import ChainSolver


def main() -> int:
    model = load_robot(sys.argv[1])
    solver = ChainSolver(model, default_tip_of(model),
                         ik_config(Settings.from_values({"timeout": 60.0})))
    # (the ChainSolver fixed its backend when built: the host backend's kernels were built or
    # loaded from the on-disk cache then, so no request pays for them)
    seed = model.neutral_q()
    names = list(model.q_names)

    def compute_ik(req, resp):
        r = solver.solve(as_f64(req.compact_goals), seed)
        resp.joint_names = names
        resp.compact_solutions = f64_array(r.q)
        resp.status = [int(r.status[0])]
        return resp

    rclpy.init()
    node = rclpy.create_node("bare_ik")
    node.create_service(ComputeIK, "/bare_ik/compute_ik", compute_ik, qos_profile=SERVICE_QOS)

    def trigger(req, resp):
        resp.success = True
        return resp

    node.create_service(Trigger, "/bare_ik/trigger", trigger, qos_profile=SERVICE_QOS)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    print("serving", flush=True)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:  # a signal shut the context down inside a wait: raised again if not
        if rclpy.ok():
            raise
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
