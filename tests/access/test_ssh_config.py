"""The SSH Host blocks, as OpenSSH itself reads them (`ssh -G`, Debian's openssh-client): the
portal's block (access/ssh.py) and the one gpuctl writes into a config file (gpuctl/ssh.py)
hold exactly the lines they mean, over a table of hostile values (line breaks, quotes, `#`,
`%` tokens, blanks, `=`): each value is read back whole, or refused; no other option moves."""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess
from pathlib import Path

import pytest

from access import ssh as portal_ssh
from gpuctl import ssh as gpuctl_ssh

HOSTILE = [
    'x"\n    ProxyCommand touch /tmp/p\n#',
    "x\n    ProxyCommand touch /tmp/p",
    "x\r\nLocalCommand id",
    'a "quoted" word',
    "it's",
    "hash#tag",
    "# a comment",
    "100%h%%d%r",
    "two words",
    "key=value",
    "=leading",
    "back\\slash",
    "tab\tinside",
    "comma,list",
    "-oProxyCommand=touch",
    "",
]
IDS = [f"v{n}" for n in range(len(HOSTILE))]


def ssh_g(config: Path, host: str) -> dict[str, list[str]]:
    """`ssh -G`'s reading of `config` for `host`: option → its values, in order."""
    out = subprocess.run(["ssh", "-G", "-F", str(config), host], capture_output=True,
                         text=True, check=True, stdin=subprocess.DEVNULL).stdout
    options: dict[str, list[str]] = {}
    for line in out.splitlines():
        option, _, value = line.partition(" ")
        options.setdefault(option, []).append(value)
    return options


def read_back(tmp_path: Path, block: str, host: str, meant: dict[str, str], plain: str) -> None:
    """OpenSSH reads `block` as `meant` (option → value) and every other option as it reads
    `plain`, the same block of plain values: nothing else set, nothing injected."""
    config = tmp_path / "config"
    config.write_text(block)
    read = ssh_g(config, host)
    config.write_text(plain)
    baseline = ssh_g(config, host)
    for option, value in meant.items():
        assert read[option.lower()] == [value], (option, read[option.lower()], block)
    assert {option: values for option, values in read.items()
            if option not in {name.lower() for name in meant}} == \
        {option: values for option, values in baseline.items()
         if option not in {name.lower() for name in meant}}, block


# --- the portal's block -----------------------------------------------------------------------

@pytest.mark.parametrize("user_id", HOSTILE, ids=IDS)
def test_the_principal_is_a_plain_word_whatever_the_id(tmp_path, user_id):
    principal = portal_ssh.principal_for(user_id)
    assert portal_ssh.CONFIG_WORD.fullmatch(principal)
    block = portal_ssh.ssh_config_block(workload_id=7, principal=principal)
    directory = portal_ssh.PORTAL_KEY_DIR
    read_back(tmp_path, block, "gpu-portal-7", {
        "HostName": "gpu-portal-7", "User": principal,
        "ProxyCommand": "gpuctl ssh-proxy 7",
        "IdentityFile": f"{directory}/id_ed25519",
        "CertificateFile": f"{directory}/workload-7-cert.pub",
        "HostKeyAlias": "gpu-portal-workload-7",
        # (`ssh -G` shows this one with `~` expanded)
        # (ssh expands `~` to the account's home in the password database, not $HOME)
        "UserKnownHostsFile": f"{directory}/known_hosts".replace(
            "~", pwd.getpwuid(os.getuid()).pw_dir, 1),
        "StrictHostKeyChecking": "true", "IdentitiesOnly": "yes",
        "ServerAliveInterval": "30"}, plain=portal_ssh.ssh_config_block(workload_id=7,
                                                                       principal="abc123"))


def test_a_keystone_id_is_its_own_principal_and_others_are_hashed_apart():
    keystone_id = "4b5f6c0e9d8a4f3e8c2b1a0f9e8d7c6b"
    assert portal_ssh.principal_for(keystone_id) == keystone_id
    hashed = {portal_ssh.principal_for(value) for value in HOSTILE}
    assert len(hashed) == len(HOSTILE) and all(p.startswith("u") for p in hashed)


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_the_portal_writer_refuses_any_value_ssh_would_not_read_back(value):
    with pytest.raises(ValueError):
        portal_ssh.ssh_config_block(workload_id=7, principal=value)
    if value:
        with pytest.raises(ValueError):
            portal_ssh.ssh_config_block(workload_id=7, principal="u1", key_dir=f"/keys/{value}")


# --- gpuctl's block ---------------------------------------------------------------------------

PORTAL_BLOCK = portal_ssh.ssh_config_block(workload_id=7, principal="abc123")
WRITABLE = [value for value in HOSTILE if not any(ord(c) < 0x20 for c in value) and value]


@pytest.mark.parametrize("value", WRITABLE, ids=[f"w{n}" for n in range(len(WRITABLE))])
def test_gpuctl_writes_a_local_folder_and_command_that_ssh_reads_back_exactly(tmp_path, value):
    directory = tmp_path / f"keys {value}"
    # as gpuctl_command makes it: shell-quoted
    command = shlex.join([f"/opt/{value}/python", "-m", "gpuctl", "--portal-url",
                          "http://p/%41"])
    block = gpuctl_ssh.config_block(PORTAL_BLOCK, workload_id=7, directory=directory,
                                    command=command)
    # OpenSSH keeps `%%` in what it shows and makes it `%` when it uses the value (it shows
    # UserKnownHostsFile expanded)
    shown = str(directory).replace("%", "%%")
    read_back(tmp_path, block, "gpu-portal-7", {
        "HostName": "gpu-portal-7", "User": "abc123",
        "ProxyCommand": command.replace("%", "%%") + " ssh-proxy 7",
        "IdentityFile": f"{shown}/id_ed25519",
        "CertificateFile": f"{shown}/workload-7-cert.pub",
        "HostKeyAlias": "gpu-portal-workload-7",
        "UserKnownHostsFile": f"{directory}/known_hosts",
        "StrictHostKeyChecking": "true", "IdentitiesOnly": "yes",
        "ServerAliveInterval": "30"},
        plain=gpuctl_ssh.config_block(PORTAL_BLOCK, workload_id=7, directory=Path("/k"),
                                      command="gpuctl"))


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\x00b", "a\x1bb"],
                         ids=["newline", "return", "nul", "escape"])
def test_gpuctl_refuses_a_control_character_in_what_it_would_write(value):
    with pytest.raises(gpuctl_ssh.BlockRefused):
        gpuctl_ssh.config_block(PORTAL_BLOCK, workload_id=7, directory=Path(f"/k/{value}"),
                                command="gpuctl")
    with pytest.raises(gpuctl_ssh.BlockRefused):
        gpuctl_ssh.config_block(PORTAL_BLOCK, workload_id=7, directory=Path("/k"),
                                command=shlex.join(["gpuctl", value]))


def test_gpuctl_refuses_a_command_whose_quotes_do_not_pair():
    with pytest.raises(gpuctl_ssh.BlockRefused):
        gpuctl_ssh.config_block(PORTAL_BLOCK, workload_id=7, directory=Path("/k"),
                                command="/opt/it's/python -m gpuctl")


@pytest.mark.parametrize("block", [
    PORTAL_BLOCK.replace("User abc123", 'User x"\n    ProxyCommand touch /tmp/p\n#'),
    PORTAL_BLOCK.replace("User abc123", "User two words"),
    PORTAL_BLOCK.replace("User abc123", "User 100%h"),
    PORTAL_BLOCK.replace("User abc123", "User a=b"),
    PORTAL_BLOCK.replace("ProxyCommand gpuctl ssh-proxy 7", "ProxyCommand touch /tmp/p"),
    PORTAL_BLOCK + "    LocalCommand id\n",
    PORTAL_BLOCK + "    User again\n",
    PORTAL_BLOCK.replace("Host gpu-portal-7", "Host *"),
    PORTAL_BLOCK.replace("Host gpu-portal-7", "Host gpu-portal-8"),
    "Match all\n" + PORTAL_BLOCK,
], ids=["injected-line", "blank", "token", "equals", "proxycommand", "extra-option",
        "twice", "any-host", "other-host", "match"])
def test_gpuctl_refuses_a_portal_block_it_does_not_expect(block):
    with pytest.raises(gpuctl_ssh.BlockRefused):
        gpuctl_ssh.config_block(block, workload_id=7, directory=Path("/k"), command="gpuctl")
