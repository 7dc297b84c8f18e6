"""Reach studies (core: no rclpy, no Ray at import)."""
