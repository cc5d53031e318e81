"""The Policy interface both backends implement, and the step data it exchanges with the engine.

The types are defined in `automation.proposal` (the engine must not import `inference`); this
module is where the inference layer names them.
"""

from __future__ import annotations

from holodesk.automation.proposal import PastStep, Policy, Proposal, RejectedAnswer, StepTimings

__all__ = ["PastStep", "Policy", "Proposal", "RejectedAnswer", "StepTimings"]
