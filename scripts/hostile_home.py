#!/usr/bin/env python3
"""A hostile caller for the test suite: the settings a person might have that would change a result.

``write DIR`` lays out a home whose kms settings deny every write (allowlist matching nothing, writes
off), an XDG config folder and a ``KMS_CONFIG`` file that are broken TOML, a database path that is not a
database, and prints the environment (``export NAME=VALUE`` lines) that points at them. ``squat PORT``
holds the service's default port with a listener that answers every request with garbage, the way a
stale or foreign service would. ``scripts/test.sh`` runs the whole suite under both: the suite gives every
test its own HOME, XDG folders, settings, database and port (tests/conftest.py), so nothing here may
change a result. Stdlib only.
"""

from __future__ import annotations

import shlex
import socket
import sys
from pathlib import Path

DENYING_SETTINGS = """\
[agent]
write = false
edit = false
organize = false

[write]
allowlist = ["nowhere-at-all/*"]
approval = "always"
per_minute = 1

[service]
use = true
"""

BROKEN_TOML = "[agent\nwrite = = on\n"


def write(root: Path) -> None:
    home = root / "home"
    (home / ".config" / "kms").mkdir(parents=True)
    (home / ".config" / "kms" / "config.toml").write_text(DENYING_SETTINGS)
    (root / "xdg-config" / "kms").mkdir(parents=True)
    (root / "xdg-config" / "kms" / "config.toml").write_text(BROKEN_TOML)
    (root / "broken.toml").write_text(BROKEN_TOML)
    (root / "not-a-database.db").write_bytes(b"this is not an SQLite database\n" * 64)
    env = {
        "HOME": home,
        "XDG_CONFIG_HOME": root / "xdg-config",
        "XDG_DATA_HOME": root / "xdg-data",
        "KMS_CONFIG": root / "broken.toml",
        "KMS_DB_PATH": root / "not-a-database.db",
        "KMS_AGENT_WRITE_TOOLS_ENABLED": "0",
        "KMS_WRITE_ALLOWLIST": "nowhere-at-all/*",
        "KMS_SERVICE_USE": "1",
    }
    for name, value in env.items():
        print(f"export {name}={shlex.quote(str(value))}")


def squat(port: int) -> None:
    """Answer every connection on ``port`` with a response no kms client can use, until killed. A port
    already taken (a real service of the person's) is hostile enough: say so and stop."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(("127.0.0.1", port))
        except OSError:
            print(f"hostile_home: port {port} is already taken; leaving it as it is", file=sys.stderr)
            return
        server.listen(16)
        while True:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"HTTP/1.1 418 I'm a teapot\r\nContent-Length: 9\r\n\r\nnot kms\r\n")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in {"write", "squat"}:
        sys.exit("usage: hostile_home.py write DIR | squat PORT")
    if sys.argv[1] == "write":
        write(Path(sys.argv[2]))
    else:
        squat(int(sys.argv[2]))
