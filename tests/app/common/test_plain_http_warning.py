"""An API key about to travel over plain http to another machine is warned about; local or https is fine."""

from __future__ import annotations

import pytest

from holodesk.app.common.policy_factory import PolicyOptions, plain_http_key_warning


def remote_options(backend: str, base_url: str) -> PolicyOptions:
    return PolicyOptions(
        backend=backend,
        profile="holotron",
        model=None,
        base_url=base_url,
        device="cuda",
        script=None,
        screenshot_window="trained",
    )


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLODESK_API_KEY", "sk-secret-value")


@pytest.mark.parametrize(
    "url", ["http://gpu-box:8000/v1", "http://10.0.0.7/v1", "http://[2001:db8::1]:8000/v1", "HTTP://Example.com/v1"]
)
def test_a_key_over_plain_http_to_another_host_is_warned_about(key: None, url: str) -> None:
    warning = plain_http_key_warning(remote_options("remote", url))
    assert warning is not None
    assert "unencrypted" in warning and "HOLODESK_API_KEY" in warning and "https://" in warning
    assert "sk-secret-value" not in warning


@pytest.mark.parametrize(
    "url",
    ["https://gpu-box:8000/v1", "http://127.0.0.1:8000/v1", "http://127.8.0.1/v1", "http://localhost:8000/v1",
     "http://[::1]:8000/v1", "http://[::1"],
)  # fmt: skip
def test_https_and_this_machine_are_not_warned_about(key: None, url: str) -> None:
    assert plain_http_key_warning(remote_options("remote", url)) is None


def test_no_key_or_no_remote_backend_means_no_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOLODESK_API_KEY", raising=False)
    monkeypatch.setattr("keyring.get_password", lambda service, user: None)
    assert plain_http_key_warning(remote_options("remote", "http://gpu-box:8000/v1")) is None
    monkeypatch.setenv("HOLODESK_API_KEY", "sk-x")
    assert plain_http_key_warning(remote_options("local", "http://gpu-box:8000/v1")) is None
