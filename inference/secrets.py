"""Where the remote backend's API key lives: the environment or the OS keyring, never a settings file.

Lookup order: HOLODESK_API_KEY, then the OS keyring under service "holodesk" with the server's
host name as the user name.
A keyring that cannot be read (no backend on a headless box, a locked collection, no D-Bus) is
reported as a problem, not raised: a server without authentication still works.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

import keyring
import keyring.errors

from holodesk.inference.errors import InferenceError

logger = logging.getLogger(__name__)

KEYRING_SERVICE = "holodesk"
# Only our own variable: falling back to OPENAI_API_KEY would send a user's OpenAI key to whoever runs
# the shared server.
API_KEY_ENV_VARS = ("HOLODESK_API_KEY",)


class KeyringError(InferenceError):
    """The OS keyring could not store or delete a key; the message says why and what to do instead."""


@dataclass(frozen=True, slots=True)
class ApiKeyLookup:
    """The outcome of looking for a key: the key (or None), where it came from, what went wrong.

    `source` names the env var or says "keyring (holodesk/<host>)"; `problem` is set when the
    keyring could not be read, so a doctor command can show it even though lookup did not fail.
    """

    key: str | None
    source: str | None
    problem: str | None = None


def keyring_username(base_url: str) -> str:
    """The keyring user name for a server: its host name, lower-case (ports share one key)."""
    url = base_url.strip()
    # "gpu-box:8000" has no scheme; urlsplit would read "gpu-box" as the scheme.
    if "://" not in url:
        url = "http://" + url
    host = urlsplit(url).hostname
    if not host:
        raise ValueError(f"cannot find a host name in the server URL {base_url!r}")
    return host.lower()


def where_keys_come_from(base_url: str) -> str:
    """One sentence for error messages: where Holodesk looks for this server's key."""
    env_vars = " or ".join(API_KEY_ENV_VARS)
    user = _safe_username(base_url)
    return f"set {env_vars}, or store the key in the OS keyring (service '{KEYRING_SERVICE}', user '{user}')"


def find_api_key(base_url: str) -> ApiKeyLookup:
    """Look for the key for `base_url` in the environment, then the keyring; never raises for keyring trouble."""
    for name in API_KEY_ENV_VARS:
        value = os.environ.get(name, "").strip()
        if value:
            return ApiKeyLookup(key=value, source=name)
    username = keyring_username(base_url)
    try:
        stored = keyring.get_password(KEYRING_SERVICE, username)
    except Exception as exc:  # keyring backends raise anything from NoKeyringError to D-Bus errors
        problem = (
            f"the OS keyring could not be read ({type(exc).__name__}: {exc}); "
            f"set {' or '.join(API_KEY_ENV_VARS)} instead"
        )
        # Not a warning: most servers need no key. It matters only when a server asks for one, and
        # then the refusal says where keys go (and `holodesk doctor` shows this problem).
        logger.info("API key lookup: %s", problem)
        return ApiKeyLookup(key=None, source=None, problem=problem)
    if stored and stored.strip():
        return ApiKeyLookup(key=stored.strip(), source=f"keyring ({KEYRING_SERVICE}/{username})")
    return ApiKeyLookup(key=None, source=None)


def store_api_key(base_url: str, key: str) -> None:
    """Store `key` for `base_url`'s host in the OS keyring; KeyringError when the keyring refuses."""
    key = key.strip()
    if not key:
        raise ValueError("the API key is empty")
    username = keyring_username(base_url)
    try:
        keyring.set_password(KEYRING_SERVICE, username, key)
    except Exception as exc:  # keyring backends raise anything from NoKeyringError to D-Bus errors
        raise KeyringError(
            f"could not store the API key in the OS keyring ({type(exc).__name__}: {exc}); "
            f"set {' or '.join(API_KEY_ENV_VARS)} in the environment instead"
        ) from exc


def delete_api_key(base_url: str) -> bool:
    """Remove the stored key for `base_url`'s host. True if one was removed, False if none was stored."""
    username = keyring_username(base_url)
    try:
        keyring.delete_password(KEYRING_SERVICE, username)
    except keyring.errors.PasswordDeleteError:
        return False
    except Exception as exc:  # keyring backends raise anything from NoKeyringError to D-Bus errors
        raise KeyringError(f"could not delete the API key from the OS keyring ({type(exc).__name__}: {exc})") from exc
    return True


def _safe_username(base_url: str) -> str:
    try:
        return keyring_username(base_url)
    except ValueError:
        return "<server host>"
