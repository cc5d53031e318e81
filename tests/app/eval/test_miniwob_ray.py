"""`holodesk eval miniwob --ray`: desktops as Ray actors on a two-node cluster started on this machine.

ray.cluster_utils.Cluster runs a head (which offers no desktop) and two worker nodes, each its own
raylet offering the `holodesk_desktop` resource, CPU only. Episodes are the DOM oracle's
(tests/app/eval/oracle_source.py) in real Chromium, scored by the page. One test kills a whole node
while its desktop is in the middle of an episode: that episode runs again on the other node and
counts once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.app.cli.main import main
from holodesk.app.eval.miniwob_eval import MiniWoBOptions
from holodesk.app.eval.parallel import ParallelRun, jobs_for
from holodesk.app.eval.ray_backend import DESKTOP_RESOURCE, RayDesktops
from holodesk.app.eval.workers import WorkerSetup
from holodesk.automation.trajectory import iter_session_folders
from tests.app.eval.oracle_source import OracleSource
from tests.support.waiting import wait_until

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError:  # a failure, not a skip: tests/run.sh installs the extra for this tier
    pytest.fail("these tests need Ray: pip install -e '.[cluster]' (tests/run.sh installs it)", pytrace=False)

pytestmark = [pytest.mark.display, pytest.mark.chromium]

NODE_ARGS = {"num_cpus": 1, "object_store_memory": 96 * 1024 * 1024, "include_dashboard": False}


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    started = Cluster(initialize_head=True, head_node_args={**NODE_ARGS, "resources": {}})
    try:
        for _ in range(2):
            started.add_node(**NODE_ARGS, resources={DESKTOP_RESOURCE: 2})
        started.wait_for_nodes()
        ray.init(address=started.address, log_to_driver=False)
        yield started
    finally:
        ray.shutdown()
        started.shutdown()


def _node_of(where: str) -> str:
    return where.rsplit("ray node ", 1)[1].rstrip(")")


def test_episodes_spread_over_the_nodes_win_with_the_pages_reward(cluster, tmp_path):
    options = MiniWoBOptions(tasks=("click-button", "enter-text"), episodes=2, seed=5, zoom=2)
    meeting = tmp_path / "meeting"  # both workers take part: a fast first one could otherwise do every episode
    meeting.mkdir()
    desktops = RayDesktops(cluster.address, WorkerSetup(options=options, policy=OracleSource(meeting=meeting)))
    assert desktops.offered == 4
    run = ParallelRun(jobs_for(options), desktops.start, 2, tmp_path / "sessions")
    report = run.run()

    print("\n" + report.table())
    assert [e.success for e in report.episodes] == [True] * 4, report.table()
    assert report.retried == 0
    assert len({_node_of(where) for where in run.where.values()}) == 2, run.where  # both nodes worked
    assert len(list(iter_session_folders(tmp_path / "sessions"))) == 4


def test_a_node_killed_mid_episode_costs_one_retry_and_no_episode(cluster, tmp_path):
    options = MiniWoBOptions(tasks=("click-button",), episodes=4, seed=30, zoom=2)
    marker = tmp_path / "paused"
    setup = WorkerSetup(options=options, policy=OracleSource(marker=marker, pause_s=120))
    desktops = RayDesktops(cluster.address, setup)
    run = ParallelRun(jobs_for(options), desktops.start, 2, tmp_path / "sessions")
    killed: list[str] = []

    def kill_the_paused_node() -> None:
        # The first step of some episode writes its worker's ids into the marker and waits there:
        # the node whose raylet started that worker's actor goes, with every process on it.
        wait_until(lambda: marker.is_file() and marker.read_text().endswith("\n"), 240, "a worker paused mid-episode")
        actor_pid = int(marker.read_text().split()[1])
        raylets = {node: node.all_processes["raylet"][0].process.pid for node in cluster.worker_nodes}
        parent = int(Path(f"/proc/{actor_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        [node] = [node for node, pid in raylets.items() if pid == parent]
        killed.append(node.node_id[:12])
        cluster.remove_node(node, allow_graceful=False)

    killer = threading.Thread(target=kill_the_paused_node, name="node-killer")
    killer.start()
    try:
        report = run.run()
    finally:
        killer.join(timeout=300)

    print("\n" + report.table())
    assert killed, "no node was killed"
    assert [e.seed for e in report.episodes] == [30, 31, 32, 33]
    assert all(e.success for e in report.episodes), report.table()
    assert report.retried == 1
    assert "1 episode(s) were run again" in report.table()
    assert len(list(iter_session_folders(tmp_path / "sessions"))) == 4
    # Every episode counted finished on the node that lived.
    [survivor] = cluster.worker_nodes
    assert {_node_of(where) for where in run.where.values()} == {survivor.node_id[:12]}, (run.where, killed)
    assert killed[0] != survivor.node_id[:12]


def test_the_command_runs_on_the_cluster(cluster, tmp_path, capsys):
    answers = tmp_path / "answers.jsonl"
    corner = '{"note": "", "thought": "", "action": {"name": "click_desktop", "x": 995, "y": 995}}'
    answers.write_text((json.dumps(corner) + "\n") * 2, encoding="utf-8")
    results = tmp_path / "results.json"
    code = main(
        [
            "eval", "miniwob", "--tasks", "click-button", "--episodes", "2", "--max-steps", "1", "--zoom", "2",
            "--backend", "scripted", "--script", str(answers), "--ray", cluster.address, "--workers", "2",
            "--json", str(results), "--sessions", str(tmp_path / "sessions"),
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    written = json.loads(results.read_text())
    assert written["episodes_run"] == 2 and written["retried"] == 0
    assert len(list(iter_session_folders(tmp_path / "sessions"))) == 2
