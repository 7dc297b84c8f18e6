"""Sphinx configuration of ros2_ik's documentation (``make docs``: warnings are errors).

The node reference (parameters, topics, services, actions, result codes, interface
definitions) is generated here from the code at every build (``reference/node.md``), as the API
reference is from the docstrings (autodoc)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

project = "ros2_ik"
author = "ros2_ik maintainers"
copyright = "2026, ros2_ik maintainers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_title = "ros2_ik"
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "undoc-members": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
suppress_warnings = ["myst.xref_missing"] if os.environ.get("ROS2_IK_DOCS_LAX") else []
nitpicky = False


def _node_reference() -> str:
    from ros2_ik.ros.params import markdown_table  # noqa: PLC0415 - (sys.path set above)
    from ros2_ik.ros.surface import markdown_codes, markdown_surface  # noqa: PLC0415

    parts = ["# Node reference", "",
             "Generated from the code at every build (`ros2_ik/ros/params.py`, "
             "`ros2_ik/ros/surface.py`, `ros2_ik/ros/codes.py`, `ros2_ik_interfaces/`); a test "
             "checks that the node has exactly these topics, services and actions.", "",
             "## Topics, services and actions", "",
             "`~/` is the node's namespace and name (`/ros2_ik` by default).", "",
             markdown_surface(), "", "## Parameters", "",
             "Every parameter is declared with its type, range and description (`ros2 param "
             "describe /ros2_ik <name>`); `config/ros2_ik.yaml` holds the defaults.", "",
             markdown_table(), "", "## Result codes", "",
             "`IKErrorCode` values (MoveIt's `MoveItErrorCodes` where the meaning is the same; "
             "per problem and overall).", "", markdown_codes(), "", "## Interface definitions",
             ""]
    ifc = ROOT / "ros2_ik_interfaces"
    for sub in ("msg", "srv", "action"):
        for f in sorted((ifc / sub).glob("*.*")):
            parts += [f"### {f.stem} ({sub})", "", "```text", f.read_text().rstrip(), "```", ""]
    return "\n".join(parts) + "\n"


def _generate(app):
    out = Path(app.srcdir) / "reference" / "node.md"
    text = _node_reference()
    if not out.exists() or out.read_text() != text:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


def setup(app):
    app.connect("builder-inited", _generate)
