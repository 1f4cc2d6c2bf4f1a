"""`gpuctl launch --checkpoint VOLUME[:SUBDIR]` against the live portal, the real Keystone and
kubesim: the volume named by its name, the folder chosen or the launch's own, shown by
`gpuctl show`; a service cannot have one (exit 1, the API's 400 invalid)."""

from __future__ import annotations

import json

from storage.models import StorageClass
from tests.support.gpuctl import live, portal, run  # noqa: F401 - the fixture

BATCH = ["launch", "--template", "custom", "--gpu-type", "a100", "--kind", "batch",
         "--image", "busybox:1.36", "--name", "train"]


@live
def test_a_batch_job_with_a_checkpoint_directory(portal):  # noqa: F811
    StorageClass.objects.create(name="standard", description="fast SSD", is_default=True)
    code, out, err = run(["volumes", "create", "runs", "--size", "5", "--json"], portal)
    assert code == 0, err
    made = json.loads(out)
    code, out, err = run([*BATCH, "--checkpoint", "runs:llama/v2", "--json", "--", "true"],
                         portal)
    assert code == 0, err
    launched = json.loads(out)
    assert launched["checkpoint"] == {"volume": made["id"], "name": "runs",
                                      "claim_name": made["claim_name"], "folder": "llama/v2",
                                      "directory": "/portal/checkpoint"}
    code, out, err = run(["show", str(launched["id"])], portal)
    assert code == 0 and "llama/v2 of runs" in out and "/portal/checkpoint" in out, out
    code, out, err = run([*BATCH, "--checkpoint", str(made["id"]), "--json", "--", "true"],
                         portal)
    assert code == 0, err
    assert json.loads(out)["checkpoint"]["folder"].startswith("checkpoints/wl-")
    code, out, err = run(["launch", "--template", "custom", "--gpu-type", "a100", "--kind",
                          "service", "--port", "8080", "--image", "busybox:1.36",
                          "--checkpoint", "runs", "--", "true"], portal)
    assert code == 1 and "a batch job's" in err, (code, err)
