"""`none`: no pruning; the baseline every policy is compared with."""

from __future__ import annotations

from mcsim.replay.policies import Policy, register


@register
class NoPruning(Policy):
    kind = "none"
    summary = "Never clears anything (the baseline)."
