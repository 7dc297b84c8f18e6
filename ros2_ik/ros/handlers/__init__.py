"""The node's request handlers, one module per service, action or request topic.

Each module has ``handle(ctx, request, response)`` (no rclpy object but the messages: convert,
call the core, convert back) and ``register(wiring)`` (creates its service, action or
subscription on the node through :class:`~ros2_ik.ros.wiring.Wiring`).
"""
