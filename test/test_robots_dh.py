"""Independent checks of the bundled robot models in ``ros2_ik/robots``.

Nothing here uses the kinematics code of ros2_ik: the URDF files are parsed
with ``xml.etree`` only, a tiny forward-kinematics routine is written below
(origin xyz/rpy -> 4x4, revolute/continuous joints via Rodrigues' formula,
prismatic joints as a translation along the axis), and the results are
compared with products of DH transforms written straight from the published
tables, and with a few poses worked out by hand.
"""

import importlib.util
import math
import pathlib
import xml.etree.ElementTree as ET

import numpy as np
import pytest

ROBOTS_DIR = pathlib.Path(__file__).resolve().parent.parent / 'ros2_ik' / 'robots'
PI = math.pi
TOL = 1e-9


# ---------------------------------------------------------------------------
# ros2_ik.robots, loaded from its file so that the check does not depend on
# whatever ros2_ik/__init__.py imports
# ---------------------------------------------------------------------------

def _load_robots_module():
    spec = importlib.util.spec_from_file_location(
        '_ros2_ik_robots_under_test', ROBOTS_DIR / '__init__.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


robots = _load_robots_module()


# ---------------------------------------------------------------------------
# Minimal URDF reader and forward kinematics
# ---------------------------------------------------------------------------

def _floats(text, default):
    return [float(v) for v in (text if text is not None else default).split()]


def parse_urdf(file_name):
    """Return (root element, links, joints by child link, joints by name)."""
    root = ET.parse(ROBOTS_DIR / file_name).getroot()
    links = [link.get('name') for link in root.findall('link')]
    by_child, by_name = {}, {}
    for j in root.findall('joint'):
        origin = j.find('origin')
        axis = j.find('axis')
        limit = j.find('limit')
        mimic = j.find('mimic')
        joint = {
            'name': j.get('name'),
            'type': j.get('type'),
            'parent': j.find('parent').get('link'),
            'child': j.find('child').get('link'),
            'xyz': _floats(origin.get('xyz') if origin is not None else None, '0 0 0'),
            'rpy': _floats(origin.get('rpy') if origin is not None else None, '0 0 0'),
            'axis': _floats(axis.get('xyz') if axis is not None else None, '1 0 0'),
            'limit': None if limit is None else dict(limit.attrib),
            'mimic': None if mimic is None else dict(mimic.attrib),
        }
        assert joint['child'] not in by_child, 'link with two parents: %s' % joint['child']
        by_child[joint['child']] = joint
        by_name[joint['name']] = joint
    return root, links, by_child, by_name


def rot_x(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=float)


def rot_y(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]], dtype=float)


def rot_z(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=float)


def homogeneous(R=None, p=None):
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def origin_transform(xyz, rpy):
    # URDF: rpy are fixed-axis roll (x), pitch (y), yaw (z): R = Rz(y) Ry(p) Rx(r)
    r, p, y = rpy
    return homogeneous(rot_z(y) @ rot_y(p) @ rot_x(r), xyz)


def rodrigues(axis, angle):
    k = np.asarray(axis, dtype=float)
    k = k / np.linalg.norm(k)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * (K @ K)


def chain(by_child, base, tip):
    """Joints from base to tip, in order."""
    joints = []
    link = tip
    while link != base:
        assert link in by_child, '%s is not below %s' % (tip, base)
        joints.append(by_child[link])
        link = by_child[link]['parent']
    return joints[::-1]


def movable(joints):
    return [j for j in joints if j['type'] != 'fixed']


def fk(by_child, base, tip, q):
    """Pose of tip in base for the joint values q (one per non-fixed joint)."""
    joints = chain(by_child, base, tip)
    assert len(movable(joints)) == len(q)
    T = np.eye(4)
    values = iter(q)
    for j in joints:
        T = T @ origin_transform(j['xyz'], j['rpy'])
        if j['type'] in ('revolute', 'continuous'):
            T = T @ homogeneous(R=rodrigues(j['axis'], next(values)))
        elif j['type'] == 'prismatic':
            a = np.asarray(j['axis'], dtype=float)
            T = T @ homogeneous(p=next(values) * a / np.linalg.norm(a))
        else:
            assert j['type'] == 'fixed', j['type']
    return T


def random_within_limits(rng, joints):
    return np.array([rng.uniform(float(j['limit']['lower']), float(j['limit']['upper']))
                     for j in joints])


# ---------------------------------------------------------------------------
# DH products written directly from the published tables
# ---------------------------------------------------------------------------

def trans(x=0.0, y=0.0, z=0.0):
    return homogeneous(p=[x, y, z])


# Franka Emika Panda, modified (Craig) DH: (a_{i-1}, d_i, alpha_{i-1})
PANDA_MDH = [
    (0.0, 0.333, 0.0),
    (0.0, 0.0, -PI / 2),
    (0.0, 0.316, PI / 2),
    (0.0825, 0.0, PI / 2),
    (-0.0825, 0.384, -PI / 2),
    (0.0, 0.0, PI / 2),
    (0.088, 0.0, PI / 2),
]
PANDA_FLANGE = (0.0, 0.107, 0.0)


def panda_mdh(q):
    """T = prod Rx(alpha_{i-1}) Tx(a_{i-1}) Rz(q_i) Tz(d_i), then the flange."""
    T = np.eye(4)
    for (a, d, alpha), qi in zip(PANDA_MDH + [PANDA_FLANGE], list(q) + [0.0]):
        T = (T @ homogeneous(R=rot_x(alpha)) @ trans(x=a)
             @ homogeneous(R=rot_z(qi)) @ trans(z=d))
    return T


# UR5, standard DH: (a_i, d_i, alpha_i)
UR5_DH = [
    (0.0, 0.089159, PI / 2),
    (-0.425, 0.0, 0.0),
    (-0.39225, 0.0, 0.0),
    (0.0, 0.10915, PI / 2),
    (0.0, 0.09465, -PI / 2),
    (0.0, 0.0823, 0.0),
]


def ur5_dh(q):
    """T = prod Rz(q_i) Tz(d_i) Tx(a_i) Rx(alpha_i)."""
    T = np.eye(4)
    for (a, d, alpha), qi in zip(UR5_DH, q):
        T = (T @ homogeneous(R=rot_z(qi)) @ trans(z=d) @ trans(x=a)
             @ homogeneous(R=rot_x(alpha)))
    return T


def assert_pose(T, position, rotation, tol=TOL):
    np.testing.assert_allclose(T[:3, 3], position, rtol=0, atol=tol)
    np.testing.assert_allclose(T[:3, :3], rotation, rtol=0, atol=tol)


# ---------------------------------------------------------------------------
# Generic validity of every bundled URDF
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('name', sorted(robots.ROBOTS))
def test_urdf_is_valid(name):
    entry = robots.ROBOTS[name]
    root, links, by_child, by_name = parse_urdf(entry['file'])
    assert root.tag == 'robot'
    assert len(links) == len(set(links)), 'duplicate link names'
    assert len(by_name) == len(root.findall('joint')), 'duplicate joint names'
    for j in by_child.values():
        assert j['parent'] in links and j['child'] in links, j['name']
        assert j['type'] in ('revolute', 'continuous', 'prismatic', 'fixed',
                             'floating', 'planar'), j['type']
        if j['type'] in ('revolute', 'prismatic'):
            lim = j['limit']
            assert lim is not None, j['name']
            for key in ('lower', 'upper', 'effort', 'velocity'):
                assert key in lim, (j['name'], key)
            assert float(lim['lower']) < float(lim['upper']), j['name']
            assert float(lim['effort']) > 0 and float(lim['velocity']) > 0, j['name']
        if j['type'] in ('revolute', 'continuous', 'prismatic', 'planar'):
            assert np.linalg.norm(j['axis']) == pytest.approx(1.0, abs=1e-12), j['name']
    roots = [link for link in links if link not in by_child]
    assert roots == [entry['root']]
    # every link hangs off the root (no cycles, no detached pieces)
    for link in links:
        chain(by_child, entry['root'], link)
    for link in (entry['base'], entry['tip']) + tuple(entry['tips']):
        assert link in links
    assert entry['tip'] == entry['tips'][0]
    for tip in entry['tips']:
        chain(by_child, entry['base'], tip)


def test_robots_module_api():
    assert set(robots.ROBOTS) == {'panda', 'ur', 'dual_arm', 'misc'}
    for name, entry in robots.ROBOTS.items():
        p = robots.path(name)
        assert isinstance(p, pathlib.Path) and p.is_file() and p.is_absolute()
        assert p.name == entry['file']
        text = robots.urdf_string(name)
        assert ET.fromstring(text).tag == 'robot'
        # lxml (used by urdf_parser_py) refuses str input that carries an
        # encoding declaration, so the files must not have one
        assert 'encoding=' not in text.split('?>', 1)[0]
        assert text == p.read_text(encoding='utf-8')
        assert entry['description']
    with pytest.raises(ValueError) as excinfo:
        robots.path('no_such_robot')
    for name in ('panda', 'ur', 'dual_arm', 'misc'):
        assert name in str(excinfo.value)
    with pytest.raises(ValueError):
        robots.urdf_string('PANDA')


# ---------------------------------------------------------------------------
# Panda
# ---------------------------------------------------------------------------

PANDA_JOINTS = ['panda_joint%d' % i for i in range(1, 8)]
# published limits: (lower, upper, effort, velocity)
PANDA_LIMITS = [
    (-2.8973, 2.8973, 87, 2.1750),
    (-1.7628, 1.7628, 87, 2.1750),
    (-2.8973, 2.8973, 87, 2.1750),
    (-3.0718, -0.0698, 87, 2.1750),
    (-2.8973, 2.8973, 12, 2.6100),
    (-0.0175, 3.7525, 12, 2.6100),
    (-2.8973, 2.8973, 12, 2.6100),
]


@pytest.fixture(scope='module')
def panda():
    return parse_urdf('panda.urdf')[2]


def test_panda_chain_and_limits(panda):
    joints = chain(panda, 'panda_link0', 'panda_hand_tcp')
    assert [j['name'] for j in joints] == PANDA_JOINTS + [
        'panda_joint8', 'panda_hand_joint', 'panda_hand_tcp_joint']
    assert [j['type'] for j in joints] == ['revolute'] * 7 + ['fixed'] * 3
    for j, (lower, upper, effort, velocity) in zip(joints, PANDA_LIMITS):
        lim = j['limit']
        assert (float(lim['lower']), float(lim['upper'])) == (lower, upper)
        assert (float(lim['effort']), float(lim['velocity'])) == (effort, velocity)
        assert j['axis'] == [0.0, 0.0, 1.0]


def test_panda_matches_modified_dh(panda):
    rng = np.random.default_rng(20240601)
    joints = movable(chain(panda, 'panda_link0', 'panda_link8'))
    hand = homogeneous(R=rot_z(-PI / 4)) @ trans(z=0.1034)
    for _ in range(20):
        q = random_within_limits(rng, joints)
        expected = panda_mdh(q)
        np.testing.assert_allclose(fk(panda, 'panda_link0', 'panda_link8', q),
                                   expected, rtol=0, atol=TOL)
        np.testing.assert_allclose(fk(panda, 'panda_link0', 'panda_hand_tcp', q),
                                   expected @ hand, rtol=0, atol=TOL)


def test_panda_hand_checked_poses(panda):
    # q = 0 (note: q4 = 0 is outside the joint-4 limits; this is a pure FK check).
    # All joint axes are vertical or cancel: x = a4 + a5 + a7 = 0.0825 - 0.0825
    # + 0.088 = 0.088, z = d1 + d3 + d5 - d_flange = 0.333 + 0.316 + 0.384
    # - 0.107 = 0.926 (alpha7 = pi/2 after alpha6 = pi/2 leaves z pointing down).
    flange_down = np.diag([1.0, -1.0, -1.0])
    T = fk(panda, 'panda_link0', 'panda_link8', [0.0] * 7)
    assert_pose(T, [0.088, 0.0, 0.926], flange_down)
    assert_pose(panda_mdh([0.0] * 7), [0.088, 0.0, 0.926], flange_down)
    # The TCP is 0.1034 further along the (downward) flange z axis, and the hand
    # is turned by -pi/4 about it: R = diag(1,-1,-1) Rz(-pi/4).
    c = math.sqrt(0.5)
    T = fk(panda, 'panda_link0', 'panda_hand_tcp', [0.0] * 7)
    assert_pose(T, [0.088, 0.0, 0.926 - 0.1034],
                [[c, c, 0.0], [c, -c, 0.0], [0.0, 0.0, -1.0]])
    # q = (0, 0, 0, -pi/2, 0, pi/2, 0), within limits, worked frame by frame:
    # frame 4 at (0.0825, 0, 0.649) with x4 pointing down after q4 = -pi/2;
    # a5 = -0.0825 along x4 lifts to z = 0.7315, d5 = 0.384 runs along +x
    # (x = 0.4665); q6 = pi/2 turns x6 to +x, a7 = 0.088 -> x = 0.5545;
    # alpha7 = pi/2 points z7 down, d_flange = 0.107 -> z = 0.6245.
    q = [0.0, 0.0, 0.0, -PI / 2, 0.0, PI / 2, 0.0]
    T = fk(panda, 'panda_link0', 'panda_link8', q)
    assert_pose(T, [0.5545, 0.0, 0.6245], flange_down)


# ---------------------------------------------------------------------------
# UR5
# ---------------------------------------------------------------------------

UR_JOINTS = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint',
             'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint']


@pytest.fixture(scope='module')
def ur():
    return parse_urdf('ur.urdf')[2]


def test_ur_chain_and_limits(ur):
    joints = chain(ur, 'base_link', 'tool0')
    assert [j['name'] for j in joints] == UR_JOINTS + ['tool0_joint']
    assert [j['child'] for j in joints] == [
        'shoulder_link', 'upper_arm_link', 'forearm_link', 'wrist_1_link',
        'wrist_2_link', 'wrist_3_link', 'tool0']
    assert [j['type'] for j in joints] == ['revolute'] * 6 + ['fixed']
    for j in joints[:6]:
        bound = PI if j['name'] == 'elbow_joint' else 2 * PI
        assert float(j['limit']['lower']) == pytest.approx(-bound, abs=1e-12)
        assert float(j['limit']['upper']) == pytest.approx(bound, abs=1e-12)


def test_ur_matches_standard_dh(ur):
    rng = np.random.default_rng(7)
    joints = movable(chain(ur, 'base_link', 'tool0'))
    for _ in range(20):
        q = random_within_limits(rng, joints)
        np.testing.assert_allclose(fk(ur, 'base_link', 'tool0', q), ur5_dh(q),
                                   rtol=0, atol=TOL)


def test_ur_hand_checked_poses(ur):
    # q = 0, standard DH worked by hand (base_link = DH frame 0, no extra pi
    # rotation about z as in the vendor description, hence negative x and y):
    #   Tz(d1) Rx(pi/2): frame 1 at (0, 0, d1), z1 = -y, y1 = +z
    #   a2 + a3 along x:                 x = -0.425 - 0.39225 = -0.81725
    #   d4 along z1 = -y:                y = -0.10915
    #   Rx(pi/2): z4 = -z;  d5 along it: z = 0.089159 - 0.09465 = -0.005491
    #   Rx(-pi/2): z5 = -y; d6 along it: y = -0.10915 - 0.0823 = -0.19145
    #   final axes: x = +x, y = +z, z = -y, i.e. R = Rx(pi/2)
    T = fk(ur, 'base_link', 'tool0', [0.0] * 6)
    assert_pose(T, [-0.81725, -0.19145, -0.005491], rot_x(PI / 2))
    assert_pose(ur5_dh([0.0] * 6), [-0.81725, -0.19145, -0.005491], rot_x(PI / 2))
    # q = (0, -pi/2, 0, -pi/2, 0, 0): arm straight up.  q2 = -pi/2 turns x2 to
    # -z, so a2 + a3 rise to z = d1 + 0.81725 = 0.906409; q4 = -pi/2 and
    # alpha4 = pi/2 make z4 = +z, d5 -> z = 1.001059; y = -(d4 + d6) = -0.19145;
    # final axes x = -x, y = -z, z = -y.
    q = [0.0, -PI / 2, 0.0, -PI / 2, 0.0, 0.0]
    T = fk(ur, 'base_link', 'tool0', q)
    assert_pose(T, [0.0, -0.19145, 1.001059],
                [[-1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, -1.0, 0.0]])


# ---------------------------------------------------------------------------
# dual_arm
# ---------------------------------------------------------------------------

def test_dual_arm_structure_and_poses():
    root, links, by_child, by_name = parse_urdf('dual_arm.urdf')
    assert [link for link in links if link not in by_child] == ['base_link']
    assert by_name['waist_joint']['type'] == 'revolute'
    assert by_name['waist_joint']['axis'] == [0.0, 0.0, 1.0]
    assert by_name['head_joint']['type'] == 'fixed'
    assert by_name['head_joint']['child'] == 'head_link'
    for side in ('left', 'right'):
        joints = chain(by_child, 'base_link', side + '_tool')
        assert [j['name'] for j in joints] == (
            ['waist_joint'] + ['%s_joint%d' % (side, i) for i in range(1, 8)]
            + [side + '_tool_joint'])
        assert [j['type'] for j in joints] == ['revolute'] * 8 + ['fixed']
        # alternating local z / y axes
        assert [j['axis'] for j in joints[1:8]] == [
            [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]] * 3 + [[0.0, 0.0, 1.0]]
    # q = 0, by hand: shoulder at (0, +-0.2, 0.4 + 0.45); 0.05 + 0.15 + 0.15
    # outwards to the elbow (y = +-0.55); the forearm bends forward: 0.125 +
    # 0.125 + 0.06 along x (x = 0.31); the wrist bends inwards and the tool is
    # 0.08 further (y = +-0.47); tool z points to the robot's middle.
    T = fk(by_child, 'base_link', 'left_tool', [0.0] * 8)
    assert_pose(T, [0.31, 0.47, 0.85],
                [[-1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, -1.0, 0.0]])
    T = fk(by_child, 'base_link', 'right_tool', [0.0] * 8)
    assert_pose(T, [0.31, -0.47, 0.85],
                [[-1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    # mirror symmetry in the xz plane: right(s * q) = M left(q), M = diag(1,-1,1)
    M = np.diag([1.0, -1.0, 1.0])
    signs = np.array([-1, -1, 1, -1, 1, -1, 1, -1], dtype=float)
    rng = np.random.default_rng(3)
    for _ in range(10):
        q = rng.uniform(-1.5, 1.5, 8)
        left = fk(by_child, 'base_link', 'left_tool', q)
        right = fk(by_child, 'base_link', 'right_tool', signs * q)
        np.testing.assert_allclose(right[:3, 3], M @ left[:3, 3], rtol=0, atol=TOL)


# ---------------------------------------------------------------------------
# misc
# ---------------------------------------------------------------------------

def test_misc_joint_types():
    root, links, by_child, by_name = parse_urdf('misc.urdf')
    assert [link for link in links if link not in by_child] == ['world']
    types = [j['type'] for j in by_name.values()]
    for kind in ('floating', 'planar', 'prismatic', 'continuous', 'revolute', 'fixed'):
        assert kind in types, kind
    assert types.count('floating') == 1 and types.count('planar') == 1
    assert by_name['base_joint']['type'] == 'floating'
    assert by_name['base_joint']['parent'] == 'world'
    assert by_name['planar_joint']['axis'] == [0.0, 0.0, 1.0]

    mimics = [j for j in by_name.values() if j['mimic'] is not None]
    assert len(mimics) == 1
    mimic = mimics[0]
    assert mimic['name'] == 'finger_right_joint' and mimic['child'] == 'finger_right'
    master = by_name[mimic['mimic']['joint']]
    assert master['name'] == 'finger_left_joint' and master['type'] == 'prismatic'
    multiplier = float(mimic['mimic']['multiplier'])
    offset = float(mimic['mimic']['offset'])
    assert (multiplier, offset) == (-1.0, 0.01)
    # the mimic's own limits are the image of the master's range
    image = sorted(multiplier * float(master['limit'][k]) + offset
                   for k in ('lower', 'upper'))
    assert image == pytest.approx([float(mimic['limit']['lower']),
                                   float(mimic['limit']['upper'])])

    tool = chain(by_child, 'base', 'tool')
    assert [(j['name'], j['type']) for j in tool] == [
        ('lift_joint', 'prismatic'), ('turret_joint', 'continuous'),
        ('shoulder_joint', 'revolute'), ('elbow_joint', 'revolute'),
        ('wrist_joint', 'revolute'), ('tool_joint', 'fixed')]
    finger = chain(by_child, 'base', 'finger_right')
    assert [j['name'] for j in finger][-2:] == ['wrist_joint', 'finger_right_joint']
    assert finger[-2]['type'] == 'revolute' and finger[-1]['mimic'] is not None

    # a joint axis that is not a coordinate axis, and non-trivial rpy origins
    assert by_name['shoulder_joint']['axis'] == [0.0, 0.6, 0.8]
    assert sum(1 for j in by_name.values() if sum(v != 0 for v in j['rpy']) >= 2) >= 2

    # sanity check of the local FK through a prismatic joint
    T0 = fk(by_child, 'base', 'lift_link', [0.0])
    T1 = fk(by_child, 'base', 'lift_link', [0.25])
    np.testing.assert_allclose(T1[:3, 3] - T0[:3, 3], [0.0, 0.0, 0.25], atol=TOL)


def test_default_tips_one_source_of_truth():
    """ROBOTS' default tip is the node's default tip (``default_tip_of``), and the
    documentation's bundled-robot table (docs/robots.md) lists ROBOTS' tips and SRDF groups."""
    import re

    from ros2_ik import load_robot
    from ros2_ik.model import parse_srdf
    from ros2_ik.ros.robot import default_tip_of

    readme = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "robots.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", readme, re.M)}
    for name, entry in robots.ROBOTS.items():
        model = load_robot(name)
        assert entry['tip'] == default_tip_of(model), name
        cells = rows[name].split("|")
        assert re.findall(r"`(\w+)`", cells[3]) == list(entry['tips']), name
        srdf = robots.srdf_string(name)
        groups = parse_srdf(srdf).group_names if srdf else []
        listed = [g for g in re.findall(r"`(\w+)`", cells[4]) if g in groups]
        assert sorted(listed) == sorted(groups), name
        for g in groups:  # every bundled group fits its robot
            parse_srdf(srdf).group(model, g)
