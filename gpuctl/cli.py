"""gpuctl: launch and manage GPU workloads on the GPU portal from a shell or a script.

Credentials are the usual OpenStack ones (source your openrc, or OS_CLOUD for clouds.yaml),
plus GPU_PORTAL_URL. Output is a table by default, JSON with `-o json`.

Exit codes (stable, for scripts):
  0  success
  1  the API refused the request (categories invalid, forbidden, conflict, rate_limited,
     internal; e.g. distributed_unavailable: the cluster cannot run a group of nodes)
  2  usage error: bad arguments or missing configuration
  3  authentication failed (Keystone refused the credentials, or the portal the token:
     category auth)
  4  refused at admission (category admission: quota_exceeded, budget_exhausted,
     maintenance_window, no_address_free, and any refusal the portal adds to them)
  5  --wait: timed out, or the workload ended in a state other than the one waited for;
     webhook test: no answer from the receiver within --timeout
  6  not found (no such workload or tenant, or not visible to you: category not_found)
  7  the portal or Keystone cannot be reached (or is unavailable: category unavailable)
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import config as config_mod
from . import ssh as ssh_mod
from .client import ApiError, AuthError, PortalClient, Unreachable
from .ssh_transport import relay

EXIT_OK, EXIT_API, EXIT_USAGE, EXIT_AUTH, EXIT_QUOTA, EXIT_WAIT, EXIT_NOT_FOUND, \
    EXIT_UNREACHABLE = range(8)
# the exit code of an API error follows its category (the API gives each error one); the
# categories not named here (invalid, forbidden, conflict, rate_limited, internal) exit 1
EXIT_BY_CATEGORY = {"admission": EXIT_QUOTA, "auth": EXIT_AUTH, "not_found": EXIT_NOT_FOUND,
                    "unavailable": EXIT_UNREACHABLE}

FINAL_STATES = {"succeeded", "failed", "stopped"}
STATES = ["submitted", "creating", "queued", "pending", "running", "succeeded", "failed",
          "stopping", "stopped"]


class WaitFailed(Exception):
    """--wait did not see the state it waited for (exit code 5)."""


# --- output ----------------------------------------------------------------------------------

def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return " ".join(str(v) for v in value) or "-"
    return str(value)


def print_table(rows: Sequence[dict], columns: Sequence[tuple[str, str]], out: TextIO) -> None:
    """columns: (heading, key); a key may be a callable of the row."""
    cells = [[_cell(col(row) if callable(col) else row.get(col)) for _, col in columns]
             for row in rows]
    headings = [heading for heading, _ in columns]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headings)]
    out.write("  ".join(h.upper().ljust(w) for h, w in zip(headings, widths, strict=True))
              .rstrip() + "\n")
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def print_record(record: dict, fields: Sequence[str], out: TextIO) -> None:
    width = max(len(f) for f in fields)
    for field in fields:
        out.write(f"{field.ljust(width)}  {_cell(record.get(field))}\n")


def emit(args: argparse.Namespace, data: Any, table: Callable[[TextIO], None]) -> None:
    if args.output == "json":
        json.dump(data, args.out, indent=2, sort_keys=False, default=str)
        args.out.write("\n")
    else:
        table(args.out)


def _age(row: dict) -> str:
    created = row.get("created_at")
    if not created:
        return "-"
    try:
        then = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return created
    seconds = int((dt.datetime.now(dt.UTC) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _minutes_text(seconds: float) -> str:
    minutes = max(round(seconds / 60), 1)
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def queue_text(workload: dict, now: dt.datetime | None = None) -> str:
    """"queued — position 3 of 7 for a100, about 40 min" (or why there is no estimate)."""
    text = "queued"
    if workload.get("queue_position"):
        text += (f" — position {workload['queue_position']} of {workload.get('queue_length')}"
                 f" for {workload.get('gpu_type')}")
    eta = workload.get("eta")
    if eta:
        now = now or dt.datetime.now(dt.UTC)
        wait = (dt.datetime.fromisoformat(eta.replace("Z", "+00:00")) - now).total_seconds()
        text += (", about " + _minutes_text(wait)) if wait > 30 else ", starting now"
    elif workload.get("eta_basis"):
        text += f"; {workload['eta_basis']}"
    return text


def _state(workload: dict) -> str:
    if workload.get("state") == "queued" and workload.get("queue_position"):
        return f"queued {workload['queue_position']}/{workload.get('queue_length')}"
    return workload.get("state", "")


def gpus_text(workload: dict) -> str:
    """"1x a100", or for a distributed workload "2 nodes x 4x a100 (8)": GPUs per node × nodes."""
    each = f"{workload['gpu_count']}x {workload['gpu_type']}"
    nodes = workload.get("nodes") or 1
    return each if nodes == 1 else f"{nodes} nodes x {each} ({nodes * workload['gpu_count']})"


WORKLOAD_COLUMNS = [("id", "id"), ("name", "name"), ("state", _state),
                    ("template", "template"), ("gpus", gpus_text),
                    ("owner", "owner"), ("age", _age), ("url", "url")]
WORKLOAD_FIELDS = ["id", "name", "tenant", "owner", "template", "kind", "gpu_type", "gpu_count",
                   "nodes", "gpus", "image", "command", "args", "port", "cpu", "memory", "max_runtime_minutes",
                   "state", "reason", "url", "address", "node", "exit_code", "created_at",
                   "started_at", "finished_at", "expires_at", "queue_position", "queue_length",
                   "eta", "eta_basis"]


# --- commands ----------------------------------------------------------------------------------

def cmd_whoami(api: PortalClient, args: argparse.Namespace) -> int:
    me = api.get("me/")
    emit(args, me, lambda out: print_record(
        {**me, "project": (me.get("project") or {}).get("name")},
        ["user_name", "user_id", "domain", "project", "role", "is_admin", "namespace",
         "token_expires_at"], out))
    return EXIT_OK


def cmd_gpu_types(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get("gpu-types/")
    emit(args, rows, lambda out: print_table(rows, [
        ("slug", "slug"), ("name", "name"), ("resource", "resource_name"),
        ("memory", lambda r: f"{r['memory_gb']} GB"), ("capacity", "capacity"),
        ("free", "free"), ("largest node", "largest_node"), ("next 24 h", gpu_type_ahead)], out))
    return EXIT_OK


def gpu_type_ahead(row: dict[str, Any]) -> str:
    """How the calendar changes the type's free GPUs in the next 24 hours ("" when it does not),
    without the "free now" that the table has already: "8 from 14:00 (maintenance), …"."""
    upcoming = row.get("upcoming") or {}
    if not upcoming.get("changes"):
        return ""
    return str(upcoming.get("text", "")).split(", ", 1)[-1]


def cmd_templates(api: PortalClient, args: argparse.Namespace) -> int:
    rows = api.get("templates/")
    emit(args, rows, lambda out: print_table(rows, [
        ("slug", "slug"), ("name", "name"), ("kind", "kind"), ("image", "image"),
        ("port", "port"), ("cpu", "cpu"), ("memory", lambda r: f"{r['memory']} GiB"),
        ("options", template_options)], out))
    return EXIT_OK


def template_options(row: dict[str, Any]) -> str:
    """What `--arg` may add to a launch of the template: any (custom), its options, or none."""
    if row.get("custom"):
        return "any"
    return " ".join(row.get("allowed_args") or []) or "-"


def _env_pairs(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        if "=" not in pair:
            raise argparse.ArgumentTypeError(f"--env {pair!r}: expected KEY=VALUE")
        key, value = pair.split("=", 1)
        env[key] = value
    return env


def launch_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"name": args.name or f"{args.template}-{args.gpu_type}",
                            "template": args.template, "gpu_type": args.gpu_type,
                            "gpu_count": args.gpus}
    if args.nodes is not None:
        body["nodes"] = args.nodes
    if args.command is not None and args.program:
        raise argparse.ArgumentTypeError("give the program either after -- or as --command, "
                                         "not both")
    if args.program:  # after --: each word one argv item, as typed (no shell)
        body["command"] = list(args.program)
    elif args.command is not None:
        body["command"] = shlex.split(args.command)
    optional = {"kind": args.kind, "image": args.image, "args": args.arg or None,
                "env": _env_pairs(args.env) if args.env else None, "port": args.port,
                "cpu": args.cpu, "memory": args.memory,
                "max_runtime_minutes": args.max_runtime, "retries": args.retries}
    body.update({key: value for key, value in optional.items() if value is not None})
    if args.use_home:
        body["use_home"] = True
    if args.ssh is not None:
        body["ssh"] = args.ssh
    return body


def wait_for(api: PortalClient, workload_id: int, *, until: set[str], timeout: float,
             interval: float, err: TextIO, quiet: bool = False) -> dict:
    """Poll the workload until its state is in `until` (→ it) or final otherwise (→ WaitFailed)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        workload = api.get(f"workloads/{workload_id}/")
        state = workload["state"]
        shown = queue_text(workload) if state == "queued" else state
        if shown != last and not quiet:
            reason = f": {workload['reason']}" if workload.get("reason") else ""
            err.write(f"workload {workload_id}: {shown}{reason}\n")
            last = shown
        if state in until:
            return workload
        if state in FINAL_STATES:
            raise WaitFailed(f"workload {workload_id} ended {state}"
                             + (f": {workload['reason']}" if workload.get("reason") else ""))
        if time.monotonic() >= deadline:
            raise WaitFailed(f"workload {workload_id} still {state} after {timeout:g} s"
                             + (f": {workload['reason']}" if workload.get("reason") else ""))
        time.sleep(min(interval, max(deadline - time.monotonic(), 0.05)))


def cmd_launch(api: PortalClient, args: argparse.Namespace) -> int:
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    workload = api.post("workloads/", launch_body(args), headers=headers)
    if args.wait or args.wait_done:
        until = {"succeeded"} if args.wait_done else {"running", "succeeded"}
        workload = wait_for(api, workload["id"], until=until, timeout=args.timeout,
                            interval=args.interval, err=args.err)
    emit(args, workload, lambda out: print_workload(workload, out))
    return EXIT_OK


def cmd_list(api: PortalClient, args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"state": args.state, "owner": args.owner,
                              "gpu_type": args.gpu_type, "template": args.template,
                              "ordering": args.sort}
    if args.mine:
        params["mine"] = "true"
    rows = api.get_all("workloads/", limit=args.limit, **params)
    emit(args, rows, lambda out: print_table(rows, WORKLOAD_COLUMNS, out))
    return EXIT_OK


def shown_ranks(ranks: list[dict]) -> list[dict]:
    """A distributed workload's ranks in rank order, the MPI launcher last."""
    workers = sorted((r for r in ranks if r.get("role") != "launcher"),
                     key=lambda r: r.get("rank") or 0)
    return workers + [r for r in ranks if r.get("role") == "launcher"]


RANK_COLUMNS = [("rank", lambda r: "launcher" if r.get("role") == "launcher" else r.get("rank")),
                ("pod", "pod"), ("node", lambda r: r.get("node") or None),
                ("state", "state"), ("reason", lambda r: r.get("reason") or None),
                ("exit code", "exit_code")]


def print_workload(workload: dict, out: TextIO) -> None:
    """The record, then (a distributed workload) its ranks as a table."""
    print_record({**workload, "gpus": gpus_text(workload)}, WORKLOAD_FIELDS, out)
    ranks = workload.get("ranks") or []
    if ranks:
        running = sum(1 for r in ranks if r.get("state") == "running"
                      and r.get("role") != "launcher")
        out.write(f"\nranks: {running} of {workload.get('nodes')} running\n")
        print_table(shown_ranks(ranks), RANK_COLUMNS, out)


def cmd_show(api: PortalClient, args: argparse.Namespace) -> int:
    workload = api.get(f"workloads/{args.id}/")
    events = api.get(f"workloads/{args.id}/events/") if args.events else None
    data = {**workload, "events": events} if events is not None else workload

    def table(out: TextIO) -> None:
        print_workload(workload, out)
        if events is not None:
            out.write("\n")
            print_table(events, [("at", "at"), ("type", "type"), ("reason", "reason"),
                                 ("message", "message")], out)

    emit(args, data, table)
    return EXIT_OK


def _new_lines(previous: list[str], current: list[str]) -> list[str]:
    """The lines of `current` after its overlap with the end of `previous` (a polled tail)."""
    if not previous:
        return current
    for start in range(len(current), 0, -1):
        overlap = current[:start]
        if len(overlap) <= len(previous) and previous[-len(overlap):] == overlap:
            return current[start:]
    return current


def cmd_logs(api: PortalClient, args: argparse.Namespace) -> int:
    def read() -> list[str]:
        # a distributed workload's rank (or the MPI launcher); the API's default without it
        return api.get(f"workloads/{args.id}/logs/", tail=args.tail, rank=args.rank)["lines"]

    lines = read()
    if args.output == "json" and not args.follow:
        emit(args, {"lines": lines}, lambda out: None)
        return EXIT_OK
    for line in lines:
        args.out.write(line + "\n")
    args.out.flush()
    deadline = time.monotonic() + args.timeout if args.timeout else None
    while args.follow:
        state = api.get(f"workloads/{args.id}/")["state"]
        time.sleep(args.interval)
        current = read()
        for line in _new_lines(lines, current):
            args.out.write(line + "\n")
        args.out.flush()
        lines = current
        if state in FINAL_STATES:
            break  # one last read after the end, then stop
        if deadline is not None and time.monotonic() >= deadline:
            break
    return EXIT_OK


def cmd_token(api: PortalClient, args: argparse.Namespace) -> int:
    """A bearer token for a service workload's address (its proxy admits it): valid a minute,
    so a script asks again rather than keeping it."""
    issued = api.post(f"workloads/{args.id}/access-token/")
    if args.output == "json":
        emit(args, issued, lambda out: None)
    elif args.header:
        args.out.write(f"Authorization: Bearer {issued['token']}\n")
    else:
        args.out.write(issued["token"] + "\n")
    return EXIT_OK


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
    directory = ssh_mod.key_dir(args.environ)
    ssh_mod.ensure_certificate(api, args.id, directory)
    portal_block = ssh_mod.portal_block_path(directory, args.id).read_text()
    command = ssh_mod.gpuctl_command(_portal_options(args))
    try:
        return directory, ssh_mod.config_block(portal_block, workload_id=args.id,
                                               directory=directory, command=command)
    except ssh_mod.BlockRefused as exc:
        args.err.write(f"gpuctl: nothing written: {exc}\n")
        return directory, None


def cmd_ssh_config(api: PortalClient, args: argparse.Namespace) -> int:
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
        args.err.write(f"wrote Host {ssh_mod.host_alias(args.id)} to {target}\n")
    else:
        args.out.write(block.rstrip() + "\n")
    return EXIT_OK


def cmd_ssh(api: PortalClient, args: argparse.Namespace) -> int:
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
    argv.append(ssh_mod.host_alias(args.id))
    if args.remote_command:
        argv += ["--", *args.remote_command]
    # OpenSSH runs the ProxyCommand (gpuctl again) with this environment: the same credentials
    return subprocess.call(argv, env={**args.environ, "GPUCTL_SSH_DIR": str(directory)})


def cmd_ssh_proxy(api: PortalClient, args: argparse.Namespace) -> int:
    """OpenSSH's ProxyCommand: a WebSocket to the workload's SSH server through its proxy,
    relayed to stdin and stdout. Writes nothing but the SSH stream to stdout."""
    directory = ssh_mod.key_dir(args.environ)
    ssh_mod.ensure_certificate(api, args.id, directory)  # before OpenSSH offers it
    issued = api.post(f"workloads/{args.id}/access-token/")
    try:
        url = ssh_mod.websocket_url(issued.get("url") or "")
    except ValueError as exc:
        args.err.write(f"gpuctl: {exc}\n")
        return EXIT_API
    return relay(url, headers={"Authorization": f"Bearer {issued['token']}"},
                 ssl_context=api.ssl_context() if url.startswith("wss://") else None)


def cmd_stop(api: PortalClient, args: argparse.Namespace) -> int:
    workload = api.post(f"workloads/{args.id}/stop/")
    if args.wait:
        workload = wait_for(api, args.id, until={"stopped", "succeeded", "failed"},
                            timeout=args.timeout, interval=args.interval, err=args.err)
    emit(args, workload, lambda out: print_record(workload, ["id", "name", "state"], out))
    return EXIT_OK


def cmd_delete(api: PortalClient, args: argparse.Namespace) -> int:
    api.delete(f"workloads/{args.id}/")
    emit(args, {"id": args.id, "deleted": True},
         lambda out: out.write(f"workload {args.id} deleted\n"))
    return EXIT_OK


def rank_value(text: str) -> str:
    if text == "launcher" or (text.isascii() and text.isdigit()):
        return text
    raise argparse.ArgumentTypeError(f"--rank {text!r}: a rank number (0, 1, …) or launcher")


def _tenant(api: PortalClient, wanted: str | None) -> dict:
    if wanted:
        if wanted.isascii() and wanted.isdigit():
            return api.get(f"tenants/{wanted}/")
        for tenant in api.get_all("tenants/", q=wanted):
            if wanted in (tenant["name"], tenant["keystone_project_id"]):
                return tenant
        raise ApiError(404, "not_found", f"No tenant named {wanted!r} that you can see.")
    project = api.get("me/").get("project")
    if not project:
        raise ApiError(404, "not_found", "Your token has no project; pass --tenant.")
    for tenant in api.get_all("tenants/", q=project["id"]):
        if tenant["keystone_project_id"] == project["id"]:
            return tenant
    raise ApiError(404, "not_found", f"No tenant for project {project['name']}.")


def cmd_quota(api: PortalClient, args: argparse.Namespace) -> int:
    tenant = _tenant(api, args.tenant)
    quota = api.get(f"tenants/{tenant['id']}/quota/")
    data = {"tenant": tenant["name"], "tenant_id": tenant["id"], **quota}

    def table(out: TextIO) -> None:
        out.write(f"tenant {tenant['name']} (id {tenant['id']}, namespace "
                  f"{tenant['namespace']})\n")
        by_type = quota.get("gpus_by_type") or {}
        print_record({**quota, **{f"gpus {slug}": n for slug, n in by_type.items()}},
                     ["gpus_total", *[f"gpus {slug}" for slug in by_type], "cpu", "memory",
                      "max_workloads", "max_runtime_minutes", "idle_threshold_percent",
                      "idle_minutes", "idle_action"], out)
        out.write(quota_in_force_text(quota))

    emit(args, data, table)
    return EXIT_OK


def quota_in_force_text(quota: dict) -> str:
    """What counts now where adjustments change the quota (the API's `in_force` and
    `adjustments`: a running reservation, maintenance, a budget's hold); "" when none do."""
    adjustments = quota.get("adjustments") or []
    if not adjustments:
        return ""
    in_force = quota.get("in_force") or {}
    by_type = in_force.get("gpus_by_type") or {}
    out = io.StringIO()
    out.write("\nin force now\n")
    print_record({**in_force, **{f"gpus {slug}": n for slug, n in by_type.items()}},
                 ["gpus_total", *[f"gpus {slug}" for slug in by_type], "cpu", "memory"], out)
    if in_force.get("held"):
        out.write(f"queue held: {in_force.get('held_reason')}\n")
    for item in adjustments:
        what = ("queue held" if item.get("kind") == "hold" else
                f"{item.get('gpus', 0):+d} {item.get('gpu_type') or 'GPUs in all'}")
        until = f" until {item['ends_at']}" if item.get("ends_at") else ""
        out.write(f"  {item.get('source')}: {what}{until} ({item.get('reason')})\n")
    return out.getvalue()


def cmd_usage(api: PortalClient, args: argparse.Namespace) -> int:
    params = {"since": args.since, "until": args.until, "group_by": args.group_by,
              "tenant": args.tenant, "workload": args.workload}
    try:
        if args.csv:
            response = api.request("GET", "usage/", params={**params, "format": "csv"},
                                   accept="text/csv")
            args.out.write(response.text)
            return EXIT_OK
        report = api.get("usage/", **params)
    except ApiError as exc:
        if exc.status == 404 and exc.code == "error":  # the route itself is missing
            args.err.write("gpuctl: this portal has no usage API (GET /api/v1/usage/)\n")
            return EXIT_API
        raise

    def table(out: TextIO) -> None:
        columns = report.get("columns") or []
        rows = report.get("results") or []
        out.write(f"usage {report['since']} .. {report['until']} by {report['group_by']}\n")
        print_table(rows, [(c, c) for c in columns], out)
        totals = report.get("totals") or {}
        if totals:
            out.write("total: " + ", ".join(f"{k} {_cell(v)}" for k, v in totals.items()) + "\n")

    emit(args, report, table)
    return EXIT_OK


def _weights(pairs: list[str], option: str) -> dict[str, float]:
    """["a100=1", "t4=0.25"] → {"a100": 1.0, "t4": 0.25}."""
    out: dict[str, float] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} {pair!r}: NAME=NUMBER") from None
    return out


def _percentages(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--warn-at {text!r}: percentages separated by commas, e.g. 50,80,100") from None


def _hours(value: float | None) -> str:
    return "no limit" if value is None else f"{value:g}"


def cmd_budget(api: PortalClient, args: argparse.Namespace) -> int:
    tenant = _tenant(api, args.project)
    path = f"tenants/{tenant['id']}/budget/"
    if args.action == "set":
        if args.gpu_hours is None:
            raise argparse.ArgumentTypeError("budget set: --gpu-hours is required")
        body: dict[str, Any] = {"period": args.period, "gpu_hours": args.gpu_hours,
                                "weights": _weights(args.weight or [], "--weight"),
                                "hard": args.hard, "stop_at_exhaustion": args.stop_at_exhaustion,
                                "user_caps": _weights(args.user_cap or [], "--user-cap")}
        if args.warn_at is not None:
            body["warn_at"] = _percentages(args.warn_at)
        budget = api.put(path, body)
    elif args.action == "remove":
        api.delete(path)
        budget = api.get(path)
    else:
        budget = api.get(path)
    data = {**budget, "tenant": tenant["name"], "tenant_id": tenant["id"]}

    def table(out: TextIO) -> None:
        if budget["gpu_hours"] is None:
            out.write(f"tenant {tenant['name']}: no budget; {budget['used']:g} GPU-hours used "
                      f"since {budget['period_start'][:10]}\n")
            return
        kind = "hard" if budget["hard"] else "soft"
        out.write(f"tenant {tenant['name']}: {kind} budget of {_hours(budget['gpu_hours'])} "
                  f"weighted GPU-hours per {budget['period']}\n")
        weights = budget.get("weights") or {}
        print_record({**budget, "percent": f"{budget['percent']:g} %",
                      "used": f"{budget['used']:g}", "remaining": f"{budget['remaining']:g}",
                      "forecast": budget["forecast_exhausted_at"] or "not before the reset",
                      "weights": ", ".join(f"{k}={v:g}" for k, v in weights.items()) or "all 1",
                      "warn_at": ",".join(str(p) for p in budget["warn_at"])},
                     ["used", "remaining", "percent", "exhausted", "forecast", "resets_at",
                      "weights", "warn_at", "stop_at_exhaustion"], out)
        if budget.get("by_user"):
            out.write("top users:\n")
            print_table(budget["by_user"], [("USER", "user"), ("GPU-HOURS", "gpu_hours"),
                                            ("CAP", "cap")], out)

    emit(args, data, table)
    return EXIT_OK


# --- the parser -------------------------------------------------------------------------------

# --- notifications and webhooks ----------------------------------------------------

NOTIFICATION_COLUMNS = [("id", "id"), ("read", "read"), ("kind", "kind"), ("title", "title"),
                        ("project", "project"), ("workload", "workload"), ("age", _age)]
WEBHOOK_COLUMNS = [("id", "id"), ("project", "project"), ("kinds", "kinds"),
                   ("state", lambda row: row.get("state") or ("active" if row.get("active")
                                                              else "disabled")),
                   ("url", lambda row: row.get("url") or ("(the project's managers')"
                                                          if row.get("project") else None))]


def _usage(args: argparse.Namespace, message: str) -> int:
    args.err.write(f"gpuctl: {message}\n")
    return EXIT_USAGE


def cmd_notifications(api: PortalClient, args: argparse.Namespace) -> int:
    if args.action == "read":
        if args.all == (args.id is not None):
            return _usage(args, "notifications read: give one ID or --all")
        if args.all:
            marked = api.post("notifications/read-all/")
            emit(args, marked, lambda out: out.write(f"{marked['marked']} marked read\n"))
        else:
            row = api.post(f"notifications/{args.id}/read/")
            emit(args, row, lambda out: out.write(f"notification {row['id']} read\n"))
        return EXIT_OK
    if args.action == "preferences":
        return _preferences(api, args)
    if args.id is not None or args.all or args.set:
        return _usage(args, "notifications: ID, --all and --set go with read / preferences")
    rows = api.get_all("notifications/", unread="true" if args.unread else None,
                       kind=args.kind, limit=args.limit)
    emit(args, rows, lambda out: print_table(rows, NOTIFICATION_COLUMNS, out))
    return EXIT_OK


def _preferences(api: PortalClient, args: argparse.Namespace) -> int:
    if args.set:
        change: dict[str, dict[str, bool]] = {}
        for item in args.set:
            name, _, value = item.partition("=")
            kind, _, channel = name.partition(".")
            if not kind or not channel or value not in ("on", "off"):
                return _usage(args, f"--set {item!r}: write KIND.CHANNEL=on|off, e.g. "
                                    "started.email=on")
            change.setdefault(kind, {})[channel] = value == "on"
        chosen = api.put("notifications/preferences/", change)
    else:
        chosen = api.get("notifications/preferences/")
    channels = list(next(iter(chosen.values()), {}))
    rows = [{"kind": kind, **{c: "on" if on else "off" for c, on in by_channel.items()}}
            for kind, by_channel in chosen.items()]
    emit(args, chosen, lambda out: print_table(
        rows, [("kind", "kind"), *[(c, c) for c in channels]], out))
    return EXIT_OK


def cmd_webhook(api: PortalClient, args: argparse.Namespace) -> int:
    if args.action == "list":
        rows = api.get_all("notifications/webhooks/")
        emit(args, rows, lambda out: print_table(rows, WEBHOOK_COLUMNS, out))
        return EXIT_OK
    if args.target is None:
        return _usage(args, f"webhook {args.action}: "
                            f"{'the URL' if args.action == 'add' else 'the webhook ID'} is missing")
    if args.action == "add":
        body: dict[str, Any] = {"url": args.target, "kinds": args.kind or []}
        if args.project:
            body["tenant"] = _tenant(api, None)["id"]
        made = api.post("notifications/webhooks/", body)

        def shown(out: TextIO) -> None:
            print_record(made, ["id", "project", "kinds", "url", "secret"], out)
            out.write("The secret signs every POST (X-GPU-Portal-Signature); it is shown this "
                      "once.\n")

        emit(args, made, shown)
        return EXIT_OK
    if not (args.target.isascii() and args.target.isdigit()):
        return _usage(args, f"webhook {args.action}: {args.target!r} is not a webhook ID")
    if args.action == "delete":
        api.delete(f"notifications/webhooks/{args.target}/")
        emit(args, {"id": int(args.target), "deleted": True},
             lambda out: out.write(f"webhook {args.target} deleted\n"))
        return EXIT_OK
    if args.action in ("enable", "confirm"):
        row = api.post(f"notifications/webhooks/{args.target}/{args.action}/")
        emit(args, row, lambda out: out.write(f"webhook {row['id']}: {row['state']}\n"))
        return EXIT_OK
    return _webhook_test(api, args)


def _webhook_test(api: PortalClient, args: argparse.Namespace) -> int:
    """Queue a test POST, then poll its delivery until the workers have the receiver's answer
    (or --timeout: exit 5, the delivery still pending)."""
    delivery = api.post(f"notifications/webhooks/{args.target}/test/")
    deadline = time.monotonic() + args.timeout
    while not delivery["done"] and time.monotonic() < deadline:
        time.sleep(min(args.interval, max(deadline - time.monotonic(), 0.05)))
        delivery = api.get(f"notifications/deliveries/{delivery['id']}/")
    if not delivery["done"]:
        emit(args, delivery, lambda out: out.write(
            f"still {delivery['state']} after {args.timeout:g} s (delivery {delivery['id']}; "
            f"gpuctl webhook list shows the webhook's state)\n"))
        return EXIT_WAIT
    sent = delivery["state"] == "sent"
    emit(args, delivery, lambda out: out.write(
        f"delivered ({delivery['last_status']})\n" if sent
        else f"not delivered: {delivery['last_error'] or delivery['state']}\n"))
    return EXIT_OK if sent else EXIT_API


# --- the cluster's calendar: reservations and maintenance windows -----------------

RESERVATION_COLUMNS = [("id", "id"), ("project", "tenant_name"), ("gpu_type", "gpu_type"),
                       ("gpus", "count"), ("start", "start"), ("end", "end"),
                       ("repeats", lambda r: f"weekly until {r['until']}" if r.get("recurrence")
                        else "once"), ("state", "state"), ("note", "note")]
WINDOW_COLUMNS = [("id", "id"), ("covers", "covers"), ("start", "start"), ("end", "end"),
                  ("drain", "drain"), ("state", "state"), ("nodes", lambda w: len(w["affected"])),
                  ("reason", "reason")]


def when(text: str) -> str:
    """A date and time as the API takes it (ISO 8601 with a zone): "2026-12-01T09:00" without
    one is this machine's local time; "2026-12-01" is its midnight."""
    try:
        parsed = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a date and time, e.g. 2026-12-01T09:00 or 2026-12-01T09:00+01:00"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # the local zone
    return parsed.isoformat()


def _need(args: argparse.Namespace, what: str, *options: str) -> str | None:
    missing = [o for o in options if getattr(args, o.lstrip("-").replace("-", "_")) is None]
    return f"{what}: {', '.join(missing)} required" if missing else None


def cmd_reservations(api: PortalClient, args: argparse.Namespace) -> int:
    if args.action == "cancel":
        if args.id is None:
            return _usage(args, "reservations cancel: the reservation's ID is missing")
        api.delete(f"reservations/{args.id}/")
        emit(args, {"id": args.id, "cancelled": True},
             lambda out: out.write(f"reservation {args.id} cancelled\n"))
        return EXIT_OK
    if args.action == "create":
        problem = _need(args, "reservations create", "--gpu-type", "--count", "--start", "--end")
        if problem or (args.weekly and args.until is None):
            return _usage(args, problem or "reservations create: --weekly needs --until")
        body: dict[str, Any] = {"gpu_type": args.gpu_type, "count": args.count,
                                "start": args.start, "end": args.end, "note": args.note or ""}
        if args.weekly:
            body.update(recurrence="weekly", until=args.until)
        if args.tenant:
            body["tenant"] = _tenant(api, args.tenant)["id"]
        made = api.post("reservations/", body)
        emit(args, made, lambda out: print_record(
            made, ["id", "tenant_name", "gpu_type", "count", "start", "end", "recurrence",
                   "until", "note", "state", "at_end"], out))
        return EXIT_OK
    tenant = _tenant(api, args.tenant)["id"] if args.tenant else None
    rows = api.get_all("reservations/", gpu_type=args.gpu_type, tenant=tenant,
                       include_past="1" if args.all else None)

    def table(out: TextIO) -> None:
        print_table(rows, RESERVATION_COLUMNS, out)
        if rows and rows[0].get("at_end"):  # the same for every one: the portal's rule
            out.write(f"\n{rows[0]['at_end']}\n")

    emit(args, rows, table)
    return EXIT_OK


def cmd_maintenance(api: PortalClient, args: argparse.Namespace) -> int:
    if args.action == "cancel":
        if args.id is None:
            return _usage(args, "maintenance cancel: the window's ID is missing")
        api.delete(f"maintenance-windows/{args.id}/")
        emit(args, {"id": args.id, "cancelled": True},
             lambda out: out.write(f"maintenance window {args.id} cancelled\n"))
        return EXIT_OK
    if args.action == "create":
        problem = _need(args, "maintenance create", "--start", "--end", "--reason")
        covers = [o for o in ("nodes", "selector", "gpu_type") if getattr(args, o)]
        if problem or len(covers) != 1:
            return _usage(args, problem or "maintenance create: exactly one of --nodes, "
                                           "--selector or --gpu-type says what it covers")
        body: dict[str, Any] = {"start": args.start, "end": args.end, "reason": args.reason,
                                "drain": args.drain}
        if args.nodes:
            body["nodes"] = [n.strip() for n in args.nodes.split(",") if n.strip()]
        elif args.selector:
            body["node_selector"] = args.selector
        else:
            body["gpu_type"] = args.gpu_type
        made = api.post("maintenance-windows/", body)
        emit(args, made, lambda out: print_record(
            {**made, "affected": ",".join(sorted(made["affected"]))},
            ["id", "covers", "start", "end", "reason", "drain", "state", "affected"], out))
        return EXIT_OK
    rows = api.get_all("maintenance-windows/", include_past="1" if args.all else None)
    if args.gpu_type:
        rows = [w for w in rows if w.get("gpu_type") == args.gpu_type or any(
            (e or {}).get("gpu_type") == args.gpu_type for e in w["affected"].values())]
    emit(args, rows, lambda out: print_table(rows, WINDOW_COLUMNS, out))
    return EXIT_OK


BAR = 40  # the widest timeline bar, in characters


def timeline_text(calendar: dict[str, Any], out: TextIO) -> None:
    """A type's calendar as text: each stretch with what is reserved, down and left to book,
    a bar of what is left (#) and taken (= reserved, x maintenance), then the bookings and
    the windows."""
    capacity = calendar["capacity"]
    out.write(f"{calendar['gpu_type']}: {capacity} GPUs in service, "
              f"{calendar['since']} .. {calendar['until']}\n")
    scale = BAR / capacity if capacity else 0

    def bar(row: dict[str, Any]) -> str:
        left, reserved = row["bookable"], row["reserved"]
        down = max(capacity - left - reserved, 0)
        return ("#" * round(left * scale) + "=" * round(reserved * scale)
                + "x" * round(down * scale))

    print_table(calendar["segments"], [("from", "start"), ("to", "end"),
                                       ("reserved", "reserved"), ("maintenance", "maintenance"),
                                       ("free to book", "bookable"), ("", bar)], out)
    if calendar["reservations"]:
        out.write("reservations:\n")
        print_table(calendar["reservations"], [
            ("id", "id"), ("project", lambda r: r["tenant"] or "(another project)"),
            ("gpus", "count"), ("start", "start"), ("end", "end"), ("note", "note")], out)
    if calendar["windows"]:
        out.write("maintenance:\n")
        print_table(calendar["windows"], [("id", "id"), ("gpus", "gpus"), ("start", "start"),
                                          ("end", "end"), ("covers", "covers"),
                                          ("reason", "reason")], out)


def cmd_calendar(api: PortalClient, args: argparse.Namespace) -> int:
    calendar = api.get("calendar/", gpu_type=args.gpu_type, since=args.since, until=args.until)
    emit(args, calendar, lambda out: timeline_text(calendar, out))
    return EXIT_OK


def _common_options(suppress: bool) -> argparse.ArgumentParser:
    """The global options, accepted before and after the command. After it, their defaults
    are suppressed, so that a value given before the command is not reset."""
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-o", "--output", choices=["table", "json"], default=default("table"),
                        help="table (default) or json (the API's own JSON, for scripts)")
    common.add_argument("--portal-url", default=default(None),
                        help="the portal, e.g. https://gpu.example.org "
                             "(default: $GPU_PORTAL_URL)")
    common.add_argument("--os-cloud", default=default(None),
                        help="a clouds.yaml entry (default: $OS_CLOUD; without either, the "
                             "OS_* variables of an openrc)")
    common.add_argument("--http-timeout", type=float, default=default(30.0), metavar="SECONDS",
                        help="per request (default 30)")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common_options(suppress=True)
    parser = argparse.ArgumentParser(
        prog="gpuctl", parents=[_common_options(suppress=False)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Launch and manage GPU workloads on the GPU portal.",
        epilog=__doc__.split("\n\n", 2)[2])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, func, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    def waiting(p: argparse.ArgumentParser, default_timeout: float = 600.0) -> None:
        p.add_argument("--timeout", type=float, default=default_timeout, metavar="SECONDS",
                       help=f"how long --wait waits (default {default_timeout:g})")
        p.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                       help="polling interval (default 2)")

    command("whoami", cmd_whoami, "who the portal thinks you are: user, project, role")
    command("gpu-types", cmd_gpu_types, "the GPU types with capacity and free GPUs")
    command("templates", cmd_templates, "the templates to launch from")

    p = command("launch", cmd_launch, "launch a workload in your project")
    p.add_argument("--template", required=True, help="jupyter, digits, tensorboard, custom …")
    p.add_argument("--gpu-type", required=True, help="a GPU type slug (see gpu-types)")
    p.add_argument("--gpus", "--gpu-count", dest="gpus", type=int, default=1,
                   help="number of GPUs (default 1); per node with --nodes")
    p.add_argument("--nodes", type=int, metavar="N",
                   help="how many nodes a distributed template (pytorch-ddp, mpi) spans, "
                        "--gpus on each (default 1); every node starts at once or none does")
    p.add_argument("--name", help="display name (default: TEMPLATE-GPU_TYPE)")
    p.add_argument("--kind", choices=["service", "batch"], help="default: the template's")
    p.add_argument("--image", help="container image (custom template)")
    p.add_argument("--command", help="the command, split like a shell would (never run by one); "
                                     "or give it after --, as in -- python train.py")
    p.add_argument("--arg", action="append", metavar="ARG",
                   help="an argument (repeatable); write --arg=--logdir=/x for one that starts "
                        "with a dash. The custom template takes any; another template only the "
                        "options `gpuctl templates` lists, added after its own arguments")
    p.add_argument("--env", action="append", metavar="KEY=VALUE",
                   help="an environment variable (repeatable)")
    p.add_argument("--port", type=int, help="the port a custom service listens on")
    p.add_argument("--cpu", type=int, help="CPU cores (default: the template's)")
    p.add_argument("--memory", type=int, metavar="GIB", help="memory in GiB")
    p.add_argument("--max-runtime", type=int, metavar="MINUTES", help="stop after this long")
    p.add_argument("--retries", type=int, help="batch: retries of a failed run")
    p.add_argument("--use-home", action="store_true", help="mount the project's home volume")
    p.add_argument("--ssh", action=argparse.BooleanOptionalAction, default=None,
                   help="run the portal's SSH server beside the program (gpuctl ssh ID); "
                        "default: the template's choice (on for jupyter, code-server and "
                        "custom services with a command; a batch job only when asked)")
    p.add_argument("program", nargs="*", metavar="-- PROGRAM",
                   help="the program and its arguments after --, each word one item (custom "
                        "and distributed templates; a distributed one runs it on every node)")
    p.add_argument("--idempotency-key", metavar="KEY",
                   help="the same key again returns the same workload, launches nothing new")
    p.add_argument("--wait", action="store_true",
                   help="wait until running (or succeeded); exit 5 if it ends otherwise or "
                        "the timeout passes")
    p.add_argument("--wait-done", action="store_true",
                   help="wait until the workload succeeded (batch jobs); exit 5 otherwise")
    waiting(p)

    p = command("list", cmd_list, "your project's workloads")
    p.add_argument("--state", action="append", choices=STATES, help="repeatable")
    p.add_argument("--owner", help="a Keystone user id, or a name only one owner has")
    p.add_argument("--gpu-type")
    p.add_argument("--template")
    p.add_argument("--mine", action="store_true", help="only your own")
    p.add_argument("--sort", choices=["created", "-created", "name", "-name", "state", "-state",
                                      "gpus", "-gpus"], help="order (default: newest first)")
    p.add_argument("--limit", type=int, help="at most this many rows")

    p = command("show", cmd_show, "one workload")
    p.add_argument("id", type=int)
    p.add_argument("--events", action="store_true", help="with its events")

    p = command("token", cmd_token,
                "a bearer token for a service workload's address (valid one minute), e.g. "
                "curl -H \"$(gpuctl token 42 --header)\" http://ADDRESS:PORT/")
    p.add_argument("id", type=int)
    p.add_argument("--header", action="store_true",
                   help="print it as an HTTP header line (Authorization: Bearer …)")

    p = command("ssh", cmd_ssh,
                "SSH into a running workload through its login (shell, command, -L "
                "forwarding); a key is made once, a short-lived certificate fetched as needed")
    p.add_argument("id", type=int)
    p.add_argument("-L", dest="forward", action="append", metavar="[BIND:]PORT:HOST:HOSTPORT",
                   help="forward a local port to HOST:HOSTPORT as the workload sees it "
                        "(repeatable), as ssh -L")
    p.add_argument("--ssh", dest="ssh_binary", default="ssh", help="the OpenSSH client to run")
    p.add_argument("remote_command", nargs="*", metavar="-- COMMAND",
                   help="a command to run instead of a shell, after --")

    p = command("ssh-config", cmd_ssh_config,
                "the workload's OpenSSH Host block (ProxyCommand gpuctl ssh-proxy ID), for "
                "ssh, scp, sftp, VS Code Remote-SSH and JetBrains Gateway")
    p.add_argument("id", type=int)
    p.add_argument("--write", metavar="FILE",
                   help="put the block into FILE (e.g. ~/.ssh/config), replacing this "
                        "workload's earlier one, instead of printing it")

    p = command("ssh-proxy", cmd_ssh_proxy,
                "OpenSSH's ProxyCommand for a workload: relays stdin/stdout over a WebSocket "
                "through the workload's proxy (ssh-config writes it for you)")
    p.add_argument("id", type=int)

    p = command("logs", cmd_logs, "the last log lines of a workload")
    p.add_argument("id", type=int)
    p.add_argument("--tail", type=int, default=100, help="lines (default 100, at most 10000)")
    p.add_argument("--rank", type=rank_value, metavar="N|launcher",
                   help="a distributed workload's rank (0, 1, …) or the MPI launcher "
                        "(default: what the portal shows first)")
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep printing new lines until the workload ends (polls)")
    waiting(p, default_timeout=0)

    p = command("stop", cmd_stop, "stop a workload (its record stays)")
    p.add_argument("id", type=int)
    p.add_argument("--wait", action="store_true", help="until it is stopped")
    waiting(p, default_timeout=120.0)

    p = command("delete", cmd_delete, "delete a workload (stops it first)")
    p.add_argument("id", type=int)

    p = command("quota", cmd_quota, "your project's quota (admins: --tenant)")
    p.add_argument("--tenant", help="tenant id, name or Keystone project id")

    p = command("budget", cmd_budget, "your project's GPU-hour budget; `budget set` (admins) "
                                      "sets it, `budget remove` removes it")
    p.add_argument("action", nargs="?", choices=["show", "set", "remove"], default="show")
    p.add_argument("--project", "--tenant", dest="project",
                   help="tenant id, name or Keystone project id (default: your token's)")
    p.add_argument("--gpu-hours", type=float, metavar="N", help="set: weighted GPU-hours")
    p.add_argument("--period", choices=["month", "quarter", "year"], default="month",
                   help="set: the period it resets after (default month)")
    p.add_argument("--weight", action="append", metavar="GPU_TYPE=W",
                   help="set: what an hour of a GPU type counts (repeatable; unnamed: 1)")
    p.add_argument("--hard", action="store_true",
                   help="set: refuse launches when it is used up (default: warn only)")
    p.add_argument("--warn-at", metavar="P,P,…", help="set: percentages to warn at "
                                                      "(default 50,80,100)")
    p.add_argument("--stop-at-exhaustion", action="store_true",
                   help="set: stop running workloads when it is used up (after a grace)")
    p.add_argument("--user-cap", action="append", metavar="USER=HOURS",
                   help="set: a user's own cap inside it, USER a user of the project by "
                        "Keystone user id or a name only one of them has (repeatable)")

    p = command("usage", cmd_usage, "GPU-hours allocated and used")
    p.add_argument("--since", help="ISO date or date-time (default: 30 days ago)")
    p.add_argument("--until", help="ISO date or date-time (default: now)")
    p.add_argument("--group-by", choices=["tenant", "user", "gpu_type", "workload", "day"])
    p.add_argument("--tenant", help="tenant id or name (admins)")
    p.add_argument("--workload", type=int)
    p.add_argument("--csv", action="store_true", help="CSV, as the portal exports it")

    p = command("notifications", cmd_notifications,
                "your notifications (the bell's); `read ID|--all`; `preferences [--set "
                "KIND.CHANNEL=on|off …]`")
    p.add_argument("action", nargs="?", choices=["list", "read", "preferences"], default="list")
    p.add_argument("id", nargs="?", type=int, help="read: the notification's id")
    p.add_argument("--unread", action="store_true", help="list: only unread ones")
    p.add_argument("--kind", help="list: one kind (failed, finished, idle_warning …)")
    p.add_argument("--limit", type=int, help="list: at most this many (newest first)")
    p.add_argument("--all", action="store_true", help="read: mark every one read")
    p.add_argument("--set", action="append", metavar="KIND.CHANNEL=on|off",
                   help="preferences: change one (repeatable); channels: portal, email, webhook")
    p.add_argument("--json", dest="output", action="store_const", const="json",
                   default=argparse.SUPPRESS,
                   help="JSON, as -o json")

    p = command("webhook", cmd_webhook,
                "your webhooks and your project's: add URL (prints the secret once), list, "
                "delete ID, test ID (a signed test POST, waited for), enable ID (a disabled "
                "one), confirm ID (a project's, by a manager)")
    p.add_argument("action", choices=["add", "list", "delete", "test", "enable", "confirm"])
    p.add_argument("target", nargs="?", metavar="URL|ID")
    p.add_argument("--project", action="store_true",
                   help="add: the current project's webhook (its managers and admins)")
    p.add_argument("--kind", action="append", metavar="KIND",
                   help="add: only this kind (repeatable; default every kind)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="test: how long to wait for the receiver's answer (default 60 s)")
    p.add_argument("--interval", type=float, default=1.0,
                   help="test: seconds between looks at the delivery (default 1)")
    p.add_argument("--json", dest="output", action="store_const", const="json",
                   default=argparse.SUPPRESS,
                   help="JSON, as -o json")

    p = command("reservations", cmd_reservations,
                "GPU reservations: list (your project's; admins every one), create (managers "
                "within the project's allowance, admins for any project), cancel ID")
    p.add_argument("action", nargs="?", choices=["list", "create", "cancel"], default="list")
    p.add_argument("id", nargs="?", type=int, help="cancel: the reservation's id")
    p.add_argument("--gpu-type", help="create: the type to book; list: only this type")
    p.add_argument("--count", type=int, help="create: how many GPUs")
    p.add_argument("--start", type=when, help="create: ISO date and time (no zone: local)")
    p.add_argument("--end", type=when, help="create: ISO date and time")
    p.add_argument("--weekly", action="store_true", help="create: every week, until --until")
    p.add_argument("--until", type=when, help="create: --weekly's last start is before this")
    p.add_argument("--note", help="create: what it is for (course, deadline, demo)")
    p.add_argument("--tenant", "--project", dest="tenant",
                   help="create (admins): the project booked for; list: only its own "
                        "(tenant id, name or Keystone project id)")
    p.add_argument("--all", action="store_true", help="list: past and cancelled ones too")
    p.add_argument("--json", dest="output", action="store_const", const="json",
                   default=argparse.SUPPRESS, help="JSON, as -o json")

    p = command("maintenance", cmd_maintenance,
                "maintenance windows: list, create (admins), cancel ID (admins; one in "
                "progress ends now)")
    p.add_argument("action", nargs="?", choices=["list", "create", "cancel"], default="list")
    p.add_argument("id", nargs="?", type=int, help="cancel: the window's id")
    p.add_argument("--nodes", metavar="NAME,NAME", help="create: these nodes")
    p.add_argument("--selector", metavar="KEY=VALUE,…", help="create: nodes with these labels")
    p.add_argument("--gpu-type", help="create: every node of this type; list: only this type")
    p.add_argument("--start", type=when, help="create: ISO date and time (no zone: local)")
    p.add_argument("--end", type=when, help="create: ISO date and time")
    p.add_argument("--reason", help="create: told to everyone affected")
    p.add_argument("--drain", action="store_true",
                   help="create: at the start, stop what still runs on the nodes")
    p.add_argument("--all", action="store_true", help="list: ended and cancelled ones too")
    p.add_argument("--json", dest="output", action="store_const", const="json",
                   default=argparse.SUPPRESS, help="JSON, as -o json")

    p = command("calendar", cmd_calendar,
                "a GPU type's calendar as a text timeline: what is reserved, in maintenance "
                "and free to book")
    p.add_argument("--gpu-type", required=True)
    p.add_argument("--since", type=when, help="default: now")
    p.add_argument("--until", type=when, help="default: two weeks after --since")
    p.add_argument("--json", dest="output", action="store_const", const="json",
                   default=argparse.SUPPRESS, help="JSON, as -o json")
    return parser


def main(argv: Sequence[str] | None = None, *, env: dict[str, str] | None = None,
         stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return int(exc.code or 0)
    args.out, args.err = out, err
    args.environ = dict(os.environ if env is None else env)
    try:
        cfg = config_mod.load(env=env, cloud=args.os_cloud, portal_url=args.portal_url)
    except config_mod.ConfigError as exc:
        err.write(f"gpuctl: {exc}\n")
        return EXIT_USAGE
    api = PortalClient(cfg, timeout=args.http_timeout)
    try:
        return args.func(api, args)
    except argparse.ArgumentTypeError as exc:
        err.write(f"gpuctl: {exc}\n")
        return EXIT_USAGE
    except AuthError as exc:
        err.write(f"gpuctl: authentication failed: {exc}\n")
        return EXIT_AUTH
    except Unreachable as exc:
        err.write(f"gpuctl: {exc}\n")
        return EXIT_UNREACHABLE
    except WaitFailed as exc:
        err.write(f"gpuctl: {exc}\n")
        return EXIT_WAIT
    except ApiError as exc:
        if exc.code == "distributed_unavailable":  # the cluster has no engine for a group
            err.write(f"gpuctl: cannot launch on several nodes here: {exc.detail}\n"
                      "gpuctl: (400 distributed_unavailable) launch a one-pod template, or ask "
                      "an admin to install the engine\n")
            return EXIT_API
        err.write(f"gpuctl: {exc}\n")
        return EXIT_BY_CATEGORY.get(exc.category, EXIT_API)
    except KeyboardInterrupt:
        return 130
    finally:
        api.close()


if __name__ == "__main__":
    sys.exit(main())
