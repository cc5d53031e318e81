"""The approval rule: what each step can do beyond its target, and so when it must be shown.

One table, read by the engine (routine "approve all", `Decision.APPROVE_ALL_EXACT`) and by the tray's
approver (the kinds ticked "approve automatically") through one object they both ask,
`AutoApproval` (automation/auto_approval.py). Two boxes can let a step through unshown:

- routine "approve all" covers a step whose target was found exactly where it was recorded and that
  does nothing beyond pressing there (`ApprovalRule.may_approve_all`);
- a per-kind box in the tray covers a step of a kind the person ticked (`per_kind_may_cover`),
  except a step that is always shown.

What each action of the vocabulary (automation/actions.py) can do beyond its target:

| action                      | beyond its target                                         | approve all | per kind |
|-----------------------------|-----------------------------------------------------------|-------------|----------|
| click, left or right, once  | presses there; a right click opens a menu                 | if exact    | yes      |
| double or triple click      | selects a word or line (it replaces the primary selection |             |          |
|                             | a middle click pastes), or opens the item under it        | no          | yes      |
| middle click (any count)    | PASTES the primary selection into the program under the   | never       | never    |
|                             | pointer (X11; GTK and Qt on Wayland too): shown with the  |             |          |
|                             | text it would paste, read when asked; refused when the    |             |          |
|                             | selection cannot be read                                  |             |          |
| drag, left or right         | drops what it picked up where it ends: files moved into a | no          | yes      |
|                             | folder or the bin, text moved, a path typed into a        |             |          |
|                             | terminal                                                  |             |          |
| drag, middle                | pastes the primary selection at its release (X11)         | never       | never    |
| move                        | hovers: opens a tooltip or a menu, nothing more           | if exact    | yes      |
| scroll with a point         | scrolls, or changes a value under the pointer (a slider,  | if exact    | yes      |
|                             | spin box or combo box); scrolling back undoes it          |             |          |
| scroll without a point      | the same wherever the pointer happens to be               | no          | yes      |
| type                        | types into the focused program (a click first with `at`)  | no          | yes      |
| type with a line break, or  | presses Enter: a terminal runs the line, a form submits   | never       | never    |
| press_enter                 |                                                           |             |          |
| key, hold_and_tap           | anything the focused program binds to the keys            | no          | yes      |
| keys that paste             | ctrl+v, ctrl+shift+v, shift+insert: paste the clipboard   | no          | never    |
|                             | or the selection, whatever it holds (a line break runs a  |             |          |
|                             | terminal's line), into the focused program                |             |          |
| keys that press Enter       | see `presses_enter`: enter (return, kp_enter), any chord  | never       | never    |
|                             | with it (shift+enter, ctrl+enter, alt+enter), and ctrl    |             |          |
|                             | with m or j (a terminal's carriage return and line feed)  |             |          |
|                             | or o (bash's operate-and-get-next runs the line), alone   |             |          |
|                             | or with other modifiers, pressed together or held-and-    |             |          |
|                             | tapped                                                    |             |          |
| wait, plan, done, ask_user  | nothing on the desktop                                    | if exact    | yes      |

A step its routine file calls irreversible (send, save, delete...) is never covered either, and the
engine's approval never lowers what the rule says: a hand-edited `irreversible = false` cannot
make an Enter or a paste pass unshown. A step the model proposed (no grounding) is never covered by
routine "approve all", which exists only for a routine's recorded steps.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from holodesk.automation.actions import Action, Click, Drag, HoldAndTap, KeyCombo, MouseButton, TypeText
from holodesk.automation.proposal import Grounding

# normalize_key (automation/keys.py) folds return, ret and kp_enter into "enter" before any rule sees them.
ENTER_KEYS = frozenset({"enter"})
# ctrl with these is Enter to a terminal: ^M is carriage return, ^J line feed; readline's ctrl+o
# (operate-and-get-next) runs the line as well. Other modifiers held with them change nothing there.
CTRL_ENTER_LETTERS = frozenset({"m", "j", "o"})
# Chords programs read as paste: ctrl+v (GUI programs), ctrl+shift+v (terminals), shift+insert (both;
# xterm pastes the primary selection with it).
PASTE_CHORDS = (frozenset({"ctrl", "v"}), frozenset({"ctrl", "shift", "v"}), frozenset({"shift", "insert"}))
# The buttons whose press or release the platform turns into a paste of the primary selection.
PASTE_BUTTONS = frozenset({MouseButton.MIDDLE})
# How much of the text a paste would type is shown (its start and end; the length is said).
PASTE_SHOWN_CHARS = 160
_PICTURES = {"\n": "⏎", "\r": "⏎", " ": "·", "\t": "⇥", "\x7f": "␡"}


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """What the approval rule says about one step.

    `may_approve_all`: routine "approve all" may cover it. `per_kind_may_cover`: a kind ticked in the
    tray may approve it unshown. `irreversible`: the approver says so. `why_asked`: the rule in words.
    """

    may_approve_all: bool
    irreversible: bool
    why_asked: str
    per_kind_may_cover: bool = True


def chord_presses_enter(keys: Iterable[str]) -> bool:
    """Whether keys pressed together (normalized names) reach a program as Enter."""
    held = frozenset(keys)
    return bool(held & ENTER_KEYS) or ("ctrl" in held and bool(held & CTRL_ENTER_LETTERS))


def presses_enter(action: Action) -> bool:
    """Whether the step presses Enter, in any of its disguises (see the module's table)."""
    if isinstance(action, TypeText):
        return action.press_enter or "\n" in action.text
    if isinstance(action, KeyCombo):
        return chord_presses_enter(action.keys)
    if isinstance(action, HoldAndTap):
        return any(chord_presses_enter((*action.hold, tap)) for tap in action.taps)
    return False


def pastes(action: Action) -> bool:
    """Whether the step pastes the primary selection: a middle click, or a middle drag (at its release)."""
    return isinstance(action, Click | Drag) and action.button in PASTE_BUTTONS


def pictured(text: str) -> str:
    """`text` with every character that is not plainly printable shown as a visible picture: line breaks
    as ⏎, spaces as ·, tabs as ⇥, other controls as their Unicode control pictures (␛, ␇...), and
    invisible or format characters (bidi overrides, other spaces) as ⟨U+202E⟩.

    No backslash escapes: the words go into the request's prose, which every front end escapes again
    (automation/display_text.py), and an escape escaped twice would read as a backslash in the text.
    """
    out: list[str] = []
    for character in text:
        code = ord(character)
        if character in _PICTURES:
            out.append(_PICTURES[character])
        elif code < 0x20:
            out.append(chr(0x2400 + code))  # the Control Pictures block: ␀ to ␟
        elif unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp", "Zs", "Cs", "Co", "Cn"):
            out.append(f"⟨U+{code:04X}⟩")
        else:
            out.append(character)
    return "".join(out)


def presses_paste_keys(action: Action) -> bool:
    """Whether the step's keys paste the clipboard or the selection (see PASTE_CHORDS)."""
    if isinstance(action, KeyCombo):
        return frozenset(action.keys) in PASTE_CHORDS
    if isinstance(action, HoldAndTap):
        return any(frozenset((*action.hold, tap)) in PASTE_CHORDS for tap in action.taps)
    return False


def paste_in_words(text: str) -> str:
    """What a paste would type, safe to show (`pictured`), bounded (its start and end); its line breaks
    counted, since a terminal runs each line."""
    if not text:
        return "the primary selection is empty: it pastes nothing"
    breaks = text.count("\n") + text.count("\r")
    lines = f", its {breaks} line break{'s' if breaks != 1 else ''} pressed as Enter" if breaks else ""
    shown = pictured(text)
    if len(shown) > PASTE_SHOWN_CHARS:
        head, tail = PASTE_SHOWN_CHARS * 2 // 3, PASTE_SHOWN_CHARS // 3
        shown = f"{shown[:head]} …[{len(shown) - head - tail} more]… {shown[-tail:]}"
    return f"it pastes the primary selection ({len(text)} characters{lines}): {shown}"


def approval_rule(action: Action, grounding: Grounding | None, paste_text: str | None = None) -> ApprovalRule:
    """The rule for one step (screen or model space alike: only what it does matters, not where).

    `paste_text` is what a pasting step would paste, read when it is asked (the engine reads it);
    without it a paste is said to paste an unread selection.
    """
    if pastes(action):
        words = paste_in_words(paste_text) if paste_text is not None else "it pastes the primary selection"
        return ApprovalRule(False, True, f"{words}: always shown", per_kind_may_cover=False)
    if presses_enter(action):
        return ApprovalRule(False, True, "irreversible (it presses Enter): always shown", per_kind_may_cover=False)
    if grounding is not None and grounding.irreversible:
        return ApprovalRule(
            False, True, "irreversible (send, save, delete, submit...): always shown", per_kind_may_cover=False
        )
    if presses_paste_keys(action):
        return ApprovalRule(
            False, False, "it pastes whatever the clipboard or selection holds: always shown", per_kind_may_cover=False
        )
    if grounding is None:
        return ApprovalRule(False, False, "proposed by the model")
    if isinstance(action, TypeText | KeyCombo | HoldAndTap):
        return ApprovalRule(False, False, "it types: always shown")
    if isinstance(action, Drag):
        return ApprovalRule(False, False, "it drops what it drags where it ends: shown on its own")
    if isinstance(action, Click) and action.count > 1:
        return ApprovalRule(False, False, "a double or triple click selects or opens: shown on its own")
    if action.kind == "scroll" and not action.points():
        return ApprovalRule(False, False, "it scrolls wherever the pointer is: shown on its own")
    if not grounding.exact:
        return ApprovalRule(False, False, f"{grounding.how}: shown on its own")
    return ApprovalRule(True, False, grounding.how)
