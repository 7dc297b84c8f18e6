"""MoveIt's services, when ``moveit_msgs`` is importable: ``~/solve_ik``
(moveit_msgs/srv/GetPositionIK, what ``srv_kinematics_plugin`` calls) and ``~/solve_fk``
(GetPositionFK), answered by the ComputeIK / ComputeFK handlers through the conversions of
:mod:`ros2_ik.ros.moveit_compat`.
"""

from __future__ import annotations

from .. import codes, moveit_compat
from . import compute_fk, compute_ik

__all__ = ["register"]


def register(w) -> bool:
    """The two services on the node of ``w``; False (and a log line) without moveit_msgs."""
    if not moveit_compat.moveit_available():
        w.node.get_logger().info(
            "moveit_msgs is not importable: the MoveIt-compatible ~/solve_ik / ~/solve_fk "
            "services are not offered (install moveit_msgs to get them); ros2_ik's own "
            "services run")
        return False
    from moveit_msgs.srv import GetPositionFK, GetPositionIK  # noqa: PLC0415

    warned = [False]

    def answer_ik(ctx, req, resp):
        kind = "solve_ik (MoveIt)"
        try:
            out, unsupported = moveit_compat.serve_ik(ctx, req, resp, compute_ik.handle)
        except Exception as exc:  # noqa: BLE001
            code, message = w.fail(kind, exc)
            moveit_compat.set_error(resp, code, message)
            w.stats.record(kind, code, message=message)
            return resp
        if unsupported and not warned[0]:
            warned[0] = True
            w.log("warning", moveit_compat.IGNORED_WARNING)
        ec = resp.error_code
        message = getattr(ec, "message", "") or getattr(ec, "error_message", "")
        w.stats.record(kind, out.code, out.problems, out.solved, message=message)
        w.markers(out)
        return resp

    def answer_fk(ctx, req, resp):
        kind = "solve_fk (MoveIt)"
        try:
            n = moveit_compat.serve_fk(ctx, req, resp, compute_fk.handle)
        except Exception as exc:  # noqa: BLE001
            code, message = w.fail(kind, exc)
            moveit_compat.set_error(resp, code, message)
            w.stats.record(kind, code, message=message)
            return resp
        w.stats.record(kind, codes.SUCCESS, n, n)
        return resp

    def small(req) -> bool:
        """One pose for a group's tip (what srv_kinematics_plugin asks), its solvers built: a
        fraction of a millisecond, answered on the executor thread (no hand-off)."""
        ik = req.ik_request
        robot = w.robot()
        s = w.settings()
        if robot is None or len(ik.pose_stamped_vector) > 1 or len(ik.ik_link_names) > 1 \
                or not robot.compiled_ready:
            return False
        if ik.avoid_collisions and not robot.collision_prepared(s):
            return False
        if ik.group_name:
            try:
                g = robot.group(ik.group_name)
            except Exception:  # noqa: BLE001 - answered (INVALID_GROUP_NAME) by a worker
                return False
            if g.tip is None or (ik.ik_link_name and ik.ik_link_name != g.tip):
                return False
        elif ik.ik_link_name and ik.ik_link_name != robot.default_tip:
            return False
        return (s.solver == "dls" and s.num_seeds <= compute_ik.INLINE_SEEDS
                and s.max_iterations <= compute_ik.INLINE_ITERATIONS)

    w.service(GetPositionIK, moveit_compat.SOLVE_IK, answer_ik, inline=small)
    w.service(GetPositionFK, moveit_compat.SOLVE_FK, answer_fk)
    w.node.get_logger().info(
        "moveit_msgs found: also serving "
        f"{w.node.resolve_service_name(moveit_compat.SOLVE_IK)} (GetPositionIK, for "
        "srv_kinematics_plugin) and "
        f"{w.node.resolve_service_name(moveit_compat.SOLVE_FK)} (GetPositionFK)")
    return True
