"""gpuctl's command line in the shape of gh, without a server: a module per noun registers its
verbs as sub-commands, options belong to the verb that reads them, one --json for every
command, usage errors are argparse's (exit 2, before any configuration is looked for), every
command and verb has a description and a help that prints, and no exit code is chosen by an
error's code."""

from __future__ import annotations

import argparse
import ast
import io
import shlex
from pathlib import Path

import pytest

import gpuctl
from gpuctl import cli
from gpuctl.commands import (
    NOUNS,
    budget,
    calendar,
    dataset,
    logs,
    maintenance,
    notification,
    reservation,
    secret,
    ssh,
    usage,
    volume,
    webhook,
    workload,
)
from gpuctl.output import emit, line
from gpuctl.parser import Commands, Parser, common_options, parse, walk
from tests.support.gpuctl import run

# what each noun module registers: a command of its own (None) or a noun with its verbs
REGISTERED = {
    "identity": {"whoami": None},
    "catalogue": {"gpu-types": None, "templates": None},
    "cluster": {"clusters": ["list", "show", "add", "set", "remove"]},
    "workload": {"launch": None, "list": None, "show": None, "stop": None, "delete": None,
                 "token": None},
    "logs": {"logs": None},
    "ssh": {"ssh": None, "ssh-config": None, "ssh-proxy": None},
    "files": {"files": ["ls", "get", "put", "rm", "mkdir", "mv"]},
    "volume": {"volumes": ["ls", "create", "grow", "rm"]},
    "dataset": {"datasets": ["ls", "show", "create", "rm"]},
    "quota": {"quota": None},
    "usage": {"usage": None},
    "budget": {"budget": ["show", "set", "remove"]},
    "notification": {"notifications": ["list", "read", "preferences"]},
    "webhook": {"webhook": ["add", "list", "test", "delete", "enable", "confirm"]},
    "secret": {"secrets": ["ls", "create", "set", "rm"]},
    "reservation": {"reservations": ["list", "create", "cancel"]},
    "maintenance": {"maintenance": ["list", "create", "show", "cancel"]},
    "calendar": {"calendar": None},
    "department": {"department": ["list", "show", "create", "update", "delete", "assign"]},
    "record": {"record": ["show", "set"]},
    "request": {"request": ["list", "create", "change", "approve", "deny"]},
    "price": {"price": ["show", "set"]},
    "report": {"report": ["usage", "close", "reopen", "months"]},
}

TREE = list(walk(cli.build_parser()))


def registered(parser: argparse.ArgumentParser) -> dict[str, list[str] | None]:
    found: dict[str, list[str] | None] = {}
    for words, _ in walk(parser):
        if len(words) == 1:
            found[words[0]] = None
        elif len(words) == 2:
            found[words[0]] = [*(found[words[0]] or []), words[1]]
    return found


@pytest.mark.parametrize("module", NOUNS, ids=lambda module: module.__name__.rsplit(".")[-1])
def test_each_noun_module_registers_its_verbs(module):
    parser = Parser(prog="gpuctl")
    module.register(Commands(parser.add_subparsers(parser_class=Parser),
                             common_options(suppress=True)))
    assert registered(parser) == REGISTERED[module.__name__.rsplit(".")[-1]]


def test_gpuctl_is_the_noun_modules_together():
    assert registered(cli.build_parser()) == {
        name: verbs for commands in REGISTERED.values() for name, verbs in commands.items()}


@pytest.mark.parametrize("words", [words for words, _ in TREE], ids=" ".join)
def test_every_command_and_verb_has_a_description_and_a_help(words, capsys):
    parser = dict(TREE)[words]
    assert parser.description and parser.description.strip()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):  # each listed with a line of help
            assert all(choice.help for choice in action._choices_actions), words
    assert cli.main([*words, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {' '.join(('gpuctl', *words))}")
    assert parser.description.splitlines()[0] in out


def leaves():
    return [(words, parser) for words, parser in TREE if parser.get_default("func")]


def test_one_json_option_for_every_command():
    """--json (and -o json, its other spelling) is the shared global option on every command
    and verb, before or after its name: the same two actions (the top parser's, and the one
    after a command's name), never a command's own."""
    json_actions = {id(parser._option_string_actions["--json"])
                    for _, parser in [*leaves(), ((), dict(TREE)[()])]}
    assert len(json_actions) == 2
    for words, _ in leaves():
        argv = [*words, *REQUIRED.get(words, [])]
        for spelled in (["--json", *argv], [*argv, "--json"], [*argv, "-o", "json"]):
            assert parse(cli.build_parser(), spelled).output == "json", spelled
        assert parse(cli.build_parser(), argv).output == "table"


# what a command needs besides its name to parse
REQUIRED = {("launch",): ["--template", "jupyter", "--gpu-type", "a100"],
            ("clusters", "show"): ["east"], ("clusters", "add"): ["east"],
            ("clusters", "set"): ["east"], ("clusters", "remove"): ["east"],
            ("show",): ["1"], ("stop",): ["1"], ("delete",): ["1"], ("token",): ["1"],
            ("logs",): ["1"], ("ssh",): ["1"], ("ssh-config",): ["1"], ("ssh-proxy",): ["1"],
            ("calendar",): ["--gpu-type", "a100"], ("budget", "set"): ["--gpu-hours", "1"],
            ("notifications", "read"): ["--all"], ("webhook", "add"): ["https://x.example/"],
            ("webhook", "test"): ["1"], ("webhook", "delete"): ["1"],
            ("webhook", "enable"): ["1"], ("webhook", "confirm"): ["1"],
            ("reservations", "create"): ["--gpu-type", "a100", "--count", "1", "--start",
                                         "2026-12-01T09:00Z", "--end", "2026-12-01T10:00Z"],
            ("reservations", "cancel"): ["1"], ("maintenance", "cancel"): ["1"],
            ("maintenance", "show"): ["1"],
            ("department", "show"): ["1"], ("department", "create"): ["Physics"],
            ("department", "update"): ["1"], ("department", "delete"): ["1"],
            ("department", "assign"): ["vision-lab", "--none"],
            ("request", "create"): ["quota", "--why", "a deadline", "--detail", "gpus=8"],
            ("request", "approve"): ["1"], ("request", "deny"): ["1"],
            ("request", "change"): ["1"],
            ("report", "close"): ["2026-11"],
            ("report", "reopen"): ["2026-11", "--reason", "late runs"],
            ("secrets", "create"): ["hf", "--kind", "env"], ("secrets", "set"): ["hf"],
            ("secrets", "rm"): ["hf"],
            ("volumes", "create"): ["data", "--size", "10"],
            ("volumes", "grow"): ["data", "--size", "20"], ("volumes", "rm"): ["data"],
            ("datasets", "show"): ["imagenet"], ("datasets", "rm"): ["imagenet"],
            ("datasets", "create"): ["imagenet", "--size", "1", "--nfs", "h:/x",
                                     "--all-projects"],
            ("maintenance", "create"): ["--gpu-type", "a100", "--start", "2026-12-01T09:00Z",
                                        "--end", "2026-12-01T10:00Z", "--reason", "x"],
            ("files", "ls"): ["data"], ("files", "get"): ["data:a"],
            ("files", "put"): ["a", "data:"], ("files", "rm"): ["data:a"],
            ("files", "mkdir"): ["data:a"], ("files", "mv"): ["data:a", "b"]}


def test_json_is_declared_once():
    sources = "".join(path.read_text() for path in Path(gpuctl.__file__).parent.rglob("*.py"))
    assert sources.count('add_argument("--json"') == 1


@pytest.mark.parametrize(("argv", "func"), [
    (["notifications"], notification.list_notifications),
    (["notifications", "--unread", "--json"], notification.list_notifications),
    (["notifications", "--unread", "list"], notification.list_notifications),  # as before
    (["budget"], budget.show),
    (["budget", "--project", "vision-lab"], budget.show),
    (["budget", "--project", "vision-lab", "set", "--gpu-hours", "3"], budget.set_budget),
    (["-o", "json", "reservations"], reservation.list_reservations),
    (["maintenance", "--all"], maintenance.list_windows),
    (["webhook", "--json", "list"], webhook.list_webhooks),
    (["launch", "--template", "mpi", "--gpu-type", "a100", "--", "list"], workload.launch),
])
def test_a_noun_runs_the_verb_named_or_its_default(argv, func):
    assert parse(cli.build_parser(), argv).func is func


# command lines as README.md, docs/ and scripts write them, from before verbs were
# sub-commands: each still parses, to the command it meant
SPELLINGS = [
    ("launch --template custom --kind service --gpu-type v100 --gpus 1 --image python:3.12-slim "
     "--port 8080 --command 'python -m http.server 8080' --wait", workload.launch),
    ("launch --template jupyter --gpu-type a100 --wait --wait-done", workload.launch),
    ("-o json show 42", workload.show),
    ("list --state running --state queued --mine --sort=-created", workload.list_workloads),
    ("logs 43 --rank launcher --follow", logs.logs),
    ("--os-cloud mysite ssh-config 42 --write /tmp/ssh-config", ssh.ssh_config),
    ("ssh 42 -- nvidia-smi", ssh.ssh), ("ssh 42 -L 8888:localhost:8888", ssh.ssh),
    ("budget set --project vision-lab --gpu-hours 0.02 --period month --weight a100=2 "
     "--hard --warn-at 50,80,100 --user-cap researcher=40", budget.set_budget),
    ("budget remove --project vision-lab", budget.remove),
    ("budget -o json", budget.show),
    ("notifications --unread --json", notification.list_notifications),
    ("notifications read 17", notification.read),
    ("notifications read --all", notification.read),
    ("notifications preferences --set started.email=on --set queued.webhook=off",
     notification.preferences),
    ("webhook add https://hooks.example.org/x --kind failed --kind finished", webhook.add),
    ("webhook add https://chat.example.org/hooks/x --project", webhook.add),
    ("webhook test 3 --timeout 0.5 --interval 0.1", webhook.test),
    ("webhook enable 3", None), ("webhook confirm 4", None), ("webhook delete 3", webhook.delete),
    ("reservations", reservation.list_reservations),
    ("reservations create --tenant vision-lab --gpu-type a100 --count 4 --start "
     "2026-12-07T09:00 --end 2026-12-07T13:00 --weekly --until 2027-02-01 --note lab --json",
     reservation.create),
    ("reservations cancel 12", reservation.cancel),
    ("maintenance list", maintenance.list_windows),
    ("maintenance create --gpu-type a100 --start 2026-12-01T14:00Z --end 2026-12-01T18:00Z "
     "--reason update --drain --json", maintenance.create),
    ("maintenance cancel 3", maintenance.cancel),
    ("calendar --gpu-type a100 --since 2026-12-01 --until 2026-12-15 --json", calendar.calendar),
    ("usage --group-by user --since 2026-11-01 --csv", usage.usage),
    ("token 42 --header", workload.token),
    ("secrets ls --json", secret.list_secrets),
    ("secrets create hf --kind env --from-file hf.env", secret.create),
    ("secrets create certs --kind file --from-file ca.pem --from-file key.pem --project",
     secret.create),
    ("secrets set hf --from-file hf.env", secret.replace),
    ("secrets rm 3", secret.remove),
    ("launch --template jupyter --gpu-type a100 --secret hf --secret certs:/etc/ssl/mine",
     workload.launch),
    ("volumes", volume.list_volumes), ("volumes ls --scope project --json", volume.list_volumes),
    ("volumes create datasets --size 200 --class fast-ssd", volume.create),
    ("volumes create shared --size 500 --project", volume.create),
    ("volumes grow datasets --size 300", volume.grow), ("volumes rm 12", volume.remove),
    ("launch --template jupyter --gpu-type a100 --mount datasets:/data:ro --mount 12:/work",
     workload.launch),
    ("datasets", dataset.list_datasets), ("datasets ls --json", dataset.list_datasets),
    ("datasets show imagenet", dataset.show),
    ("datasets create imagenet --size 150 --nfs nfs.example.org:/exports/imagenet "
     "--description 'ILSVRC 2012' --project vision-lab", dataset.create),
    ("datasets create corpora --size 900 --s3 s3://corpora/text/ "
     "--endpoint https://s3.example.org --all-projects", dataset.create),
    ("datasets create scratch --size 2000 --pv lustre-scratch --all-projects", dataset.create),
    ("datasets rm imagenet", dataset.remove),
    ("launch --template jupyter --gpu-type a100 --dataset imagenet "
     "--dataset corpora:/data/text", workload.launch),
    ("launch --template custom --gpu-type a100 --image busybox --checkpoint runs:llama -- true",
     workload.launch),
]


@pytest.mark.parametrize(("line", "func"), SPELLINGS)
def test_the_spellings_of_scripts_and_docs_still_parse(line, func):
    args = parse(cli.build_parser(), shlex.split(line))
    if func is not None:
        assert args.func is func


@pytest.mark.parametrize(("argv", "said"), [
    (["webhook"], "the following arguments are required: VERB"),
    (["webhook", "frobnicate"], "invalid choice: 'frobnicate'"),
    (["webhook", "delete", "abc"], "argument id: invalid int value: 'abc'"),
    (["webhook", "list", "--kind", "failed"], "unrecognized arguments: --kind failed"),
    (["budget", "set"], "the following arguments are required: --gpu-hours"),
    (["budget", "show", "--gpu-hours", "3"], "unrecognized arguments: --gpu-hours 3"),
    (["budget", "set", "--gpu-hours", "3", "--weight", "a100"],
     "argument --weight: 'a100': expected GPU_TYPE=WEIGHT"),
    (["notifications", "read"], "one of the arguments ID --all is required"),
    (["notifications", "read", "3", "--all"], "argument --all: not allowed with argument ID"),
    (["notifications", "--all"], "unrecognized arguments: --all"),
    (["notifications", "preferences", "--set", "started"],
     "argument --set: 'started': write KIND.CHANNEL=on|off"),
    (["maintenance", "create", "--start", "2026-12-01T09:00Z", "--end", "2026-12-01T10:00Z",
      "--reason", "x"], "one of the arguments --nodes --selector --gpu-type is required"),
    (["maintenance", "create", "--nodes", "n1", "--gpu-type", "a100", "--start",
      "2026-12-01T09:00Z", "--end", "2026-12-01T10:00Z", "--reason", "x"],
     "argument --gpu-type: not allowed with argument --nodes"),
    (["reservations", "cancel"], "the following arguments are required: id"),
    (["reservations", "create", "--gpu-type", "a100", "--count", "1", "--start",
      "2026-12-01T09:00Z", "--end", "2026-12-01T10:00Z", "--weekly"],
     "reservations create: error: --weekly needs --until"),
    (["launch", "--template", "custom", "--gpu-type", "a100", "--env", "NOVALUE"],
     "argument --env: 'NOVALUE': expected KEY=VALUE"),
    (["launch", "--template", "custom", "--gpu-type", "a100", "--check", "--wait"],
     "launch: error: --check launches nothing to wait for"),
    (["launch", "--template", "jupyter", "--gpu-type", "a100", "--mount", "data"],
     "argument --mount: 'data': expected VOLUME:/PATH or VOLUME:/PATH:ro"),
    (["launch", "--template", "jupyter", "--gpu-type", "a100", "--mount", "data:work"],
     "argument --mount: 'data:work': expected VOLUME:/PATH"),
    (["launch", "--template", "custom", "--gpu-type", "a100", "--checkpoint", ":runs"],
     "argument --checkpoint: ':runs': expected VOLUME or VOLUME:SUBDIR"),
    (["volumes", "create", "data"], "the following arguments are required: --size"),
    (["launch", "--template", "jupyter", "--gpu-type", "a100", "--dataset", "imagenet:data"],
     "argument --dataset: 'imagenet:data': expected NAME or NAME:/PATH"),
    (["datasets", "create", "x", "--size", "1", "--all-projects"],
     "one of the arguments --nfs --pv --csi --s3 is required"),
    (["datasets", "create", "x", "--size", "1", "--nfs", "h:/x"],
     "one of the arguments --all-projects --project is required"),
    (["volumes", "grow", "data", "--size", "big"], "argument --size: invalid int value"),
    (["calendar", "--gpu-type", "a100", "--since", "monday"],
     "argument --since: 'monday': a date and time"),
])
def test_usage_errors_are_argparse_s_before_any_configuration(argv, said):
    code, out, err = run(argv, {"HOME": "/nonexistent"})
    assert (code, out) == (2, "")
    assert err.startswith("usage: gpuctl ") and said in err, err
    assert "credentials" not in err  # refused before the configuration is read


def test_no_exit_code_is_chosen_by_an_errors_code():
    """The category decides (gpuctl/errors.py): nothing in gpuctl compares an error's `code`."""
    compared = []
    for path in Path(gpuctl.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                    isinstance(side, ast.Attribute) and side.attr == "code"
                    for side in (node.left, *node.comparators)):
                compared.append(f"{path.name}:{node.lineno}")
    assert compared == []


def test_one_printer_the_api_s_json_or_the_text():
    for output, expected in (("json", '{\n  "id": 3,\n  "deleted": true\n}\n'),
                             ("table", "webhook 3 deleted\n")):
        args = argparse.Namespace(output=output, out=io.StringIO())
        emit(args, {"id": 3, "deleted": True}, line("webhook 3 deleted"))
        assert args.out.getvalue() == expected


def test_mounts_reach_the_launch_body_as_the_api_takes_them():
    args = parse(cli.build_parser(), ["launch", "--template", "jupyter", "--gpu-type", "a100",
                                      "--mount", "datasets:/data:ro", "--mount", "12:/work"])
    assert workload.launch_body(args)["mounts"] == [
        {"volume": "datasets", "path": "/data", "read_only": True},
        {"volume": "12", "path": "/work", "read_only": False}]


def test_a_checkpoint_reaches_the_launch_body_as_the_api_takes_it():
    def body(*checkpoint: str) -> dict:
        args = parse(cli.build_parser(), ["launch", "--template", "custom", "--gpu-type", "a100",
                                          *checkpoint])
        return workload.launch_body(args)

    assert body("--checkpoint", "runs:llama/v2")["checkpoint"] == {"volume": "runs",
                                                                  "path": "llama/v2"}
    assert body("--checkpoint", "12")["checkpoint"] == {"volume": "12"}
    assert "checkpoint" not in body()
