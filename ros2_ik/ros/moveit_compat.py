"""MoveIt-compatible ``compute_ik`` (moveit_msgs/srv/GetPositionIK) and ``compute_fk``
(GetPositionFK), served only when ``moveit_msgs`` is importable.

The translation is plain attribute access on the request objects, so it is tested with simple
stand-in objects where moveit_msgs is not installed. Semantics follow move_group's
kinematics_service_capability:

- IK: with at most one pose in ``pose_stamped_vector`` the request uses ``pose_stamped`` +
  ``ik_link_name`` (empty = the node's default tip), otherwise ``pose_stamped_vector`` +
  ``ik_link_names``; different lengths give INVALID_LINK_NAME. The seed is
  ``robot_state.joint_state``. ``group_name`` is not checked (ros2_ik has no groups; the whole
  model is solved). ``avoid_collisions`` and ``constraints`` cannot be honoured (no collision
  model): they are ignored with a warning. Unlike move_group, the full ``timeout`` (sec and
  nanosec) is honoured. One solution in ``solution.joint_state``.
- FK: empty ``fk_link_names`` gives INVALID_LINK_NAME; poses in ``header.frame_id`` (empty =
  base link) for the single ``robot_state``.
- Codes: MoveIt has no NO_ROBOT_MODEL / INVALID_REQUEST: they become FAILURE (99999); all other
  codes already are MoveIt values. The message goes into ``error_code.message`` where that
  field exists (MoveIt's ros2 branch); it is always logged.
"""

from __future__ import annotations

import array
import types

from . import codes
from .conversions import as_f64

__all__ = ["moveit_available", "moveit_code", "ik_request_as_compute_ik",
           "fk_request_as_compute_fk", "fill_ik_response", "fill_fk_response",
           "compute_ik_response", "compute_fk_response", "IGNORED_WARNING"]

IGNORED_WARNING = ("compute_ik (MoveIt): avoid_collisions / constraints are not supported by "
                   "ros2_ik (no collision model) and are ignored")


def moveit_available() -> bool:
    try:
        from moveit_msgs.srv import GetPositionFK, GetPositionIK  # noqa: F401, PLC0415
    except Exception:
        return False
    return True


def moveit_code(code: int) -> int:
    """IKErrorCode value -> MoveItErrorCodes value."""
    if code in (codes.NO_ROBOT_MODEL, codes.INVALID_REQUEST):
        return codes.FAILURE
    return int(code)


def _empty_js():
    return types.SimpleNamespace(name=[], position=array.array("d"))


def ik_request_as_compute_ik(ik_request) -> tuple[types.SimpleNamespace, bool]:
    """A ComputeIK-shaped request (compact response) for a PositionIKRequest, and whether
    unsupported options (avoid_collisions / constraints) were set."""
    from .codes import RequestError  # noqa: PLC0415

    vec = list(ik_request.pose_stamped_vector)
    if len(vec) <= 1:
        poses = [vec[0] if vec else ik_request.pose_stamped]
        tips = [ik_request.ik_link_name] if ik_request.ik_link_name else []
        if len(vec) == 1 and list(ik_request.ik_link_names):
            tips = list(ik_request.ik_link_names)[:1]
    else:
        poses = vec
        tips = list(ik_request.ik_link_names)
        if len(tips) != len(poses):
            raise RequestError(codes.INVALID_LINK_NAME,
                               f"{len(poses)} poses in pose_stamped_vector but {len(tips)} "
                               "ik_link_names; give one link name per pose")
    js = ik_request.robot_state.joint_state if ik_request.robot_state is not None else _empty_js()
    c = ik_request.constraints
    constrained = bool(getattr(ik_request, "avoid_collisions", False)) or bool(
        c is not None and any(len(getattr(c, f, []) or []) for f in (
            "joint_constraints", "position_constraints", "orientation_constraints",
            "visibility_constraints")))
    req = types.SimpleNamespace(
        goals=poses, tip_links=tips, compact_goals=array.array("d"), compact_frame_id="",
        seed=js, solver="", position_tolerance=0.0, orientation_tolerance=0.0,
        timeout=ik_request.timeout, num_seeds=0, solve_mode="", position_only=False,
        axis_weights=array.array("d"), rng_seed=-1, compact_response=True)
    return req, constrained


def compute_ik_response() -> types.SimpleNamespace:
    """A ComputeIK-shaped response object for :func:`services.compute_ik`."""
    return types.SimpleNamespace(
        solutions=[], joint_names=[], compact_solutions=array.array("d"),
        status=array.array("i"), position_errors=array.array("d"),
        orientation_errors=array.array("d"), iterations=array.array("I"),
        error_code=types.SimpleNamespace(val=codes.FAILURE), message="")


def fill_ik_response(resp, ik_resp) -> None:
    """MoveIt GetPositionIK response from a ComputeIK-shaped one (single problem)."""
    code = int(ik_resp.error_code.val)
    resp.error_code.val = moveit_code(code)
    if hasattr(resp.error_code, "message"):
        resp.error_code.message = ik_resp.message
    if hasattr(resp.error_code, "source"):
        resp.error_code.source = "ros2_ik"
    if len(ik_resp.compact_solutions):
        resp.solution.joint_state.name = list(ik_resp.joint_names)
        resp.solution.joint_state.position = array.array(
            "d", as_f64(ik_resp.compact_solutions)[:len(ik_resp.joint_names)].tobytes())


def fk_request_as_compute_fk(req) -> types.SimpleNamespace:
    """A ComputeFK-shaped request (friendly form) for a GetPositionFK request."""
    from .codes import RequestError  # noqa: PLC0415

    links = list(req.fk_link_names)
    if not links:
        raise RequestError(codes.INVALID_LINK_NAME,
                           "fk_link_names is empty; name the links whose poses you want")
    js = req.robot_state.joint_state
    return types.SimpleNamespace(states=[js], joint_names=[], compact_positions=array.array("d"),
                                 link_names=links, frame_id=req.header.frame_id)


def compute_fk_response() -> types.SimpleNamespace:
    return types.SimpleNamespace(poses=[], compact_poses=array.array("d"),
                                 error_code=types.SimpleNamespace(val=codes.FAILURE), message="")


def fill_fk_response(resp, fk_resp, links) -> None:
    code = int(fk_resp.error_code.val)
    resp.error_code.val = moveit_code(code)
    if hasattr(resp.error_code, "message"):
        resp.error_code.message = fk_resp.message
    if code == codes.SUCCESS:
        resp.pose_stamped = list(fk_resp.poses)
        resp.fk_link_names = list(links)

