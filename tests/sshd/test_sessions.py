"""What a user does in an admitted session, with the real OpenSSH client through gpuctl's relay:
a command, a terminal, scp and sftp, local port forwarding."""

from __future__ import annotations

import re
import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.sshd.harness import free_port, stop_process
from tests.support.waiting import eventually

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_a_command_runs_and_its_output_and_exit_status_come_back(start_sshd, client, alice,
                                                                  portal, home):
    sshd = start_sshd()
    result = client(sshd).ssh(alice, 'echo "out $USER $LOGNAME $PWD"; echo "err" >&2; '
                                     'echo "session $GPU_PORTAL_SSH_SESSION"; exit 3')
    assert result.returncode == 3, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == f"out alice alice {home}"
    assert result.stderr.decode().splitlines()[-1] == "err"
    session = lines[1].removeprefix("session ")
    assert UUID.match(session)
    assert [r["session"] for r in portal.of("start")] == [session]


def test_only_locale_and_term_variables_pass_from_the_client(start_sshd, client, alice):
    result = client(start_sshd()).ssh(alice, "-o", "SetEnv=LC_GPU_TEST=fr_FR FOO_GPU_TEST=bar",
                                      'echo "[$LC_GPU_TEST] [$FOO_GPU_TEST]"')
    assert result.stdout == b"[fr_FR] []\n", result.stderr


def test_a_process_killed_by_a_signal_is_told_as_such(start_sshd, client, alice):
    result = client(start_sshd()).ssh(alice, "-v", "kill -TERM $$")
    # OpenSSH's client exits 255 on an exit-signal; -v shows the request it got
    assert result.returncode == 255
    assert b"rtype exit-signal" in result.stderr
    assert b"rtype exit-status" not in result.stderr


def test_a_terminal_session(start_sshd, client, alice):
    result = client(start_sshd()).ssh(alice, "-tt", "tty; echo $TERM")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0].startswith("/dev/pts/")
    assert lines[1] == "xterm-256color"


def test_a_terminal_passes_its_output_unchanged(start_sshd, client, alice):
    """What the terminal writes reaches the client byte for byte: a program in raw mode (tmux,
    a full-screen editor) moves the cursor down with a bare newline, which must stay bare."""
    result = client(start_sshd()).ssh(alice, "-tt", "stty raw -echo; printf 'a\\nb\\r\\nc'")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(b"a\nb\r\nc"), result.stdout


def test_a_certificate_without_permit_pty_gets_no_terminal(start_sshd, client, alice, ca):
    alice.certify(ca, extensions=("permit-port-forwarding",))
    sshd = start_sshd()
    result = client(sshd).ssh(alice, "-tt", "tty")
    assert b"PTY allocation request failed" in result.stderr
    assert b"/dev/pts/" not in result.stdout
    assert sshd.logged("terminal refused", reason="the certificate does not permit it")


def test_scp_both_ways_and_sftp(start_sshd, client, alice, home, tmp_path):
    c = client(start_sshd())
    payload = bytes(range(256)) * 4096  # 1 MiB, every byte value
    local = tmp_path / "up.bin"
    local.write_bytes(payload)
    up = subprocess.run(["scp", *c.options(alice), str(local), "workload:uploaded.bin"],
                        capture_output=True, timeout=60)
    assert up.returncode == 0, up.stderr
    assert (home / "uploaded.bin").read_bytes() == payload

    (home / "down.txt").write_text("from the workload\n")
    back = tmp_path / "down.txt"
    down = subprocess.run(["scp", *c.options(alice), "workload:down.txt", str(back)],
                          capture_output=True, timeout=60)
    assert down.returncode == 0, down.stderr
    assert back.read_text() == "from the workload\n"

    listing = subprocess.run(["sftp", *c.options(alice), "-b", "-", "workload"],
                             input=b"ls -1\n", capture_output=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    names = set(listing.stdout.decode().split())
    assert {"uploaded.bin", "down.txt"} <= names


@pytest.fixture
def web_server():
    """A small HTTP server on the workload's loopback: what ssh -L reaches."""
    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b"hello from inside the workload"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_local_port_forwarding(start_sshd, client, alice, web_server):
    local_port = free_port()
    tunnel = client(start_sshd()).popen(
        alice, "-N", "-o", "ExitOnForwardFailure=yes",
        "-L", f"127.0.0.1:{local_port}:127.0.0.1:{web_server}")
    try:
        def fetched() -> bytes:
            assert tunnel.poll() is None, tunnel.stderr.read()
            with urllib.request.urlopen(f"http://127.0.0.1:{local_port}/", timeout=5) as answer:
                return answer.read()
        assert eventually(fetched, ignoring=(OSError,)) == b"hello from inside the workload"
    finally:
        stop_process(tunnel)


def test_forwarding_needs_the_certificates_permission(start_sshd, client, alice, ca, web_server):
    alice.certify(ca, extensions=("permit-pty",))
    sshd = start_sshd()
    result = client(sshd).ssh(alice, "-W", f"127.0.0.1:{web_server}",
                              input=b"GET / HTTP/1.0\r\n\r\n")
    assert b"hello from inside" not in result.stdout
    assert result.returncode != 0
    assert sshd.logged("port forwarding refused", target=f"127.0.0.1:{web_server}",
                       reason="the certificate does not permit it")
