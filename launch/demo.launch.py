"""ros2_ik on a bundled robot, with the robot description published on robot_description.

    ros2 launch ros2_ik demo.launch.py                      # panda
    ros2 launch ros2_ik demo.launch.py robot:=ur rviz:=true

- robot_state_publisher (when installed; ``use_rsp:=false`` to skip) publishes the bundled
  URDF on ``robot_description`` (transient local), and the TF of the latest IK solution: its
  ``joint_states`` input is remapped to ``/ros2_ik/solution``.
- ros2_ik_node gets the model from that topic. Without robot_state_publisher it loads the same
  bundled robot from its ``robot`` parameter instead.
- rviz2 (``rviz:=true``) shows the robot model, TF, the IK goal markers and the goal handle
  (config/ros2_ik.rviz): drag the handle at the tip and the node solves it; a second
  robot_state_publisher (frame prefix ``ghost/``, joint states from
  ``/ros2_ik/goal_marker/solution``, tied to the base by a static transform) shows the answer as
  a ghost robot.

Send a goal:  ros2 topic pub --once /ros2_ik/goal geometry_msgs/msg/PoseStamped
  "{header: {frame_id: panda_link0}, pose: {position: {x: 0.4, y: 0.1, z: 0.5},
    orientation: {x: 1.0, y: 0.0, z: 0.0, w: 0.0}}}"
"""

import os

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from ros2_ik import robots


def _have_package(name):
    try:
        get_package_share_directory(name)
    except PackageNotFoundError:
        return False
    return True


def _nodes(context):
    from ros2_ik import robots  # the bundled URDFs ship inside the Python package

    robot = LaunchConfiguration('robot').perform(context)
    urdf = robots.urdf_string(robot)  # raises ValueError listing the valid names
    share = get_package_share_directory('ros2_ik')
    use_rsp = LaunchConfiguration('use_rsp').perform(context).lower() in ('1', 'true', 'yes')
    if use_rsp and not _have_package('robot_state_publisher'):
        print('[demo.launch.py] robot_state_publisher is not installed: the ros2_ik node loads '
              f'the bundled robot {robot!r} from its robot parameter instead')
        use_rsp = False
    actions = []
    if use_rsp:
        actions.append(Node(
            package='robot_state_publisher', executable='robot_state_publisher',
            output='screen',
            parameters=[{'robot_description': ParameterValue(urdf, value_type=str)}],
            remappings=[('joint_states', '/ros2_ik/solution')]))
    actions.append(Node(
        package='ros2_ik', executable='ros2_ik_node', name='ros2_ik', output='screen',
        emulate_tty=True,
        parameters=[os.path.join(share, 'config', 'ros2_ik.yaml'),
                    {'robot': '' if use_rsp else robot}]))
    rviz = LaunchConfiguration('rviz').perform(context).lower() in ('1', 'true', 'yes')
    if rviz and use_rsp and _have_package('tf2_ros'):
        base = robots.ROBOTS[robot]['base']
        actions.append(Node(
            package='robot_state_publisher', executable='robot_state_publisher',
            name='ghost_state_publisher', namespace='ghost', output='screen',
            parameters=[{'robot_description': ParameterValue(urdf, value_type=str),
                         'frame_prefix': 'ghost/'}],
            remappings=[('joint_states', '/ros2_ik/goal_marker/solution')]))
        actions.append(Node(
            package='tf2_ros', executable='static_transform_publisher', output='screen',
            arguments=['--frame-id', base, '--child-frame-id', 'ghost/' + base]))
    if rviz:
        actions.append(Node(
            package='rviz2', executable='rviz2', output='screen',
            arguments=['-d', os.path.join(share, 'config', 'ros2_ik.rviz'),
                       '-f', robots.ROBOTS[robot]['base']]))
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument('robot', default_value='panda',
                              description='bundled robot: ' + ', '.join(robots.names())),
        DeclareLaunchArgument('use_rsp', default_value='true',
                              description='publish robot_description with robot_state_publisher'),
        DeclareLaunchArgument('rviz', default_value='false', description='start rviz2'),
        OpaqueFunction(function=_nodes),
    ])

