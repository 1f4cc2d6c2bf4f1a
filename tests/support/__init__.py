"""Helpers shared by the tests: one place for what more than one test module uses.

Test modules import from here (or from a helper module beside them), never from another test
module (tests/architecture/test_test_imports.py). A fixture shared by a folder's modules is
named in that folder's conftest.py; tests/realcluster imports those it re-runs with.

- waiting.py: `eventually`, the one way a test waits for something.
- cluster.py: a test's cluster objects, its own and gone before the next test starts.
- database.py: rows a module's tests share, made once and rolled back after its last test.
- tracking.py, journeys.py, kueue.py: tenants, launches and the tracker's loop on kubesim, on
  the real control plane and on the one with Kueue.
- pages.py, gpuctl.py: signed-in pages and their forms; gpuctl against the live portal.
- lifecycle.py, manifests.py, distributed.py, calendars.py, culling.py, deploy.py, rbac.py,
  provisioning.py: the data and objects of one area, used by its tests and by their re-runs.
"""
