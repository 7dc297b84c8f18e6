"""``~/goal`` (geometry_msgs/PoseStamped): IK for the default tip, the answer on ``~/solution``.

A goal is solved as a one-goal ComputeIK request with the node's parameters and the latest
joint_states as the seed, in the goal pool's one worker (so solutions are published in goal
order); a goal that is not solved publishes nothing and is logged with its reason.
"""

from __future__ import annotations

from geometry_msgs.msg import PoseStamped
from ros2_ik_interfaces.srv import ComputeIK
from sensor_msgs.msg import JointState

from .. import codes
from ..conversions import f64_array
from ..executor import quiet_events
from . import compute_ik

__all__ = ["register", "QUEUE"]

#: depth of the ~/goal subscription and the ~/solution publisher: 10 s of a 100 Hz stream, so
#: that no goal or solution is dropped while the executor thread (or a subscriber) is held up
#: on a loaded machine (1 s was seen to drop a few goals with two other processes busy)
QUEUE = 1000


def register(w, callback_group) -> None:
    solution = w.node.create_publisher(JointState, "~/solution", QUEUE,
                                        event_callbacks=quiet_events(publisher=True))

    def solve(ctx, msg: PoseStamped) -> None:
        req = ComputeIK.Request()
        req.goals = [msg]
        req.compact_response = True
        resp, out = w.serve("goal topic", compute_ik.handle, ctx, req, ComputeIK.Response(),
                            ComputeIK.Response)
        w.markers(out)
        if resp.error_code.val != codes.SUCCESS:
            w.log("warning", f"~/goal in frame {msg.header.frame_id!r} not solved "
                             f"({codes.name_of(resp.error_code.val)}): {resp.message}; nothing "
                             "published")
            return
        js = JointState()
        js.header.stamp = w.node.get_clock().now().to_msg()
        js.header.frame_id = msg.header.frame_id
        js.name = list(resp.joint_names)
        js.position = f64_array(resp.compact_solutions)
        w.publish(solution, js)

    def on_goal(msg: PoseStamped) -> None:  # the executor thread: the goal's context
        try:
            w.pool("goal").submit(solve, w.context(), msg)  # one worker: in order
        except RuntimeError:
            pass  # shutting down

    w.node.create_subscription(PoseStamped, "~/goal", on_goal, QUEUE,
                               callback_group=callback_group)
