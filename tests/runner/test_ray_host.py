"""Envs on Ray actors over a local multi-node cluster, including a node lost mid-run (slow)."""

from __future__ import annotations

import threading
import time

import pytest

from palaestra.agents.simple import LatencyAgent, PolicyAgent
from palaestra.runner import Runner, make_tasks

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    """A head node without CPUs and two worker nodes of two CPUs each (Ray is imported here,
    so collecting the default suite does not pay for it)."""
    ray = pytest.importorskip("ray")
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    cluster = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
    )
    for _ in range(2):
        cluster.add_node(num_cpus=2)
    ray.init(address=cluster.address)
    cluster.wait_for_nodes()
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def _alive_actor_nodes() -> list[str]:
    """The node of every live actor, from the cluster's control store (the public state API,
    ``ray.util.state``, needs the dashboard of ``ray[default]``)."""
    from ray._private.state import actors

    return [a["Address"]["NodeID"] for a in actors().values() if a["State"] == "ALIVE"]


def _wait_until_no_actor_is_alive(timeout_s: float = 60.0) -> None:
    """Killed actors leave asynchronously; wait for the cluster to report none alive."""
    deadline = time.monotonic() + timeout_s
    while _alive_actor_nodes():
        assert time.monotonic() < deadline, "actors still alive after close()"
        time.sleep(0.2)


def _comparable(episode) -> dict:
    return {**episode.to_dict(), "duration_s": 0.0}


def test_ray_actors_give_the_same_episodes_as_in_process(cluster):
    from palaestra.runner.ray_host import RayEnvHost

    tasks = make_tasks(["game:GuessTheNumber-v0", "math:Arithmetic-v0"], range(4))
    agent = PolicyAgent(lambda obs: "\\boxed{25}")
    local = Runner(agent).run(tasks)
    host = RayEnvHost(workers=4)
    try:
        remote = Runner(agent, host=host).run(tasks)
        nodes = set(_alive_actor_nodes())
    finally:
        host.close()
    _wait_until_no_actor_is_alive()
    assert [_comparable(e) for e in remote] == [_comparable(e) for e in local]
    assert len(nodes) == 2  # spread over both worker nodes


def test_a_node_lost_mid_run_errors_its_episodes_and_the_run_finishes(cluster):
    from palaestra.runner.ray_host import RayEnvHost

    victim = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    host = RayEnvHost(workers=6, timeout_s=60)  # two actors per node
    tasks = make_tasks(["game:GuessTheNumber-v0"], range(60))
    runner = Runner(
        LatencyAgent(PolicyAgent(lambda obs: "\\boxed{25}"), median_s=0.02, p99_s=0.05),
        host=host,
        concurrency=12,
    )
    killed = threading.Event()

    def kill_when_started() -> None:
        while runner.stats.episodes < 5:
            killed.wait(0.05)
        cluster.remove_node(victim)
        killed.set()

    killer = threading.Thread(target=kill_when_started, daemon=True)
    killer.start()
    try:
        episodes = runner.run(tasks)
    finally:
        host.close()
    killer.join()
    assert killed.is_set()
    errored = [e for e in episodes if e.error is not None]
    assert len(episodes) == 60
    assert errored and all("died" in e.error for e in errored)
    assert runner.stats.errors == len(errored) < 60
    assert all(e.num_turns == 10 for e in episodes if e.error is None)
    assert len(host.dead) == 2
    _wait_until_no_actor_is_alive()


def test_actors_the_cluster_cannot_place_never_get_an_episode(cluster, caplog):
    from palaestra.runner.ray_host import RayEnvHost

    host = RayEnvHost(workers=6, num_cpus=1, placement_timeout_s=10)  # four CPUs in all
    try:
        assert "2 of 6 Ray env workers could not be placed" in caplog.text
        assert len(host.dead) == 2
        runner = Runner(PolicyAgent(lambda obs: "\\boxed{25}"), host=host, concurrency=12)
        episodes = runner.run(make_tasks(["game:GuessTheNumber-v0"], range(24)))
        assert [e.error for e in episodes] == [None] * 24  # none waited on an unplaced actor
        assert len(_alive_actor_nodes()) == 4
    finally:
        host.close()
    _wait_until_no_actor_is_alive()
    with pytest.raises(RuntimeError, match="2 of 2 Ray env workers could not be placed"):
        RayEnvHost(workers=2, num_cpus=8, placement_timeout_s=2)
    _wait_until_no_actor_is_alive()
