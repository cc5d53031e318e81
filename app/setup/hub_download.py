"""Download a listed repository into a staging folder, verify every file, and only then move it into place.

The bytes travel through huggingface_hub's own downloader (`file_download.http_get`: its headers, token,
redirects, retries and Range resume within a run). What this module adds:
- the free-disk check before anything is fetched (the bytes still missing against the free space);
- resume across runs: a file in progress is `<name>.part` in the staging folder, and the next run asks
  the hub for the rest from where it stopped (a killed or cancelled download loses nothing);
- the checksums the hub lists, verified for every file (sha256 for weights, git's blob id for the rest):
  a file that does not match is deleted and the download refused;
- a partial download is never a model: the staging folder sits apart (`<models>/.partial/`), and the
  finished folder appears at its final path in one rename, after every file was verified.
Progress is the bytes on disk in the staging folder, reported from a watcher thread four times a second.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub.utils import tqdm as hf_tqdm

from holodesk.app.setup.errors import SetupError
from holodesk.app.setup.hub_listing import HubFile, RepoListing, gated_words

PARTIAL_FOLDER = ".partial"
MANIFEST = "holodesk-download.json"  # in the finished folder: what was downloaded, from where, verified how
DISK_MARGIN = 1024 * 1024  # room left free beyond the download (the manifest, the file system's own needs)
REPORT_EVERY_S = 0.25


@dataclass(frozen=True, slots=True)
class Progress:
    """Bytes of the repository on disk so far (resumed bytes included) and the file being fetched."""

    done: int
    total: int
    file: str


ProgressSink = Callable[[Progress], None]


def default_models_root() -> Path:
    """Where downloaded models live: <user data folder>/holodesk/models (~/.local/share/holodesk/models)."""
    from platformdirs import user_data_path

    return user_data_path("holodesk", appauthor=False) / "models"


def final_folder(models_root: Path, listing: RepoListing) -> Path:
    return models_root / listing.repo_id.replace("/", "--") / listing.commit


def staging_folder(models_root: Path, listing: RepoListing) -> Path:
    return models_root / PARTIAL_FOLDER / f"{listing.repo_id.replace('/', '--')}--{listing.commit}"


def bytes_on_disk(staging: Path, files: tuple[HubFile, ...]) -> int:
    """What is already there: finished files whole, files in progress up to their size."""
    done = 0
    for f in files:
        whole, part = staging / f.name, staging / f"{f.name}.part"
        if whole.is_file():
            done += f.size
        elif part.is_file():
            done += min(part.stat().st_size, f.size)
    return done


def check_free_space(models_root: Path, listing: RepoListing) -> int:
    """The bytes still to fetch; SetupError in words when the disk cannot hold them."""
    missing = listing.total_bytes - bytes_on_disk(staging_folder(models_root, listing), listing.files)
    free = shutil.disk_usage(_existing(models_root)).free
    if free < missing + DISK_MARGIN:
        raise SetupError(
            f"not enough free disk space for {listing.repo_id}: it needs {_size(missing)} more and"
            f" {_existing(models_root)} has {_size(free)} free. Free some space (or set XDG_DATA_HOME to a"
            " larger disk) and run holodesk setup again; nothing was downloaded and the settings are unchanged"
        )
    return missing


def download(listing: RepoListing, models_root: Path, progress: ProgressSink | None = None) -> Path:
    """Fetch every file of `listing`, verified, into its final folder (returned). Raises SetupError in words.

    An existing final folder is checked again against the listing (sizes and checksums) and reused;
    one a person edited by hand is refused in words, never used or overwritten."""
    final = final_folder(models_root, listing)
    if final.exists():
        _check_untouched(final, listing)
        return final
    check_free_space(models_root, listing)
    staging = staging_folder(models_root, listing)
    staging.mkdir(parents=True, exist_ok=True)
    with _watching(staging, listing, progress) as current:
        for hub_file in listing.files:
            if (staging / hub_file.name).is_file():
                continue  # fetched and verified by an earlier run
            current[0] = hub_file.name
            _fetch_one(listing, hub_file, staging)
    _write_manifest(staging, listing)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staging, final)  # one rename: the model appears whole or not at all
    with contextlib.suppress(OSError):  # the staging parent, when no other download is in it
        staging.parent.rmdir()
    return final


def _fetch_one(listing: RepoListing, hub_file: HubFile, staging: Path) -> None:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    part = staging / f"{hub_file.name}.part"
    part.parent.mkdir(parents=True, exist_ok=True)
    if part.is_file() and part.stat().st_size > hub_file.size:
        part.unlink()  # longer than the file can be: not ours to resume
    url = hf_hub_url(listing.repo_id, hub_file.name, revision=listing.commit, endpoint=listing.endpoint)
    try:
        meta = get_hf_file_metadata(url, endpoint=listing.endpoint)
        with part.open("ab") as out:
            http_get(
                meta.location,
                out,
                resume_size=out.tell(),
                headers=build_hf_headers(),
                expected_size=hub_file.size,
                displayed_filename=hub_file.name,
                tqdm_class=_Quiet,
            )
    except GatedRepoError:
        raise SetupError(gated_words(listing)) from None
    except HfHubHTTPError as exc:
        raise SetupError(
            f"the hub at {listing.endpoint} refused {listing.repo_id}'s {hub_file.name}: {str(exc).splitlines()[0]}."
            " What was downloaded is kept, and holodesk setup resumes from there"
        ) from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise SetupError(
                f"the disk filled while downloading {listing.repo_id}'s {hub_file.name}"
                f" ({_size(part.stat().st_size if part.exists() else 0)} of {_size(hub_file.size)} written;"
                f" {_size(shutil.disk_usage(staging).free)} free at {staging.parent}). Free some space and run"
                " holodesk setup again: it resumes where it stopped; the settings are unchanged"
            ) from None
        if exc.errno is not None:  # a local file system fault, not the network
            raise SetupError(f"cannot write {part}: {exc.strerror}; the settings are unchanged") from None
        raise SetupError(_interrupted_words(listing, hub_file, exc)) from None
    except Exception as exc:  # the HTTP client's connection and timeout errors, once its own retries are spent
        raise SetupError(_interrupted_words(listing, hub_file, exc)) from None
    _verify(hub_file, part)
    os.replace(part, staging / hub_file.name)


def _interrupted_words(listing: RepoListing, hub_file: HubFile, exc: BaseException) -> str:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (
        f"the download of {listing.repo_id}'s {hub_file.name} from {listing.endpoint} stopped and did not"
        f" resume ({type(exc).__name__}: {detail}): check this computer's network connection and run"
        " holodesk setup again; what was downloaded is kept and it resumes from there, the settings are unchanged"
    )


def _verify(hub_file: HubFile, part: Path) -> None:
    """The file's checksum against the hub's listing; a mismatch deletes the file and refuses in words."""
    size = part.stat().st_size
    if hub_file.sha256 is not None:
        expected, actual, kind = hub_file.sha256, _digest(part, hashlib.sha256()), "sha256"
    elif hub_file.blob_id is not None:
        expected, actual, kind = hub_file.blob_id, _digest(part, hashlib.sha1(b"blob %d\0" % size)), "git blob id"
    else:
        raise SetupError(f"the hub listed no checksum for {hub_file.name}, so it cannot be verified: not used")
    if actual != expected:
        part.unlink()
        raise SetupError(
            f"{hub_file.name} arrived damaged: its {kind} is {actual[:16]}..., the hub lists {expected[:16]}...;"
            " the file was deleted and the model not installed. Run holodesk setup again to download it again;"
            " if it happens again, the network or a proxy is changing the data"
        )


def _check_untouched(folder: Path, listing: RepoListing) -> None:
    changed = []
    for hub_file in listing.files:
        path = folder / hub_file.name
        if not path.is_file():
            changed.append(f"{hub_file.name} is missing")
        elif path.stat().st_size != hub_file.size:
            changed.append(f"{hub_file.name} is {path.stat().st_size} bytes, not {hub_file.size}")
        elif _checksum(hub_file, path) != (hub_file.sha256 or hub_file.blob_id):
            changed.append(f"{hub_file.name} does not match its checksum")
    if changed:
        raise SetupError(
            f"the downloaded model in {folder} was changed since it was downloaded ({'; '.join(changed)}), so it"
            " is neither used nor overwritten: move that folder away (to keep your edits) or delete it, then run"
            " holodesk setup again to download it afresh; the settings are unchanged"
        )


def _checksum(hub_file: HubFile, path: Path) -> str:
    if hub_file.sha256 is not None:
        return _digest(path, hashlib.sha256())
    return _digest(path, hashlib.sha1(b"blob %d\0" % path.stat().st_size))


def _digest(path: Path, hasher: hashlib._Hash) -> str:
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            hasher.update(chunk)
    return hasher.hexdigest()


def _write_manifest(staging: Path, listing: RepoListing) -> None:
    import json

    record = {
        "repo_id": listing.repo_id,
        "commit": listing.commit,
        "endpoint": listing.endpoint,
        "license": listing.license,
        "files": {f.name: {"size": f.size, "sha256": f.sha256, "blob_id": f.blob_id} for f in listing.files},
    }
    (staging / MANIFEST).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    cache = staging / ".cache"
    if cache.is_dir():  # huggingface_hub's own bookkeeping, if any: not part of the model
        shutil.rmtree(cache)


@contextmanager
def _watching(staging: Path, listing: RepoListing, progress: ProgressSink | None) -> Iterator[list[str]]:
    """Report the bytes on disk until the block ends (and once more at its end); yields the current file's slot."""
    current = [""]
    if progress is None:
        yield current
        return
    stop = threading.Event()

    def report() -> None:
        progress(Progress(bytes_on_disk(staging, listing.files), listing.total_bytes, current[0]))

    def watch() -> None:
        while not stop.wait(REPORT_EVERY_S):
            report()

    report()
    thread = threading.Thread(target=watch, name="download-progress", daemon=True)
    thread.start()
    try:
        yield current
    finally:
        stop.set()
        thread.join()
    report()


def _existing(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def _size(num_bytes: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.1f} {unit}"
    return f"{num_bytes} bytes"


class _Quiet(hf_tqdm):
    """huggingface_hub's own bar, switched off: the progress is reported by this module's watcher."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["disable"] = True
        super().__init__(*args, **kwargs)
