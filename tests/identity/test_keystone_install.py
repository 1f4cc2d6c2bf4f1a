"""The embedded Keystone's state (stack/keystone.py): bootstrapped once per virtualenv, each
Keystone a copy whose catalog names its own address."""

import base64
import sqlite3

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from stack.keystone import ADMIN_PASSWORD, KeystoneInstall
from stack.procs import free_port


def test_a_second_keystone_is_a_copy_that_runs_no_keystone_manage(keystone, tmp_path,
                                                                  monkeypatch):
    def no_manage(self, *args):
        raise AssertionError(f"keystone-manage {args[0]} ran again")

    monkeypatch.setattr(KeystoneInstall, "_manage", no_manage)
    install = KeystoneInstall(venv=keystone.install.venv, state_dir=tmp_path / "keystone",
                              port=free_port())
    install.ensure()
    with sqlite3.connect(install.state_dir / "keystone.db") as db:
        endpoints = dict(db.execute("SELECT interface, url FROM endpoint").fetchall())
    assert endpoints == dict.fromkeys(("public", "internal", "admin"), install.url)
    # keys of its own: a token of one Keystone means nothing to another
    for keys in ("fernet-keys", "credential-keys"):
        mine = {(install.state_dir / keys / i).read_bytes() for i in ("0", "1")}
        theirs = {(keystone.install.state_dir / keys / i).read_bytes() for i in ("0", "1")}
        assert len(mine) == 2 and not mine & theirs
        assert all(len(base64.urlsafe_b64decode(key)) == 32 for key in mine)
        assert oct((install.state_dir / keys / "1").stat().st_mode & 0o777) == "0o600"


def test_the_running_keystones_catalog_names_its_own_address(keystone):
    auth = v3.Password(auth_url=keystone.url, username="admin", password=ADMIN_PASSWORD,
                       user_domain_id="default", project_name="admin",
                       project_domain_id="default")
    access = auth.get_access(ks_session.Session(auth=auth, timeout=10))
    for interface in ("public", "internal", "admin"):
        assert access.service_catalog.url_for(service_type="identity",
                                              interface=interface) == keystone.url
