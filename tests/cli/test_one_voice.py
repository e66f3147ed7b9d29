"""One error voice (issue 38): every refusal is `error (KIND): message` on stderr with the kind's exit code,
and a suggestion in it is a command that works. Each case spoke otherwise before (`error: Unknown setting`,
`kms: unknown host`, a suggested `kms mcp-config nohost --http` that fails), or was not refused at all (a
token whose folders could never write, a second live token of the same label)."""

from __future__ import annotations

import re

import pytest
from support.cli import kms, ok, refused, said

VOICE = re.compile(r"error \((?P<kind>[a-z-]+)\): \S")


@pytest.mark.parametrize(
    ("args", "kind", "code"),
    [
        (("config", "set", "agent.wirte", "on"), "invalid-input", 2),
        (("config", "get", "agent.wirte"), "invalid-input", 2),
        (("mcp-config", "nohost"), "invalid-input", 2),
        (("token", "secret", "nohost"), "invalid-input", 2),
        (("token", "header", "nohost"), "invalid-input", 2),
        (("mcp-config", "cursor", "--install", "--uninstall"), "invalid-input", 2),
    ],
)
def test_refusals_speak_in_one_voice(args: tuple[str, ...], kind: str, code: int) -> None:
    err = said(refused(kms(*args), code).stderr)
    found = VOICE.match(err)
    assert found and found["kind"] == kind, err
    assert "kms mcp-config nohost" not in err  # never a suggestion that fails in turn


def test_a_token_whose_folders_could_never_write_is_refused(db_path: object) -> None:
    ok(kms("config", "set", "write.allowlist", "drafts/*"))
    err = said(refused(kms("token", "create", "--label", "bot", "--scopes", "tier:write folder:drafts/sub"), 2).stderr)
    assert err.startswith("error (invalid-input): folder:drafts/sub could never write"), err
    ok(kms("token", "create", "--label", "bot", "--scopes", "tier:write folder:drafts"))
    ok(kms("token", "create", "--label", "reader", "--scopes", "tier:read folder:drafts/sub"))  # reads only


def test_a_second_live_token_of_the_same_label_is_refused_until_the_first_is_revoked(db_path: object) -> None:
    ok(kms("token", "create", "--label", "bot", "--scopes", "tier:read"))
    err = said(refused(kms("token", "create", "--label", "bot", "--scopes", "tier:read")).stderr)
    assert err.startswith("error (already-exists): a live token is labelled 'bot'"), err
    ok(kms("token", "revoke", "bot"))
    ok(kms("token", "create", "--label", "bot", "--scopes", "tier:read"))


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("servers", "add", "x", "--url", "http://127.0.0.1:1/mcp", "--env", "A=1"), 2),
        (("restore", "Plan.md"), 2),
    ],
)
def test_the_last_commands_of_their_own_voice_speak_the_one(args: tuple[str, ...], code: int) -> None:
    err = said(refused(kms(*args), code).stderr)
    assert VOICE.match(err) and err.startswith("error (invalid-input):"), err
