"""The servers' ports (stack/procs.py free_port): a port one live process picked is not picked
by another, though no server binds it yet; a dead process's picks are free again."""

from __future__ import annotations

import subprocess
import sys

from stack import procs
from stack.procs import REPO, free_port

# below the range every other process picks from: only this test's processes pick here
FEW = range(19990, 19994)

CHILD = f"""
from stack import procs
procs.PORTS = range({FEW.start}, {FEW.stop})
print(procs.free_port())
try:
    procs.free_port()
except procs.StackError:
    print("none left")
"""


def pick_in_another_process() -> list[str]:
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stdout.split("\n", 2)[:2]


def test_a_port_a_live_process_picked_is_not_picked_by_another_until_it_ends(monkeypatch):
    monkeypatch.setattr(procs, "PORTS", FEW)
    monkeypatch.setattr(procs, "_picked", set())
    mine = {free_port() for _ in range(len(FEW) - 1)}  # picked, none of them bound

    theirs, then = pick_in_another_process()  # while this process lives

    assert {int(theirs)} == set(FEW) - mine
    assert then == "none left"
    # that process has ended: what it picked is free again
    assert free_port() == int(theirs)
