"""``~/compute_fk`` (ros2_ik_interfaces/srv/ComputeFK): poses of links for joint states.

States come as JointState messages (joints a state leaves out: 0 clamped into the limits) or
as a compact array (``joint_names`` + state-major ``compact_positions``); poses are expressed
in ``frame_id`` (a link of the model; '' = the base).
"""

from __future__ import annotations

import numpy as np
from ros2_ik_interfaces.srv import ComputeFK

from ...api import fk_frames
from ...backend import to_numpy
from ...kinematics import pose_inverse, pose_to_pq
from .. import codes
from ..codes import RequestError
from ..conversions import as_f64, f64_array, pq_to_pose_stamped
from ..request import Context, compact_states

__all__ = ["handle", "register", "INLINE_POSES"]

INLINE_POSES = 8  # states (friendly form) + joint values (compact form) answered inline


def register(w) -> None:
    def answer(ctx, req, resp):
        return w.serve("compute_fk", handle, ctx, req, resp, ComputeFK.Response)[0]

    w.service(ComputeFK, "~/compute_fk", answer,
              inline=lambda r: len(r.states) + len(r.compact_positions) <= INLINE_POSES)


def handle(ctx: Context, req, resp) -> int:
    """Answer a ComputeFK request into ``resp``; returns the number of poses computed."""
    robot = ctx.require_robot()
    model = robot.model
    links = list(req.link_names) or [robot.default_tip]
    for name in links:
        robot.check_link(name, "link")
    frame = req.frame_id
    L = len(links)
    n_friendly = len(req.states)
    names = list(req.joint_names)
    vals = as_f64(req.compact_positions)
    if n_friendly and (names or vals.size):
        raise RequestError(codes.INVALID_REQUEST,
                           "both `states` and `joint_names`/`compact_positions` are filled; use "
                           "exactly one form")
    if not n_friendly and not names and not vals.size:
        raise RequestError(codes.INVALID_REQUEST,
                           "no joint states given; fill `states` or `joint_names` + "
                           "`compact_positions`")
    if n_friendly:
        M = n_friendly
    else:
        if not names or vals.size % len(names):
            raise RequestError(codes.INVALID_REQUEST,
                               f"compact_positions has {vals.size} values for {len(names)} "
                               "joint_names; give M * len(joint_names) values (state-major)")
        M = vals.size // len(names)
        if M == 0:
            raise RequestError(codes.INVALID_REQUEST,
                               "compact form with joint_names but no compact_positions; give at "
                               "least one state")
    if M * L > ctx.settings.max_batch:
        raise RequestError(codes.INVALID_REQUEST,
                           f"{M} states x {L} links = {M * L} poses exceed the node's max_batch = "
                           f"{ctx.settings.max_batch}; split the request")
    # joints a state leaves out: 0 clamped into the limits (ros2_ik's ComputeFK), or the
    # current state (MoveIt's GetPositionFK: move_group's current state, overwritten)
    lenient = getattr(req, "use_current_state", False)
    base = ctx.current_q(robot) if lenient else robot.zero_q
    if n_friendly:
        Q = np.empty((M, model.nq))
        for i, js in enumerate(req.states):
            Q[i] = robot.apply_joint_values(base, list(js.name), as_f64(js.position),
                                            what=f"states[{i}]", strict=True, clip=False,
                                            ignore_unknown=lenient)
    else:
        Q = compact_states(robot, robot.zero_q, names, vals.reshape(M, len(names)))
    if frame not in ("", robot.base):
        robot.frame_transforms([frame], robot.zero_q, what="frame_id")  # validates the name
        T = fk_frames(model, Q, links + [frame])
        T = pose_inverse(T[:, -1:]) @ T[:, :-1]
    else:
        T = fk_frames(model, Q, links)
    pq = to_numpy(pose_to_pq(T)).reshape(M * L, 7)
    if n_friendly:
        resp.poses = pq_to_pose_stamped(pq, frame or robot.base)
    else:
        resp.compact_poses = f64_array(pq)
    resp.error_code.val = codes.SUCCESS
    resp.message = ""
    return M * L
