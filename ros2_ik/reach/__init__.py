"""Reach studies: IK at many target poses, per-voxel reachability, heat maps (no rclpy, no Ray).

- :mod:`.targets`  -- target poses: a voxel grid over a box or sphere x orientations, or a file
- :mod:`.study`    -- :class:`Study`, :class:`StudyConfig`, one shard's solve, per-voxel table
- :mod:`.runner`   -- :func:`run_study`: shards through an executor, written as they finish
- :mod:`.store`    -- the study folder (manifest, NPZ shards, results, summary)
- :mod:`.plots`    -- PNG heat maps (matplotlib, imported only when drawing)
- :mod:`.ray_executor` -- the optional Ray executor (``ray`` imported only when used)
- :mod:`.cli`      -- the ``reach_study`` command (``python -m ros2_ik.reach``)
- :mod:`.placement` -- base placement: where should the robot stand (:func:`run_placement`);
  :mod:`.placement_cli` its command, ``ros2_ik_base_placement``
"""

from .placement import (Placement, PlacementConfig, PlacementResult, Region, run_placement,
                        score_bases)
from .runner import LocalExecutor, StudyResult, run_study
from .study import (COLUMNS, OUT_OF_REACH, VOXEL_COLUMNS, Study, StudyConfig, limit_margin,
                    manipulability, reach_bound, solve_shard, voxel_table)
from .targets import (Box, Sphere, Targets, fibonacci_directions, from_poses, grid_targets,
                      load_targets, tool_orientations)

__all__ = ["Study", "StudyConfig", "run_study", "StudyResult", "LocalExecutor", "Targets",
           "Box", "Sphere", "grid_targets", "load_targets", "from_poses",
           "fibonacci_directions", "tool_orientations", "solve_shard", "voxel_table",
           "reach_bound", "manipulability", "limit_margin", "COLUMNS", "VOXEL_COLUMNS",
           "OUT_OF_REACH", "Placement", "PlacementConfig", "PlacementResult", "Region",
           "run_placement", "score_bases"]
