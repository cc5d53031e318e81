"""`holodesk annotate --ray`: the batch on Ray Data, on a two-node cluster started on this machine.

The servers are real HTTP servers on 127.0.0.1 (bench/rigs/fake_openai_server.py); the cluster is
ray.cluster_utils.Cluster (a head and two worker nodes, CPU only). One test kills the command
outright mid-batch and runs it again: every item then has exactly one answer line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.rigs.fake_openai_server import FakeOpenAIServer, SlowReply
from holodesk.app.cli.main import main
from tests.app.eval.test_annotate import POINT_ANSWER, make_batch
from tests.support.holodesk_command import HOLODESK_COMMAND
from tests.support.waiting import wait_until

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError:  # a failure, not a skip: tests/run.sh installs the extra
    pytest.fail("these tests need Ray: pip install -e '.[cluster]' (tests/run.sh installs it)", pytrace=False)

NODE_ARGS = {"num_cpus": 1, "object_store_memory": 96 * 1024 * 1024, "include_dashboard": False}


@pytest.fixture(autouse=True)
def no_key_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLODESK_API_KEY", "test-key")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    started = Cluster(initialize_head=True, head_node_args=NODE_ARGS)
    try:
        for _ in range(2):
            started.add_node(**NODE_ARGS)
        started.wait_for_nodes()
        ray.init(address=started.address, log_to_driver=False)
        yield started
    finally:
        ray.shutdown()
        started.shutdown()


def lines_of(path: Path) -> list[dict]:
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue  # a line the kill cut off
    return found


def test_two_servers_share_the_batch_on_ray_data(cluster, tmp_path, capsys):
    batch = make_batch(tmp_path / "in", 12)
    output = tmp_path / "out.jsonl"
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        first.default_reply = second.default_reply = POINT_ANSWER
        code = main(
            ["annotate", str(batch), str(output), "--base-url", first.base_url, "--base-url", second.base_url,
             "--concurrency", "2", "--ray", cluster.address]
        )  # fmt: skip
        assert first.problems == [] and second.problems == []
        asked = (len(first.chat_requests), len(second.chat_requests))

    captured = capsys.readouterr()
    assert code == 0, captured.err
    records = lines_of(output)
    assert sorted(r["id"] for r in records) == sorted(f"item-{i}" for i in range(12))
    assert all(r["point"] == [200, 50] for r in records)  # 500/1000 of 400, 250/1000 of 200
    assert asked[0] > 0 and asked[1] > 0 and sum(asked) == 12  # both servers, each item once
    assert "12/12 items" in captured.err and "localized 12, failed 0" in captured.out


def test_a_batch_killed_mid_way_resumes_with_no_duplicate_and_no_missing_line(cluster, tmp_path, capsys):
    count = 24
    batch = make_batch(tmp_path / "in", count)
    output = tmp_path / "out.jsonl"
    with FakeOpenAIServer() as server:
        server.default_reply = SlowReply(0.3, POINT_ANSWER)
        command = [*HOLODESK_COMMAND, "annotate", str(batch), str(output), "--base-url", server.base_url,
                   "--concurrency", "2", "--ray", cluster.address]  # fmt: skip
        first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ))
        try:
            wait_until(lambda: output.exists() and len(lines_of(output)) >= 4, 180, "four answers written")
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        done_before = {r["id"] for r in lines_of(output)}
        assert 4 <= len(done_before) < count  # killed mid-batch

        assert main(["annotate", str(batch), str(output), "--base-url", server.base_url, "--concurrency", "2",
                     "--ray", cluster.address]) == 0  # fmt: skip
        asked = len(server.chat_requests)

    err = capsys.readouterr().err
    assert f"{len(done_before)} of {count} items were already done; resuming" in err
    records = lines_of(output)
    per_id = Counter(r["id"] for r in records)
    assert set(per_id) == {f"item-{i}" for i in range(count)}  # none missing
    assert max(per_id.values()) == 1, per_id  # none twice
    assert all("point" in r for r in records)
    # The second run asked only for what the first had not written (and the first's requests in
    # flight at the kill may have reached the server as well).
    assert asked >= count


def test_eval_on_a_cluster_without_desktops_says_how_to_offer_them(cluster, tmp_path, capsys):
    # This cluster's nodes offer no holodesk_desktop: the command stops before starting anything.
    answers = tmp_path / "answers.jsonl"
    answers.write_text('"{}"\n', encoding="utf-8")
    arguments = ["eval", "miniwob", "--tasks", "click-button", "--ray", cluster.address]
    assert main([*arguments, "--backend", "scripted", "--script", str(answers)]) == 2
    err = capsys.readouterr().err
    assert "no node of the Ray cluster offers the holodesk_desktop resource" in err
    assert "--resources '{\"holodesk_desktop\": N}'" in err
