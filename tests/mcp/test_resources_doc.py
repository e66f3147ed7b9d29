"""docs/resources.md is generated from what the server serves (resources, the template, the prompts) and
kept current."""

from __future__ import annotations

from pathlib import Path

from server.activity.prompts import PROMPTS
from server.mcp.surfaces import TEMPLATE
from server.mcp.surfaces_docs import resources_markdown

REPO = Path(__file__).resolve().parents[2]


def test_the_resources_and_prompts_reference_is_current() -> None:
    doc = (REPO / "docs" / "resources.md").read_text(encoding="utf-8")
    assert doc == resources_markdown(), "docs/resources.md is stale: run `python -m server.mcp.surfaces_docs`"


def test_it_names_the_template_and_every_prompt_with_its_tier() -> None:
    doc = resources_markdown()
    assert f"`{TEMPLATE.uri_template}`" in doc
    for prompt in PROMPTS:
        assert f"| `{prompt.name}` | {prompt.title} | {prompt.tier} |" in doc


def test_the_adapter_serves_the_cores_template_and_media_type() -> None:
    from server.activity import note_resources
    from server.mcp import surfaces

    assert (surfaces.NOTE_TEMPLATE, surfaces.MIME) == (note_resources.TEMPLATE, note_resources.MIME)
