"""Workloads: `gpuctl launch`, `list`, `show`, `stop`, `delete` and `token`, spelled flat as
gpuctl always has (the workload is the noun a command means when it names none)."""

from __future__ import annotations

import argparse
import shlex
import time
from typing import Any, TextIO

from ..client import PortalClient
from ..errors import EXIT_OK, WaitFailed
from ..output import Column, Render, age, emit, line, print_record, print_table, record, table
from ..parser import Commands, Parser, key_value, wait_options
from .dataset import find_dataset
from .secret import launch_secrets
from .volume import find_volume

FINAL_STATES = {"succeeded", "failed", "stopped"}
STATES = ["submitted", "creating", "queued", "pending", "running", "succeeded", "failed",
          "stopping", "stopped"]

LAUNCH_EXAMPLES = """\
examples:
  gpuctl launch --template jupyter --gpu-type a100
  gpuctl launch --template custom --kind service --gpu-type v100 --image python:3.12-slim \\
      --port 8080 --command 'python -m http.server 8080' --wait
  gpuctl launch --template pytorch-ddp --gpu-type a100 --gpus 4 --nodes 2 -- python train.py
  gpuctl launch --template jupyter --gpu-type a100 --gpus 4 --check   # the portal's notes
  gpuctl launch --template jupyter --gpu-type a100 --mount datasets:/data:ro --mount 12:/work
  gpuctl launch --template jupyter --gpu-type a100 --dataset imagenet"""


def register(commands: Commands) -> None:
    _launch_options(commands.command(
        "launch", launch, "launch a workload in your project",
        description="Launch a workload in your project: a template on GPUs of one type. "
                    "--check asks the portal what it would say of the launch first.",
        epilog=LAUNCH_EXAMPLES, check=nothing_to_wait_for))

    p = commands.command("list", list_workloads, "your project's workloads")
    p.add_argument("--state", action="append", choices=STATES, help="repeatable")
    p.add_argument("--owner", help="a Keystone user id, or a name only one owner has")
    p.add_argument("--gpu-type")
    p.add_argument("--template")
    p.add_argument("--mine", action="store_true", help="only your own")
    p.add_argument("--sort", choices=["created", "-created", "name", "-name", "state", "-state",
                                      "gpus", "-gpus"], help="order (default: newest first)")
    p.add_argument("--limit", type=int, help="at most this many rows")

    p = commands.command("show", show, "one workload",
                         description="One workload: its record, a distributed one's ranks, "
                                     "and with --events what happened to it.")
    p.add_argument("id", type=int)
    p.add_argument("--events", action="store_true", help="with its events")

    p = commands.command("stop", stop, "stop a workload (its record stays)")
    p.add_argument("id", type=int)
    p.add_argument("--wait", action="store_true", help="until it is stopped")
    wait_options(p, timeout=120.0)

    p = commands.command("delete", delete, "delete a workload (stops it first)")
    p.add_argument("id", type=int)

    p = commands.command(
        "token", token, "a bearer token for a service workload's address (valid one minute)",
        epilog="example:\n  curl -H \"$(gpuctl token 42 --header)\" http://ADDRESS:PORT/")
    p.add_argument("id", type=int)
    p.add_argument("--header", action="store_true",
                   help="print it as an HTTP header line (Authorization: Bearer …)")


def _launch_options(p: Parser) -> None:
    p.add_argument("--template", required=True, help="jupyter, digits, tensorboard, custom …")
    p.add_argument("--gpu-type", required=True, help="a GPU type slug (see gpu-types)")
    p.add_argument("--cluster", help="the cluster to run on, by name (gpuctl clusters; "
                                     "default: a service goes where there are free GPUs of "
                                     "its type, the home cluster first; other work to the "
                                     "home cluster)")
    p.add_argument("--gpus", "--gpu-count", dest="gpus", type=int, default=1,
                   help="number of GPUs (default 1); per node with --nodes")
    p.add_argument("--nodes", type=int, metavar="N",
                   help="how many nodes a distributed template (pytorch-ddp, mpi) spans, "
                        "--gpus on each (default 1); every node starts at once or none does")
    p.add_argument("--name", help="display name (default: TEMPLATE-GPU_TYPE)")
    p.add_argument("--kind", choices=["service", "batch"], help="default: the template's")
    p.add_argument("--image", help="container image (custom template)")
    program = p.add_mutually_exclusive_group()
    program.add_argument("--command",
                         help="the command, split like a shell would (never run by one); "
                              "or give it after --, as in -- python train.py")
    program.add_argument("program", nargs="*", default=[], metavar="-- PROGRAM",
                         help="the program and its arguments after --, each word one item "
                              "(custom and distributed templates; a distributed one runs it "
                              "on every node)")
    p.add_argument("--arg", action="append", metavar="ARG",
                   help="an argument (repeatable); write --arg=--logdir=/x for one that starts "
                        "with a dash. The custom template takes any; another template only the "
                        "options `gpuctl templates` lists, added after its own arguments")
    p.add_argument("--env", action="append", type=key_value(), metavar="KEY=VALUE",
                   help="an environment variable (repeatable)")
    p.add_argument("--port", type=int, help="the port a custom service listens on")
    p.add_argument("--cpu", type=int, help="CPU cores (default: the template's)")
    p.add_argument("--memory", type=int, metavar="GIB", help="memory in GiB")
    p.add_argument("--max-runtime", type=int, metavar="MINUTES", help="stop after this long")
    p.add_argument("--retries", type=int, help="batch: retries of a failed run")
    p.add_argument("--use-home", action="store_true",
                   help="mount the project's volume `home` at /home/portal")
    p.add_argument("--mount", action="append", type=mount_spec, metavar="VOLUME:/PATH[:ro]",
                   help="mount a volume (its id or name) at an absolute path, read-only with "
                        ":ro (repeatable)")
    p.add_argument("--dataset", action="append", type=dataset_spec, metavar="NAME[:/PATH]",
                   help="mount a dataset open to your project (its name or id), always "
                        "read-only, at PATH (default /datasets/NAME; repeatable; gpuctl "
                        "datasets ls)")
    p.add_argument("--checkpoint", type=checkpoint_spec, metavar="VOLUME[:SUBDIR]",
                   help="batch: a checkpoint directory on a volume (its id or name), in a "
                        "folder of it (default checkpoints/<the workload>); the program finds "
                        "it at $PORTAL_CHECKPOINT_DIR, and a requeued run gets the same")
    p.add_argument("--secret", action="append", metavar="NAME[:PATH]",
                   help="a secret it reads, yours or the project's, by name or id "
                        "(repeatable): env → its variables, file → its files at PATH "
                        "(default /run/secrets/NAME), registry → the image's pull login, s3 → "
                        "the AWS variables and RCLONE_CONFIG (gpuctl secrets ls)")
    p.add_argument("--ssh", action=argparse.BooleanOptionalAction, default=None,
                   help="run the portal's SSH server beside the program (gpuctl ssh ID); "
                        "default: the template's choice (on for jupyter, code-server and "
                        "custom services with a command; a batch job only when asked)")
    p.add_argument("--idempotency-key", metavar="KEY",
                   help="the same key again returns the same workload, launches nothing new")
    p.add_argument("--check", action="store_true",
                   help="launch nothing: print what the portal would say of this launch (its "
                        "notes on the budget, maintenance, reservations, capacity)")
    p.add_argument("--wait", action="store_true",
                   help="wait until running (or succeeded); exit 5 if it ends otherwise or "
                        "the timeout passes")
    p.add_argument("--wait-done", action="store_true",
                   help="wait until the workload succeeded (batch jobs); exit 5 otherwise")
    wait_options(p)


def nothing_to_wait_for(args: argparse.Namespace) -> str | None:
    """--check launches nothing (--wait and --wait-done together wait until it succeeded)."""
    if args.check and (args.wait or args.wait_done):
        return "--check launches nothing to wait for: no --wait or --wait-done with it"
    return None


def launch_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"name": args.name or f"{args.template}-{args.gpu_type}",
                            "template": args.template, "gpu_type": args.gpu_type,
                            "gpu_count": args.gpus}
    if args.nodes is not None:
        body["nodes"] = args.nodes
    if args.program:  # after --: each word one argv item, as typed (no shell)
        body["command"] = list(args.program)
    elif args.command is not None:
        body["command"] = shlex.split(args.command)
    optional = {"kind": args.kind, "image": args.image, "args": args.arg or None,
                "env": dict(args.env) if args.env else None, "port": args.port,
                "cpu": args.cpu, "memory": args.memory,
                "max_runtime_minutes": args.max_runtime, "retries": args.retries,
                "cluster": args.cluster}
    body.update({key: value for key, value in optional.items() if value is not None})
    if args.use_home:
        body["use_home"] = True
    if args.mount:
        body["mounts"] = [{"volume": volume, "path": path, "read_only": read_only}
                          for volume, path, read_only in args.mount]
    if args.dataset:  # always read-only: the portal refuses anything else
        body.setdefault("mounts", []).extend(
            {"dataset": name, **({"path": path} if path else {})} for name, path in args.dataset)
    if args.checkpoint:
        volume, folder = args.checkpoint
        body["checkpoint"] = {"volume": volume, **({"path": folder} if folder else {})}
    if args.ssh is not None:
        body["ssh"] = args.ssh
    return body


def checkpoint_spec(text: str) -> tuple[str, str]:
    """`VOLUME[:SUBDIR]` → (volume, folder); VOLUME is an id or a name."""
    volume, _, folder = text.partition(":")
    if not volume:
        raise argparse.ArgumentTypeError(f"{text!r}: expected VOLUME or VOLUME:SUBDIR")
    return volume, folder


def mount_spec(text: str) -> tuple[str, str, bool]:
    """`VOLUME:/path[:ro]` → (volume, path, read-only); VOLUME is an id or a name."""
    volume, sep, rest = text.partition(":")
    read_only = rest.endswith(":ro")
    path = rest[:-3] if read_only else rest
    if not sep or not volume or not path.startswith("/"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected VOLUME:/PATH or VOLUME:/PATH:ro")
    return volume, path, read_only


def dataset_spec(text: str) -> tuple[str, str | None]:
    """`NAME[:/path]` → (dataset, path or None: its default)."""
    name, sep, path = text.partition(":")
    if not name or (sep and not path.startswith("/")):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME or NAME:/PATH")
    return name, path or None


def with_volume_ids(api: PortalClient, body: dict[str, Any]) -> dict[str, Any]:
    """The launch with each mount's volume or dataset, and the checkpoint's volume, named by
    its id (a name is looked up)."""
    for mount in [*(body.get("mounts") or []), *([body["checkpoint"]] if "checkpoint" in body
                                                 else [])]:
        if "volume" in mount:
            name = mount["volume"]
            mount["volume"] = int(name) if name.isdigit() else find_volume(api, name)["id"]
        else:
            mount["dataset"] = find_dataset(api, mount["dataset"])["id"]
    return body


def launch(api: PortalClient, args: argparse.Namespace) -> int:
    body = with_volume_ids(api, launch_body(args))
    if args.secret:
        body["secrets"] = launch_secrets(api, args.secret)
    if args.check:
        advice = api.post("workloads/check/", body)
        emit(args, advice, notes_text(advice["notes"]))
        return EXIT_OK
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    workload = api.post("workloads/", body, headers=headers)
    if args.wait or args.wait_done:
        until = {"succeeded"} if args.wait_done else {"running", "succeeded"}
        workload = wait_for(api, workload["id"], until=until, timeout=args.timeout,
                            interval=args.interval, err=args.err)
    emit(args, workload, lambda out: print_workload(workload, out))
    return EXIT_OK


def notes_text(notes: list[dict[str, str]]) -> Render:
    """The portal's notes on a launch, each as it wrote it, after its level."""
    if not notes:
        return line("the portal has no notes on this launch")
    return line("\n".join(f"{note['level']}: {note['message']}" for note in notes))


def wait_for(api: PortalClient, workload_id: int, *, until: set[str], timeout: float,
             interval: float, err: TextIO) -> dict[str, Any]:
    """Poll the workload until its state is in `until` (→ it) or final otherwise (→ WaitFailed)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        workload: dict[str, Any] = api.get(f"workloads/{workload_id}/")
        state = workload["state"]
        reason = f": {workload['reason']}" if workload.get("reason") else ""
        shown = workload.get("queue_text") or state  # the portal's words for its place
        if workload.get("queue_reason"):  # and why Kueue holds it
            shown += f" ({workload['queue_reason']})"
        if shown != last:
            err.write(f"workload {workload_id}: {shown}{reason}\n")
            last = shown
        if state in until:
            return workload
        if state in FINAL_STATES:
            raise WaitFailed(f"workload {workload_id} ended {state}{reason}")
        if time.monotonic() >= deadline:
            raise WaitFailed(f"workload {workload_id} still {state} after {timeout:g} s{reason}")
        time.sleep(min(interval, max(deadline - time.monotonic(), 0.05)))


def list_workloads(api: PortalClient, args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"state": args.state, "owner": args.owner,
                              "gpu_type": args.gpu_type, "template": args.template,
                              "ordering": args.sort}
    if args.mine:
        params["mine"] = "true"
    rows = api.get_all("workloads/", limit=args.limit, **params)
    emit(args, rows, table(rows, WORKLOAD_COLUMNS))
    return EXIT_OK


def show(api: PortalClient, args: argparse.Namespace) -> int:
    workload = api.get(f"workloads/{args.id}/")
    events = api.get(f"workloads/{args.id}/events/") if args.events else None
    data = {**workload, "events": events} if events is not None else workload

    def render(out: TextIO) -> None:
        print_workload(workload, out)
        if events is not None:
            out.write("\n")
            print_table(events, [("at", "at"), ("type", "type"), ("reason", "reason"),
                                 ("message", "message")], out)

    emit(args, data, render)
    return EXIT_OK


def stop(api: PortalClient, args: argparse.Namespace) -> int:
    workload = api.post(f"workloads/{args.id}/stop/")
    if args.wait:
        workload = wait_for(api, args.id, until={"stopped", "succeeded", "failed"},
                            timeout=args.timeout, interval=args.interval, err=args.err)
    emit(args, workload, record(workload, ["id", "name", "state"]))
    return EXIT_OK


def delete(api: PortalClient, args: argparse.Namespace) -> int:
    api.delete(f"workloads/{args.id}/")
    emit(args, {"id": args.id, "deleted": True}, line(f"workload {args.id} deleted"))
    return EXIT_OK


def token(api: PortalClient, args: argparse.Namespace) -> int:
    """A bearer token for a service workload's address (its proxy admits it): valid a minute,
    so a script asks again rather than keeping it."""
    issued = api.post(f"workloads/{args.id}/access-token/")
    shown = f"Authorization: Bearer {issued['token']}" if args.header else issued["token"]
    emit(args, issued, line(shown))
    return EXIT_OK


# --- how a workload is shown --------------------------------------------------------------------

def state_text(workload: dict[str, Any]) -> str:
    """The state column: a queued workload's place in line ("queued 3/7")."""
    if workload.get("state") == "queued" and workload.get("queue_position"):
        return f"queued {workload['queue_position']}/{workload.get('queue_length')}"
    return str(workload.get("state", ""))


WORKLOAD_COLUMNS: list[Column] = [
    ("id", "id"), ("name", "name"), ("state", state_text), ("template", "template"),
    ("gpus", "gpus"), ("cluster", "cluster"), ("owner", "owner"), ("age", age), ("url", "url")]
WORKLOAD_FIELDS = ["id", "name", "tenant", "owner", "template", "kind", "gpu_type", "cluster",
                   "gpu_count",
                   "nodes", "gpus", "image", "command", "args", "port", "cpu", "memory",
                   "max_runtime_minutes", "state", "reason", "url", "address", "node",
                   "exit_code", "created_at", "started_at", "finished_at", "expires_at",
                   "queue_text", "queue_reason", "queue_kueue_message", "eta", "secrets",
                   "checkpoint"]


def shown_ranks(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A distributed workload's ranks in rank order, the MPI launcher last."""
    workers = sorted((r for r in ranks if r.get("role") != "launcher"),
                     key=lambda r: r.get("rank") or 0)
    return workers + [r for r in ranks if r.get("role") == "launcher"]


RANK_COLUMNS: list[Column] = [
    ("rank", lambda r: "launcher" if r.get("role") == "launcher" else r.get("rank")),
    ("pod", "pod"), ("node", lambda r: r.get("node") or None), ("state", "state"),
    ("reason", lambda r: r.get("reason") or None), ("exit code", "exit_code")]


MOUNT_COLUMNS: list[Column] = [
    ("volume", lambda m: f"{m['name']} ({m['volume']})" if m.get("volume")
     else f"dataset {m['name']} ({m['dataset']})" if m.get("dataset") else m["name"]),
    ("path", "path"), ("mode", lambda m: "read-only" if m.get("read_only") else "read-write")]


def print_workload(workload: dict[str, Any], out: TextIO) -> None:
    """The record, then (a distributed workload) its ranks as a table."""
    secrets = ", ".join(f"{s['name']} ({s['kind']}{' at ' + s['path'] if s.get('path') else ''})"
                        for s in workload.get("secrets") or []) or None
    checkpoint = workload.get("checkpoint")
    if checkpoint:
        checkpoint = f"{checkpoint['folder']} of {checkpoint['name']} ({checkpoint['volume']}) " \
                     f"at {checkpoint['directory']}"
    print_record({**workload, "secrets": secrets, "checkpoint": checkpoint}, WORKLOAD_FIELDS, out)
    ranks = workload.get("ranks") or []
    if ranks:
        running = sum(1 for r in ranks if r.get("state") == "running"
                      and r.get("role") != "launcher")
        out.write(f"\nranks: {running} of {workload.get('nodes')} running\n")
        print_table(shown_ranks(ranks), RANK_COLUMNS, out)
    mounts = workload.get("mounts") or []
    if mounts:
        out.write("\nmounts:\n")
        print_table(mounts, MOUNT_COLUMNS, out)
