"""Where the API key comes from: environment first, then the OS keyring (in-memory here), never crashing on it."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import keyring
import keyring.errors
import pytest
from keyring.backend import KeyringBackend

from holodesk.inference.secrets import (
    KEYRING_SERVICE,
    KeyringError,
    delete_api_key,
    find_api_key,
    keyring_username,
    store_api_key,
)

BASE_URL = "http://GPU-Box.lan:8000/v1"


class MemoryKeyring(KeyringBackend):
    """A keyring that lives in a dict, so tests never touch the user's real one."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if (service, username) not in self.passwords:
            raise keyring.errors.PasswordDeleteError("no such password")
        del self.passwords[(service, username)]


class BrokenKeyring(KeyringBackend):
    """What a headless box gives: every call fails."""

    priority = 1  # type: ignore[assignment]

    def get_password(self, service: str, username: str) -> str | None:
        raise keyring.errors.NoKeyringError("No recommended backend was available.")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise keyring.errors.NoKeyringError("No recommended backend was available.")

    def delete_password(self, service: str, username: str) -> None:
        raise keyring.errors.KeyringLocked("The collection is locked.")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOLODESK_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


@pytest.fixture
def broken_keyring() -> Iterator[BrokenKeyring]:
    previous = keyring.get_keyring()
    backend = BrokenKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


def test_holodesk_variable_wins_over_the_keyring(
    monkeypatch: pytest.MonkeyPatch, memory_keyring: MemoryKeyring
) -> None:
    store_api_key(BASE_URL, "sk-keyring")
    monkeypatch.setenv("HOLODESK_API_KEY", "sk-holodesk")
    assert find_api_key(BASE_URL).key == "sk-holodesk"
    assert find_api_key(BASE_URL).source == "HOLODESK_API_KEY"

    monkeypatch.delenv("HOLODESK_API_KEY")
    lookup = find_api_key(BASE_URL)
    assert (lookup.key, lookup.source) == ("sk-keyring", "keyring (holodesk/gpu-box.lan)")


def test_an_openai_key_is_never_sent_to_the_shared_server(
    monkeypatch: pytest.MonkeyPatch, memory_keyring: MemoryKeyring
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert find_api_key(BASE_URL).key is None


def test_a_blank_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch, memory_keyring: MemoryKeyring) -> None:
    store_api_key(BASE_URL, "sk-keyring")
    monkeypatch.setenv("HOLODESK_API_KEY", "   ")
    assert find_api_key(BASE_URL).key == "sk-keyring"


def test_store_resolve_delete(memory_keyring: MemoryKeyring) -> None:
    assert find_api_key(BASE_URL).key is None
    store_api_key(BASE_URL, "  sk-stored  ")
    # Stored under the host name only: other ports and paths on that host share it.
    assert memory_keyring.passwords == {(KEYRING_SERVICE, "gpu-box.lan"): "sk-stored"}
    assert find_api_key("https://gpu-box.lan/v1").key == "sk-stored"
    assert find_api_key("http://other-box:8000/v1").key is None

    assert delete_api_key(BASE_URL) is True
    assert find_api_key(BASE_URL).key is None
    assert delete_api_key(BASE_URL) is False


def test_an_empty_key_is_not_stored(memory_keyring: MemoryKeyring) -> None:
    with pytest.raises(ValueError, match="empty"):
        store_api_key(BASE_URL, "  ")
    assert memory_keyring.passwords == {}


@pytest.mark.parametrize(
    ("url", "host"),
    [("http://GPU-Box:8000/v1", "gpu-box"), ("gpu-box:8000", "gpu-box"), ("https://10.0.0.7/v1", "10.0.0.7")],
)
def test_keyring_username_is_the_host(url: str, host: str) -> None:
    assert keyring_username(url) == host


def test_keyring_username_needs_a_host() -> None:
    with pytest.raises(ValueError, match="host"):
        keyring_username("http:///v1")


def test_an_unreadable_keyring_is_reported_not_raised(
    broken_keyring: BrokenKeyring, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="holodesk.inference.secrets"):
        lookup = find_api_key(BASE_URL)
        assert find_api_key(BASE_URL).key is None
    assert lookup.key is None and lookup.source is None
    assert lookup.problem is not None
    assert "keyring could not be read" in lookup.problem and "NoKeyringError" in lookup.problem
    assert "HOLODESK_API_KEY" in lookup.problem
    assert "keyring could not be read" in caplog.text
    # Logged, not warned: most servers need no key, so a terminal must not be told on every command.
    assert all(record.levelno < logging.WARNING for record in caplog.records)


def test_the_environment_still_works_with_a_broken_keyring(
    broken_keyring: BrokenKeyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLODESK_API_KEY", "sk-env")
    lookup = find_api_key(BASE_URL)
    assert (lookup.key, lookup.problem) == ("sk-env", None)


def test_storing_in_a_broken_keyring_says_what_to_do(broken_keyring: BrokenKeyring) -> None:
    with pytest.raises(KeyringError) as caught:
        store_api_key(BASE_URL, "sk-x")
    assert "could not store" in str(caught.value) and "HOLODESK_API_KEY" in str(caught.value)
    assert "sk-x" not in str(caught.value)
    with pytest.raises(KeyringError, match="locked"):
        delete_api_key(BASE_URL)
