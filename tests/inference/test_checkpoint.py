"""Finding checkpoints offline: local directories, the Hugging Face cache, partial downloads, sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from holodesk.inference.checkpoint import (
    DEFAULT_REPO_ID,
    estimate_weight_bytes,
    find_checkpoint,
    looks_like_repo_id,
)
from holodesk.inference.errors import ModelLoadError

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def write_checkpoint(path: Path, shards: dict[str, int], *, index: bool = False, dtype: str = "bfloat16") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"torch_dtype": dtype}))
    for name, size in shards.items():
        (path / name).write_bytes(b"\0" * size)
    if index:
        weight_map = {f"layer.{i}": name for i, name in enumerate(shards)}
        (path / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": sum(shards.values())}, "weight_map": weight_map})
        )
    return path


def write_hf_cache(cache: Path, repo_id: str, shards: dict[str, int]) -> Path:
    """The hub cache layout: blobs, a snapshot of symlinks to them, and refs/main naming the commit."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    (repo / "blobs").mkdir()
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    files = {"config.json": json.dumps({"torch_dtype": "bfloat16"}).encode()}
    files.update({name: b"\0" * size for name, size in shards.items()})
    for i, (name, content) in enumerate(files.items()):
        blob = repo / "blobs" / f"blob{i}"
        blob.write_bytes(content)
        (snapshot / name).symlink_to(blob)
    return snapshot


def test_a_local_directory_is_found_with_its_weight_size(tmp_path: Path) -> None:
    path = write_checkpoint(tmp_path / "holotron", {"model-1.safetensors": 1000, "model-2.safetensors": 24})
    location = find_checkpoint(path)
    assert location.source == "directory"
    assert location.path == path.resolve()
    assert location.weight_bytes == 1024
    assert location.repo_id is None
    assert find_checkpoint(str(path)) == location


def test_a_missing_directory_says_where_and_how_to_get_weights(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError) as caught:
        find_checkpoint(tmp_path / "nowhere")
    message = str(caught.value)
    assert str(tmp_path / "nowhere") in message
    assert "hf download Hcompany/Holotron-12B" in message


def test_a_directory_without_config_is_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.safetensors").write_bytes(b"\0")
    with pytest.raises(ModelLoadError, match=r"has no config\.json"):
        find_checkpoint(tmp_path / "weights")


def test_a_partial_download_names_the_missing_shards(tmp_path: Path) -> None:
    path = write_checkpoint(
        tmp_path / "partial",
        {"model-00001-of-00002.safetensors": 10, "model-00002-of-00002.safetensors": 10},
        index=True,
    )
    (path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"missing 1 weight file\(s\) \(model-00002-of-00002.safetensors\)"):
        find_checkpoint(path)


def test_a_repo_id_resolves_from_the_hf_cache_only(tmp_path: Path) -> None:
    snapshot = write_hf_cache(tmp_path / "hub", DEFAULT_REPO_ID, {"model.safetensors": 4096})
    location = find_checkpoint(DEFAULT_REPO_ID, cache_dir=tmp_path / "hub")
    assert location.source == "hf-cache"
    assert location.path == snapshot
    assert location.repo_id == DEFAULT_REPO_ID
    assert location.revision == COMMIT
    assert location.weight_bytes == 4096  # the size of the blob behind the symlink, not of the link


def test_no_spec_means_holotron_and_a_cache_miss_says_how_to_download(tmp_path: Path) -> None:
    empty_cache = tmp_path / "hub"
    empty_cache.mkdir()
    with pytest.raises(ModelLoadError) as caught:
        find_checkpoint(None, cache_dir=empty_cache)
    message = str(caught.value)
    assert f"{DEFAULT_REPO_ID} is not in the Hugging Face cache at {empty_cache}" in message
    assert "hf download Hcompany/Holotron-12B" in message


def test_a_dangling_cache_symlink_counts_as_missing(tmp_path: Path) -> None:
    snapshot = write_hf_cache(tmp_path / "hub", "org/model", {"model-a.safetensors": 8, "model-b.safetensors": 8})
    (snapshot / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-a.safetensors", "b": "model-b.safetensors"}})
    )
    (snapshot / "model-b.safetensors").resolve().unlink()
    with pytest.raises(ModelLoadError, match="interrupted: run hf download org/model again"):
        find_checkpoint("org/model", cache_dir=tmp_path / "hub")


def test_an_existing_relative_path_is_a_path_not_a_repo_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_checkpoint(tmp_path / "models" / "holotron", {"model.safetensors": 7})
    assert not looks_like_repo_id("models/holotron")
    assert looks_like_repo_id("Hcompany/Holotron-12B")
    assert not looks_like_repo_id("/abs/path")
    assert find_checkpoint("models/holotron").source == "directory"


def test_size_falls_back_to_the_index_total(tmp_path: Path) -> None:
    indexed = tmp_path / "indexed"
    indexed.mkdir()
    (indexed / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 24_600_000_000}}))
    assert estimate_weight_bytes(indexed) == 24_600_000_000
    assert estimate_weight_bytes(write_checkpoint(tmp_path / "legacy", {"pytorch_model.bin": 300})) == 0
