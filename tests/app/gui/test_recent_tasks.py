"""Recent tasks: newest first, no duplicates, bounded, and a broken file is not fatal."""

from __future__ import annotations

import json

from holodesk.app.gui.recent_tasks import RecentTasks


def test_newest_first_without_duplicates_and_bounded(tmp_path):
    recent = RecentTasks(tmp_path / "recent.json", limit=3)
    for task in ("a", "b", "c", "a", "d"):
        recent.add(task)
    assert recent.tasks == ["d", "a", "c"]
    assert RecentTasks(tmp_path / "recent.json", limit=3).tasks == ["d", "a", "c"]  # persisted


def test_matching_is_case_insensitive_substring(tmp_path):
    recent = RecentTasks(tmp_path / "recent.json")
    recent.add("Archive newsletters")
    recent.add("Open the Display settings")
    assert recent.matching("display") == ["Open the Display settings"]
    assert recent.matching("") == ["Open the Display settings", "Archive newsletters"]


def test_a_broken_file_gives_no_suggestions_and_is_left_alone(tmp_path):
    path = tmp_path / "recent.json"
    path.write_text("{broken", encoding="utf-8")
    assert RecentTasks(path).tasks == []
    assert path.read_text(encoding="utf-8") == "{broken"
    path.write_text(json.dumps({"not": "a list"}), encoding="utf-8")
    assert RecentTasks(path).tasks == []
