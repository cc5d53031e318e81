"""`holodesk annotate --ray`: the batch as a Ray Data pipeline, each item one request to one of the servers.

The items not yet finished in the output (app/eval/annotate.py's `finished_ids`, the same rule as
without Ray) become a Ray dataset of (id, image path, instruction); `map_batches` hands them one at
a time to a pool of `concurrency` actors, each with one request in flight, each item sent to the
server its id hashes to (so the load is shared evenly across servers whatever the actors do). The
actors read the images themselves: on a cluster of several machines the input folder must be
readable at the same path on every node, as for Ray Data's own readers.

Results stream back to this process, which appends each line to the output and flushes it as it
comes, exactly as without Ray: a kill loses only the requests in flight, and the next run redoes
those alone. A line cut off by the kill is closed with a newline before anything is appended, so
it stays one unreadable line (skipped on reading) and cannot merge into the next record. An id
already written in this run is never written again, should Ray run an item twice after a failure.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from holodesk.app.eval.annotate import AnnotateItem, close_cut_line, finished_ids, localize
from holodesk.app.eval.ray_backend import ClusterError, import_ray
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.remote import RemoteBackend


def server_for(item_id: str, servers: int) -> int:
    """The server an item goes to: its id's hash, stable across processes (Python's hash() is not)."""
    digest = hashlib.blake2b(item_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % servers


class Localizer:
    """A Ray Data actor: one ModelPolicy per server, used for the items hashed to it."""

    def __init__(self, urls: Sequence[str], models: Sequence[str], keys: Sequence[str | None], profile: str) -> None:
        chosen = get_profile(profile)
        self.urls = list(urls)
        self.policies = [
            ModelPolicy(chosen, RemoteBackend(url, model=model, api_key=key, encoded_images_kept=0))
            for url, model, key in zip(urls, models, keys, strict=True)
        ]

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        ids, lines = [], []
        for item_id, image, instruction in zip(batch["id"], batch["image"], batch["instruction"], strict=True):
            server = server_for(str(item_id), len(self.policies))
            record = localize(self.policies[server], AnnotateItem(str(item_id), Path(str(image)), str(instruction)))
            record["server"] = self.urls[server]
            ids.append(str(item_id))
            lines.append(json.dumps(record, ensure_ascii=False))
        return {"id": ids, "line": lines}


def annotate_on_ray(
    address: str,
    items: Sequence[AnnotateItem],
    output: Path,
    urls: Sequence[str],
    models: Sequence[str],
    keys: Sequence[str | None],
    profile: str,
    concurrency: int,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[int, int]:
    """Localize the `items` not yet finished in `output` on the cluster; returns (localized, failed)."""
    ray = import_ray()
    connected_here = False
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ClusterError(f"cannot reach the Ray cluster at {address!r}: {exc}") from None
        connected_here = True
    try:
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False  # Holodesk's own progress line counts the items
        # Ray Data's own lines (plans, timings, where its logs are) would mix into the command's.
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        skip = finished_ids(output)
        todo = [item for item in items if item.id not in skip]
        localized = failed = 0
        if not todo:
            return 0, 0
        rows = [{"id": item.id, "image": str(item.image), "instruction": item.instruction} for item in todo]
        results = ray.data.from_items(rows).map_batches(
            Localizer,
            fn_constructor_kwargs={"urls": list(urls), "models": list(models), "keys": list(keys), "profile": profile},
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=concurrency),
            num_cpus=0.1,  # an actor mostly waits on its server
        )
        written: set[str] = set()
        close_cut_line(output)
        with open(output, "a", encoding="utf-8") as handle:
            for row in results.iter_rows():
                item_id, line = str(row["id"]), str(row["line"])
                if item_id in written:
                    continue
                written.add(item_id)
                handle.write(line + "\n")
                handle.flush()
                record = json.loads(line)
                if "error" in record:
                    failed += 1
                else:
                    localized += 1
                if on_result is not None:
                    on_result(record)
        return localized, failed
    finally:
        if connected_here:
            ray.shutdown()
