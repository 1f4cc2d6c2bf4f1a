"""State file: saved on SIGTERM, periodically (survives SIGKILL), loaded at start."""

from __future__ import annotations

import json
import time

from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import Raw


def test_state_survives_restart_and_kill(kubesim_factory):
    server = kubesim_factory(extra_args=["--no-cluster"])
    try:
        with server.api_client() as api:
            core = client.CoreV1Api(api)
            core.create_namespace({"metadata": {"name": "keep"}})
            cm = core.create_namespaced_config_map(
                "keep", {"metadata": {"name": "cm"}, "data": {"a": "1"}}
            )
        port = server.port
        server.stop()  # SIGTERM: saves
        saved = json.loads(open(server.state_file).read())
        assert saved["resourceVersion"] >= int(cm.metadata.resource_version)
        server.start()
        assert server.port == port  # same address, so clients keep working
        with server.api_client() as api:
            core = client.CoreV1Api(api)
            again = core.read_namespaced_config_map("cm", "keep")
            assert again.metadata.uid == cm.metadata.uid and again.data == {"a": "1"}
            # resourceVersions keep growing after a restart
            newer = core.create_namespaced_config_map("keep", {"metadata": {"name": "cm2"}})
            assert int(newer.metadata.resource_version) > int(cm.metadata.resource_version)
            time.sleep(1.5)  # > --save-interval 0.5: the periodic save has run
        server.kill()  # SIGKILL: only the periodic save survives
        server.start()
        with server.api_client() as api:
            core = client.CoreV1Api(api)
            assert core.read_namespaced_config_map("cm2", "keep").metadata.name == "cm2"
        # history does not survive: watching from before the restart is 410
        status, _, body = Raw(server).request(
            "GET", "/api/v1/namespaces/keep/configmaps?watch=1&resourceVersion=1"
        )
        assert status == 200 and b'"code":410' in body
    finally:
        server.stop()


def test_missing_state_file_starts_empty(kubesim_factory):
    server = kubesim_factory(extra_args=["--no-cluster"])
    try:
        with server.api_client() as api:
            try:
                client.CoreV1Api(api).read_namespace("keep")
                raise AssertionError("fresh server has state")
            except ApiException as e:
                assert e.status == 404
    finally:
        server.stop()
