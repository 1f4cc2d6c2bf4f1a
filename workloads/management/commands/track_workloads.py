"""`manage.py track_workloads [--duration S]`: the lifecycle tracker, a long-lived process.

Leads while it holds the tracker's lease (a Redis lock it renews), stands by while another
process holds it, and takes over when that one's lease lapses; so running two never tracks
twice. Runs until stopped (SIGTERM, Ctrl-C), or for `--duration` seconds.
"""

from __future__ import annotations

import signal
import threading
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from workloads.tracking.tracker import LEASE_SECONDS, track


class Command(BaseCommand):
    help = "Track workloads (reflectors over the cluster, one reconcile per workload)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--duration", type=float, default=None,
                            help="stop after this many seconds (default: run until stopped)")
        parser.add_argument("--lease", type=float, default=LEASE_SECONDS,
                            help=f"seconds a leader's lease lasts unrenewed (default "
                                 f"{LEASE_SECONDS:g})")

    def handle(self, *args: Any, duration: float | None = None, lease: float = LEASE_SECONDS,
               **options: Any) -> None:
        stop = threading.Event()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())

        def say(text: str) -> None:
            self.stdout.write(text)
            self.stdout.flush()

        track(stop=stop, duration=duration, lease_seconds=lease, say=say)
