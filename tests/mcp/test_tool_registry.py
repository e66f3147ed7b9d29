"""Completeness of the one tool registry: no tool exists half-way (issue 3)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_types import ToolAnnotations
from pydantic import BaseModel

from server.config.tiers import TIERS
from server.errors import KINDS, RECOVERY
from server.index.note_data import DATA_SENTENCE
from server.mcp.serve import output_schema, to_mcp_tool
from server.mcp.tools import BY_TIER, REGISTRY
from server.mcp.tools.base import EXAMPLE_ALLOWLIST, ReadSpec, StrictInput, ToolSpec, WriteSpec

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent


def other_test_text() -> str:
    return "\n".join(
        p.read_text(encoding="utf-8") for p in sorted(TESTS.rglob("test_*.py")) if p.name != Path(__file__).name
    )


def test_registry_is_the_tiers_tuples_in_chain_order_and_names_are_unique() -> None:
    names = [s.name for s in REGISTRY]
    assert len(names) >= 6 and len(set(names)) == len(names)
    assert set(BY_TIER) == set(TIERS) and all(BY_TIER[t] for t in TIERS)  # every tier has its tools
    assert REGISTRY == tuple(s for t in TIERS for s in BY_TIER[t])
    # read tools come first: a host that truncates the list keeps the safe ones
    tiers = [s.tier for s in REGISTRY]
    assert tiers == sorted(tiers, key=TIERS.index)


@pytest.mark.parametrize("spec", REGISTRY, ids=lambda s: s.name)
def test_each_tool_declares_its_error_kinds_and_its_description_names_them(spec: ToolSpec) -> None:
    assert isinstance(spec, ReadSpec) is (spec.tier == "read") and isinstance(spec, WriteSpec) is (spec.tier != "read")
    assert set(spec.errors) <= set(KINDS) and set(spec.kinds) <= set(KINDS)
    assert spec.description.startswith(spec.about) and "Errors:" not in spec.about  # rendered, never hand-written
    sentence = spec.description[len(spec.about) :].strip()
    if spec.note_text:  # then the data sentence (server.index.note_data), before the errors
        assert sentence.startswith(DATA_SENTENCE)
        sentence = sentence[len(DATA_SENTENCE) :].strip()
    assert sentence.startswith("Errors: ") and sentence.endswith(".")
    named = [part.split(" (")[0] for part in sentence[len("Errors: ") : -1].split(", ")]
    assert named == [k for k in KINDS if k in spec.kinds]
    assert "invalid-input" in named and "feature-disabled" in named  # every tool validates and is gated
    if spec.tier != "read":
        assert {"rate-limited", "paused", "revoked", "rejected"} <= set(named)  # the guard's


def test_every_error_kind_has_one_recovery_hint() -> None:
    assert list(RECOVERY) == list(KINDS)
    with pytest.raises(ValueError, match="no-such-kind"):
        ReadSpec(
            name="kms_x",
            about="x",
            errors=("no-such-kind",),
            input_model=StrictInput,
            output_model=BaseModel,
            handler=lambda ctx, args: {},
            annotations=ToolAnnotations(title="x"),
            example={},
        )


@pytest.mark.parametrize("spec", REGISTRY, ids=lambda s: s.name)
def test_tool_spec_is_complete(spec: ToolSpec) -> None:
    assert re.fullmatch(r"kms_[a-z_]+", spec.name)
    assert spec.tier in ("read", "write", "edit", "organize")
    assert spec.description and len(spec.description) >= 40 and spec.description.strip() == spec.description
    assert isinstance(spec, ReadSpec | WriteSpec) and callable(spec.handler)
    assert issubclass(spec.input_model, StrictInput)
    schema = spec.input_model.model_json_schema()
    assert schema["type"] == "object" and isinstance(schema.get("properties"), dict)
    assert schema.get("additionalProperties") is False  # unknown keys refused
    assert "$ref" not in str(schema) and "$defs" not in schema  # self-contained
    for name in schema.get("required", []):
        assert name in schema["properties"]
    assert issubclass(spec.output_model, BaseModel)
    assert output_schema(spec)["type"] == "object"
    a = spec.annotations
    assert isinstance(a, ToolAnnotations) and a.title
    assert a.open_world_hint is False
    # they remove or replace text, or move files; kms_update_properties's remove deletes keys
    assert a.destructive_hint is (spec.tier in ("edit", "organize") or spec.name == "kms_update_properties")
    assert a.read_only_hint is (spec.tier == "read")
    assert isinstance(a.idempotent_hint, bool)
    if spec.cursor_field:
        assert spec.cursor_field in schema["properties"]
    tool = to_mcp_tool(spec)
    assert tool.name == spec.name and tool.input_schema == schema


@pytest.mark.parametrize("spec", REGISTRY, ids=lambda s: s.name)
def test_each_tools_example_and_denied_call_are_valid_arguments(spec: ToolSpec) -> None:
    """The tests that go through every tool call it with these (tests/support/examples.py): they must pass
    its input model, and a write names a path outside ``EXAMPLE_ALLOWLIST`` or says why it cannot."""
    spec.input_model.model_validate(spec.example)
    if isinstance(spec, WriteSpec):
        if isinstance(spec.denied, str):
            assert len(spec.denied) > 10, spec.name  # a reason, not a placeholder
        else:
            spec.input_model.model_validate(spec.denied.args)
            folder = spec.denied.path.rpartition("/")[0]
            assert folder.startswith("drafts/") and folder not in EXAMPLE_ALLOWLIST, spec.name


@pytest.mark.parametrize("spec", REGISTRY, ids=lambda s: s.name)
def test_every_tool_has_a_test(spec: ToolSpec) -> None:
    assert re.search(rf"\b{spec.name}\b", other_test_text()), f"no test under tests/ mentions {spec.name}"


def test_tool_reference_doc_is_current() -> None:
    from server.mcp.tools.docs import tools_markdown

    doc = (REPO / "docs" / "tools.md").read_text(encoding="utf-8")
    assert doc == tools_markdown(), "docs/tools.md is stale: run `python -m server.mcp.tools.docs`"


def test_tool_reference_tables_keep_their_columns_and_show_enum_values() -> None:
    from server.mcp.tools.docs import tools_markdown

    doc = tools_markdown()
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    assert len(rows) > 20 and all(line.count("|") == 6 for line in rows), "a bare | in a cell breaks the table"
    assert "string or null" in doc and "one of `hybrid`, `semantic`" in doc
    assert "`wait_for_previous`" in doc
    from server.config.tiers import CHAIN

    for rule in CHAIN:  # the tiers' prose comes from the chain's one home
        line = next(x for x in doc.splitlines() if x.startswith(f"- **{rule.name}** ({rule.does}): "))
        assert f"`{rule.key}` (`{rule.env}`)" in line


async def test_the_server_says_which_kms_it_is(db_path: Path) -> None:
    """The version hosts see is the installed distribution's (it was "0" once the package was renamed)."""
    from support.mcp_session import mcp_client

    from server import installed_version

    async with mcp_client(db_path) as client:
        info = client.server_info
    assert installed_version() and info is not None and (info.name, info.version) == ("kms", installed_version())


def test_listing_the_tools_loads_no_note_editor() -> None:
    """Server start builds the registry: the YAML editors, the Markdown parser and pathspec are loaded
    on first use (a write, the watcher's first index), fuzzy matching on the first miss, not on the way to
    ``tools/list``; the SDK itself (``mcp``, not its types) only by ``serve.main``, without its client."""
    code = (
        "import sys, server.mcp.serve; from server.mcp.tools import REGISTRY; "
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'ruamel', 'yaml', 'pyromark', 'pathspec', 'numpy', 'mcp', 'rapidfuzz'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == ""
