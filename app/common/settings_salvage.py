"""Salvage: the settings a broken file still gives, every valid value kept and the default for each bad one.

What `load_settings()` starts the app with when the file has problems: one bad value never drops the
others (a remote server's URL survives a typo in the step limit). Never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from holodesk.app.common.settings_checks import InvalidValue
from holodesk.app.common.settings_model import Section, SettingValueError, dotted_key, sections_of
from holodesk.app.common.settings_schema import RULE_KEYS, SECRET_KEY_NAMES


def salvage(cls: type[Section], data: object) -> Any:
    """A `cls` from the valid values of a table and defaults for the rest (never raises)."""
    sections = sections_of(cls)
    values: dict[str, Any] = {}
    for name, raw in data.items() if isinstance(data, Mapping) else ():
        if name in sections:
            values[name] = salvage(sections[name], raw)
        elif name in cls.CHECKS and name.lower() not in SECRET_KEY_NAMES:
            with suppress(InvalidValue):
                values[name] = cls.CHECKS[name](raw)
    try:
        return cls(**values)
    except SettingValueError:  # a rule across fields (the remote backend without a URL): default its fields
        kept = {
            name: value
            for name, value in values.items()
            if name in sections or dotted_key(cls.TABLE, name) not in RULE_KEYS
        }
        try:
            return cls(**kept)
        except SettingValueError:
            return cls(**{name: value for name, value in values.items() if name in sections})
