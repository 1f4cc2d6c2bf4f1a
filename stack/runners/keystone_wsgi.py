"""Serve Keystone's WSGI application with waitress. Runs under Keystone's own virtualenv.

Keystone's configuration parser reads sys.argv, so this runner takes its options from the
environment and clears sys.argv before Keystone is imported.

    KEYSTONE_RUNNER_HOST=127.0.0.1 KEYSTONE_RUNNER_PORT=5000 \
    OS_KEYSTONE_CONFIG_FILES=/path/keystone.conf  python keystone_wsgi.py
"""

import os
import sys


def main() -> None:
    host = os.environ.get("KEYSTONE_RUNNER_HOST", "127.0.0.1")
    port = int(os.environ.get("KEYSTONE_RUNNER_PORT", "5000"))
    threads = int(os.environ.get("KEYSTONE_RUNNER_THREADS", "8"))
    sys.argv = sys.argv[:1]
    import waitress  # noqa: PLC0415
    from keystone.wsgi.api import application  # noqa: PLC0415 - after argv is cleared

    print(f"keystone listening on http://{host}:{port}/v3", flush=True)
    waitress.serve(application, host=host, port=port, threads=threads, ident="keystone",
                   channel_timeout=60)


if __name__ == "__main__":
    main()
