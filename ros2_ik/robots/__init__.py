"""Robot models bundled with ros2_ik.

The URDF files in this directory were written by hand for this project:

* ``panda``    -- 7-DOF Franka-Panda-like arm (modified DH parameters).
* ``ur``       -- 6-DOF UR5-like arm (standard DH parameters).
* ``dual_arm`` -- branched robot: waist + two mirrored 7-DOF arms + head.
* ``misc``     -- exercises every URDF joint type (floating, planar,
  prismatic, continuous, revolute, fixed, mimic).

Usage::

    from ros2_ik import robots
    xml = robots.urdf_string('panda')
    info = robots.ROBOTS['panda']   # file, root, base, tip, tips, description

Only the standard library is used here.
"""

import pathlib

__all__ = ['ROBOTS', 'names', 'path', 'urdf_string', 'srdf_string', 'info']

_DIR = pathlib.Path(__file__).resolve().parent

#: name -> description of a bundled robot.
#:   file        -- URDF file name in this directory
#:   root        -- the URDF's root link
#:   base        -- default base link of the kinematic chain(s)
#:   tip         -- default tip link (first of ``tips``): the tip the node uses when a request
#:                  names none (``ros2_ik.ros.robot.default_tip_of``: the end of the longest
#:                  chain; a test keeps the two equal)
#:   tips        -- default tip link(s), a tuple
#:   srdf        -- SRDF file with the robot's planning groups (absent: none)
#:   description -- one-line summary
ROBOTS = {
    'panda': {
        'file': 'panda.urdf',
        'root': 'panda_link0',
        'base': 'panda_link0',
        'tip': 'panda_hand_tcp',
        'tips': ('panda_hand_tcp',),
        'srdf': 'panda.srdf',
        'description': '7-DOF Franka-Panda-like arm from the published modified DH '
                       'parameters; panda_link8 is the flange, panda_hand_tcp the '
                       'gripper TCP (0.1034 m beyond the flange, rotated -pi/4).',
    },
    'ur': {
        'file': 'ur.urdf',
        'root': 'base_link',
        'base': 'base_link',
        'tip': 'tool0',
        'tips': ('tool0',),
        'srdf': 'ur.srdf',
        'description': '6-DOF UR5-like arm from the published standard DH parameters; '
                       'base_link is the DH base frame, tool0 the flange.',
    },
    'dual_arm': {
        'file': 'dual_arm.urdf',
        'root': 'base_link',
        'base': 'base_link',
        'tip': 'left_tool',
        'tips': ('left_tool', 'right_tool'),
        'srdf': 'dual_arm.srdf',
        'description': 'Branched robot: revolute waist, fixed head and two mirrored '
                       '7-DOF arms (left_*/right_*) ending in left_tool/right_tool.',
    },
    'misc': {
        'file': 'misc.urdf',
        'root': 'world',
        'base': 'base',
        'tip': 'finger_left',
        'tips': ('finger_left', 'tool'),
        'description': 'Test robot with floating, planar, prismatic, continuous, '
                       'revolute, fixed and mimic joints and a non-axis-aligned axis.',
    },
}


def names():
    """Sorted list of the bundled robot names."""
    return sorted(ROBOTS)


def info(name):
    """The ``ROBOTS`` entry for *name* (raises ``ValueError`` if unknown)."""
    try:
        return ROBOTS[name]
    except (KeyError, TypeError):
        raise ValueError('unknown robot %r; valid names are: %s'
                         % (name, ', '.join(names()))) from None


def path(name):
    """Absolute :class:`pathlib.Path` of the URDF file of robot *name*."""
    return _DIR / info(name)['file']


def urdf_string(name):
    """The URDF XML text of robot *name*."""
    return path(name).read_text(encoding='utf-8')


def srdf_string(name):
    """The SRDF XML text (planning groups) of robot *name*, or None if it has none."""
    f = info(name).get('srdf')
    return (_DIR / f).read_text(encoding='utf-8') if f else None
