"""The settings of kms's connections beyond the local session: vault sync (conflict patterns, own writes),
the background service and remote mode (OAuth, pairing, redirect URIs). Their own section of the table
because they configure how kms is reached and shared rather than what an agent may do; ``schema._SCHEMA``
joins them in place, so ``SETTINGS`` and ``docs/settings.md`` keep their order."""

from __future__ import annotations

from server.config import validators
from server.config.conflict_patterns import check_patterns
from server.config.setting_row import Setting

CONNECTION_SETTINGS: list[Setting] = [
    Setting(
        "sync.conflict_patterns",
        "globs",
        [],
        "More names of conflict copies, besides the ones kms knows (Syncthing, Dropbox, Nextcloud, OneDrive, "
        "iCloud, Google Drive, git's siblings): globs over a file name where `{note}` is the note's name "
        "without `.md`, such as `{note}.conflict-*.md`, or `{note}-JANES-PC.md` for OneDrive on a computer you "
        "named (kms knows only Windows' own DESKTOP-/LAPTOP- names). A conflict copy is never indexed as a "
        "note; `kms conflicts` lists it.",
        "",
        validator=check_patterns,
        valid="file-name globs naming the note once as {note}, such as '{note}.conflict-*.md'",
    ),
    Setting(
        "sync.own_writes_here",
        "bool",
        True,
        "Whether this machine makes the writes kms makes on its own, unasked (tidying agent memory, session "
        "notes at a session's end): with one vault synced to several machines, turn it off on all but one, "
        "or each machine's kms writes its own copy and the sync tool makes conflicts no person caused.",
        "",
    ),
    Setting(
        "sync.git_every",
        "int",
        60,
        "Seconds between two syncs of a vault in git mode `sync` by the service: fetch, fast-forward or merge, "
        'then push (docs/git.md, "Sync"). A sync starts only once writes were quiet for sync.git_quiet.',
        "",
        validator=validators.int_range(5, 86400),
        valid="a whole number of seconds from 5 to 86400",
    ),
    Setting(
        "sync.git_quiet",
        "int",
        10,
        "Seconds without an agent write before the service syncs and pushes a vault in git mode `sync`, so "
        "a burst of writes is pushed once it is over, never in its middle.",
        "",
        validator=validators.int_range(0, 3600),
        valid="a whole number of seconds from 0 to 3600",
    ),
    Setting(
        "sync.watcher_step_aside",
        "int",
        10,
        "Seconds, at most, the service's watcher waits while this process rewrites several files at once (a "
        "git sync moving the tree, a multi-file write) before it reads the files anyway; it reads them as "
        "soon as the change is done, so this only bounds a stuck one.",
        "",
        validator=validators.int_range(1, 600),
        valid="a whole number of seconds from 1 to 600",
    ),
    Setting(
        "service.use",
        "bool",
        True,
        "`kms claude` serves its session from the kms service (one process for every session, over HTTP on "
        "loopback), starting it when it is down; off (or `kms claude --stdio`): a `kms mcp` of its own.",
        "KMS_SERVICE_USE",
    ),
    Setting(
        "service.port",
        "int",
        8765,
        "The loopback TCP port of the kms service (`kms serve`, `kms service start`, `kms claude`).",
        "KMS_SERVICE_PORT",
        validator=validators.int_range(1024, 65535),
        valid="a whole number from 1024 to 65535",
    ),
    Setting(
        "service.start_wait",
        "int",
        2,
        "Seconds `kms claude` waits for a service it started to answer; then the session gets a `kms mcp` of "
        "its own (stderr says so) and the service goes on starting for the next one.",
        "KMS_SERVICE_START_WAIT",
        validator=validators.int_range(1, 60),
        valid="a whole number of seconds from 1 to 60",
    ),
    Setting(
        "remote.enabled",
        "bool",
        False,
        "Remote mode (docs/remote.md): the service opens a second loopback listener for OAuth clients "
        "(claude.ai, ChatGPT) reached through your TLS terminator at remote.url. `kms remote enable` sets it.",
        "KMS_REMOTE_ENABLED",
    ),
    Setting(
        "remote.url",
        "text",
        None,
        "The public https origin your TLS terminator serves kms at (such as https://box.tail1234.ts.net): "
        "the OAuth issuer and the only Host the remote listener answers.",
        "KMS_REMOTE_URL",
        validator=validators.check_public_url,
        valid="an https:// origin (http:// only on loopback)",
    ),
    Setting(
        "remote.port",
        "int",
        8766,
        "The loopback TCP port of the remote listener: the one port the tunnel forwards to.",
        "KMS_REMOTE_PORT",
        validator=validators.int_range(1024, 65535),
        valid="a whole number from 1024 to 65535",
    ),
    Setting(
        "remote.max_scopes",
        "text",
        "tier:write",
        "The most a remote grant may get, in the scope grammar (tier:, vault:, folder:); the consent page "
        "clamps what the person picks to it. Every remote write is staged for review whatever the tier.",
        "KMS_REMOTE_MAX_SCOPES",
        validator=validators.check_scopes,
        valid="scopes such as 'tier:write' or 'tier:read vault:notes'",
    ),
    Setting(
        "remote.redirect_uris",
        "text",
        None,
        "Redirect URIs a remote client may register besides claude.ai's, ChatGPT's and loopback ones "
        "(space-separated, matched exactly).",
        "KMS_REMOTE_REDIRECT_URIS",
        validator=validators.check_redirect_uris,
        valid="https:// URIs separated by spaces",
    ),
    Setting(
        "remote.fetch_client_metadata",
        "bool",
        False,
        "Fetch the metadata document of a client that names itself by an https URL kms does not know "
        "(https only, no private address, 64 KiB, 5 s); off: only the known clients (Claude, Claude Code) are "
        "accepted that way.",
        "KMS_REMOTE_FETCH_CLIENT_METADATA",
    ),
]
