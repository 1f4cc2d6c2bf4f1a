"""`manage.py track_workloads [--once] [--duration S]`: the lifecycle tracker in the foreground.

The same cycle the periodic `workloads_track` task runs, under the same lock, so running it
beside a worker never tracks twice. Useful for tests, the demo and debugging.
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections, connection

from workloads.tracking.tracker import tracking_cycle


class Command(BaseCommand):
    help = "Track workloads (list + watch the cluster) in the foreground."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="run one cycle, then exit")
        parser.add_argument("--duration", type=float, default=13.0,
                            help="seconds each cycle watches (default 13)")

    def handle(self, *args, once: bool = False, duration: float = 13.0, **options) -> None:
        while True:
            if not connection.in_atomic_block:
                # long-lived, outside any request: drop a connection the database closed
                # (Celery's Django fix-up does the same around each task)
                close_old_connections()
            stats = tracking_cycle(duration=duration)
            if stats is None:
                self.stdout.write("another tracker holds the lock; waiting")
                time.sleep(min(duration, 5.0))
            else:
                self.stdout.write(" ".join(f"{k}={v}" for k, v in stats.as_dict().items()))
            if once:
                return
