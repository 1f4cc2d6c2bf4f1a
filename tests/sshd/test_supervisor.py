"""gpu-portal-sshd as the container's entrypoint: the application is its child, with the same
environment and streams; its exit status is the wrapper's; signals reach it; SSH trouble never
stops it; and `install` puts a runnable copy in place (the init container)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.sshd.harness import stop_process
from tests.support.waiting import eventually


def test_the_programs_exit_status_is_the_wrappers(start_sshd):
    sshd = start_sshd(program=["sh", "-c", "exit 7"], wait=False)
    assert sshd.proc.wait(timeout=30) == 7


def test_a_program_killed_by_a_signal_gives_128_plus_the_signal(start_sshd):
    sshd = start_sshd(program=["sh", "-c", "kill -KILL $$"], wait=False)
    assert sshd.proc.wait(timeout=30) == 128 + 9


def test_sigterm_reaches_the_program(start_sshd):
    program = [sys.executable, "-c",
               "import signal, sys\n"
               "signal.signal(signal.SIGTERM, lambda *a: sys.exit(42))\n"
               "print('ready', flush=True)\n"
               "signal.pause()\n"]
    sshd = start_sshd(program=program)
    assert sshd.proc.stdout.readline() == b"ready\n"  # the program's stdout is the wrapper's
    sshd.proc.send_signal(signal.SIGTERM)
    assert sshd.proc.wait(timeout=30) == 42


def test_the_program_sees_the_wrappers_environment_unchanged(start_sshd, tmp_path):
    seen = tmp_path / "env.json"
    # LANG set: a Python under the C locale would add LC_CTYPE to its own environment (PEP 538)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "APP_SETTING": "x=1 y", "LANG": "C.UTF-8",
           "EMPTY": ""}
    sshd = start_sshd(program=[sys.executable, "-c",
                               f"import json, os; json.dump(dict(os.environ), open({str(seen)!r}, 'w'))"],
                      env=env, wait=False)
    assert sshd.proc.wait(timeout=30) == 0
    assert json.loads(seen.read_text()) == env


def test_a_program_that_cannot_start_exits_127(start_sshd):
    sshd = start_sshd(program=["/nonexistent/app"], wait=False)
    assert sshd.proc.wait(timeout=30) == 127
    assert sshd.logged("cannot start the program", program="/nonexistent/app")


def test_a_broken_ssh_config_still_runs_the_program(start_sshd):
    sshd = start_sshd(program=["sh", "-c", "echo app ran; exit 3"], wait=False,
                      extra=["--config-dir", "/nonexistent"])
    assert sshd.proc.wait(timeout=30) == 3
    assert sshd.proc.stdout.read() == b"app ran\n"
    assert sshd.logged("SSH is unavailable in this workload (the application runs all the same)",
                       error="/nonexistent")


def test_a_broken_ssh_config_without_a_program_fails(start_sshd):
    sshd = start_sshd(program=[], wait=False, extra=["--config-dir", "/nonexistent"])
    assert sshd.proc.wait(timeout=30) != 0
    assert sshd.logged("cannot serve SSH", error="/nonexistent")


def test_without_a_program_sigterm_stops_it_cleanly(start_sshd):
    sshd = start_sshd(program=[])
    sshd.proc.send_signal(signal.SIGTERM)
    assert sshd.proc.wait(timeout=30) == 0


def test_the_programs_exit_ends_the_ssh_sessions(start_sshd, client, alice, portal, tmp_path):
    flag = tmp_path / "stop-now"
    sshd = start_sshd(program=["sh", "-c", f"while [ ! -e {flag} ]; do sleep 0.05; done; exit 5"])
    session = client(sshd).popen(alice, "echo started; sleep 60")
    try:
        assert session.stdout.readline() == b"started\n"
        flag.touch()
        assert sshd.proc.wait(timeout=30) == 5
        eventually(lambda: session.poll() is not None)
        assert b"gpu-portal: the workload is stopping" in session.stderr.read()
    finally:
        stop_process(session)
    # the end was reported before the wrapper exited
    assert [r["reason"] for r in portal.of("end")] == ["workload stopping"]


def test_other_paths_are_404_and_the_relay_says_the_status(start_sshd, tmp_path):
    sshd = start_sshd()
    url = sshd.url.replace("/.gpu-portal/ssh", "/elsewhere")
    relay = subprocess.run(
        [sys.executable, "-c",
         "import sys; from gpuctl.ssh_transport import relay\n"
         f"sys.exit(relay({url!r}, headers={{'Authorization': 'Bearer tok-secret-77'}}))"],
        capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert relay.returncode != 0
    assert relay.stderr.decode().strip() == \
        "gpuctl: the workload's proxy refused the connection: 404"
    assert b"tok-secret-77" not in relay.stderr + relay.stdout


def test_install_copies_a_runnable_binary(binary, tmp_path):
    dest = tmp_path / "shared"
    dest.mkdir()
    for _ in range(2):  # idempotent: a restarted init container installs again
        done = subprocess.run([str(binary), "install", str(dest)], capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr
    installed = dest / "gpu-portal-sshd"
    assert installed.stat().st_mode & 0o777 == 0o555
    assert installed.read_bytes() == binary.read_bytes()
    usage = subprocess.run([str(installed)], capture_output=True, timeout=30)
    assert usage.returncode == 2 and b"gpu-portal-sshd run" in usage.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["gpu-portal-sshd"]
