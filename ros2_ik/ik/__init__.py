"""The IK specification: the readable reference of every solver step, on ``xp`` (NumPy/CuPy).

- :mod:`.config`: :class:`IKConfig`, :class:`Status`, :class:`SolveMode`, :class:`IKResult`;
- :mod:`.objectives`, :mod:`.residuals`: residual rows and their Jacobian blocks;
- :mod:`.lm`: Levenberg-Marquardt / damped least squares (damping, non-monotone phase, limit
  excursion, active-set limits); :mod:`.ccd`: cyclic coordinate descent;
- :mod:`.seeds`: restart seeds, limits, the coordinates a solve moves;
- :mod:`.batch`: the reference batch solve (chunks, selection, FK verification).

Nothing here calls compiled code: the compiled backends (:mod:`ros2_ik.backends`) are generated
from one source and tested against this package; :mod:`ros2_ik.api` chooses between them.
"""

from .checks import SOLVERS
from .config import IKConfig, IKResult, SolveMode, Status
from .objectives import (EvalContext, JointLimitObjective, Objective, OrientationObjective,
                         PoseObjective, PositionObjective, PostureObjective)

__all__ = ["IKConfig", "IKResult", "SolveMode", "Status", "SOLVERS", "Objective",
           "EvalContext", "PoseObjective", "PositionObjective", "OrientationObjective",
           "JointLimitObjective", "PostureObjective"]
