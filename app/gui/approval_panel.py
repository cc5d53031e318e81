"""The approval panel: a small always-on-top window asking about one step.

It shows the step number, the action in words, the model's description of its target, its note and
thought (and the loop warning, when there is one), and offers Approve (Enter), Edit, Skip and Stop
(Esc), plus "approve this kind of action for the rest of this task". Edit reveals what the action
lets one change: the target as typed screen pixels (the overlay's marker can be dragged too), the
text to type and whether select-all comes before it and Enter after it, the keys to press. The
headline names every key a typing step presses, select-all and Enter included.

Focus: the panel must never be where the action's keystrokes land. It is a Tool window shown with
WA_ShowWithoutActivating, so appearing does not take the keyboard from the user's application. The
user may still click into it (to edit, or to answer with Enter/Esc), so `retract()` hides it, waits
for the window system to have unmapped it, and on X11 gives the focus back to the window that had
it (app/x11_focus.py); the approver retracts it before `decide()` returns, so before the action runs.
Its buttons take no focus, so Enter means Approve wherever the focus is inside the panel.

Questions: when the model asks the user something (`ask_user`), the same panel shows the question
with a reply field and Reply (Enter) / Stop (Esc). Typing needs the keyboard, so this is the one
time the panel takes the focus as it appears; `retract()` gives it back as after an approval.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Sequence

from holodesk.app.common.session_words import kind_in_words
from holodesk.app.gui.focused_area import TypingPlace
from holodesk.app.gui.keep_clear import Box, around, panel_spot, typed_area
from holodesk.app.gui.overlay_drawing import MARKER, action_in_words
from holodesk.app.gui.qt import Qt, QtCore, QtGui, QtWidgets, Signal
from holodesk.app.gui.qt_screens import screen_point_to_global_logical
from holodesk.app.gui.x11_focus import FocusReturn
from holodesk.automation.action_picture import typing_in_words
from holodesk.automation.actions import MAX_COORDINATE, Action, Drag, KeyCombo, Point, TypeText, UpdatePlan
from holodesk.automation.approval_rules import paste_in_words, pastes, presses_enter
from holodesk.automation.coords import Monitor, Rect, monitor_at
from holodesk.automation.display_text import bounded_prose, safe_lines, safe_text, text_summary
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, QuestionRequest
from holodesk.automation.errors import ActionError, OffScreenError
from holodesk.automation.keys import parse_combination

PANEL_WIDTH = 440
REMEMBER_SLACK = 12  # pixels the style may draw around a check box's label (its frame, focus rectangle)
SCREEN_MARGIN = 24
MAX_THOUGHT_CHARS = 420
MAX_NOTE_CHARS = 600
MAX_CONTEXT_CHARS = 300
MAX_ASKER_CHARS = 80  # who asks for a step (an MCP client names itself): one line of the header
MAX_QUESTION_CHARS = 800
POINT_NAMES = {Drag.kind: ("From", "To")}
ANSWER_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Escape)

STYLE = f"""
#panel {{ background: #1d1e27; border: 1px solid #44465a; }}
QLabel {{ color: #e6e6ee; font-size: 13px; }}
#header {{ color: #a4a6ba; font-size: 12px; }}
#badge {{ background: {MARKER.name()}; color: white; font-weight: 700; font-size: 12px;
          border-radius: 4px; padding: 1px 8px; }}
#action {{ color: white; font-size: 17px; font-weight: 600; }}
#element {{ color: #c9cad8; font-size: 12px; }}
#note {{ color: #e6e6ee; }}
#thought {{ color: #9fa1b5; font-style: italic; }}
#context {{ color: #ffd27a; font-size: 12px; }}
#paste {{ color: #ffd27a; font-size: 13px; }}
#warning {{ background: #5b1f24; color: #ffdada; border: 1px solid #a5404a; border-radius: 5px; padding: 6px; }}
#error {{ color: #ff9393; }}
#hint, #remember_note {{ color: #9fa1b5; font-size: 12px; }}
#question {{ color: white; font-size: 16px; font-weight: 600; }}
QCheckBox {{ color: #c9cad8; font-size: 12px; }}
QCheckBox:disabled {{ color: #6d6f84; }}
QCheckBox::indicator:disabled {{ background: #2a2b37; border: 1px solid #4b4d63; }}
QLineEdit, QPlainTextEdit, QSpinBox {{ background: #2a2b37; color: white; border: 1px solid #4b4d63;
          border-radius: 4px; padding: 3px 5px; font-size: 13px; selection-background-color: #5a5cf0; }}
QLineEdit:focus, QPlainTextEdit:focus {{ border-color: #8d90ff; }}
QSpinBox::up-button, QSpinBox::down-button {{ width: 0px; border: none; }} /* NoButtons breaks styled spin boxes */
QPushButton {{ background: #2d2e3c; color: #f2f2f7; border: 1px solid #4b4d63; border-radius: 5px;
          padding: 6px 12px; font-size: 13px; }}
QPushButton:hover {{ background: #3a3c4f; }}
QPushButton:checked {{ background: #3a3c4f; border-color: #8d90ad; }}
#approve, #send {{ background: #1f7a46; border-color: #2fa862; font-weight: 600; }}
#approve:hover, #send:hover {{ background: #25925a; }}
#send:disabled {{ background: #2d2e3c; border-color: #4b4d63; color: #8d8fa3; }}
#stop {{ border-color: #a5404a; color: #ffc9c9; }}
#stop:hover {{ background: #5b1f24; }}
"""


class _PointEditor(QtWidgets.QWidget):
    """x and y of one screen pixel."""

    changed = Signal()

    def __init__(self, caption: str, parent: QtWidgets.QWidget) -> None:
        super().__init__(parent)
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QtWidgets.QLabel(caption, self))
        # Not `x`/`y`: QWidget already has x() and y() methods.
        self.x_box = self._spin_box("x")
        self.y_box = self._spin_box("y")
        for box in (self.x_box, self.y_box):
            layout.addWidget(box)
        layout.addStretch(1)

    def _spin_box(self, axis: str) -> QtWidgets.QSpinBox:
        box = QtWidgets.QSpinBox(self)
        box.setRange(-MAX_COORDINATE, MAX_COORDINATE)
        box.setPrefix(f"{axis} ")
        box.setMinimumWidth(96)
        box.valueChanged.connect(self.changed)
        return box

    def point(self) -> Point:
        return Point(self.x_box.value(), self.y_box.value())

    def set_point(self, point: Point) -> None:
        for box, value in ((self.x_box, point.x), (self.y_box, point.y)):
            box.blockSignals(True)
            box.setValue(value)
            box.blockSignals(False)


class ApprovalPanel(QtWidgets.QWidget):
    """Asks about one step at a time. Use it on the GUI thread.

    Signals:
      decided(ApprovalDecision, bool): the user's answer, and whether to approve this kind of action
        for the rest of the task (only ever True with an approve or an edit).
      action_edited(Action): the user typed a new target; the edited action, screen space.
      replied(object): the user's reply to a question (str), or None when the user stopped instead.
    """

    decided = Signal(object, bool)
    action_edited = Signal(object)
    replied = Signal(object)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        flags = Qt.WindowType.Tool | Qt.WindowType.FramelessWindowHint | Qt.WindowType.WindowStaysOnTopHint
        super().__init__(parent, flags)
        self.setObjectName("panel")
        self.setWindowTitle("Holodesk: approve this step?")
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)
        self.setStyleSheet(STYLE)
        self.setFixedWidth(PANEL_WIDTH)
        self._request: ApprovalRequest | None = None
        self._question: QuestionRequest | None = None
        self._original: Action | None = None
        self._action: Action | None = None
        self._monitors: tuple[Monitor, ...] = ()
        self._drag_from: QtCore.QPointF | None = None
        self._answer_key: int | None = None
        self._watching_window = False
        self._key_hints = True
        self._focus = FocusReturn(QtGui.QGuiApplication.platformName() == "xcb")
        self._build()

    # -- construction --

    def _build(self) -> None:
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 16, 14)
        layout.setSpacing(8)

        header = QtWidgets.QHBoxLayout()
        self._badge = self._label("badge")
        self._header = self._label("header", "Holodesk wants to")
        header.addWidget(self._badge)
        header.addWidget(self._header, 1)
        layout.addLayout(header)

        self._context = self._label("context", wrap=True)  # what became of the last step; target moved
        self._action_label = self._label("action", wrap=True)
        self._warning = self._label("warning", wrap=True)
        self._element = self._label("element", wrap=True)
        self._paste = self._label("paste", wrap=True)  # what a middle click pastes, under the headline
        self._note = self._label("note", wrap=True)
        self._thought = self._label("thought", wrap=True)
        self._reply = QtWidgets.QLineEdit(self)
        self._reply.setObjectName("reply")
        self._reply.setPlaceholderText("Type your answer, then press Enter")
        self._reply.installEventFilter(self)
        self._reply.textChanged.connect(self._on_reply_typed)
        parts = (
            self._context,
            self._action_label,
            self._paste,
            self._element,
            self._warning,
            self._note,
            self._thought,
        )
        for part in (*parts, self._reply):
            layout.addWidget(part)

        self._editor = QtWidgets.QWidget(self)
        editor_layout = QtWidgets.QVBoxLayout(self._editor)
        editor_layout.setContentsMargins(0, 4, 0, 0)
        editor_layout.setSpacing(6)
        self._hint = self._label("hint", wrap=True, parent=self._editor)
        self._points = [_PointEditor("Target", self._editor), _PointEditor("To", self._editor)]
        for editor in self._points:
            editor.changed.connect(self._on_point_typed)
        self._text = QtWidgets.QPlainTextEdit(self._editor)
        self._text.setObjectName("text")
        self._text.setFixedHeight(62)
        self._text.installEventFilter(self)
        self._text.textChanged.connect(self._on_text_typed)
        # What a typing step presses besides the text: shown in the headline, and the user may turn it off.
        self._overwrite = self._option("overwrite", "First select all, and type over it")
        self._enter = self._option("press_enter", "Then press Enter")
        self._keys = QtWidgets.QLineEdit(self._editor)
        self._keys.setObjectName("keys")
        self._keys.setPlaceholderText("e.g. ctrl+shift+t")
        self._keys.textChanged.connect(self._on_text_typed)
        self._error = self._label("error", wrap=True, parent=self._editor)
        fields: list[QtWidgets.QWidget] = [
            self._hint,
            *self._points,
            self._text,
            self._overwrite,
            self._enter,
            self._keys,
            self._error,
        ]
        for field_widget in fields:
            editor_layout.addWidget(field_widget)
        layout.addWidget(self._editor)

        self._remember = QtWidgets.QCheckBox(self)
        self._remember.setObjectName("remember")
        self._remember.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        layout.addWidget(self._remember)
        # A check box does not wrap: which later steps the box never covers goes on a line of its own.
        self._remember_note = self._label("remember_note", wrap=True)
        layout.addWidget(self._remember_note)

        buttons = QtWidgets.QHBoxLayout()
        buttons.setSpacing(8)
        self._approve = self._button("approve", "Approve  ⏎", self._on_approve)
        self._edit = self._button("edit", "Edit", self._on_edit)
        self._edit.setCheckable(True)
        self._skip = self._button("skip", "Skip", self._on_skip)
        self._send = self._button("send", "Reply  ⏎", self._on_send)
        self._stop = self._button("stop", "Stop  Esc", self._on_stop)
        buttons.addWidget(self._approve, 2)
        buttons.addWidget(self._send, 2)
        for button in (self._edit, self._skip, self._stop):
            buttons.addWidget(button, 1)
        layout.addLayout(buttons)

    def _label(
        self, name: str, text: str = "", wrap: bool = False, parent: QtWidgets.QWidget | None = None
    ) -> QtWidgets.QLabel:
        label = QtWidgets.QLabel(text, parent or self)
        label.setObjectName(name)
        label.setWordWrap(wrap)
        label.setTextFormat(Qt.TextFormat.PlainText)  # model text is shown as written, never as markup
        return label

    def _option(self, name: str, text: str) -> QtWidgets.QCheckBox:
        box = QtWidgets.QCheckBox(text, self._editor)
        box.setObjectName(name)
        box.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Enter keeps meaning Approve
        box.toggled.connect(lambda _checked: self._on_text_typed())
        return box

    def set_key_hints(self, shown: bool) -> None:
        """Show Enter and Esc on Approve and Stop only where those keys reach Holodesk (X11's grab):
        on Wayland they go to the user's focused window, and a hint would invite that mistake."""
        self._key_hints = shown
        self._approve.setText(self._approve_words())
        self._stop.setText("Stop  Esc" if shown else "Stop")

    def _approve_words(self) -> str:
        # A plan changes nothing on screen: going on is not approving an action.
        words = "Continue" if isinstance(self._original, UpdatePlan) else "Approve"
        return f"{words}  ⏎" if self._key_hints else words

    def _button(self, name: str, text: str, slot: object) -> QtWidgets.QPushButton:
        button = QtWidgets.QPushButton(text, self)
        button.setObjectName(name)
        button.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Enter approves, whichever button was last clicked
        button.setAutoDefault(False)
        button.clicked.connect(slot)
        return button

    def named_widgets(self) -> dict[str, QtWidgets.QWidget]:
        """The widgets a test (or an accessibility tool) looks for, by name."""
        return {
            "approve": self._approve,
            "edit": self._edit,
            "skip": self._skip,
            "stop": self._stop,
            "remember": self._remember,
            "remember_note": self._remember_note,
            "header": self._header,
            "action": self._action_label,
            "element": self._element,
            "paste": self._paste,
            "context": self._context,
            "note": self._note,
            "thought": self._thought,
            "warning": self._warning,
            "error": self._error,
            "text": self._text,
            "keys": self._keys,
            "overwrite": self._overwrite,
            "press_enter": self._enter,
            "reply": self._reply,
            "send": self._send,
            "target_x": self._points[0].x_box,
            "target_y": self._points[0].y_box,
            "end_x": self._points[1].x_box,
            "end_y": self._points[1].y_box,
        }

    # -- showing a request --

    def present(
        self,
        request: ApprovalRequest,
        typing_place: TypingPlace | None = None,
        overlay_drawn: Sequence[QtCore.QRect] = (),
    ) -> None:
        """Show the panel for `request`, without taking the keyboard focus.

        It covers none of the places the action lands (app/gui/keep_clear.py): its target points, or for
        keys without a point where `typing_place` says the text lands (screen space: the caret's line, else
        the focused window's bottom rows), and as
        little as it can of `overlay_drawn` (what the overlay draws, global logical coordinates)."""
        action = request.action
        self._request = request
        self._question = None
        self._set_mode(question=False)
        self._answer_key = None
        self._original = self._action = action
        self._monitors = request.frame.monitors
        self._badge.setText(f"Step {request.step}")
        plan = isinstance(action, UpdatePlan)
        self._header.setText("The model's plan (nothing happens on screen)" if plan else _who_wants(request))
        self._approve.setText(self._approve_words())
        self._action_label.setText(_sentence(_action_words(action)))
        context = []
        if request.previous_result:  # line breaks kept (a plan's goals), bounded
            context.append(f"Step {request.step - 1}: {bounded_prose(request.previous_result, MAX_CONTEXT_CHARS)}")
        adjustment = _without_paste_words(request.adjustment, request.paste_text)  # shown under the headline
        if adjustment:
            context.append(bounded_prose(adjustment, MAX_CONTEXT_CHARS))
        self._context.setText("\n".join(context))
        self._context.setVisible(bool(context))
        paste = _sentence(paste_in_words(request.paste_text)) if request.paste_text is not None else ""
        self._paste.setText(_in_font(bounded_prose(paste, MAX_CONTEXT_CHARS), self._paste))
        self._paste.setVisible(bool(paste))
        self._warning.setText(f"⚠ {_sentence(request.loop_warning)}. Approve only if you are sure.")
        self._warning.setVisible(bool(request.loop_warning))
        # The model's description of its target: what to look for under the marker.
        element = safe_text(" ".join(request.proposal.element.split()))
        self._element.setText(f"Target: {_shorten(element, MAX_THOUGHT_CHARS)}" if element else "")
        self._element.setVisible(bool(element))
        self._show_model_words(request.proposal.note, request.proposal.thought)
        kind = kind_in_words(action.kind)
        self.set_remember_text(f"Approve every step of this kind ({kind}) for the rest of this task")
        never = _never_covered(request)
        self._remember_note.setText(never)
        self._remember_note.setVisible(bool(never))
        self._remember.setChecked(False)
        # A looping step is asked about one at a time, and a step of a kind the box never covers (a paste,
        # Enter) is asked every time: no blanket approval from either, the note says why.
        self._remember.setEnabled(not request.loop_warning and not never)
        self._fill_editor(action)
        self._edit.setChecked(False)
        self._editor.setVisible(False)
        self._error.setVisible(False)
        self._fit_height()
        self._place(action, typing_place, overlay_drawn)
        if not self.isVisible():
            self._focus.remember([int(self.winId())])
        self.show()
        self.raise_()

    def present_question(self, request: QuestionRequest) -> None:
        """Show the model's question with a reply field, and take the keyboard for the reply."""
        self._request = None
        self._question = request
        self._answer_key = None
        self._action = self._original = None
        self._set_mode(question=True)
        self._badge.setText(f"Step {request.step}")
        self._header.setText("Holodesk asks you")
        self._action_label.setObjectName("question")
        self._action_label.setText(bounded_prose(request.question, MAX_QUESTION_CHARS, max_lines=8))
        self._restyle(self._action_label)
        # Nothing of the last step stays on the panel: no result line, no target.
        for label in (self._context, self._element, self._paste):
            label.clear()
            label.setVisible(False)
        self._show_model_words(request.proposal.note, request.proposal.thought)
        self._reply.clear()
        self._send.setEnabled(False)
        self._fit_height()
        self._place_in_corner()
        if not self.isVisible():
            self._focus.remember([int(self.winId())])
        self.show()
        self.raise_()
        self.activateWindow()
        self._reply.setFocus()

    def _show_model_words(self, note: str, thought: str) -> None:
        """The model's note and thought: escaped, bounded, runs of spaces visible (the full thought as a tooltip)."""
        shown_note = bounded_prose(note, MAX_NOTE_CHARS, max_lines=6)
        self._note.setText(shown_note)
        self._note.setVisible(bool(shown_note))
        shown_thought = bounded_prose(thought, MAX_THOUGHT_CHARS, max_lines=6)
        self._thought.setText(shown_thought)
        full = safe_lines(thought.strip())
        self._thought.setToolTip(_shorten(full, 4000) if shown_thought != full else "")
        self._thought.setVisible(bool(shown_thought))

    def _place_in_corner(self) -> None:
        """Bottom right of the screen under the pointer: where the thinking status just was."""
        screen = QtGui.QGuiApplication.screenAt(QtGui.QCursor.pos()) or QtGui.QGuiApplication.primaryScreen()
        area = screen.availableGeometry()
        self.setScreen(screen)
        self.move(area.right() - SCREEN_MARGIN - self.width(), area.bottom() - SCREEN_MARGIN - self.height())

    def _set_mode(self, *, question: bool) -> None:
        for control in (self._approve, self._edit, self._skip, self._remember):
            control.setVisible(not question)
        self._reply.setVisible(question)
        self._send.setVisible(question)
        self._warning.setVisible(False)
        self._remember_note.setVisible(False)
        self._editor.setVisible(False)
        self.setWindowTitle("Holodesk: a question for you" if question else "Holodesk: approve this step?")
        if not question:
            self._header.setText(_who_wants(self._request) if self._request is not None else "Holodesk wants to")
            if self._action_label.objectName() != "action":
                self._action_label.setObjectName("action")
                self._restyle(self._action_label)

    @staticmethod
    def _restyle(widget: QtWidgets.QWidget) -> None:
        widget.style().unpolish(widget)
        widget.style().polish(widget)

    def set_action(self, action: Action) -> None:
        """The target was edited elsewhere (the overlay's marker was dragged)."""
        if self._request is None:
            return
        self._action = action
        for editor, point in zip(self._points, action.points(), strict=False):
            editor.set_point(point)
        self._action_label.setText(_sentence(_action_words(action)))
        self._error.setVisible(False)

    def retract(self) -> None:
        """Hide the panel, forget the request, and leave the keyboard where it was before."""
        self._request = None
        self._question = None
        if not self.isVisible():
            return
        self.hide()
        QtGui.QGuiApplication.sync()  # a round trip: the window system has unmapped the panel
        self._focus.give_back([int(self.winId())])

    def _fill_editor(self, action: Action) -> None:
        points = action.points()
        captions = POINT_NAMES.get(action.kind, ("Target", "Target"))
        for index, editor in enumerate(self._points):
            editor.setVisible(index < len(points))
            if index < len(points):
                editor.set_point(points[index])
                label = editor.findChild(QtWidgets.QLabel)
                if label is not None:
                    label.setText(captions[index])
        typing = isinstance(action, TypeText)
        for widget in (self._text, self._overwrite, self._enter):
            widget.setVisible(typing)
        self._keys.setVisible(isinstance(action, KeyCombo))
        if isinstance(action, TypeText):
            # The boxes first: setting the text redraws the headline from the editor.
            for box, value in ((self._overwrite, action.overwrite), (self._enter, action.press_enter)):
                box.blockSignals(True)
                box.setChecked(value)
                box.blockSignals(False)
            self._text.setPlainText(action.text)
        if isinstance(action, KeyCombo):
            self._keys.setText("+".join(action.keys))
        if points:
            hint = "Drag the marker on the screen, or type the screen pixel."
        elif isinstance(action, TypeText):
            hint = "Change the text or what is pressed with it, then press Approve."
        elif isinstance(action, KeyCombo):
            hint = "Change it, then press Approve (Enter)."
        else:
            hint = "This action has nothing to edit."
        self._hint.setText(hint)

    def _place(self, action: Action, typing_place: TypingPlace | None, overlay_drawn: Sequence[QtCore.QRect]) -> None:
        """On the target's screen, clear of where the action lands, as far from it as the screen allows."""
        keep: list[Box] = []
        for point in action.points():
            anchor = screen_point_to_global_logical_or_none(point)
            if anchor is not None:
                keep.append(around(anchor.x(), anchor.y()))
        if typing_place is not None and not action.points():
            caret, field = typing_place.caret, typing_place.field
            keep.append(
                typed_area(
                    _logical_box(typing_place.window),
                    _logical_box(caret) if caret is not None else None,
                    _logical_box(field) if field is not None else None,
                )
            )
        if keep:
            centre = keep[0].centre()
            anchor_point = QtCore.QPoint(round(centre[0]), round(centre[1]))
        else:
            anchor_point = QtGui.QCursor.pos()
        screen = QtGui.QGuiApplication.screenAt(anchor_point) or QtGui.QGuiApplication.primaryScreen()
        area = screen.availableGeometry()
        if screen is not self.screen():  # laid out again on its new screen: its height was measured on the old
            self.setScreen(screen)
            self._fit_height()
        drawn = [Box(r.left(), r.top(), r.width(), r.height()) for r in overlay_drawn]
        if not keep and not drawn:  # nothing to keep clear: away from the pointer
            drawn = [around(anchor_point.x(), anchor_point.y())]
        left, top = panel_spot(
            Box(area.left(), area.top(), area.width(), area.height()),
            self.width(),
            self.height(),
            keep,
            drawn,
            SCREEN_MARGIN,
        )
        self.setScreen(screen)
        self.move(round(left), round(top))

    # -- answers --

    def _on_send(self) -> None:
        reply = self._reply.text().strip()
        if self._question is None or not reply:
            return
        self._question = None
        self.replied.emit(reply)

    def _on_reply_typed(self, text: str) -> None:
        self._send.setEnabled(bool(text.strip()))

    def _on_approve(self) -> None:
        if self._question is not None:
            self._on_send()
            return
        if self._request is None or self._original is None:
            return
        try:
            action = self._edited_action()
            for point in action.points():
                monitor_at(point, self._monitors)
        except (ActionError, OffScreenError) as exc:
            self._error.setText(str(exc))
            self._error.setVisible(True)
            self._show_editor(True)
            return
        decision = ApprovalDecision.approve() if action == self._original else ApprovalDecision.edit(action)
        self._answer(decision, self._remember.isChecked())

    def _on_skip(self) -> None:
        self._answer(ApprovalDecision.skip(), False)

    def _on_stop(self) -> None:
        if self._question is not None:
            self._question = None
            self.replied.emit(None)
            return
        self._answer(ApprovalDecision.stop(), False)

    def _on_edit(self) -> None:
        self._show_editor(self._edit.isChecked())

    def _answer(self, decision: ApprovalDecision, remember: bool) -> None:
        if self._request is None:
            return  # already answered: a double click must not decide the next step
        self._request = None
        self.decided.emit(decision, remember and decision.decision.value in ("approve", "edit"))

    def _show_editor(self, visible: bool) -> None:
        self._edit.setChecked(visible)
        self._editor.setVisible(visible)
        self._fit_height()
        self._keep_on_screen()
        if visible and self._action is not None:
            field = self._text if isinstance(self._action, TypeText) else self._keys
            if field.isVisible():  # the user asked to edit text: take the keyboard for it
                self.activateWindow()
                field.setFocus()

    def set_remember_text(self, text: str) -> None:
        """The tick's words in lines that fit the panel: a check box does not wrap, and a long label was
        cut off at the panel's edge ("...for the rest of this tas")."""
        layout = self.layout()
        margins = layout.contentsMargins() if layout is not None else QtCore.QMargins()
        style = self._remember.style()
        box = style.pixelMetric(QtWidgets.QStyle.PixelMetric.PM_IndicatorWidth, None, self._remember)
        gap = style.pixelMetric(QtWidgets.QStyle.PixelMetric.PM_CheckBoxLabelSpacing, None, self._remember)
        room = PANEL_WIDTH - margins.left() - margins.right() - box - gap - REMEMBER_SLACK
        self._remember.ensurePolished()  # the style sheet's font, not the default one, is measured
        self._remember.setText(lines_that_fit(text, self._remember.fontMetrics(), room))
        self._remember.setToolTip(text)

    def _fit_height(self) -> None:
        # Not adjustSize(): it caps a window at 2/3 of the screen, which squeezes the wrapped text
        # on a small or highly scaled screen.
        layout = self.layout()
        if layout is None:  # set in __init__; None only while the panel is being torn down
            return
        layout.activate()
        if layout.hasHeightForWidth():
            height = layout.totalHeightForWidth(self.width())
        else:
            height = layout.totalSizeHint().height()
        self.resize(self.width(), height)

    def _keep_on_screen(self) -> None:
        """After growing, move back inside the screen (a panel in a bottom corner grows upwards)."""
        area = self.screen().availableGeometry().adjusted(SCREEN_MARGIN, SCREEN_MARGIN, -SCREEN_MARGIN, -SCREEN_MARGIN)
        frame = self.frameGeometry()
        left = min(max(frame.left(), area.left()), area.right() + 1 - frame.width())
        top = min(max(frame.top(), area.top()), area.bottom() + 1 - frame.height())
        self.move(left, top)

    def _edited_action(self) -> Action:
        """The action with what the editor holds (validated by the action types)."""
        assert self._action is not None
        action = self._action
        if isinstance(action, TypeText):
            action = dataclasses.replace(
                action,
                text=self._text.toPlainText(),
                overwrite=self._overwrite.isChecked(),
                press_enter=self._enter.isChecked(),
            )
        elif isinstance(action, KeyCombo):
            action = KeyCombo(parse_combination(self._keys.text()))
        return action

    def _on_text_typed(self) -> None:
        """Keep the headline in step with the text or keys being edited."""
        if self._action is None or not isinstance(self._action, TypeText | KeyCombo):
            return
        try:
            edited = self._edited_action()
        except ActionError:
            return  # half-typed keys: the headline keeps the last valid combination
        self._action_label.setText(_sentence(_action_words(edited)))

    def _on_point_typed(self) -> None:
        if self._action is None:
            return
        points = [editor.point() for editor in self._points[: len(self._action.points())]]
        iterator = iter(points)
        try:
            edited = self._action.map_points(lambda _old: next(iterator))
        except ActionError as exc:
            self._error.setText(str(exc))
            self._error.setVisible(True)
            return
        self._action = edited
        self._action_label.setText(_sentence(_action_words(edited)))
        self._error.setVisible(False)
        self.action_edited.emit(edited)

    # -- keyboard and moving the panel --

    def keyPressEvent(self, event: QtGui.QKeyEvent) -> None:
        if not self._key_down(event):
            super().keyPressEvent(event)

    def keyReleaseEvent(self, event: QtGui.QKeyEvent) -> None:
        if not self._key_up(event):
            super().keyReleaseEvent(event)

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if watched is self.windowHandle():
            # A click anywhere in the panel gives it the keyboard (for Enter, Esc and the editor).
            # Qt does this itself, except for 400 ms after one of its windows lost the focus.
            if event.type() == QtCore.QEvent.Type.MouseButtonPress and not self.isActiveWindow():
                self.activateWindow()
            return False
        # In the text field, Enter answers as everywhere in the panel; Shift+Enter adds a line.
        if watched in (self._text, self._reply) and isinstance(event, QtGui.QKeyEvent):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                return False
            if event.type() == QtCore.QEvent.Type.KeyPress:
                return self._key_down(event)
            if event.type() == QtCore.QEvent.Type.KeyRelease:
                return self._key_up(event)
        return super().eventFilter(watched, event)

    def answer_with_key(self, key: str) -> None:
        """Answer as the key would (canonical name: "enter" approves, "esc" stops); for the key grab."""
        if self._request is None:
            return
        if key == "esc":
            self._on_stop()
        elif key == "enter":
            self._on_approve()

    def _key_down(self, event: QtGui.QKeyEvent) -> bool:
        if event.key() not in ANSWER_KEYS:
            return False
        if not event.isAutoRepeat():
            self._answer_key = event.key()
        return True

    def _key_up(self, event: QtGui.QKeyEvent) -> bool:
        # Answer on the release: answering on the press hides the panel, and the release would then
        # reach the user's window as a stray key.
        key = event.key()
        if key not in ANSWER_KEYS or event.isAutoRepeat():
            return False
        if key == self._answer_key:
            self._answer_key = None
            if key == Qt.Key.Key_Escape:
                self._on_stop()
            else:
                self._on_approve()
        return True

    def showEvent(self, event: QtGui.QShowEvent) -> None:
        super().showEvent(event)
        window = self.windowHandle()
        if window is not None and not self._watching_window:
            window.installEventFilter(self)
            self._watching_window = True

    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._drag_from = event.globalPosition() - QtCore.QPointF(self.pos())

    def mouseMoveEvent(self, event: QtGui.QMouseEvent) -> None:
        if self._drag_from is not None:
            self.move((event.globalPosition() - self._drag_from).toPoint())

    def mouseReleaseEvent(self, event: QtGui.QMouseEvent) -> None:
        self._drag_from = None


def _logical_box(rect: Rect) -> Box:
    """A screen-space rectangle in Qt's global logical coordinates. A corner on no screen (a window partly
    off the desktop) is taken as is: exact wherever Qt does not scale, which is where that happens."""
    top_left = screen_point_to_global_logical_or_none(Point(rect.left, rect.top)) or QtCore.QPointF(rect.left, rect.top)
    corner = Point(rect.right - 1, rect.bottom - 1)
    bottom_right = screen_point_to_global_logical_or_none(corner) or QtCore.QPointF(corner.x, corner.y)
    return Box(top_left.x(), top_left.y(), bottom_right.x() - top_left.x() + 1, bottom_right.y() - top_left.y() + 1)


def screen_point_to_global_logical_or_none(point: Point) -> QtCore.QPointF | None:
    try:
        return screen_point_to_global_logical(point)
    except OffScreenError:
        return None


def _action_words(action: Action) -> str:
    """The action in words; text to type with its length and whitespace visible, long text as start and end."""
    if isinstance(action, TypeText):
        # The text on a line of its own: never broken between "Enter" and the text's first word.
        return f"{typing_in_words(action, focused_field=True)}:\n{_breakable(text_summary(action.text))}"
    if pastes(action):  # what it does, not only which button: the text it pastes is on the line below
        return f"{action_in_words(action)}: pastes the selection"
    return action_in_words(action)


def _without_paste_words(adjustment: str, paste_text: str | None) -> str:
    """The engine's adjustment line without the paste's words it appends (the panel shows them under the
    headline instead)."""
    if paste_text is None:
        return adjustment
    words = _sentence(paste_in_words(paste_text))
    return (
        "; ".join(part for part in adjustment.split("; ") if part and part != words)
        if words in adjustment
        else adjustment
    )


# The Control Pictures (U+2400...) a paste's text shows its control characters as: many fonts have none of
# them (DejaVu Sans, the usual default, has no ␛ and draws a box), so where the label's font lacks one the
# control's name is shown in angle brackets, which such fonts have.
CONTROL_PICTURES = range(0x2400, 0x2427)


def _in_font(text: str, label: QtWidgets.QLabel) -> str:
    """`text` with each control picture the label's font cannot draw written as its name."""
    label.ensurePolished()  # the style sheet's font
    metrics = label.fontMetrics()
    out = []
    for character in text:
        if ord(character) in CONTROL_PICTURES and not metrics.inFontUcs4(ord(character)):
            name = unicodedata.name(character, "control").removeprefix("SYMBOL FOR ")
            out.append(f"⟨{name.capitalize()}⟩")  # ␛ as ⟨Escape⟩
        else:
            out.append(character)
    return "".join(out)


def _breakable(text: str, every: int = 24) -> str:
    """Offer a line break (a zero-width space, invisible) every `every` characters.

    Text to type is shown with its spaces as '·', so it has no break opportunities, and Qt sizes a
    word-wrapped label wrongly for one unbreakable run: the panel would clip it.
    """
    return "\u200b".join(text[i : i + every] for i in range(0, len(text), every))


def _never_covered(request: ApprovalRequest) -> str:
    """For a step that is always shown (the engine's approval_rule), which later steps of its kind the
    approve-all box never covers; empty for any other step."""
    if not request.irreversible:
        return ""
    action = request.action
    if pastes(action):
        why = "A middle click pastes the selection: it is asked every time, with the text."
    elif isinstance(action, TypeText) and presses_enter(action):
        why = "Typing that presses Enter is asked every time."
    elif presses_enter(action):
        why = "Keys that press Enter (ctrl+m and ctrl+j too) are asked every time."
    else:
        why = "Irreversible steps (send, save, delete...) are asked every time."
    return f"Not offered on this step. {why}"


def _who_wants(request: ApprovalRequest) -> str:
    """The header over the action: Holodesk's own model, or the agent that asks for the step (its name
    is the client's own word, so it is escaped and bounded like model text)."""
    if not request.asked_by:
        return "Holodesk wants to"
    return f"{bounded_prose(request.asked_by, MAX_ASKER_CHARS, max_lines=1)} wants to"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def lines_that_fit(text: str, metrics: QtGui.QFontMetrics, width: int) -> str:
    """`text` broken between words into lines no wider than `width` pixels (a word wider than that
    stays whole on its own line)."""
    lines: list[str] = []
    for word in text.split():
        if lines and metrics.horizontalAdvance(f"{lines[-1]} {word}") <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return "\n".join(lines)
