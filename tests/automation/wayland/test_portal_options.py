"""What Holodesk asks the portal for, by the portal's RemoteDesktop version (the restore token).

A version 1 portal (xdg-desktop-portal 1.16, Debian 12) refuses persist_mode ("cannot persist"),
so it must never be asked, and a token kept from another desktop is not sent to it; version 2
keeps the choice until the user revokes it. The headless stack's tests show v1 starting a session
with these options and the consent explanation saying it asks at every run.
"""

from __future__ import annotations

from holodesk.automation.wayland.portal import (
    DEVICE_KEYBOARD,
    DEVICE_POINTER,
    PERSIST_UNTIL_REVOKED,
    select_devices_options,
)
from holodesk.automation.wayland.session import ASKS_EVERY_RUN

DEVICES = ("u", DEVICE_KEYBOARD | DEVICE_POINTER)


def test_a_version_1_portal_is_never_asked_to_persist() -> None:
    assert select_devices_options(1, None) == {"types": DEVICES}
    assert select_devices_options(1, "kept-token") == {"types": DEVICES}


def test_a_version_2_portal_persists_and_gets_the_kept_token() -> None:
    assert select_devices_options(2, None) == {"types": DEVICES, "persist_mode": ("u", PERSIST_UNTIL_REVOKED)}
    assert select_devices_options(2, "kept-token") == {
        "types": DEVICES,
        "persist_mode": ("u", PERSIST_UNTIL_REVOKED),
        "restore_token": ("s", "kept-token"),
    }


def test_the_explanation_for_an_old_portal_says_it_asks_every_run() -> None:
    text = ASKS_EVERY_RUN.format(version=1)
    assert "version 1" in text and "asks at every run" in text


def test_the_restore_token_is_private_even_over_a_leftover_temporary_file(tmp_path):
    import os

    from holodesk.automation.wayland.session import RestoreTokenStore

    path = tmp_path / "holodesk" / "restore-token"
    path.parent.mkdir()
    leftover = path.with_name(path.name + ".tmp")
    leftover.write_text("old", encoding="utf-8")
    leftover.chmod(0o644)
    store = RestoreTokenStore(path)
    store.save("a-secret-token")
    assert store.load() == "a-secret-token"
    assert os.stat(path).st_mode & 0o777 == 0o600
