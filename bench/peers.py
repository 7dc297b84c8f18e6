"""Peer IK libraries for bench/bench_ik.py: ikpy, Robotics Toolbox for Python, Pinocchio.

None of them is a dependency of ros2_ik. ``make bench-peers-setup`` installs the pinned versions
of bench/requirements-peers.txt into build/venv-peers, a venv layered over .venv;
:func:`add_peer_site` puts that venv's site-packages at the *end* of ``sys.path`` so that .venv's
numpy/scipy keep priority. A peer that does not import or does not fit a robot is skipped with
the reason.

Every peer is built from the same bundled URDF file and must reproduce our FK (same joint order,
same base) on random configurations before it is used; answers are judged by the caller with
ros2_ik's FK, never by the peer's own flag (which is reported alongside).

One interface: ``peer.solve(T, q0, max_iterations, pos_tol, ori_tol) -> (q, own_flag)`` for one
(4, 4) target from one seed, q in ros2_ik's coordinate order.
"""

from __future__ import annotations

import copy
import glob
import os
import site
import sys
import warnings
import xml.etree.ElementTree as ET

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PEERS_VENV = os.path.join(ROOT, "build", "venv-peers")
NAMES = ("rtb", "ikpy", "pin")


class Skip(Exception):  # noqa: N818 - a signal to skip a peer, not an error
    """The peer cannot be used here (not installed, robot not supported, FK mismatch)."""


def add_peer_site() -> str | None:
    """Append build/venv-peers' site-packages (and its .pth entries) to sys.path, if present."""
    dirs = sorted(glob.glob(os.path.join(PEERS_VENV, "lib", "python*", "site-packages")))
    want = "python%d.%d" % sys.version_info[:2]
    dirs = [d for d in dirs if want in d]
    if not dirs:
        return None
    if dirs[0] not in sys.path:
        site.addsitedir(dirs[0])
    return dirs[0]


def _tip_joint(urdf_path: str, tip: str) -> str:
    root = ET.parse(urdf_path).getroot()
    for j in root.findall("joint"):
        if j.find("child").get("link") == tip:
            return j.get("name")
    raise Skip(f"no joint has child link {tip!r}")


class Peer:
    name = "?"
    version = "?"

    def __init__(self, model, robot: str, tip: str, urdf_path: str):
        self.model = model
        self.tip = tip
        self.lower = np.asarray(model.lower, dtype=float)
        self.upper = np.asarray(model.upper, dtype=float)

    def fk(self, q) -> np.ndarray:  # (4, 4) pose of the tip in the base frame
        raise NotImplementedError

    def solve(self, T, q0, max_iterations, pos_tol, ori_tol):
        raise NotImplementedError

    def check_fk(self, ref_fk, rng, n: int = 5) -> float:
        """Max |T_peer - T_ours| over n random configurations within limits."""
        q = self.model.random_q(rng, n)
        return max(float(np.max(np.abs(self.fk(qq) - ref_fk(qq)))) for qq in q)


def _angle(R) -> float:
    c = (np.trace(R) - 1.0) / 2.0
    return float(np.arccos(np.clip(c, -1.0, 1.0)))


class RtbPeer(Peer):
    """Robotics Toolbox for Python: ``ETS.ik_LM`` (C++ Levenberg-Marquardt, Chan damping).

    One search (slimit=1) from the given seed, ilimit = max_iterations, joint_limits=True (a
    solution outside the limits counts as failed). Its tolerance is on E = 0.5 e^T e (e = 6-D
    pose error); we ask for E <= 0.5 (0.1 min(pos_tol, ori_tol))^2 so that its own success
    implies ours, and judge by our FK anyway.
    """

    name = "rtb"

    def __init__(self, model, robot, tip, urdf_path):
        super().__init__(model, robot, tip, urdf_path)
        try:
            import roboticstoolbox as rtb
        except Exception as e:  # noqa: BLE001
            raise Skip(f"roboticstoolbox-python not importable ({type(e).__name__}: {e})")
        self.version = rtb.__version__
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                from roboticstoolbox.models.URDF.URDFRobot import URDF_read

                links, rname, _ = URDF_read(urdf_path)
                robot_ = rtb.Robot(links, name=rname)
            except ImportError:
                robot_ = rtb.Robot.URDF(urdf_path)
        # RTB's ETS from a link starts with that link's own transform from its parent (and its
        # joint, if any): drop it, so that poses are in the base link's frame as ros2_ik's
        ets = robot_.ets(start=model.base, end=tip)
        own = robot_.link_dict[model.base].ets if model.base in robot_.link_dict else []
        # ... and its joints keep their indices in the whole robot's q: number them 0..n-1
        # (ik_LM indexes its q by them)
        els = [copy.deepcopy(e) for e in (ets[len(own):] if len(own) else ets)]
        for k, e in enumerate(e for e in els if e.isjoint):
            e.jindex = k
        self.ets = rtb.ETS(els)
        if self.ets.n != model.nq:
            raise Skip(f"chain to {tip} has {self.ets.n} joints, ros2_ik has {model.nq}")

    def fk(self, q):
        return np.asarray(self.ets.fkine(np.asarray(q, dtype=float)).A)

    def solve(self, T, q0, max_iterations, pos_tol, ori_tol):
        tol = 0.5 * (0.1 * min(pos_tol, ori_tol)) ** 2
        s = self.ets.ik_LM(np.ascontiguousarray(T), q0=np.asarray(q0, dtype=float),
                           ilimit=int(max_iterations), slimit=1, tol=tol, joint_limits=True)
        return np.asarray(s.q, dtype=float), bool(s.success)


class IkpyPeer(Peer):
    """ikpy: ``Chain.inverse_kinematics_frame`` (SciPy least_squares 'trf' with the joint limits
    as bounds, finite-difference Jacobian, orientation_mode="all").

    The chain is cut after the tip's joint; fixed joints are inactive (active_links_mask).
    ikpy returns no success flag: its "own flag" here is its own FK against the tolerances (what
    a user of ikpy would have to do). tol=1e-12 (ikpy's default ftol/xtol 1e-8 can stop short),
    optimizer_budget = max_iterations function evaluations (the Jacobian's are not counted).
    """

    name = "ikpy"

    def __init__(self, model, robot, tip, urdf_path):
        super().__init__(model, robot, tip, urdf_path)
        try:
            import ikpy
            from ikpy.chain import Chain
        except Exception as e:  # noqa: BLE001
            raise Skip(f"ikpy not importable ({type(e).__name__}: {e})")
        self.version = getattr(ikpy, "__version__", "?")
        base = model.base
        tj = _tip_joint(urdf_path, tip)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full = Chain.from_urdf_file(urdf_path, base_elements=[base])
            names = [lk.name for lk in full.links]
            if tj not in names:
                raise Skip(f"ikpy's chain from {base} does not reach {tip} (joints {names})")
            links = full.links[:names.index(tj) + 1]
            mask = [getattr(lk, "joint_type", "fixed") != "fixed" for lk in links]
            self.chain = Chain(links, active_links_mask=mask, name=robot)
        self.mask = np.asarray(self.chain.active_links_mask, dtype=bool)
        active = [lk.name for lk, a in zip(links, self.mask) if a]
        if tuple(active) != tuple(model.q_names):
            raise Skip(f"joint order {active} differs from ros2_ik's {list(model.q_names)}")

    def _full(self, q):
        f = np.zeros(len(self.chain.links))
        f[self.mask] = q
        return f

    def fk(self, q):
        return np.asarray(self.chain.forward_kinematics(self._full(q)), dtype=float)

    def solve(self, T, q0, max_iterations, pos_tol, ori_tol):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sol = self.chain.inverse_kinematics_frame(
                np.asarray(T), initial_position=self._full(q0), orientation_mode="all",
                optimizer="least_squares", optimizer_budget=int(max_iterations), tol=1e-12)
        q = np.asarray(sol, dtype=float)[self.mask]
        Tq = self.fk(q)
        ok = (np.linalg.norm(Tq[:3, 3] - T[:3, 3]) <= pos_tol
              and _angle(Tq[:3, :3].T @ T[:3, :3]) <= ori_tol)
        return q, bool(ok)


class PinPeer(Peer):
    """Pinocchio (pip ``pin``): a damped least-squares loop in Python on pinocchio's C++ FK and
    frame Jacobian (the CLIK of pinocchio's IK example with a unit step): dM = oMf^-1 oMd,
    e = log6(dM) in the tip frame, J_e = Jlog6(dM^-1) J_local,
    dq = J_e^T (J_e J_e^T + 1e-10 I)^-1 e, then q clamped to the limits; stops when its own
    position/angle errors are within the tolerances (that is its "own flag").
    """

    name = "pin"

    def __init__(self, model, robot, tip, urdf_path):
        super().__init__(model, robot, tip, urdf_path)
        try:
            import pinocchio as pin
        except Exception as e:  # noqa: BLE001
            raise Skip(f"pinocchio (pip 'pin') not importable ({type(e).__name__}: {e})")
        self.pin = pin
        self.version = pin.__version__
        full = pin.buildModelFromUrdf(urdf_path)
        keep = set(model.q_names)
        lock = [i for i, n in enumerate(full.names) if i > 0 and n not in keep]
        self.pm = pin.buildReducedModel(full, lock, pin.neutral(full)) if lock else full
        self.pd = self.pm.createData()
        names = list(self.pm.names)[1:]
        if self.pm.nv != model.nq or tuple(names) != tuple(model.q_names):
            raise Skip(f"joints {names} (nv {self.pm.nv}) differ from ros2_ik's "
                       f"{list(model.q_names)}")
        # per ros2_ik coordinate: its index in pinocchio's q, and whether it is (cos, sin)
        self.iq = np.array([self.pm.joints[i].idx_q for i in range(1, self.pm.njoints)])
        self.cs = np.array([self.pm.joints[i].nq == 2 for i in range(1, self.pm.njoints)])
        for name in (tip, model.base):
            if not self.pm.existFrame(name):
                raise Skip(f"no frame {name}")
        self.fid = self.pm.getFrameId(tip)
        # the base link's pose in pinocchio's root frame (joints above it are locked)
        pin.framesForwardKinematics(self.pm, self.pd, self.pin_q(model.neutral_q()))
        self.oMb = self.pd.oMf[self.pm.getFrameId(model.base)].copy()

    def pin_q(self, q):
        """ros2_ik coordinates -> pinocchio's q (continuous joints as cos, sin)."""
        q = np.asarray(q, dtype=float)
        out = np.empty(self.pm.nq)
        out[self.iq] = np.where(self.cs, np.cos(q), q)
        out[self.iq[self.cs] + 1] = np.sin(q[self.cs])
        return out

    def fk(self, q):
        self.pin.framesForwardKinematics(self.pm, self.pd, self.pin_q(q))
        return np.array(self.oMb.actInv(self.pd.oMf[self.fid]).homogeneous)

    def solve(self, T, q0, max_iterations, pos_tol, ori_tol):
        pin, pm, pd, fid = self.pin, self.pm, self.pd, self.fid
        oMd = self.oMb * pin.SE3(np.ascontiguousarray(T[:3, :3]), np.ascontiguousarray(T[:3, 3]))
        q = np.array(q0, dtype=float)
        eye = 1e-10 * np.eye(6)

        def done():
            dM = pd.oMf[fid].actInv(oMd)
            return dM, (np.linalg.norm(oMd.translation - pd.oMf[fid].translation) <= pos_tol
                        and _angle(dM.rotation) <= ori_tol)
        for _ in range(int(max_iterations)):
            pq = self.pin_q(q)
            pin.framesForwardKinematics(pm, pd, pq)
            dM, ok = done()
            if ok:
                return q, True
            err = pin.log6(dM).vector
            J = pin.Jlog6(dM.inverse()) @ pin.computeFrameJacobian(pm, pd, pq, fid, pin.LOCAL)
            dq = J.T @ np.linalg.solve(J @ J.T + eye, err)
            q = np.clip(q + dq, self.lower, self.upper)
        pin.framesForwardKinematics(pm, pd, self.pin_q(q))
        return q, bool(done()[1])


CLASSES = {"rtb": RtbPeer, "ikpy": IkpyPeer, "pin": PinPeer}


def make(name: str, model, robot: str, tips, urdf_path: str, ref_fk, rng, max_dev=1e-9):
    """A ready peer, or raise :class:`Skip` with the reason. ``ref_fk(q) -> (4, 4)`` is ours."""
    if len(tips) != 1:
        raise Skip(f"multi-tip goals ({', '.join(tips)}) not supported by this peer adapter")
    peer = CLASSES[name](model, robot, tips[0], urdf_path)
    dev = peer.check_fk(ref_fk, rng)
    peer.fk_deviation = dev
    if not dev <= max_dev:
        raise Skip(f"FK differs from ros2_ik's by {dev:.3g} (> {max_dev:g}): joint order or base "
                   f"do not match")
    return peer
