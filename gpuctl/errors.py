"""What went wrong, as a category, and the exit code each category gives.

Every error gpuctl reports carries a `category`: an API error the one the portal sends with it
(`{"code", "category", "detail", "fields"}`; a code gpuctl has never heard of exits by its
category all the same), gpuctl's own errors one of the same words (auth, unavailable) or of
their own (usage: the configuration; wait). The exit code follows the category alone:
EXIT_BY_CATEGORY is the only table of them. Usage errors of the arguments are argparse's
(gpuctl/parser.py), which exits 2 as `usage` does.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_API = 1  # the categories not named below: invalid, forbidden, conflict, rate_limited …
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_ADMISSION = 4
EXIT_WAIT = 5
EXIT_NOT_FOUND = 6
EXIT_UNREACHABLE = 7

EXIT_BY_CATEGORY = {"usage": EXIT_USAGE, "auth": EXIT_AUTH, "admission": EXIT_ADMISSION,
                    "wait": EXIT_WAIT, "not_found": EXIT_NOT_FOUND,
                    "unavailable": EXIT_UNREACHABLE}

# `gpuctl --help` says it; README.md's list is the same
EXIT_CODES_TEXT = """\
exit codes (stable, for scripts; they follow the category of the error, never its code):
  0  success
  1  the API refused the request (categories invalid, forbidden, conflict, rate_limited,
     internal; e.g. distributed_unavailable: the cluster cannot run a group of nodes)
  2  usage error: bad arguments or missing configuration
  3  authentication failed (Keystone refused the credentials, or the portal the token:
     category auth)
  4  refused at admission (category admission: quota_exceeded, budget_exhausted,
     maintenance_window, allocation_ended, no_address_free, and any refusal the portal adds
     to them)
  5  --wait: timed out, or the workload ended in a state other than the one waited for;
     webhook test: no answer from the receiver within --timeout
  6  not found (no such workload or tenant, or not visible to you: category not_found)
  7  the portal or Keystone cannot be reached (or is unavailable: category unavailable)"""


def exit_code(category: str) -> int:
    return EXIT_BY_CATEGORY.get(category, EXIT_API)


class GpuctlError(Exception):
    """An error gpuctl reports on stderr (`gpuctl: <the text>`) and exits by its category."""

    category = "internal"


class WaitFailed(GpuctlError):
    """--wait did not see the state it waited for (exit code 5)."""

    category = "wait"
