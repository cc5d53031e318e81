"""What the Hugging Face hub says about a model repository: its commit, files, checksums, licence and gating.

Asked through huggingface_hub's own client (`HfApi.model_info` with the files' metadata), so HF_ENDPOINT,
tokens and proxies work as for every other Hugging Face tool. Every failure becomes a SetupError in words.
"""

from __future__ import annotations

from dataclasses import dataclass

from holodesk.app.setup.errors import SetupError

# Files a checkpoint is loaded from; the rest (pictures, GGUF or ONNX exports, README) are not downloaded.
WANTED_SUFFIXES = (".json", ".safetensors", ".txt", ".jinja", ".model", ".tiktoken", ".py")
# Licences that forbid commercial use, as model cards name them.
NON_COMMERCIAL_MARKS = ("-nc", "nc-", "non-commercial", "noncommercial", "research")


@dataclass(frozen=True, slots=True)
class HubFile:
    """One file of the repository: its size and the checksum the hub lists (sha256 for LFS files, else git's)."""

    name: str
    size: int
    sha256: str | None
    blob_id: str | None


@dataclass(frozen=True, slots=True)
class RepoListing:
    """A repository at one commit, as the hub describes it."""

    repo_id: str
    commit: str
    files: tuple[HubFile, ...]
    license: str | None
    gated: bool
    endpoint: str

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def page(self) -> str:
        return f"{self.endpoint}/{self.repo_id}"

    def licence_words(self) -> str:
        """The licence in words, said plainly when it restricts use."""
        if not self.license:
            return "its model card names no licence: read the model page before using it"
        name = self.license.lower()
        if any(mark in name for mark in NON_COMMERCIAL_MARKS):
            return f"licence {self.license}: NON-COMMERCIAL use only (read it on the model page)"
        return f"licence {self.license}"


def list_repo(repo_id: str, revision: str | None, *, endpoint: str | None = None) -> RepoListing:
    """Ask the hub for `repo_id` at `revision` (default: main). Raises SetupError in words."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    base = (endpoint or constants.ENDPOINT).rstrip("/")
    if constants.is_offline_mode():
        raise SetupError(
            "the Hugging Face client is in offline mode (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set), and"
            " holodesk setup downloads a model: unset that variable for this command, then run it again"
        )
    try:
        info = HfApi(endpoint=base).model_info(repo_id, revision=revision, files_metadata=True)
    except RevisionNotFoundError:
        raise SetupError(
            f"{repo_id} has no revision {revision!r} on {base}: give a branch, tag or commit that exists"
            f" (see {base}/{repo_id}/tree/main), or leave --revision out for the main branch"
        ) from None
    except GatedRepoError:
        raise SetupError(_gated_words(repo_id, base, None)) from None
    except RepositoryNotFoundError:
        raise SetupError(
            f"{repo_id} is not a model on {base} (or it is private and you are not logged in):"
            " check the name, or log in with `hf auth login`"
        ) from None
    except HfHubHTTPError as exc:
        raise SetupError(f"the Hugging Face hub at {base} refused to describe {repo_id}: {_first_line(exc)}") from None
    except Exception as exc:  # the HTTP client's connection and timeout errors: no common base to name
        raise SetupError(unreachable_words(base, exc)) from None
    if not info.sha:
        raise SetupError(f"the hub at {base} did not say which commit {repo_id} is at: try again later")
    files = []
    for sibling in info.siblings or ():
        if not sibling.rfilename.endswith(WANTED_SUFFIXES):
            continue
        if sibling.size is None:
            raise SetupError(f"the hub at {base} did not give the size of {repo_id}'s {sibling.rfilename}")
        sha256 = sibling.lfs.sha256 if sibling.lfs is not None else None
        files.append(HubFile(sibling.rfilename, sibling.size, sha256, sibling.blob_id))
    if not any(f.name == "config.json" for f in files):
        raise SetupError(f"{repo_id} at {info.sha[:12]} has no config.json, so it is not a checkpoint Holodesk loads")
    card = info.card_data
    license_name = card.get("license") if card is not None else None
    return RepoListing(
        repo_id=repo_id,
        commit=info.sha,
        files=tuple(files),
        license=str(license_name) if license_name else None,
        gated=bool(info.gated),
        endpoint=base,
    )


def unreachable_words(base: str, exc: BaseException) -> str:
    return (
        f"cannot reach the Hugging Face hub at {base} ({type(exc).__name__}: {_first_line(exc)}): check this"
        " computer's network connection (and HF_ENDPOINT or a proxy if you set one), then run holodesk setup again"
    )


def _gated_words(repo_id: str, base: str, license_name: str | None) -> str:
    licence = f" (licence {license_name})" if license_name else ""
    return (
        f"{repo_id} is gated{licence}: its owner asks each person to accept its conditions first. Open"
        f" {base}/{repo_id} while logged in, accept them, then log in here with `hf auth login` and run"
        " holodesk setup again"
    )


def gated_words(listing: RepoListing) -> str:
    return _gated_words(listing.repo_id, listing.endpoint, listing.license)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
