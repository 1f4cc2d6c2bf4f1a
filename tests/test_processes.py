"""The test helper that plays a Deployment's restartPolicy starts an exited process again."""

from tests.fixtures.processes import PortalProcess, restarted_when_it_exits
from tests.support.waiting import eventually


def test_an_exited_process_is_started_again_while_the_block_runs(tmp_path):
    process = PortalProcess("short-lived", ["sh", "-c", "echo ready; sleep 0.5; exit 3"], {},
                            tmp_path / "short.log", ready_text="ready").start()
    with restarted_when_it_exits(process, interval=0.1) as exits:
        eventually(lambda: len(exits) >= 2, timeout=10, message="the process did not exit twice")
    assert exits[:2] == [3, 3]
    assert (tmp_path / "short.log").read_text().count("ready") >= 3
    process.stop()
