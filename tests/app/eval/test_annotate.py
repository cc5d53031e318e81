"""`holodesk annotate` against real HTTP servers on 127.0.0.1 (bench/rigs/fake_openai_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from bench.rigs.fake_openai_server import Completion, ErrorReply, FakeOpenAIServer, SlowReply
from holodesk.app.cli.main import main

POINT_ANSWER = Completion(text='{"x": 500, "y": 250}')


@pytest.fixture(autouse=True)
def no_key_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLODESK_API_KEY", "test-key")


def make_batch(folder: Path, count: int, *, missing: set[int] = frozenset()) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for index in range(count):
        name = f"shot-{index}.png"
        if index not in missing:
            Image.new("RGB", (400, 200), (index * 10 % 255, 90, 160)).save(folder / name)
        lines.append(json.dumps({"id": f"item-{index}", "image": name, "instruction": f"the button number {index}"}))
    batch = folder / "batch.jsonl"
    batch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return batch


def results(path: Path) -> dict[str, dict]:
    return {record["id"]: record for record in map(json.loads, path.read_text().splitlines())}


def most_overlapping(times: list[float], window_s: float) -> int:
    """The largest number of requests that arrived within `window_s` of each other."""
    times = sorted(times)
    return max(sum(1 for t in times[i:] if t - start < window_s) for i, start in enumerate(times))


def test_two_servers_share_a_concurrent_batch_and_points_are_in_image_pixels(tmp_path, capsys):
    batch = make_batch(tmp_path / "in", 16)
    output = tmp_path / "out.jsonl"
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        for server in (first, second):
            server.default_reply = SlowReply(0.4, POINT_ANSWER)
        code = main(
            ["annotate", str(batch), str(output), "--base-url", first.base_url, "--base-url", second.base_url,
             "--concurrency", "8"]
        )  # fmt: skip
        assert first.problems == [] and second.problems == []
        first_times = [r.received_at for r in first.chat_requests]
        second_times = [r.received_at for r in second.chat_requests]

    assert code == 0, capsys.readouterr().err
    found = results(output)
    assert len(found) == 16
    assert all(record["point"] == [200, 50] for record in found.values())  # 500/1000 of 400, 250/1000 of 200
    assert len(first_times) == len(second_times) == 8
    # Each server held four requests at once: they arrived together although each took 0.4 s to answer.
    assert most_overlapping(first_times, 0.3) >= 4 and most_overlapping(second_times, 0.3) >= 4
    assert "16/16 items" in capsys.readouterr().err


def test_a_failed_item_does_not_stop_the_batch_and_a_restart_redoes_only_what_is_missing(tmp_path, capsys):
    batch = make_batch(tmp_path / "in", 6, missing={2})
    output = tmp_path / "out.jsonl"
    with FakeOpenAIServer() as server:
        server.default_reply = POINT_ANSWER
        server.queue(ErrorReply(400, "This model's maximum context length is 32768 tokens."))
        assert main(["annotate", str(batch), str(output), "--base-url", server.base_url, "--concurrency", "1"]) == 1
        first_run = len(server.chat_requests)
        found = results(output)
        assert "cannot read the image" in found["item-2"]["error"]
        failed = [item for item, record in found.items() if "error" in record]
        assert len(failed) == 2  # the missing image and the request the server refused
        assert any("maximum context length" in found[item]["error"] for item in failed)

        Image.new("RGB", (400, 200)).save(tmp_path / "in" / "shot-2.png")
        assert main(["annotate", str(batch), str(output), "--base-url", server.base_url, "--concurrency", "3"]) == 0
        assert len(server.chat_requests) - first_run == 2  # only the two that had failed
    assert all("point" in record for record in results(output).values())
    assert "4 of 6 items were already done" in capsys.readouterr().err


def test_a_folder_of_images_with_text_files_is_a_batch(tmp_path):
    folder = tmp_path / "shots"
    folder.mkdir()
    for name in ("a", "b"):
        Image.new("RGB", (100, 100)).save(folder / f"{name}.png")
        (folder / f"{name}.txt").write_text(f"the {name} icon\n")
    Image.new("RGB", (100, 100)).save(folder / "no-instruction.png")
    output = tmp_path / "out.jsonl"
    with FakeOpenAIServer() as server:
        server.default_reply = POINT_ANSWER
        assert main(["annotate", str(folder), str(output), "--base-url", server.base_url]) == 0
        asked = sorted(part["text"] for r in server.chat_requests for part in r.parts() if part.get("type") == "text")
    assert set(results(output)) == {"a.png", "b.png"}
    assert any("the a icon" in text for text in asked)


def test_bad_input_is_refused_before_any_request(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"image": "x.png"}\n')
    with FakeOpenAIServer() as server:
        code = main(["annotate", str(bad), str(tmp_path / "out.jsonl"), "--base-url", server.base_url])
        assert server.chat_requests == []
    assert code == 2
    assert "bad.jsonl:1" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


def test_an_unreachable_server_stops_the_batch_before_it_starts(tmp_path, capsys):
    batch = make_batch(tmp_path / "in", 2)
    code = main(["annotate", str(batch), str(tmp_path / "out.jsonl"), "--base-url", "http://127.0.0.1:9/v1"])
    assert code == 1
    assert "connection refused" in capsys.readouterr().err


def test_the_server_and_profile_come_from_the_settings_file_and_an_unusable_answer_is_kept(
    tmp_path, monkeypatch, capsys
):
    batch = make_batch(tmp_path / "in", 2)
    output = tmp_path / "out.jsonl"
    with FakeOpenAIServer() as server:
        config = tmp_path / "config"
        (config / "holodesk").mkdir(parents=True)
        (config / "holodesk" / "settings.toml").write_text(
            f'[model]\nbackend = "remote"\n\n[model.remote]\nbase_url = "{server.base_url}"\n', encoding="utf-8"
        )
        monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
        server.default_reply = POINT_ANSWER
        server.queue(Completion(text="It is the blue one, I believe."))
        assert main(["annotate", str(batch), str(output), "--concurrency", "1"]) == 1  # no --base-url
    found = results(output)
    failed = [record for record in found.values() if "error" in record]
    assert len(failed) == 1 and failed[0]["raw_text"] == "It is the blue one, I believe."
    assert sum("point" in record for record in found.values()) == 1


def test_without_a_server_anywhere_annotate_says_where_to_give_one(tmp_path, capsys):
    batch = make_batch(tmp_path / "in", 1)
    assert main(["annotate", str(batch), str(tmp_path / "out.jsonl")]) == 2
    assert "--base-url" in capsys.readouterr().err


def test_a_server_url_with_credentials_is_refused_without_repeating_them(tmp_path, capsys):
    batch = make_batch(tmp_path / "in", 1)
    url = "http://alice:hunter2@127.0.0.1:9/v1"
    assert main(["annotate", str(batch), str(tmp_path / "out.jsonl"), "--base-url", url]) == 2
    said = capsys.readouterr().err
    assert "user name or password" in said and "hunter2" not in said and "alice" not in said


def test_a_line_cut_off_by_a_kill_stays_apart_and_its_item_is_done_again(tmp_path, capsys):
    batch = make_batch(tmp_path / "in", 4)
    output = tmp_path / "out.jsonl"
    done = {"id": "item-0", "point": [1, 2]}
    output.write_text(json.dumps(done) + "\n" + '{"id": "item-1", "poi', encoding="utf-8")  # killed mid-write
    with FakeOpenAIServer() as server:
        server.default_reply = POINT_ANSWER
        assert main(["annotate", str(batch), str(output), "--base-url", server.base_url, "--concurrency", "2"]) == 0
        assert len(server.chat_requests) == 3

    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines[1] == '{"id": "item-1", "poi'  # closed, not joined to the next record
    records = [json.loads(line) for line in lines if line != lines[1]]
    assert sorted(record["id"] for record in records) == ["item-0", "item-1", "item-2", "item-3"]
    assert "1 of 4 items were already done" in capsys.readouterr().err
