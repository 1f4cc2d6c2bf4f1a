"""Which arguments a researcher may add to a template's program: the one rule, for an admin's
template (`TemplateForm`, `catalogue.services`) and a researcher's launch
(workloads/validation.py, so the REST API and the launch page) alike.

A template other than the custom one runs its own program: its image, command and arguments
are the admin's. A launch's `args` are *appended* to the template's arguments (never replacing
them, which would replace the program: Jupyter's arguments begin with `start-notebook.py`,
DIGITS has none and runs the image's own command) and only as options the admin declared in
the template's `allowed_args`: each item is `NAME` or `NAME=value` for a declared NAME, one
argv item each (never through a shell, so a value cannot start another option). A template that
declares none takes no arguments from a launch; the custom template, whose image and command are
the researcher's anyway, takes any.

Declared names are exact option names (`--logdir`), not patterns: a pattern such as
`--ServerApp.*` would admit options nobody read. Some options are never declarable, whatever
the program: those that choose where it listens or how it logs users in (`--port`, `--host`,
`--ip`, `--bind_all`, `--ServerApp.token` …). The workload's authenticating proxy listens on its
own port in the same pod and forwards to the template's port; a program moved onto the proxy's
port (or onto another address) would answer in its place, without the portal's login. The rule
reads an option's words (`--ServerApp.port_retries` → serverapp, port, retries) and refuses a
word that starts with one of LISTENING_WORDS or is a prefix of one (argparse takes `--po` for
`--port`), so `-p`, `-h` and other one-letter options are refused too. A launch's options are
checked against the same words again, so a template saved before this rule cannot pass one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import Template

# an option's name as an admin declares it: one or two dashes, letters, digits, ".", "_", "-"
OPTION_NAME = re.compile(r"--?[A-Za-z][A-Za-z0-9._-]*[A-Za-z0-9]|-[A-Za-z0-9]", re.ASCII)
MAX_OPTION_LENGTH = 100
MAX_ALLOWED_OPTIONS = 50
# what no program behind the portal's proxy may be told: where to listen, how to log users in
LISTENING_WORDS = ("port", "host", "ip", "bind", "address", "listen", "socket", "interface",
                   "iface", "token", "password", "passwd")
_WORD = re.compile(r"[A-Za-z0-9]+")


def listening_word(name: str) -> str | None:
    """The word of option `name` that chooses where a program listens or how it logs users
    in (or abbreviates such a word), or None."""
    words: list[str] = _WORD.findall(name)
    for word in words:
        word = word.lower()
        for refused in LISTENING_WORDS:
            if word.startswith(refused) or refused.startswith(word):
                return word
    return None


def allowed_option_problem(name: str) -> str | None:
    """Why an admin may not declare `name` as an option researchers may add, or None."""
    if len(name) > MAX_OPTION_LENGTH:
        return f"“{name[:40]}…” is longer than {MAX_OPTION_LENGTH} characters."
    if not OPTION_NAME.fullmatch(name):
        return (f"“{name}” is not an option name: one or two dashes, then letters, digits, "
                "“.”, “_” or “-” (such as --logdir), without a value.")
    word = listening_word(name)
    if word:
        return (f"{name} may never be added by researchers: “{word}” names (or abbreviates) "
                "where the program listens or how it logs users in, which the portal and its "
                "proxy decide.")
    return None


def allowed_options_problems(names: list[str], *, command: list[str], args: list[str],
                             custom: bool) -> list[str]:
    """Why `names` may not be a template's `allowed_args`, or []."""
    if not names:
        return []
    if custom:
        return ["The custom template takes any arguments; it declares no options."]
    problems: list[str] = []
    if len(names) > MAX_ALLOWED_OPTIONS:
        problems.append(f"At most {MAX_ALLOWED_OPTIONS} options.")
    problems += [problem for name in names if (problem := allowed_option_problem(name))]
    if len(set(names)) != len(names):
        problems.append("An option is declared twice.")
    if not command and not args:
        problems.append("The template has neither a command nor arguments: options added by a "
                        "launch would replace the image's own command. Give the command first.")
    return problems


def launch_args_problems(args: list[str], *, template: Template) -> list[str]:
    """Why a researcher's launch of `template` may not add `args`, or []."""
    if not args or template.takes_program:
        return []
    allowed = list(template.allowed_args or [])
    if not allowed or not (template.command or template.args):
        return [f"The {template.name} template runs its own program and takes no arguments; "
                "use the custom template to run your own."]
    problems: list[str] = []
    shown = ", ".join(allowed)
    for item in args:
        name = item.partition("=")[0]
        if name in allowed and not listening_word(name):
            continue
        problems.append(f"“{item[:60]}” is not an option the {template.name} template lets you "
                        f"add: give NAME or NAME=value, one per item, for NAME among {shown}.")
    return problems


def launch_argv(*, template: Template, args: list[str]) -> list[str]:
    """The arguments a launch runs: a custom template's are the launch's (or the template's
    when it gives none); any other's are the template's followed by the launch's options."""
    if template.takes_program:
        return list(args or template.args or [])
    return [*(template.args or []), *(args or [])]
