"""How gpuctl's commands are declared, in the shape of gh: a module per noun under
gpuctl/commands/ registers its verbs as nested sub-commands (`gpuctl webhook add URL`), or a
command of its own where gpuctl has always spelled it flat (`gpuctl launch`). Every command
and verb takes the global options (`common_options`: the one `--json`, `-o`, the portal and
the cloud), before or after its name; everything else is declared on the verb that reads it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .client import PortalClient

# a command's code: the portal's client and the parsed arguments in, the exit code out
Run = Callable[[PortalClient, argparse.Namespace], int]
# what is wrong with a command's arguments that argparse cannot see (None: nothing), said as
# argparse says its own usage errors, before anything is asked of the portal
Check = Callable[[argparse.Namespace], str | None]

HELP = ("-h", "--help")


class Parser(argparse.ArgumentParser):
    """argparse's parser with help laid out as written (examples in epilogs). A noun's parser
    knows its verbs: the verb may follow the noun's options, as gpuctl took it before verbs
    were sub-commands (`gpuctl notifications --unread list`), and a noun with a default verb
    runs it when none is named (`gpuctl notifications --unread` lists)."""

    def __init__(self, *args: Any, default_verb: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.default_verb = default_verb
        self.verbs: list[str] = []

    # typeshed overloads it for a namespace of any class; gpuctl's are argparse's own
    def parse_known_args(  # type: ignore[override]
            self, args: Sequence[str] | None = None,
            namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        if self.verbs and args is not None:
            args = self._verb_first(list(args))
        return super().parse_known_args(args, namespace)

    def _verb_first(self, args: list[str]) -> list[str]:
        words = args[:args.index("--")] if "--" in args else args
        if words and words[0] in self.verbs:
            return args
        at = next((i for i, word in enumerate(words) if word in self.verbs), None)
        if at is not None:
            return [args[at], *args[:at], *args[at + 1:]]
        if self.default_verb and not set(HELP) & set(words):
            return [self.default_verb, *args]
        return args


def common_options(*, suppress: bool) -> Parser:
    """The global options, accepted before and after the command. After it, their defaults
    are suppressed, so that a value given before the command is not reset."""
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    common = Parser(add_help=False)
    output = common.add_argument_group("output and connection (any command)")
    output.add_argument("--json", dest="output", action="store_const", const="json",
                        default=default("table"),
                        help="print the API's own JSON (for scripts) instead of text")
    output.add_argument("-o", "--output", choices=["table", "json"], default=default("table"),
                        help="table (default) or json: -o json is --json")
    output.add_argument("--portal-url", default=default(None),
                        help="the portal, e.g. https://gpu.example.org "
                             "(default: $GPU_PORTAL_URL)")
    output.add_argument("--os-cloud", default=default(None),
                        help="a clouds.yaml entry (default: $OS_CLOUD; without either, the "
                             "OS_* variables of an openrc)")
    output.add_argument("--http-timeout", type=float, default=default(30.0), metavar="SECONDS",
                        help="per request (default 30)")
    return common


def _described(help: str, description: str | None) -> str:
    """The description at the top of a command's help: its own, else its one-line help as a
    sentence; filled to the width of the rest (the formatter keeps epilogs' examples as
    written, so it leaves descriptions unwrapped too)."""
    text = description or help[:1].upper() + help[1:] + ("" if help.endswith(".") else ".")
    return "\n\n".join(textwrap.fill(paragraph, width=78) for paragraph in text.split("\n\n"))


class Commands:
    """Where the noun modules put their commands: `command` for a command of its own,
    `noun` for a noun whose verbs follow it."""

    def __init__(self, sub: argparse._SubParsersAction[Parser], common: Parser) -> None:
        self._sub = sub
        self._common = common

    def command(self, name: str, run: Run, help: str, *, description: str | None = None,
                epilog: str | None = None, check: Check | None = None) -> Parser:
        return _leaf(self._sub, name, run, help, self._common, description, epilog, check)

    def noun(self, name: str, help: str, *, default_verb: str | None = None,
             description: str | None = None, epilog: str | None = None) -> Noun:
        parser = self._sub.add_parser(name, help=help, epilog=epilog, default_verb=default_verb,
                                      description=_described(help, description))
        verbs = parser.add_subparsers(
            metavar="VERB", required=default_verb is None, parser_class=Parser,
            title="verbs" + (f" (default: {default_verb})" if default_verb else ""))
        return Noun(parser, verbs, self._common)


class Noun:
    def __init__(self, parser: Parser, verbs: argparse._SubParsersAction[Parser],
                 common: Parser) -> None:
        self.parser = parser
        self._verbs = verbs
        self._common = common

    def verb(self, name: str, run: Run, help: str, *, description: str | None = None,
             epilog: str | None = None, check: Check | None = None) -> Parser:
        self.parser.verbs.append(name)
        return _leaf(self._verbs, name, run, help, self._common, description, epilog, check)


def _leaf(sub: argparse._SubParsersAction[Parser], name: str, run: Run, help: str,
          common: Parser, description: str | None, epilog: str | None,
          check: Check | None) -> Parser:
    parser = sub.add_parser(name, parents=[common], help=help,
                            description=_described(help, description), epilog=epilog)
    parser.set_defaults(func=run, usage_problem=check or _no_problem, parser=parser)
    return parser


def _no_problem(args: argparse.Namespace) -> None:
    return None


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, or SystemExit (2 and the command's usage) for a usage error, argparse's
    or a check's."""
    args = parser.parse_args(argv)
    problem = args.usage_problem(args)
    if problem:
        args.parser.error(problem)
    return args


def walk(parser: argparse.ArgumentParser,
         words: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the tree with the words that reach it: (), ("launch",), ("webhook",),
    ("webhook", "add") …"""
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk(child, (*words, name))


def wait_options(parser: Parser, *, timeout: float = 600.0) -> None:
    parser.add_argument("--timeout", type=float, default=timeout, metavar="SECONDS",
                        help=f"how long --wait waits (default {timeout:g})")
    parser.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="polling interval (default 2)")


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


def key_value(value_type: Callable[[str], Any] = str,
              example: str = "KEY=VALUE") -> Callable[[str], tuple[str, Any]]:
    """An option's type for KEY=VALUE (repeatable with action="append"): ("KEY", value)."""
    def pair(text: str) -> tuple[str, Any]:
        key, sep, value = text.partition("=")
        try:
            if not sep or not key:
                raise ValueError
            return key, value_type(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {example}") from None
    return pair
