"""The one rule for letting a step go ahead unshown, asked by the engine and by the tray's approver.

Two boxes can let a step through without showing it: the engine's routine "approve all"
(`Decision.APPROVE_ALL_EXACT`) and the tray's per-kind boxes ("approve automatically",
app/gui/gui_approver.py). Both ask the same `AutoApproval` object, handed to each at construction
(`AUTO_APPROVAL` unless a caller gives another), so they cannot disagree about a step that must be
shown: an Enter in any disguise, a paste, a step its recording calls irreversible, and a step the
engine saw proposed again and again on an unchanged screen.

What each action can do beyond its target, and so what the boxes may cover, is the table in
automation/approval_rules.py (`approval_rule`); this object says how the two boxes use that table.
"""

from __future__ import annotations

from collections.abc import Set

from holodesk.automation.actions import Action
from holodesk.automation.approval_rules import ApprovalRule, approval_rule
from holodesk.automation.proposal import Grounding


class AutoApproval:
    """Which steps "approve all" and the ticked kinds may let through unshown (see the module's docstring)."""

    def assess(self, action: Action, grounding: Grounding | None, paste_text: str | None = None) -> ApprovalRule:
        """What the rule says of one step; `paste_text` is what a pasting step would paste, when read."""
        return approval_rule(action, grounding, paste_text)

    def always_shown(self, rule: ApprovalRule, *, looping: bool, said_irreversible: bool = False) -> bool:
        """Whether no box may cover the step: the rule says so, the step is irreversible (by the rule
        or as its request says), or the same step keeps coming back on an unchanged screen."""
        return looping or said_irreversible or rule.irreversible or not rule.per_kind_may_cover

    def approve_all_covers(self, rule: ApprovalRule, *, looping: bool) -> bool:
        """Whether routine "approve all", once chosen, lets the step through unshown."""
        return rule.may_approve_all and not self.always_shown(rule, looping=looping)

    def kinds_cover(
        self,
        action: Action,
        rule: ApprovalRule,
        kinds: Set[str],
        *,
        looping: bool,
        said_irreversible: bool = False,
    ) -> bool:
        """Whether the kinds the person ticked (`kinds`) let the step through unshown."""
        always = self.always_shown(rule, looping=looping, said_irreversible=said_irreversible)
        return action.kind in kinds and not always


# The rule every engine and approver asks unless it is given another (tests give a stricter one).
AUTO_APPROVAL = AutoApproval()
