# ruff: noqa: E501  (one table row per line: the documentation is generated from them)
"""The node's ROS surface as data: every topic, service and action with its type and what it
is for, and every result code with its meaning. The documentation's node reference is
generated from these tables (``docs/conf.py``), and a test checks that the node has exactly
these entities (``test/test_ros_units.py``). No rclpy here."""

from __future__ import annotations

__all__ = ["SURFACE", "CODE_DOCS", "markdown_surface", "markdown_codes"]

#: (name, kind: "sub" | "pub" | "service" | "action", type, what it is for)
SURFACE = (
    ('robot_description', 'sub',
     'std_msgs/String, reliable + transient local, depth 1',
     'the URDF, as robot_state_publisher publishes it; a new one replaces the model'),
    ('robot_description_semantic', 'sub',
     'std_msgs/String, reliable + transient local, depth 1',
     'the SRDF, as move_group publishes it: planning groups for `group_name`; a new one replaces the groups (a malformed one is logged and the groups stay)'),
    ('joint_states', 'sub',
     'sensor_msgs/JointState, best effort, depth 500',
     'default seed, matched by name; partial and foreign joints allowed; not waited on: taken by the node when a request needs a seed and every 0.1 s; only the latest message per set of names is kept (at most 8 sets), turned into a seed when a request needs one'),
    ('~/goal', 'sub',
     'geometry_msgs/PoseStamped, reliable, depth 100',
     'one goal for the default tip; seed from `joint_states`; solved in order'),
    ('~/solution', 'pub',
     'sensor_msgs/JointState, reliable, depth 100',
     "the solution of a `~/goal` (header.frame_id = the goal's); a goal that is not solved is logged (warning, with the reason) and nothing is published"),
    ('~/markers', 'pub',
     'visualization_msgs/MarkerArray',
     'per IK request: goal arrows (green solved, red not, grey invalid), reached positions, error lines; built only while subscribed'),
    ('/diagnostics', 'pub',
     'diagnostic_msgs/DiagnosticArray',
     'status `ros2_ik: kinematics`: backend, model (name, dof, source), requests and rate, success rate, last error, a rejected robot_description; the planning scene (version, obstacles, attached objects, a message not applied) and the collision model (its warnings, links without spheres)'),
    ('~/compute_ik', 'service',
     'ros2_ik_interfaces/srv/ComputeIK',
     'batched IK, N problems x K tips, friendly (PoseStamped) or compact (flat float64[]) form; optional `group_name` (SRDF planning group)'),
    ('~/compute_fk', 'service',
     'ros2_ik_interfaces/srv/ComputeFK',
     'batched FK, M states x L links, either form'),
    ('~/compute_jacobian', 'service',
     'ros2_ik_interfaces/srv/ComputeJacobian',
     'geometric / frame-to-frame / numerical Jacobian'),
    ('~/check_states', 'service',
     'ros2_ik_interfaces/srv/CheckStates',
     'N states (or a joint path checked densely at `path_resolution`), friendly or compact: per state within the limits, clearance to the world and between the links (exact on the collision model), the nearest pairs, the world version, the first invalid state; every state answered'),
    ('~/trajectory_seed', 'action',
     'ros2_ik_interfaces/action/TrajectorySeed',
     'IK along keyframe poses (linear + slerp), feedback `nodes_done/total/failed`, cancel'),
    ('~/reach_study', 'action',
     'ros2_ik_interfaces/action/ReachStudy',
     'a reach study on the loaded model (see the reach studies page), feedback `targets_done/total`, `reached`, `elapsed`, `eta`, cancel'),
    ('~/base_placement', 'action',
     'ros2_ik_interfaces/action/BasePlacement',
     'where to put the robot: base poses (x y z yaw) in a region of the base frame scored by the fraction of task poses solved clear of the live world, then manipulability; coarse grid then refinement, feedback `stage`, `candidates_done/total`, `best_fraction`, `eta`, cancel and timeout (see the base placement page)'),
    ('~/reach_map', 'pub',
     'sensor_msgs/PointCloud2, reliable + transient local, depth 1',
     "the last finished study's map: one point per voxel, fields `x y z reachability manipulability` (float32, base frame); shown by `config/ros2_ik.rviz`"),
    ("~/solve_ik", "service", "moveit_msgs/srv/GetPositionIK",
     "IK for MoveIt's srv_kinematics_plugin and MoveIt-speaking clients (avoid_collisions honoured); only when moveit_msgs is importable (else logged once at start-up); see the MoveIt page"),
    ("~/solve_fk", "service", "moveit_msgs/srv/GetPositionFK",
     "FK for MoveIt-speaking clients; only when moveit_msgs is importable"),
    ("~/world", "sub", "ros2_ik_interfaces/msg/WorldUpdate, reliable, depth 100",
     "changes of the world (add, move, remove, clear obstacles by id); one that cannot be applied is logged and the world stays"),
    ("~/update_world", "service", "ros2_ik_interfaces/srv/UpdateWorld",
     "changes of the world, answered once in use: the world's version and obstacle ids, or the reason it was refused"),
    ("~/collision_markers", "pub", "visualization_msgs/MarkerArray, reliable + transient local, depth 1",
     "the world's obstacles, and the last collision-aware answer's spheres coloured by clearance"),
    ("~/goal_marker/update", "pub", "visualization_msgs/InteractiveMarkerUpdate, reliable, depth 100",
     "goal handles for rviz (interactive markers protocol; an InteractiveMarkers display on `~/goal_marker`): a 6-DOF handle at each of `interactive.tips` (default: the default tip), coloured by the last answer (green solved, orange colliding, red not solved); only with `interactive.enabled`"),
    ("~/goal_marker/feedback", "sub", "visualization_msgs/InteractiveMarkerFeedback, depth 100",
     "drags of a handle: every handle's pose is solved as one problem (seeded from the last answer, `interactive.group`, `interactive.timeout`, `collision.enabled`); only the latest waits while one is solved"),
    ("~/goal_marker/get_interactive_markers", "service", "visualization_msgs/srv/GetInteractiveMarkers",
     "the handle's state, as rviz asks for it when it connects"),
    ("~/goal_marker/solution", "pub", "sensor_msgs/JointState, depth 10",
     "(`interactive.solution_topic`) the answer to the handles' poses, when solved (a robot_state_publisher with a frame prefix shows it as a ghost robot: `launch/demo.launch.py`)"),
    ("collision_object", "sub", "moveit_msgs/CollisionObject, depth 100",
     "MoveIt's world objects: ADD / APPEND / MOVE / REMOVE of primitives, meshes (the boxes of the cells they pass through, `collision.mesh_resolution`) and planes; applied in order, whole or not at all (an error names the object and the field, in the log and `scene_error` of the diagnostics); only when moveit_msgs is importable"),
    ("attached_collision_object", "sub", "moveit_msgs/AttachedCollisionObject, depth 100",
     "objects attached to a link: they move with it and are kept clear of the world and of the robot but the link and `touch_links`; a detached object goes back into the world; only when moveit_msgs is importable"),
    ("(octomap.topic)", "sub", "octomap_msgs/Octomap, depth 1",
     "only when `octomap.topic` is set (octomap_server's `octomap_binary` or `octomap_full`): each map replaces the last as obstacles `<octomap>/k` (its occupied cells, exactly), in its `header.frame_id`; a map that cannot be used removes the last and makes collision-aware requests COLLISION_CHECKING_UNAVAILABLE naming it (`scene_unsupported`) until a good one comes"),
    ("(point_cloud.topic)", "sub", "sensor_msgs/PointCloud2, sensor data QoS",
     "only when `point_cloud.topic` is set: each cloud (at most `point_cloud.max_rate` a second) replaces the last as obstacles `<cloud>/k`: the cells of `point_cloud.resolution` its points fall in, within `point_cloud.max_range` of the sensor, less the robot's own points (its spheres at the current joint states grown by `point_cloud.padding`, once joint states gave every joint); a cloud that cannot be used removes the last and makes collision-aware requests COLLISION_CHECKING_UNAVAILABLE naming it (`scene_unsupported`) until a good one comes"),
    ("planning_scene", "sub", "moveit_msgs/PlanningScene, depth 10",
     "MoveIt's planning scene, a diff or a whole one: world objects, attached objects, the allowed collision matrix, link padding and scale, and its octomap (binary or full; its occupied cells as exact boxes `<octomap>/k`, each map replacing the last; `collision.ignore_octomap` leaves it out); only when moveit_msgs is importable"),
    ("monitored_planning_scene", "sub", "moveit_msgs/PlanningScene, depth 10",
     "as planning_scene, from move_group's monitor; only when moveit_msgs is importable"),
)

#: result code name -> what it means (values: :mod:`.codes`)
CODE_DOCS = {
    'SUCCESS': 'every problem / node solved',
    'NO_IK_SOLUTION': 'some problems ran to completion without reaching the tolerances (overall), or this one (per problem)',
    'TIMED_OUT': 'the time budget ran out',
    'PREEMPTED': 'the action was cancelled (nodes not solved yet are `PREEMPTED`)',
    'INVALID_GOAL': 'a pose with NaN/inf or a quaternion whose norm is not 1 (±1e-3): per problem, the others are solved; overall when any goal was invalid',
    'INVALID_ROBOT_STATE': "seed / FK state / Jacobian state: unknown joint, length mismatch, non-finite or beyond ±1e6; a seed also more than 1e-3 outside a limit (FK and Jacobian states are computed as given, outside the limits too, as MoveIt's GetPositionFK does)",
    'INVALID_LINK_NAME': 'a tip, link or reference link that the model does not have (the message lists the valid ones)',
    'FRAME_TRANSFORM_FAILURE': "a goal or FK `frame_id` that is not '' or a link of the model",
    'NO_ROBOT_MODEL': 'no model loaded yet',
    'INVALID_REQUEST': "empty batch, both goal forms, compact length not a multiple of 7K, more than `max_batch` problems, unknown solver / solve_mode / mode, a tolerance negative or above 1 m / pi rad (the parameters' ranges), a timeout negative or not a valid Duration (`nanosec` 1e9 or more), bad axis_weights, bad keyframes / node_indices",
    "GOAL_IN_COLLISION": "within the tolerances, but every answer found collides with the robot itself or the world (collision avoidance on); the message names the pair",
    "COLLISION_CHECKING_UNAVAILABLE": "collision avoidance asked for, but it could not keep its promise: links with collision geometry have no spheres (a mesh not found: set `collision.mesh_path`), or the last octomap or point cloud could not be used; the message names them",
    "FAILURE": "an unexpected error (its text in the message, the traceback in the log); the node keeps serving",
}


def markdown_surface() -> str:
    """The reference's table of topics, services and actions."""
    rows = ["| name | kind | type | what |", "|---|---|---|---|"]
    for name, kind, typ, what in SURFACE:
        rows.append(f"| `{name}` | {kind} | {typ} | {what} |")
    return "\n".join(rows)


def markdown_codes() -> str:
    """The reference's table of result codes."""
    from .codes import NAMES  # noqa: PLC0415

    value = {n: v for v, n in NAMES.items()}
    rows = ["| code | value | when |", "|---|---|---|"]
    for name, what in CODE_DOCS.items():
        rows.append(f"| `{name}` | {value[name]} | {what} |")
    return "\n".join(rows)
