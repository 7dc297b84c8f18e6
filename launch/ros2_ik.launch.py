"""Start the ros2_ik node with a parameter file and (optionally) a URDF.

    ros2 launch ros2_ik ros2_ik.launch.py                        # model from /robot_description
    ros2 launch ros2_ik ros2_ik.launch.py urdf:=/path/robot.urdf
    ros2 launch ros2_ik ros2_ik.launch.py robot:=ur              # a bundled robot
    ros2 launch ros2_ik ros2_ik.launch.py params_file:=my.yaml namespace:=arm log_level:=debug

Without ``urdf`` and ``robot`` the node waits for ``robot_description`` (as published by
robot_state_publisher, transient local) and answers NO_ROBOT_MODEL until it arrives.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from ros2_ik import robots


def generate_launch_description():
    default_params = os.path.join(get_package_share_directory('ros2_ik'), 'config',
                                  'ros2_ik.yaml')
    args = [
        DeclareLaunchArgument('urdf', default_value='',
                              description="URDF file to load ('' = use the robot_description "
                                          'topic, or the robot argument)'),
        DeclareLaunchArgument('robot', default_value='',
                              description=f"bundled robot ({', '.join(robots.names())}); "
                                          "'' = none"),
        DeclareLaunchArgument('params_file', default_value=default_params,
                              description='parameter YAML of the node'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of the node'),
        DeclareLaunchArgument('node_name', default_value='ros2_ik',
                              description='name of the node (services are ~/compute_ik ...)'),
        DeclareLaunchArgument('log_level', default_value='info',
                              description='debug, info, warn, error'),
    ]
    node = Node(
        package='ros2_ik',
        executable='ros2_ik_node',
        name=LaunchConfiguration('node_name'),
        namespace=LaunchConfiguration('namespace'),
        output='screen',
        emulate_tty=True,
        parameters=[
            LaunchConfiguration('params_file'),
            {
                'urdf_file': ParameterValue(LaunchConfiguration('urdf'), value_type=str),
                'robot': ParameterValue(LaunchConfiguration('robot'), value_type=str),
            },
        ],
        arguments=['--ros-args', '--log-level', LaunchConfiguration('log_level')],
    )
    return LaunchDescription(args + [node])
