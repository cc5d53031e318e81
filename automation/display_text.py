"""Text from the model made safe and honest to show: control characters escaped, whitespace visible.

A model's note may carry ANSI escape sequences that redraw a terminal, bidi overrides that reorder
what is read, or text to type that hides a command after a `clear` and a screenful of spaces. Every
front end (terminal, annotated picture, panel) shows model text through these functions, never raw.

- `safe_text`: for prose (note, thought, element, question): control and invisible format
  characters become escapes such as `\\x1b`, `\\n`, `\\u202e`; ordinary spaces stay.
- `visible_text`: for text that will be typed: also makes spaces, tabs and newlines visible
  (`·`, `\\t`, `\\n`), so what is shown is exactly what will be typed, character for character.
- `text_summary`: a bounded view of long text to type: its start and end (callers show its length).
- `safe_lines`: `safe_text` that keeps line breaks, for prose in a window that wraps lines.
- `bounded_prose`: prose for a small space (the terminal's approval): bounded in characters and
  lines, runs of spaces visible.
"""

from __future__ import annotations

import unicodedata

VISIBLE_SPACE = "·"
DEFAULT_SUMMARY_CHARS = 120
MAX_PROSE_LINES = 4

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b", "\x00": "\\x00"}


def _escape(character: str) -> str | None:
    """The escape for a character that must not reach a display raw, or None if it may."""
    if character in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[character]
    code = ord(character)
    # Cc: C0/C1 controls and DEL. Cf: invisible format characters (bidi overrides, zero-width joiners).
    # Zl/Zp: line and paragraph separators, which break lines like a newline.
    if unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"):
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return None


def safe_text(text: str) -> str:
    """`text` with every control or invisible format character replaced by a visible escape.

    Backslashes are doubled: a backslash-u-2-0-2-e the model wrote shows as two backslashes and
    u202e, never like the escape of the real character.
    """
    return "".join("\\\\" if c == "\\" else escaped if (escaped := _escape(c)) is not None else c for c in text)


def visible_text(text: str) -> str:
    """`text` with controls escaped and whitespace made visible: each character shown as itself or a marker.

    Backslashes are doubled so an escape in the output always means the character, never the text.
    Spaces are `·` (a literal `·` in the text stays `·`; the length shown next to it tells them apart
    when it matters), other Unicode spaces are escaped.
    """
    shown: list[str] = []
    for character in text:
        if character == "\\":
            shown.append("\\\\")
        elif character == " ":
            shown.append(VISIBLE_SPACE)
        elif character.isspace() and character not in _NAMED_ESCAPES:
            shown.append(f"\\u{ord(character):04x}")  # no-break, em, ideographic ... spaces
        else:
            escaped = _escape(character)
            shown.append(escaped if escaped is not None else character)
    return "".join(shown)


def safe_lines(text: str) -> str:
    """`safe_text` line by line: newlines stay line breaks, every other control is escaped."""
    return "\n".join(safe_text(line) for line in text.split("\n"))


def text_summary(text: str, limit: int = DEFAULT_SUMMARY_CHARS) -> str:
    """Text to type for a one-line view: in full (visible) when short; else its start and end."""
    shown = visible_text(text)
    if len(shown) <= limit:
        return shown
    head = max(1, limit * 2 // 3)
    tail = max(1, limit - head)
    hidden = len(shown) - head - tail
    return f"{shown[:head]} …[{hidden} more]… {shown[-tail:]}"


def bounded_prose(text: str, limit: int, max_lines: int = MAX_PROSE_LINES) -> str:
    """Model prose (a note, a thought) for a small space: escaped, its whitespace visible, bounded.

    Runs of spaces show as `·` (padding cannot push text into a place of its own choosing), other
    Unicode spaces are escaped, blank lines go, at most `max_lines` lines keep their breaks (later
    ones show as `\\n`), and text beyond `limit` characters is cut, saying how much was left out.
    """
    lines = [_visible_runs(safe_text(line.strip())) for line in text.strip().split("\n") if line.strip()]
    shown = "\n".join(lines[:max_lines])
    if len(lines) > max_lines:
        shown += " \\n " + " \\n ".join(lines[max_lines:])
    if len(shown) <= limit:
        return shown
    return f"{shown[: max(1, limit - 1)].rstrip()}… [{len(shown) - limit + 1} more characters]"


def _visible_runs(line: str) -> str:
    """A line with every space that is not a single ordinary space between words made visible."""
    out: list[str] = []
    for index, character in enumerate(line):
        if character == " ":
            alone = line[index - 1 : index] != " " and line[index + 1 : index + 2] != " "
            out.append(" " if alone else VISIBLE_SPACE)
        elif character.isspace():
            out.append(f"\\u{ord(character):04x}")
        else:
            out.append(character)
    return "".join(out)
