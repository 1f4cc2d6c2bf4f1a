"""SSH into a workload: `gpuctl ssh`, `ssh-config` and `ssh-proxy` (the ProxyCommand that
ssh-config writes, so its spelling is fixed in users' ~/.ssh/config). The keys, certificates
and Host blocks are gpuctl/ssh.py's; the relay gpuctl/ssh_transport.py's."""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

from .. import ssh as ssh_keys
from ..client import PortalClient
from ..errors import EXIT_API, EXIT_OK
from ..parser import Commands
from ..ssh_transport import relay

SSH_EXAMPLES = """\
examples:
  gpuctl ssh 42                          # a shell in workload 42
  gpuctl ssh 42 -- nvidia-smi            # one command; its exit status is gpuctl's
  gpuctl ssh 42 -L 8888:localhost:8888   # and forward local port 8888 to the workload's"""


def register(commands: Commands) -> None:
    p = commands.command(
        "ssh", ssh, "SSH into a running workload (a shell, a command, -L forwarding)",
        description="SSH into a running workload through its login: a shell, a command, -L "
                    "forwarding. A key is made once for this machine, a short-lived "
                    "certificate fetched as needed.", epilog=SSH_EXAMPLES)
    p.add_argument("id", type=int)
    p.add_argument("-L", dest="forward", action="append", metavar="[BIND:]PORT:HOST:HOSTPORT",
                   help="forward a local port to HOST:HOSTPORT as the workload sees it "
                        "(repeatable), as ssh -L")
    p.add_argument("--ssh", dest="ssh_binary", default="ssh", help="the OpenSSH client to run")
    p.add_argument("remote_command", nargs="*", metavar="-- COMMAND",
                   help="a command to run instead of a shell, after --")

    p = commands.command(
        "ssh-config", ssh_config, "the workload's OpenSSH Host block (for ssh, scp, VS Code …)",
        description="The workload's OpenSSH Host block (ProxyCommand gpuctl ssh-proxy ID), for "
                    "ssh, scp, sftp, VS Code Remote-SSH and JetBrains Gateway.",
        epilog="example:\n  gpuctl ssh-config 42 --write ~/.ssh/config && ssh gpu-portal-42")
    p.add_argument("id", type=int)
    p.add_argument("--write", metavar="FILE",
                   help="put the block into FILE (e.g. ~/.ssh/config), replacing this "
                        "workload's earlier one, instead of printing it")

    p = commands.command(
        "ssh-proxy", ssh_proxy, "OpenSSH's ProxyCommand for a workload (ssh-config writes it)",
        description="OpenSSH's ProxyCommand for a workload: relays stdin/stdout over a "
                    "WebSocket through the workload's proxy (ssh-config writes it for you).")
    p.add_argument("id", type=int)


def _portal_options(args: argparse.Namespace) -> list[str]:
    """The options that chose this portal and cloud, for a gpuctl that OpenSSH runs again."""
    options = []
    if args.portal_url:
        options += ["--portal-url", args.portal_url]
    if args.os_cloud:
        options += ["--os-cloud", args.os_cloud]
    return options


def _ssh_block(api: PortalClient, args: argparse.Namespace) -> tuple[Path, str | None]:
    """A certificate that serves (renewed if needed) and the workload's Host block for this
    machine: (key directory, block); the block None (said on stderr) where a value of it
    could not be written so that OpenSSH reads it back exactly."""
    directory = ssh_keys.key_dir(args.environ)
    ssh_keys.ensure_certificate(api, args.id, directory)
    portal_block = ssh_keys.portal_block_path(directory, args.id).read_text()
    command = ssh_keys.gpuctl_command(_portal_options(args))
    try:
        return directory, ssh_keys.config_block(portal_block, workload_id=args.id,
                                                directory=directory, command=command)
    except ssh_keys.BlockRefused as exc:
        args.err.write(f"gpuctl: nothing written: {exc}\n")
        return directory, None


def ssh_config(api: PortalClient, args: argparse.Namespace) -> int:
    """The workload's OpenSSH Host block: plain ssh, scp, sftp, VS Code Remote-SSH and
    JetBrains Gateway then reach it as `gpu-portal-ID`."""
    _, block = _ssh_block(api, args)
    if block is None:
        return EXIT_API
    if args.write:
        target = Path(args.write).expanduser()
        begin, end = f"# gpu-portal workload {args.id}", f"# end gpu-portal workload {args.id}"
        text = target.read_text() if target.exists() else ""
        text = re.sub(rf"(?ms)^{re.escape(begin)}\n.*?^{re.escape(end)}\n?", "", text)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + ("\n" if text and not text.endswith("\n") else "")
                          + f"{begin}\n{block.rstrip()}\n{end}\n")
        args.err.write(f"wrote Host {ssh_keys.host_alias(args.id)} to {target}\n")
    else:
        args.out.write(block.rstrip() + "\n")
    return EXIT_OK


def ssh(api: PortalClient, args: argparse.Namespace) -> int:
    """ssh into the workload: the key made once, the certificate fetched or renewed, then
    OpenSSH with the workload's Host block (its exit status is gpuctl's)."""
    directory, block = _ssh_block(api, args)
    if block is None:
        return EXIT_API
    config = directory / f"workload-{args.id}.config"
    config.write_text(block.rstrip() + "\n")
    argv = [args.ssh_binary, "-F", str(config)]
    for spec in args.forward or []:
        argv += ["-L", spec]
    argv.append(ssh_keys.host_alias(args.id))
    if args.remote_command:
        argv += ["--", *args.remote_command]
    # OpenSSH runs the ProxyCommand (gpuctl again) with this environment: the same credentials
    return subprocess.call(argv, env={**args.environ, "GPUCTL_SSH_DIR": str(directory)})


def ssh_proxy(api: PortalClient, args: argparse.Namespace) -> int:
    """OpenSSH's ProxyCommand: a WebSocket to the workload's SSH server through its proxy,
    relayed to stdin and stdout. Writes nothing but the SSH stream to stdout."""
    directory = ssh_keys.key_dir(args.environ)
    ssh_keys.ensure_certificate(api, args.id, directory)  # before OpenSSH offers it
    issued = api.post(f"workloads/{args.id}/access-token/")
    try:
        url = ssh_keys.websocket_url(issued.get("url") or "")
    except ValueError as exc:
        args.err.write(f"gpuctl: {exc}\n")
        return EXIT_API
    return relay(url, headers={"Authorization": f"Bearer {issued['token']}"},
                 ssl_context=api.ssl_context() if url.startswith("wss://") else None)
