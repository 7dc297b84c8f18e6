"""``~/compute_jacobian`` (ros2_ik_interfaces/srv/ComputeJacobian): the geometric Jacobian of
a link at one state, in the base frame's axes or the link's own, relative to another link
where asked (the frame-to-frame Jacobian), analytic or by central differences.
"""

from __future__ import annotations

from ros2_ik_interfaces.srv import ComputeJacobian

from ...api import jacobian
from ...backend import to_numpy
from .. import codes
from ..codes import RequestError
from ..conversions import as_f64, f64_array
from ..request import Context

__all__ = ["handle", "register"]


def register(w) -> None:
    def answer(ctx, req, resp):
        return w.serve("compute_jacobian", handle, ctx, req, resp,
                       ComputeJacobian.Response)[0]

    w.service(ComputeJacobian, "~/compute_jacobian", answer, inline=lambda r: True)


def handle(ctx: Context, req, resp) -> None:
    """Answer a ComputeJacobian request into ``resp``."""
    robot = ctx.require_robot()
    link = robot.check_link(req.link_name or robot.default_tip, "link_name")
    ref = req.reference_link
    if ref == robot.base:
        ref = ""
    if ref:
        robot.check_link(ref, "reference_link")
    ex = req.expressed_in or "world"
    if ex not in ("world", "local"):
        raise RequestError(codes.INVALID_REQUEST,
                           f"expressed_in {req.expressed_in!r} is invalid; use 'world' (the axes "
                           "of reference_link, or of the base link) or 'local' (the axes of "
                           "link_name)")
    core_ex = ex if not ref else ("reference" if ex == "world" else "local")
    q = robot.apply_joint_values(robot.zero_q, list(req.state.name), as_f64(req.state.position),
                                 what="state", strict=True, clip=False)
    J = to_numpy(jacobian(robot.model, q, link, reference=ref or None, expressed_in=core_ex,
                          method="numerical" if req.numerical else "analytic"))[0]
    resp.joint_names = list(robot.jacobian_columns)
    resp.rows = int(J.shape[0])
    resp.cols = int(J.shape[1])
    resp.jacobian = f64_array(J)
    resp.error_code.val = codes.SUCCESS
    resp.message = ""
