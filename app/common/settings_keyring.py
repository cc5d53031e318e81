"""The API key of the settings' remote server, kept in the OS keyring through inference.secrets, never in the file."""

from __future__ import annotations

from holodesk.app.common.settings_model import Settings, SettingValueError
from holodesk.inference import secrets


def _remote_url(settings: Settings) -> str:
    url = settings.model.remote.base_url
    if url is None:
        raise SettingValueError("model.remote.base_url", "set the server's URL first: keys are stored per server host")
    return url


def store_api_key(settings: Settings, key: str) -> None:
    """Store the API key for the settings' remote server in the OS keyring (KeyringError if it refuses)."""
    secrets.store_api_key(_remote_url(settings), key)


def delete_api_key(settings: Settings) -> bool:
    """Forget the stored key for the settings' remote server; True if one was stored."""
    return secrets.delete_api_key(_remote_url(settings))


def find_api_key(settings: Settings) -> secrets.ApiKeyLookup:
    """Whether a key is available for the settings' remote server, and from where (env or keyring)."""
    return secrets.find_api_key(_remote_url(settings))
