"""Find a checkpoint on this disk, offline: a directory, or a repo id in the local Hugging Face cache.

A checkpoint is named either by a local directory (it must hold `config.json`) or by a Hugging Face
repo id, which is resolved from the local Hugging Face cache only: finding a model never touches
the network; weights are fetched by the user (`hf download`, see `download_command`).
Importing this module imports neither torch nor transformers (huggingface_hub only for a repo id).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from holodesk.inference.errors import ModelLoadError
from holodesk.inference.hardware import gib

DEFAULT_REPO_ID = "Hcompany/Holotron-12B"

# "owner/name" as the Hub spells repo ids; anything else is read as a path.
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_WEIGHT_SUFFIXES = (".safetensors",)


@dataclass(frozen=True, slots=True)
class CheckpointLocation:
    """Where a checkpoint's files are and how big its weights are on disk.

    `source` says how it was found; `repo_id`/`revision` are set for Hugging Face cache hits
    (`revision` is the snapshot's commit hash). `weight_bytes` is 0 when no weight files were found.
    """

    path: Path
    source: Literal["directory", "hf-cache"]
    weight_bytes: int
    repo_id: str | None = None
    revision: str | None = None

    def describe(self) -> str:
        where = f"{self.repo_id} from the Hugging Face cache ({self.path})" if self.repo_id else str(self.path)
        return f"{where}, {gib(self.weight_bytes)} of weights"


def download_command(repo_id: str = DEFAULT_REPO_ID) -> str:
    """The command a user runs to put `repo_id` into the Hugging Face cache."""
    return f"hf download {repo_id}"


def hf_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """The Hugging Face hub cache that lookups use: `cache_dir`, else HF_HUB_CACHE / HF_HOME's default."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def looks_like_repo_id(spec: str) -> bool:
    """True for "owner/name"; a string that names an existing path is a path, never a repo id."""
    return bool(_REPO_ID.match(spec)) and not Path(spec).expanduser().exists()


def find_checkpoint(
    spec: str | Path | None = None,
    *,
    cache_dir: str | Path | None = None,
    revision: str | None = None,
) -> CheckpointLocation:
    """Resolve a checkpoint offline: a directory, or a repo id in the local HF cache (default Holotron-12B).

    Raises ModelLoadError saying where it looked and how to get the weights.
    """
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        spec = DEFAULT_REPO_ID
    if isinstance(spec, str) and looks_like_repo_id(spec):
        return _from_hf_cache(spec, cache_dir=cache_dir, revision=revision)
    return _from_directory(Path(spec).expanduser())


def _from_directory(path: Path) -> CheckpointLocation:
    if not path.is_dir():
        raise ModelLoadError(
            f"No model directory at {path}. Give a directory that holds the checkpoint (config.json and"
            f" *.safetensors), or a Hugging Face repo id such as {DEFAULT_REPO_ID} after downloading it with:"
            f" {download_command()}"
        )
    _check_complete(path, where=str(path), fix="copy the missing files into that directory")
    return CheckpointLocation(path=path.resolve(), source="directory", weight_bytes=estimate_weight_bytes(path))


def _from_hf_cache(repo_id: str, *, cache_dir: str | Path | None, revision: str | None) -> CheckpointLocation:
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        raise ModelLoadError(
            f"{repo_id} names a Hugging Face repository, but the in-process backend is not installed"
            " (huggingface_hub is missing): pip install 'holodesk[holotron]', or give a checkpoint directory."
        ) from None

    cache = hf_cache_dir(cache_dir)
    try:
        snapshot = Path(snapshot_download(repo_id, revision=revision, cache_dir=str(cache), local_files_only=True))
    except LocalEntryNotFoundError:
        raise ModelLoadError(
            f"{repo_id} is not in the Hugging Face cache at {cache} (looked offline only; nothing is"
            f" downloaded without you asking). Download it once with: {download_command(repo_id)}"
            f" (about 25 GB for Holotron-12B), or run `holodesk setup` to choose a model that fits this computer"
            " and download it, or point Holodesk at a local checkpoint directory."
        ) from None
    _check_complete(
        snapshot,
        where=f"the cached snapshot of {repo_id} ({snapshot})",
        fix=f"the download was interrupted: run {download_command(repo_id)} again to finish it",
    )
    return CheckpointLocation(
        path=snapshot,
        source="hf-cache",
        weight_bytes=estimate_weight_bytes(snapshot),
        repo_id=repo_id,
        revision=snapshot.name,
    )


def _check_complete(path: Path, *, where: str, fix: str) -> None:
    """A checkpoint needs config.json, and every weight shard its index lists (a partial download has gaps)."""
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"{where} has no config.json, so it is not a transformers checkpoint: {fix}.")
    missing: list[str] = []
    for index_file in path.glob("*.index.json"):
        for shard in sorted(set(_read_json(index_file).get("weight_map", {}).values())):
            if not (path / shard).is_file():  # is_file follows the cache's symlinks: a dangling link is missing
                missing.append(shard)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ModelLoadError(f"{where} is missing {len(missing)} weight file(s) ({shown}): {fix}.")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def estimate_weight_bytes(path: str | Path) -> int:
    """Bytes of weights on disk: the safetensors files (symlinks followed), else the index's total (for people)."""
    path = Path(path)
    safetensors = _sum_sizes(path, _WEIGHT_SUFFIXES)
    if safetensors:
        return safetensors
    for index_file in path.glob("*.index.json"):
        total = _read_json(index_file).get("metadata", {}).get("total_size")
        if isinstance(total, int | float) and total > 0:
            return int(total)
    return 0


def _sum_sizes(path: Path, suffixes: tuple[str, ...]) -> int:
    total = 0
    for entry in path.iterdir() if path.is_dir() else ():
        if entry.name.endswith(suffixes):
            try:
                total += entry.stat().st_size
            except OSError:  # a dangling cache symlink: the blob is not there
                continue
    return total
