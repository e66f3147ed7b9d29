"""Two databases in one folder each have their own service: state file, log and host secrets."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from server.activity import tokens
from server.config.scopes import Scopes
from server.mcp import service
from server.store.db import connect, service_folder


def test_two_databases_in_one_folder_never_share_a_service(tmp_path: Path) -> None:
    default, other = tmp_path / "kms.db", tmp_path / "work.db"
    assert service_folder(default) == tmp_path / "service"  # where it has always been
    assert service_folder(other) == tmp_path / "service-work"
    assert service.log_path(default) != service.log_path(other)
    service.write_state(
        other,
        service.ServiceState(os.getpid(), "127.0.0.1", 1, "0", str(other), 0.0, service.process_start(os.getpid())),
    )
    assert service.read_state(default) is None  # the other database's service is not this one's
    assert service.read_state(other) is not None
    secrets = {}
    for db in (default, other):
        tokens.for_host(connect(db), db, "cursor", Scopes.parse("tier:read"))
        secrets[db] = tokens.host_secret(connect(db), db, "cursor")
        assert stat.S_IMODE(service_folder(db).stat().st_mode) == 0o700
    assert secrets[default] != secrets[other]
    for db in (default, other):  # each database still verifies its own host's secret
        assert tokens.verify(connect(db), secrets[db]) is not None
