"""`holodesk eval grounding` (point-in-box scoring) and `holodesk eval make-grounding`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from PIL import Image

from holodesk.app.cli.main import main
from holodesk.app.eval.grounding import PAGE_ELEMENTS_JS, items_from_page, read_grounding_set
from holodesk.app.eval.miniwob_browser import MiniWoBBrowser
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import DisplayLayout


def write_lines(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_scores_point_in_box_per_category_and_an_unusable_answer_is_wrong(tmp_path, capsys):
    Image.new("RGB", (400, 200), (200, 200, 200)).save(tmp_path / "shot.png")
    dataset = write_lines(
        tmp_path / "set.jsonl",
        [
            {"image": "shot.png", "instruction": "the OK button", "bbox": [190, 40, 210, 60], "category": "text"},
            {"image": "shot.png", "instruction": "the close icon", "bbox": [0, 0, 10, 10], "category": "icon"},
            {"image": "shot.png", "instruction": "the gear icon", "bbox": [0, 0, 399, 199], "category": "icon"},
        ],
    )
    # (500, 250) of 1000 is pixel (200, 50) of the 400x200 image: inside the first box only.
    answers = write_lines(tmp_path / "answers.jsonl", ['{"x": 500, "y": 250}', '{"x": 500, "y": 250}', "no idea"])
    results = tmp_path / "results.json"
    code = main(["eval", "grounding", str(dataset), "--backend", "scripted", "--script", str(answers),
                 "--json", str(results)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    written = json.loads(results.read_text())
    by_category = {c["category"]: c for c in written["categories"]}
    assert by_category["text"]["hits"] == 1 and by_category["text"]["accuracy"] == 1.0
    assert by_category["icon"]["hits"] == 0 and by_category["icon"]["unusable"] == 1
    assert written["accuracy"] == pytest.approx(1 / 3)
    assert [r["point"] for r in written["results"]] == [[200, 50], [200, 50], None]
    assert written["results"][2]["error"].startswith("unusable answer")
    assert "no idea" not in out  # model text never reaches the terminal


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ('{"image": "a.png", "instruction": "x"}', "bbox"),
        ('{"image": "a.png", "instruction": "x", "bbox": [10, 10, 5, 20]}', "before"),
        ("not json", "not a JSON line"),
    ],
)
def test_a_bad_set_is_refused_with_its_line(tmp_path, capsys, line, shown):
    dataset = tmp_path / "set.jsonl"
    dataset.write_text(line + "\n")
    assert main(["eval", "grounding", str(dataset), "--backend", "scripted", "--script", str(dataset)]) == 2
    err = capsys.readouterr().err
    assert "set.jsonl:1" in err and shown in err


def test_corrections_become_boxes_around_the_corrected_point(tmp_path, capsys):
    Image.new("RGB", (300, 300)).save(tmp_path / "step-0001.png")
    corrections = write_lines(
        tmp_path / "corrections.jsonl",
        [{"image": str(tmp_path / "step-0001.png"), "instruction": "the Save button", "point": [100, 40],
          "proposed": [90, 40], "session": "s", "step": 1}],
    )  # fmt: skip
    output = tmp_path / "made.jsonl"
    assert main(["eval", "make-grounding", str(output), "--corrections", str(corrections)]) == 0
    (item,) = read_grounding_set(output)
    assert item.instruction == "the Save button" and item.category == "correction"
    assert item.contains(100, 40) and not item.contains(90 - 13, 40)


def hovered_text(browser: MiniWoBBrowser) -> str:
    """The innermost hovered element's text, its white space collapsed."""
    text = browser.run_js(
        "var h = document.querySelectorAll(':hover'); return h.length ? h[h.length - 1].innerText : '';"
    )
    return " ".join(str(text).split())


@pytest.mark.display
@pytest.mark.parametrize("xvfb", [DisplayLayout(1024, 768)], indirect=True, ids=str)
def test_page_boxes_are_where_the_pointer_finds_the_elements(xvfb, tmp_path):
    import pyautogui

    capture = ScreenCapture()
    checked = 0
    with MiniWoBBrowser(zoom=3) as browser:
        for task, seed in (("click-button", 3), ("click-tab", 4), ("click-link", 5)):
            browser.open_task(task)
            browser.start_episode(seed, 60)
            time.sleep(0.3)
            frame = capture.grab(1)
            items = list(items_from_page(browser.boxes(PAGE_ELEMENTS_JS), frame, tmp_path / "x.png", task))
            assert items, task
            for item in items:
                left, top, right, bottom = item.bbox
                pyautogui.moveTo(frame.region.left + (left + right) // 2, frame.region.top + (top + bottom) // 2)
                # Chromium takes the motion in its own time: a loaded run read the element hovered before
                # it. Bounded: a box that is not over its element never hovers it.
                deadline = time.monotonic() + 10
                while item.instruction not in (hovered := hovered_text(browser)) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert item.instruction in hovered, (task, item, hovered)
                checked += 1
            browser.end_episode()
    assert checked >= 6


@pytest.mark.display
@pytest.mark.parametrize("xvfb", [DisplayLayout(1024, 768)], indirect=True, ids=str)
def test_make_grounding_from_miniwob_pages(xvfb, tmp_path, capsys):
    output = tmp_path / "made.jsonl"
    assert main(["eval", "make-grounding", str(output), "--miniwob-tasks", "click-button,click-tab",
                 "--episodes", "2"]) == 0  # fmt: skip
    items = read_grounding_set(output)
    assert {item.category for item in items} == {"click-button", "click-tab"}
    assert all(item.image.is_file() for item in items)
    with Image.open(items[0].image) as image:
        assert image.size == (1024, 768)
    assert any(item.instruction == "Tab #2" for item in items)
