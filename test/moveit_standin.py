"""What MoveIt 2's ``srv_kinematics_plugin`` does on either side of a call, with the moveit_msgs
classes rosidl generates (test/interfaces: moveit_msgs' definitions, built by
scripts/setup.sh). The plugin side follows moveit2's ``srv_kinematics_plugin.cpp`` and
``robot_state/conversions``:

- request: a RobotState of the default values (0, or the middle of the range where 0 is out
  of it; identity for floating joints) with the group's variables set to the seed, converted
  as ``robotStateToRobotStateMsg`` does (every single-DOF joint, mimic ones included, in
  ``joint_state`` in model order; floating / planar joints as transforms in
  ``multi_dof_joint_state``), ``avoid_collisions = true``, ``group_name``, the pose in the
  group's base frame, ``ik_link_name`` (one tip) or ``pose_stamped_vector`` + ``ik_link_names``
  (several), ``timeout`` 0, ``is_diff`` false;
- response: ``robotStateMsgToRobotState`` (an unknown variable name in ``joint_state`` throws;
  an unknown joint in ``multi_dof_joint_state`` is skipped), then the group's variables copied
  out of the state.
"""

from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import PoseStamped, Transform
from moveit_msgs.msg import MoveItErrorCodes, RobotState  # noqa: F401 (re-exported)
from moveit_msgs.srv import GetPositionFK, GetPositionIK  # noqa: F401 (re-exported)

from ros2_ik.model import JointType

MOVEIT_FLOATING = ("trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z", "rot_w")


# ---------------------------------------------------------------------- MoveIt's robot state
class MoveItState:
    """MoveIt's view of a robot model's variables, built from a ros2_ik model of the *whole*
    URDF: single-DOF joints by joint name, floating joints as ``j/trans_x .. j/rot_w``, planar
    as ``j/x, j/y, j/theta``; mimic joints are variables too (set from their leader)."""

    def __init__(self, model):
        self.model = model
        self.var_names: list[str] = []
        self.q_of_var: list[int] = []  # ros2_ik q index of each variable (-1: a mimic joint)
        self.single: list[str] = []    # single-DOF joints in model order, mimic included
        self.multi: dict[str, tuple[str, int]] = {}
        self.mimic: dict[str, tuple[int, float, float]] = {}
        for l in range(1, model.num_links):
            jt = JointType(int(model.joint_type[l]))
            name = model.joint_names[l]
            if jt == JointType.FIXED:
                continue
            if model.mimic_q[l] >= 0:
                self.single.append(name)
                self.var_names.append(name)
                self.q_of_var.append(-1)
                self.mimic[name] = (int(model.mimic_q[l]), float(model.mimic_multiplier[l]),
                                    float(model.mimic_offset[l]))
                continue
            s = int(model.q_start[l])
            if jt == JointType.FLOATING:
                self.multi[name] = ("floating", s)
                self.var_names += [f"{name}/{v}" for v in MOVEIT_FLOATING]
                self.q_of_var += list(range(s, s + 7))
            elif jt == JointType.PLANAR:
                self.multi[name] = ("planar", s)
                self.var_names += [f"{name}/{v}" for v in ("x", "y", "theta")]
                self.q_of_var += list(range(s, s + 3))
            else:
                self.single.append(name)
                self.var_names.append(name)
                self.q_of_var.append(s)
        self.q = self.default_q()

    def default_q(self) -> np.ndarray:
        """``setToDefaultValues``: 0, or the middle of the bounds where 0 is outside them;
        floating joints at the identity."""
        lo, hi = self.model.lower, self.model.upper
        with np.errstate(invalid="ignore"):  # continuous joints: infinite bounds, 0
            q = np.where((lo > 0) | (hi < 0), 0.5 * (lo + hi), 0.0)
        for kind, s in self.multi.values():
            if kind == "floating":
                q[s:s + 7] = (0, 0, 0, 0, 0, 0, 1)
        return q

    def value(self, var: str) -> float:
        i = self.q_of_var[self.var_names.index(var)]
        if i >= 0:
            return float(self.q[i])
        leader, mult, off = self.mimic[var]
        return float(self.q[leader] * mult + off)

    def to_msg(self) -> RobotState:
        """``robotStateToRobotStateMsg``."""
        rs = RobotState()
        rs.joint_state.name = list(self.single)
        rs.joint_state.position = [self.value(n) for n in self.single]
        for j, (kind, s) in self.multi.items():
            tf = Transform()
            if kind == "floating":
                v = self.q[s:s + 7]
                tf.translation.x, tf.translation.y, tf.translation.z = map(float, v[:3])
                tf.rotation.x, tf.rotation.y, tf.rotation.z, tf.rotation.w = map(float, v[3:])
            else:
                x, y, th = map(float, self.q[s:s + 3])
                tf.translation.x, tf.translation.y = x, y
                tf.rotation.z, tf.rotation.w = math.sin(th / 2), math.cos(th / 2)
            rs.multi_dof_joint_state.joint_names.append(j)
            rs.multi_dof_joint_state.transforms.append(tf)
        return rs

    def from_msg(self, rs: RobotState) -> None:
        """``robotStateMsgToRobotState``: KeyError on a variable MoveIt does not know."""
        js = rs.joint_state
        assert len(js.name) == len(js.position)
        for n, v in zip(js.name, js.position):
            if n not in self.var_names:
                raise KeyError(f"unknown variable {n!r}: MoveIt's setVariableValues throws")
            i = self.q_of_var[self.var_names.index(n)]
            if i >= 0:
                self.q[i] = v
        m = rs.multi_dof_joint_state
        for j, tf in zip(m.joint_names, m.transforms):
            if j not in self.multi:
                continue  # MoveIt warns and skips
            kind, s = self.multi[j]
            t, r = tf.translation, tf.rotation
            if kind == "floating":
                self.q[s:s + 7] = (t.x, t.y, t.z, r.x, r.y, r.z, r.w)
            else:
                self.q[s:s + 3] = (t.x, t.y, 2.0 * math.atan2(r.z, r.w))

    def set_group(self, group_vars, values) -> None:
        for n, v in zip(group_vars, values):
            self.q[self.q_of_var[self.var_names.index(n)]] = v

    def group_values(self, group_vars) -> np.ndarray:
        return np.array([self.value(n) for n in group_vars])


def plugin_request(state: MoveItState, group: str, base_frame: str, tips, poses
                   ) -> GetPositionIK.Request:
    """The request ``SrvKinematicsPlugin::searchPositionIK`` builds (``state`` already holds
    the seed in the group's variables)."""
    req = GetPositionIK.Request()
    ik = req.ik_request
    ik.avoid_collisions = True
    ik.group_name = group
    ik.robot_state = state.to_msg()
    if len(tips) > 1:
        for tip, pose in zip(tips, poses):
            ps = PoseStamped()
            ps.header.frame_id = base_frame
            ps.pose = pose
            ik.pose_stamped_vector.append(ps)
            ik.ik_link_names.append(tip)
    else:
        ik.pose_stamped.header.frame_id = base_frame
        ik.pose_stamped.pose = poses[0]
        ik.ik_link_name = tips[0]
    return req
