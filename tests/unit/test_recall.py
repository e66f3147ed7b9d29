"""recall's packing as a property: whatever the vault, topic and budget, the items' token estimates
never add up to more than the budget, each covers its item's real JSON, and no (note, section) repeats."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.vaults import write

from server.index.indexer import index_vault
from server.index.recall import MAX_BUDGET, MIN_BUDGET, item_tokens, recall
from server.vault.registry import add_vault

WORDS = [
    "login",
    "token",
    "refresh",
    "clock",
    "drift",
    "deploy",
    "garden",
    "beans",
    "Ünïcödé",
    "☕",
    '"quoted"',
    "back\\slash",
    "tab\there",
    "naïve",
    "日本語",
    "C++",
    "what's",
    "10:30",
]


@pytest.fixture
def linked_vault(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    """40 notes of varied length (sections of up to ~3,000 words, characters JSON escapes), linked in a ring
    and to a hub, so every part of the bundle (matches, sections, neighbours, cuts) is exercised."""
    import random

    rng = random.Random(14)
    root = tmp_path / "v"
    for n in range(40):
        parts = [f"# Note {n}\n"]
        for s in range(rng.randint(0, 5)):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.choice([3, 30, 300, 3000])))
            parts.append(f"## Part {s} {rng.choice(WORDS)}\n\n{words}\n")
        parts.append(f"[[Note {(n + 1) % 40}]] [[Hub]]\n")
        write(root / f"Note {n}.md", "\n".join(parts))
    write(root / "Hub.md", "# Hub\n\nEverything links here.\n")
    index_vault(conn, add_vault(conn, root, "v"))
    return conn


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    budget=st.integers(MIN_BUDGET, MAX_BUDGET),
    topic=st.lists(st.sampled_from(WORDS + ["nothing", "hub"]), min_size=1, max_size=5).map(" ".join),
)
def test_the_budget_is_never_exceeded(linked_vault: apsw.Connection, budget: int, topic: str) -> None:
    data = recall(linked_vault, topic, budget)
    total = sum(i["tokenEstimate"] for i in data["items"])
    assert total == data["usedTokens"] <= budget == data["budgetTokens"]
    for item in data["items"]:
        assert item_tokens(item) <= item["tokenEstimate"]
        assert (
            -(-len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode()) // 4) <= item["tokenEstimate"]
        )
    keys = [(i["noteId"], i["heading"]) for i in data["items"]]
    assert len(keys) == len(set(keys))
    assert [i["score"] for i in data["items"]] == sorted((i["score"] for i in data["items"]), reverse=True)


def test_out_of_range_budgets_are_clamped(linked_vault: apsw.Connection) -> None:
    assert recall(linked_vault, "login", 10)["budgetTokens"] == MIN_BUDGET
    assert recall(linked_vault, "login", 10**9)["budgetTokens"] == MAX_BUDGET
    assert recall(linked_vault, "zzzznothing", 4000)["items"] == []
