"""`holodesk annotate`: batch localization of (screenshot, instruction) items on OpenAI-compatible servers.

Items come from a JSONL file (`{"image": path, "instruction": text, "id"?: ...}`, image paths
relative to the file) or a folder (each image with a `.txt` of the same name holding its
instruction). `concurrency` requests are in flight at once; with several servers, each in-flight
slot is tied to one of them in turn, so the load is shared evenly and a slow server holds only its
own slots. Every answer or error is appended to the output JSONL as it arrives (flushed), so a
stopped batch resumes where it was: items whose id already has a point are skipped. One item's
failure (a missing image, an unusable answer, a server error) is written as that item's error
and the batch goes on.
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from holodesk.app.common.errors import HolodeskAppError
from holodesk.automation.coords import FrameMapping
from holodesk.automation.errors import AutomationError
from holodesk.automation.proposal import UnusableProposal
from holodesk.automation.screen import frame_from_image
from holodesk.inference.errors import InferenceError
from holodesk.inference.model_policy import ModelPolicy

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
MAX_CONCURRENCY = 256


class AnnotateInputError(HolodeskAppError, ValueError):
    """The input cannot be read as a batch (no such file, a malformed line, a folder without items)."""


@dataclass(frozen=True, slots=True)
class AnnotateItem:
    """One thing to localize: `id` is unique in the batch and is how a restart recognises it."""

    id: str
    image: Path
    instruction: str


def read_items(source: Path) -> list[AnnotateItem]:
    """The items of a JSONL file or a folder (see the module docstring); duplicates ids are an error."""
    if source.is_dir():
        items = list(_folder_items(source))
    elif source.is_file():
        items = list(_jsonl_items(source))
    else:
        raise AnnotateInputError(f"{source} is neither a JSONL file nor a folder")
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise AnnotateInputError(f"the id {item.id!r} appears twice in {source}")
        seen.add(item.id)
    return items


def _folder_items(folder: Path) -> Iterator[AnnotateItem]:
    for image in sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES):
        text_file = image.with_suffix(".txt")
        if not text_file.is_file():
            continue  # an image without an instruction is not an item
        instruction = text_file.read_text(encoding="utf-8").strip()
        if instruction:
            yield AnnotateItem(image.name, image, instruction)


def _jsonl_items(path: Path) -> Iterator[AnnotateItem]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise AnnotateInputError(f"cannot read {path}: {exc}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise AnnotateInputError(f"{path}:{number}: not a JSON line ({exc})") from None
        if not isinstance(record, dict):
            raise AnnotateInputError(f"{path}:{number}: expected an object with image and instruction")
        image, instruction = record.get("image"), record.get("instruction")
        if not isinstance(image, str) or not image or not isinstance(instruction, str) or not instruction.strip():
            raise AnnotateInputError(f"{path}:{number}: 'image' and 'instruction' must be non-empty strings")
        item_id = record.get("id", f"{number}:{image}")
        yield AnnotateItem(str(item_id), path.parent / image, instruction.strip())


def finished_ids(output: Path) -> set[str]:
    """Ids already localized in `output` (a cut-off last line, or an item's error, does not count)."""
    done: set[str] = set()
    if not output.exists():
        return done
    with open(output, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "point" in record and "id" in record:
                done.add(str(record["id"]))
    return done


def close_cut_line(output: Path) -> None:
    """End a last line a kill cut off with a newline, so the next record starts on a line of its own.

    The cut line stays unreadable (finished_ids skips it, and its item is done again); without
    the newline the first record appended would join it and be lost the same way.
    """
    try:
        with open(output, "rb") as handle:
            handle.seek(0, 2)
            if handle.tell() == 0:
                return
            handle.seek(-1, 2)
            if handle.read(1) == b"\n":
                return
    except FileNotFoundError:
        return
    with open(output, "ab") as handle:
        handle.write(b"\n")


def localize(policy: ModelPolicy, item: AnnotateItem) -> dict[str, Any]:
    """One item's result line: the point in the image's own pixels, or the error in words."""
    started = time.perf_counter()
    record: dict[str, Any] = {"id": item.id, "image": str(item.image), "instruction": item.instruction}
    try:
        with Image.open(item.image) as image:
            frame = frame_from_image(image)
        proposal = policy.locate(frame, item.instruction)
        (model_point,) = proposal.action.points()
        mapping = FrameMapping(frame.region, proposal.image_width, proposal.image_height)
        point = mapping.model_to_screen(model_point, proposal.space)
        record.update(point=[point.x, point.y], model_point=[model_point.x, model_point.y], raw_text=proposal.raw_text)
    except (OSError, UnidentifiedImageError) as exc:
        record["error"] = f"cannot read the image: {exc}"
    except UnusableProposal as exc:  # the answer itself is kept: it is what needs looking at
        record.update(error=str(exc), raw_text=exc.raw_text)
    except (InferenceError, AutomationError, ValueError) as exc:
        record["error"] = str(exc)
    record["seconds"] = round(time.perf_counter() - started, 4)
    return record


class BatchAnnotator:
    """Runs items through `policies` (one per in-flight slot), writing each result as it comes."""

    def __init__(self, policies: Sequence[ModelPolicy], labels: Sequence[str] | None = None) -> None:
        if not policies:
            raise ValueError("at least one policy (in-flight slot) is needed")
        if len(policies) > MAX_CONCURRENCY:
            raise ValueError(f"at most {MAX_CONCURRENCY} requests in flight, got {len(policies)}")
        self._labels = list(labels) if labels is not None else [""] * len(policies)
        self._free: queue.Queue[int] = queue.Queue()
        for slot in range(len(policies)):
            self._free.put(slot)
        self._policies = list(policies)

    def _run_one(self, item: AnnotateItem) -> dict[str, Any]:
        slot = self._free.get()
        try:
            record = localize(self._policies[slot], item)
            if self._labels[slot]:
                record["server"] = self._labels[slot]
            return record
        finally:
            self._free.put(slot)

    def run(
        self,
        items: Sequence[AnnotateItem],
        output: Path,
        on_result: Callable[[dict[str, Any]], None] | None = None,
    ) -> tuple[int, int]:
        """Localize the `items` not yet finished in `output`; returns (localized, failed) of this run."""
        skip = finished_ids(output)
        todo = [item for item in items if item.id not in skip]
        localized = failed = 0
        close_cut_line(output)
        with open(output, "a", encoding="utf-8") as handle, ThreadPoolExecutor(len(self._policies)) as pool:
            pending: set[Future[dict[str, Any]]] = set()
            remaining = iter(todo)
            # Keep exactly as many items submitted as there are slots: a huge batch never queues in memory.
            for item in remaining:
                pending.add(pool.submit(self._run_one, item))
                if len(pending) >= len(self._policies):
                    break
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    record = future.result()
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                    handle.flush()
                    if "error" in record:
                        failed += 1
                    else:
                        localized += 1
                    if on_result is not None:
                        on_result(record)
                    following = next(remaining, None)
                    if following is not None:
                        pending.add(pool.submit(self._run_one, following))
        return localized, failed
