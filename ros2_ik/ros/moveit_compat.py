"""MoveIt-compatible IK and FK: ``~/solve_ik`` (moveit_msgs/srv/GetPositionIK) and
``~/solve_fk`` (GetPositionFK), served only when ``moveit_msgs`` is importable.

The names are not move_group's ``compute_ik`` / ``compute_fk``: beside a move_group in the same
namespace two servers of one name would answer at random, and MoveIt's
``srv_kinematics_plugin`` pointed at ``compute_ik`` would call move_group back into itself.
Point the plugin at ``/ros2_ik/solve_ik`` (``kinematics_solver_service_name`` in
``kinematics.yaml``; see the README's MoveIt section).

The translation is plain attribute access on the request and response objects, so it is tested
with stand-ins that mirror the moveit_msgs definitions where moveit_msgs is not installed.
Semantics follow move_group's kinematics_service_capability and what ``srv_kinematics_plugin``
sends and reads:

- IK: with at most one pose in ``pose_stamped_vector`` the request uses ``pose_stamped`` +
  ``ik_link_name`` (empty = the group's chain tip, else the node's default tip), otherwise
  ``pose_stamped_vector`` + ``ik_link_names``; different lengths give INVALID_LINK_NAME.
  ``group_name`` names an SRDF group: only its joints move (no group: only the joints on the
  way to the tips). The seed is ``robot_state``: ``joint_state`` (single-DOF joints, and
  multi-DOF variables under MoveIt's names) and ``multi_dof_joint_state`` (floating and planar
  joints as transforms); joints the model lacks are ignored (MoveIt's robot_state holds every
  joint of the robot), joints it leaves out come from the node's current state
  (``joint_states``). ``avoid_collisions`` is honoured: the answer keeps the robot
  ``collision.margin`` clear of itself and of the node's world (which also follows MoveIt's
  planning scene), and an answer within the tolerances that collides is ``GOAL_IN_COLLISION``
  (-12); false turns collision avoidance off for the request. ``constraints`` cannot be
  honoured: they are ignored with a warning. The full ``timeout`` is honoured (0 = node
  default).
  One solution in ``solution``: every joint of the model in ``joint_state`` under MoveIt's
  variable names (floating ``j/trans_x .. j/rot_w``, planar ``j/x, j/y, j/theta``), and the
  floating / planar joints also in ``multi_dof_joint_state`` as transforms, as move_group does.
- FK: empty ``fk_link_names`` gives INVALID_LINK_NAME; poses in ``header.frame_id`` (empty =
  base link) for the single ``robot_state``, joints it leaves out at the current state.
- Codes: MoveIt has no NO_ROBOT_MODEL / INVALID_REQUEST: they become FAILURE (99999); all other
  codes already are MoveIt values. The message goes into ``error_code.message`` (or
  ``error_message``) where the field exists; it is always logged.
"""

from __future__ import annotations

import array
import math
import types

from . import codes
from .conversions import as_f64
from .robot import LoadedRobot

__all__ = ["moveit_available", "moveit_code", "ik_request_as_compute_ik",
           "fk_request_as_compute_fk", "fill_ik_response", "fill_fk_response",
           "compute_ik_response", "compute_fk_response", "moveit_names", "robot_state_seed",
           "set_error", "serve_ik", "serve_fk", "IGNORED_WARNING", "SOLVE_IK", "SOLVE_FK"]

SOLVE_IK = "~/solve_ik"
SOLVE_FK = "~/solve_fk"
IGNORED_WARNING = ("solve_ik (MoveIt): constraints are not supported by ros2_ik and are "
                   "ignored (avoid_collisions is honoured)")
#: a floating joint's coordinates: ros2_ik's suffixes and MoveIt's variable names, same order
FLOATING = (("x", "trans_x"), ("y", "trans_y"), ("z", "trans_z"), ("qx", "rot_x"),
            ("qy", "rot_y"), ("qz", "rot_z"), ("qw", "rot_w"))


def moveit_available() -> bool:
    try:
        from moveit_msgs.srv import GetPositionFK, GetPositionIK  # noqa: F401, PLC0415
    except Exception:  # noqa: BLE001 - any failure to load the messages means: not available
        return False
    return True


def moveit_code(code: int) -> int:
    """IKErrorCode value -> MoveItErrorCodes value."""
    if code in (codes.NO_ROBOT_MODEL, codes.INVALID_REQUEST):
        return codes.FAILURE
    return int(code)


def set_error(resp, code: int, message: str) -> None:
    """A MoveIt response's ``error_code`` (and its message / source where the fields exist)."""
    ec = resp.error_code
    ec.val = moveit_code(code)
    for field in ("message", "error_message"):  # the field's name differs between releases
        if hasattr(ec, field):
            setattr(ec, field, message)
    for field in ("source", "error_source"):
        if hasattr(ec, field):
            setattr(ec, field, "ros2_ik")


# ---------------------------------------------------------------------- joint names
def _floating_renames(robot: LoadedRobot) -> dict[str, str]:
    """ros2_ik coordinate name -> MoveIt variable name, for the names that differ."""
    return {f"{j}/{ours}": f"{j}/{theirs}" for j, (kind, _) in robot.multi_dof.items()
            if kind == "floating" for ours, theirs in FLOATING}


def moveit_names(robot: LoadedRobot, names) -> list[str]:
    """ros2_ik joint / coordinate names -> MoveIt's variable names."""
    ren = _floating_renames(robot)
    return [ren.get(n, n) for n in names]


def robot_state_seed(robot: LoadedRobot, robot_state) -> types.SimpleNamespace:
    """A JointState-like seed (``name``, ``position``) in ros2_ik's names from a MoveIt
    ``RobotState``: ``joint_state`` (MoveIt variable names accepted) and
    ``multi_dof_joint_state`` (floating: the transform; planar: x, y and the yaw). Joints the
    model lacks pass through (the caller ignores them); a malformed entry is named."""
    from .codes import RequestError  # noqa: PLC0415

    names: list[str] = []
    pos: list[float] = []
    if robot_state is None:
        return types.SimpleNamespace(name=names, position=array.array("d"))
    js = robot_state.joint_state
    back = {v: k for k, v in _floating_renames(robot).items()}
    jn, jp = list(js.name), as_f64(js.position)
    if len(jn) != jp.shape[0]:
        raise RequestError(codes.INVALID_ROBOT_STATE,
                           f"robot_state.joint_state has {len(jn)} names but {jp.shape[0]} "
                           "positions; give one position per name")
    names += [back.get(n, n) for n in jn]
    pos += jp.tolist()
    mdof = getattr(robot_state, "multi_dof_joint_state", None)
    if mdof is not None and len(mdof.joint_names):
        if len(mdof.joint_names) != len(mdof.transforms):
            raise RequestError(codes.INVALID_ROBOT_STATE,
                               f"robot_state.multi_dof_joint_state has {len(mdof.joint_names)} "
                               f"joint_names but {len(mdof.transforms)} transforms; give one "
                               "transform per joint")
        kinds = robot.multi_dof
        for j, tf in zip(mdof.joint_names, mdof.transforms):
            kind = kinds.get(j, (None,))[0]
            t, r = tf.translation, tf.rotation
            if kind == "floating":
                names += [f"{j}/{ours}" for ours, _ in FLOATING]
                pos += [t.x, t.y, t.z, r.x, r.y, r.z, r.w]
            elif kind == "planar":
                yaw = math.atan2(2.0 * (r.w * r.z + r.x * r.y),
                                 1.0 - 2.0 * (r.y * r.y + r.z * r.z))
                names += [f"{j}/x", f"{j}/y", f"{j}/theta"]
                pos += [t.x, t.y, yaw]
            # a joint the model lacks (e.g. MoveIt's virtual joint) or a single-DOF joint sent
            # as a transform: ignored, as joints outside the model are
    return types.SimpleNamespace(name=names, position=array.array("d", pos))


# ---------------------------------------------------------------------- IK
def ik_request_as_compute_ik(ik_request, robot: LoadedRobot
                             ) -> tuple[types.SimpleNamespace, bool]:
    """A ComputeIK-shaped request (compact response) for a PositionIKRequest, and whether
    unsupported options (constraints) were set. ``robot``: the model the request is solved on
    (reads MoveIt's names and multi-DOF joints of the seed)."""
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
    seed = robot_state_seed(robot, ik_request.robot_state)
    c = ik_request.constraints
    constrained = bool(c is not None and any(len(getattr(c, f, []) or []) for f in (
        "joint_constraints", "position_constraints", "orientation_constraints",
        "visibility_constraints")))
    collisions = 1 if bool(getattr(ik_request, "avoid_collisions", False)) else 2
    req = types.SimpleNamespace(
        goals=poses, tip_links=tips, group_name=ik_request.group_name or "",
        compact_goals=array.array("d"), compact_frame_id="", seed=seed,
        ignore_unknown_joints=True, solver="", position_tolerance=0.0,
        orientation_tolerance=0.0, timeout=ik_request.timeout, num_seeds=0, solve_mode="",
        position_only=False, axis_weights=array.array("d"), rng_seed=-1, compact_response=True,
        collisions=collisions)
    return req, constrained


def compute_ik_response() -> types.SimpleNamespace:
    """A ComputeIK-shaped response object for :func:`services.compute_ik`."""
    return types.SimpleNamespace(
        solutions=[], joint_names=[], compact_solutions=array.array("d"),
        status=array.array("i"), position_errors=array.array("d"),
        orientation_errors=array.array("d"), iterations=array.array("I"),
        clearances=array.array("d"), world_version=0,
        error_code=types.SimpleNamespace(val=codes.FAILURE), message="")


def fill_ik_response(resp, ik_resp, robot: LoadedRobot) -> None:
    """MoveIt GetPositionIK response from a ComputeIK-shaped one (single problem): MoveIt's
    variable names, and floating / planar joints also as ``multi_dof_joint_state``
    transforms."""
    set_error(resp, int(ik_resp.error_code.val), ik_resp.message)
    if not len(ik_resp.compact_solutions):
        return
    names = list(ik_resp.joint_names)
    q = as_f64(ik_resp.compact_solutions)[:len(names)]
    js = resp.solution.joint_state
    js.name = moveit_names(robot, names)
    js.position = array.array("d", q.tobytes())
    mdof = robot.multi_dof
    if not mdof:
        return
    from geometry_msgs.msg import Transform  # noqa: PLC0415

    out = resp.solution.multi_dof_joint_state
    jnames, tfs = [], []
    for j, (kind, i) in mdof.items():
        tf = Transform()
        if kind == "floating":
            v = q[i:i + 7]
            tf.translation.x, tf.translation.y, tf.translation.z = map(float, v[:3])
            tf.rotation.x, tf.rotation.y, tf.rotation.z, tf.rotation.w = map(float, v[3:])
        else:
            x, y, th = map(float, q[i:i + 3])
            tf.translation.x, tf.translation.y = x, y
            tf.rotation.z, tf.rotation.w = math.sin(th / 2), math.cos(th / 2)
        jnames.append(j)
        tfs.append(tf)
    out.joint_names = jnames
    out.transforms = tfs


def serve_ik(ctx, req, resp, compute_ik) -> tuple[object, bool]:
    """Answer a GetPositionIK request into ``resp`` with ``compute_ik`` (services.compute_ik)
    on the request's snapshot ``ctx``; returns (outcome, constrained). Raises what the
    handler raises (the caller answers with :func:`set_error`)."""
    robot = ctx.require_robot()
    ik_req, constrained = ik_request_as_compute_ik(req.ik_request, robot)
    ik_resp = compute_ik_response()
    out = compute_ik(ctx, ik_req, ik_resp)
    fill_ik_response(resp, ik_resp, robot)
    return out, constrained


# ---------------------------------------------------------------------- FK
def fk_request_as_compute_fk(req, robot: LoadedRobot) -> types.SimpleNamespace:
    """A ComputeFK-shaped request (friendly form) for a GetPositionFK request: joints the state
    leaves out keep the node's current state; joints the model lacks are ignored."""
    from .codes import RequestError  # noqa: PLC0415

    links = list(req.fk_link_names)
    if not links:
        raise RequestError(codes.INVALID_LINK_NAME,
                           "fk_link_names is empty; name the links whose poses you want")
    js = robot_state_seed(robot, req.robot_state)
    return types.SimpleNamespace(states=[js], joint_names=[], compact_positions=array.array("d"),
                                 link_names=links, frame_id=req.header.frame_id,
                                 use_current_state=True)


def compute_fk_response() -> types.SimpleNamespace:
    return types.SimpleNamespace(poses=[], compact_poses=array.array("d"),
                                 error_code=types.SimpleNamespace(val=codes.FAILURE), message="")


def fill_fk_response(resp, fk_resp, links) -> None:
    code = int(fk_resp.error_code.val)
    set_error(resp, code, fk_resp.message)
    if code == codes.SUCCESS:
        resp.pose_stamped = list(fk_resp.poses)
        resp.fk_link_names = list(links)


def serve_fk(ctx, req, resp, compute_fk) -> int:
    """Answer a GetPositionFK request into ``resp`` (see :func:`serve_ik`); returns the number
    of poses."""
    robot = ctx.require_robot()
    fk_req = fk_request_as_compute_fk(req, robot)
    fk_resp = compute_fk_response()
    n = compute_fk(ctx, fk_req, fk_resp)
    fill_fk_response(resp, fk_resp, fk_req.link_names)
    return n
