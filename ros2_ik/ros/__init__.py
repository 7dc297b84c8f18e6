"""The ROS 2 surface of ros2_ik: everything that imports rclpy or message types lives here.

- :mod:`ros2_ik.ros.node`        -- ``KinematicsNode`` (services, action, topics) and ``main()``
- :mod:`ros2_ik.ros.services`    -- request handling: messages -> core calls -> messages
- :mod:`ros2_ik.ros.conversions` -- message <-> NumPy, including the compact (flat array) forms
- :mod:`ros2_ik.ros.robot`       -- the loaded robot model as one immutable object (swapped whole)
- :mod:`ros2_ik.ros.params`      -- every ROS parameter: type, default, range, description
- :mod:`ros2_ik.ros.codes`       -- IKErrorCode values and the request error type
- :mod:`ros2_ik.ros.markers`, :mod:`ros2_ik.ros.diagnostics`, :mod:`ros2_ik.ros.moveit_compat`

The harness that starts the node as a process and calls it (tests, bench) is
``test/ros_testing.py``, outside the installed package.

Nothing here is imported by ``import ros2_ik``: the core runs without ROS.
"""
