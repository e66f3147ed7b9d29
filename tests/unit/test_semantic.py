"""Hybrid semantic search: fusion, fallbacks, hidden notes, index refresh and retrieval quality.

Real model, real DBs: the semantic test vault (tests/data/semantic_vault) is indexed and
embedded once per run and each test gets a private copy of that database.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import apsw
import pytest

from server.errors import KmsError
from server.index.embed import Embedder, embed_pending
from server.index.incremental import reindex_file
from server.index.indexer import index_vault
from server.index.notes import set_hidden
from server.index.search import search
from server.index.semantic import RELAXED_WEIGHT, RRF_K, SemanticIndex, semantic_search
from server.index.writer import delete_note_row
from server.store.db import connect
from server.vault.registry import add_vault, get_vault

HIT_KEYS = {
    "noteId",
    "title",
    "path",
    "vault",
    "excerpt",
    "heading",
    "score",
    "matchType",
    "similarity",
    "tags",
    "updatedAt",
}


def paths(result: dict) -> list[str]:
    return [h["path"] for h in result["hits"]]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_hits_have_the_documented_shape(semantic_conn: apsw.Connection, embedder: Embedder) -> None:
    q = "container keeps crashing because it runs out of RAM"
    res = semantic_search(semantic_conn, SemanticIndex(embedder), q)
    assert res["mode"] == "hybrid" and res["hits"]
    top = res["hits"][0]
    assert set(top) == HIT_KEYS
    assert top["path"] == "tech/Kubernetes OOMKilled pods.md" and top["vault"] == "sv"
    assert top["tags"] == ["kubernetes"] and isinstance(top["updatedAt"], float)
    # The excerpt is the best-matching section, with its heading.
    assert top["heading"] in ("Symptom", "Fix") and top["excerpt"].startswith(top["heading"] + ": ")


@pytest.mark.parametrize(
    "query",
    ["glass", "week", "running out of memory", "restic", "I can't doze off", "how do I fix bread that came out flat"],
)
def test_fusion_is_rrf_of_the_keyword_and_semantic_lists(semantic_conn, embedder, query: str) -> None:
    index = SemanticIndex(embedder)
    kw = search(semantic_conn, query, 50)  # kms_search's list, any-word relaxation included
    kw_rank = {h["noteId"]: r for r, h in enumerate(kw["hits"], 1)}
    # a hit holding only some of the words (after the first allWords) has a smaller share
    weight = {
        h["noteId"]: RELAXED_WEIGHT if kw["relaxed"] and r > kw["allWords"] else 1.0
        for r, h in enumerate(kw["hits"], 1)
    }
    sem = semantic_search(semantic_conn, index, query, 50, mode="semantic")
    assert all(h["matchType"] == "semantic" for h in sem["hits"])
    sem_rank = {h["noteId"]: r for r, h in enumerate(sem["hits"], 1)}
    hybrid = semantic_search(semantic_conn, index, query, 50)
    assert {h["noteId"] for h in hybrid["hits"]} == set(kw_rank) | set(sem_rank)
    for h in hybrid["hits"]:
        in_kw, in_sem = h["noteId"] in kw_rank, h["noteId"] in sem_rank
        assert (
            h["matchType"]
            == {(True, True): "both", (True, False): "keyword", (False, True): "semantic"}[(in_kw, in_sem)]
        )
        expected = (weight[h["noteId"]] / (RRF_K + kw_rank[h["noteId"]]) if in_kw else 0.0) + (
            1 / (RRF_K + sem_rank[h["noteId"]]) if in_sem else 0.0
        )
        assert h["score"] == pytest.approx(expected, abs=1e-5)
        assert (h["similarity"] is None) == (not in_sem)
    scores = [h["score"] for h in hybrid["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_all_three_match_types_occur(semantic_conn, embedder) -> None:
    index = SemanticIndex(embedder)
    seen = {
        h["matchType"]
        for q in ("glass", "week", "running out of memory")
        for h in semantic_search(semantic_conn, index, q)["hits"]
    }
    assert seen == {"keyword", "semantic", "both"}


def test_hidden_notes_never_appear(semantic_conn, embedder) -> None:
    index = SemanticIndex(embedder)
    queries = ["I can't doze off at night", "CBT-I", "caffeine half-life and circadian rhythm"]
    assert all("life/Sleep hygiene.md" in paths(semantic_search(semantic_conn, index, q)) for q in queries)
    set_hidden(semantic_conn, "Sleep hygiene", True)
    for q in queries:
        for mode in ("hybrid", "semantic"):
            found = paths(semantic_search(semantic_conn, index, q, 50, mode=mode))
            assert "life/Sleep hygiene.md" not in found


def test_limits_and_bad_input(semantic_conn, embedder) -> None:
    index = SemanticIndex(embedder)
    assert len(semantic_search(semantic_conn, index, "water", 0)["hits"]) == 1
    assert len(semantic_search(semantic_conn, index, "the a of", 500)["hits"]) <= 50
    assert len(semantic_search(semantic_conn, index, "water")["hits"]) <= 10
    with pytest.raises(KmsError) as err:
        semantic_search(semantic_conn, index, "   ")
    assert err.value.kind == "invalid-input"
    with pytest.raises(KmsError):
        semantic_search(semantic_conn, index, "x", mode="fuzzy")
    # FTS5 syntax characters in a natural-language question are not an error here.
    res = semantic_search(semantic_conn, index, 'error: pod "killed" (again')
    assert res["mode"] == "hybrid" and "tech/Kubernetes OOMKilled pods.md" in paths(res)


@pytest.mark.parametrize("kind", ["missing", "corrupt", "disabled", "loading"])
def test_model_not_ready_falls_back_to_keywords(
    semantic_conn, embed_model_dir: Path, tmp_path: Path, kind: str
) -> None:
    if kind == "missing":
        emb = Embedder(tmp_path / "no-model")
        emb.load()
    elif kind == "corrupt":
        bad = tmp_path / "bad"
        shutil.copytree(embed_model_dir, bad)
        (bad / "model.onnx").write_bytes(b"\0" * 4096)
        emb = Embedder(bad)
        emb.load()
    elif kind == "disabled":
        emb = Embedder(embed_model_dir, enabled=False)
    else:
        emb = Embedder(embed_model_dir)
        emb.start()
    index = SemanticIndex(emb)
    started = time.perf_counter()
    res = semantic_search(semantic_conn, index, "OOMKilled", 5)
    elapsed = time.perf_counter() - started
    assert res["mode"] == "keyword-only" and res["reason"]
    assert paths(res) == [h["path"] for h in search(semantic_conn, "OOMKilled", 5)["hits"]]
    assert res["hits"] and all(h["matchType"] == "keyword" and set(h) == HIT_KEYS for h in res["hits"])
    assert elapsed < 1.0  # never waits for the model
    # A paraphrase finds nothing by keyword, still no error.
    assert semantic_search(semantic_conn, index, "zzzq nonexistentword")["hits"] == []
    if kind == "loading":
        assert emb.wait(120)


def test_nothing_embedded_yet_is_keyword_only(conn: apsw.Connection, embedder, tmp_path: Path) -> None:
    from support.embed_fixtures import SEMANTIC_VAULT

    shutil.copytree(SEMANTIC_VAULT, tmp_path / "v")
    index_vault(conn, add_vault(conn, tmp_path / "v", "v"))
    res = semantic_search(conn, SemanticIndex(embedder), "restic")
    assert res["mode"] == "keyword-only" and "kms embed" in res["reason"]
    assert paths(res) == ["tech/Backup strategy 3-2-1.md"]


@pytest.mark.parametrize("project_above", [None, 0], ids=["exact", "projected"])
def test_index_follows_new_edited_and_deleted_notes(
    conn: apsw.Connection, embedder, tmp_path: Path, project_above: int | None
) -> None:
    root = tmp_path / "notes"
    write(root / "Kettle.md", "## Descaling\nBoil a mix of water and citric acid, then rinse twice.\n")
    vault = add_vault(conn, root, "notes")
    index_vault(conn, vault)
    embed_pending(conn, embedder)
    index = SemanticIndex(embedder, project_above=project_above)  # 0: projected from the first chunk on
    q = "how do I stop my bicycle from squeaking"
    assert paths(semantic_search(conn, index, q, mode="semantic")) == []  # below the noise floor

    write(root / "Bike chain.md", "## Lubrication\nA dry, noisy chain needs wet lube on every link.\n")
    reindex_file(conn, vault, "Bike chain.md")
    embed_pending(conn, embedder)
    assert paths(semantic_search(conn, index, q, mode="semantic"))[:1] == ["Bike chain.md"]
    loaded = len(index)

    write(root / "Bike chain.md", "## Storage\nKeep the bicycle indoors over winter, away from road salt.\n")
    reindex_file(conn, vault, "Bike chain.md")
    embed_pending(conn, embedder)
    res = semantic_search(conn, index, "where to keep my bike in the cold season", mode="semantic")
    assert res["hits"][0]["heading"] == "Storage" and len(index) == loaded

    rid = next(conn.execute("SELECT rid FROM notes WHERE title = 'Bike chain'"))[0]
    conn.execute("BEGIN IMMEDIATE")
    delete_note_row(conn, rid)
    conn.execute("COMMIT")
    assert "Bike chain.md" not in paths(semantic_search(conn, index, q, mode="semantic"))
    assert len(index) == loaded - 1


def test_a_projected_index_ranks_as_the_exact_one(semantic_conn, embedder) -> None:
    """Past PROJECT_ABOVE chunks the matrix is held on its principal directions plus int8 copies (a third
    of the memory); the notes it ranks and their similarities are the exact index's, within int8's error."""
    from support.embed_fixtures import load_queries

    exact, projected = SemanticIndex(embedder), SemanticIndex(embedder, project_above=0)
    exact.refresh(semantic_conn)
    projected.refresh(semantic_conn)
    assert projected.projected and not exact.projected and len(projected) == len(exact)
    for q in load_queries():
        vec = embedder.embed_query(q["query"])
        a, b = exact.best_notes(vec, depth=5), projected.best_notes(vec, depth=5)
        n = min(len(a), len(b), 3)  # a note right at the similarity floor may fall either side of it
        assert [r for r, _c, _s in a][:n] == [r for r, _c, _s in b][:n] and abs(len(a) - len(b)) <= 1, q["query"]
        for (_r1, _c1, s1), (_r2, _c2, s2) in zip(a, b, strict=False):
            assert abs(s1 - s2) < 5e-3
        chunk_ids = [c for _r, c, _s in a]
        sims = projected.similarities(vec, chunk_ids)
        assert all(abs(sims[c] - s) < 5e-3 for _r, c, s in a)


@pytest.mark.parametrize("project_above", [None, 0], ids=["exact", "projected"])
def test_vault_filter(semantic_conn, embedder, tmp_path: Path, project_above: int | None) -> None:
    root = tmp_path / "work"
    write(root / "Cluster memory.md", "## Limits\nOur pods get OOM-killed when the JVM heap outgrows it.\n")
    other = add_vault(semantic_conn, root, "work")
    index_vault(semantic_conn, other)
    embed_pending(semantic_conn, embedder)
    index = SemanticIndex(embedder, project_above=project_above)
    q = "container keeps crashing because it runs out of RAM"
    both = {h["vault"] for h in semantic_search(semantic_conn, index, q, 20)["hits"]}
    assert both == {"sv", "work"}
    for name in ("work", "sv"):
        res = semantic_search(semantic_conn, index, q, 20, vault_id=get_vault(semantic_conn, name).id)
        assert {h["vault"] for h in res["hits"]} == {name}


def recall_at_5(conn: apsw.Connection, index: SemanticIndex) -> dict[str, dict[str, float]]:
    """recall@5 per query kind for keyword-only, semantic-only and hybrid search."""
    from support.embed_fixtures import load_queries

    found: dict[str, dict[str, list[bool]]] = {}
    for q in load_queries():
        relevant = set(q["relevant"])
        runs = {
            "keyword": [h["path"] for h in search(conn, q["query"], 5)["hits"]],
            "semantic": paths(semantic_search(conn, index, q["query"], 5, mode="semantic")),
            "hybrid": paths(semantic_search(conn, index, q["query"], 5)),
        }
        per_kind = found.setdefault(q["kind"], {})
        for name, got in runs.items():
            per_kind.setdefault(name, []).append(bool(relevant & set(got)))
    return {kind: {name: sum(v) / len(v) for name, v in runs.items()} for kind, runs in found.items()}


def test_quality_hybrid_beats_keywords_on_paraphrases(semantic_conn, embedder) -> None:
    recall = recall_at_5(semantic_conn, SemanticIndex(embedder))
    print("recall@5", recall)
    para, exact = recall["paraphrase"], recall["exact"]
    assert para["hybrid"] >= para["keyword"] + 0.3, recall
    assert para["hybrid"] >= 0.9, recall
    assert exact["hybrid"] >= exact["keyword"], recall
    assert exact["hybrid"] >= 0.95, recall


def test_connections_per_thread_share_one_index(semantic_db_template: Path, embedder, tmp_path: Path) -> None:
    import threading

    db = tmp_path / "copy.db"
    shutil.copyfile(semantic_db_template, db)
    index = SemanticIndex(embedder)
    results: list[str] = []
    errors: list[BaseException] = []

    def worker(q: str) -> None:
        c = connect(db)
        try:
            results.append(semantic_search(c, index, q, 1)["hits"][0]["path"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            c.close()

    queries = ("restic", "Najdorf", "JR Pass", "ed25519")
    threads = [threading.Thread(target=worker, args=(q,)) for q in queries]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and sorted(results) == sorted(
        [
            "tech/Backup strategy 3-2-1.md",
            "life/Chess opening repertoire.md",
            "life/Kyoto and Tokyo itinerary.md",
            "tech/SSH keys setup.md",
        ]
    )


def test_service_starts_at_once_and_embeds_in_the_background(
    db_path: Path, conn: apsw.Connection, embed_model_dir: Path, tmp_path: Path
) -> None:
    from server.index.semantic import SemanticService

    root = tmp_path / "notes"
    write(root / "Kettle.md", "## Descaling\nBoil a mix of water and citric acid, then rinse twice.\n")
    write(root / "Bike chain.md", "## Lubrication\nA dry, noisy chain needs wet lube on every link.\n")
    vault = add_vault(conn, root, "notes")
    index_vault(conn, vault)
    # woken by notify_changed, not by a timer; no first-call wait: this checks the answer while loading
    service = SemanticService(db_path, model_dir=embed_model_dir, first_call_wait_s=0)
    started = time.perf_counter()
    service.start()
    first = service.search(conn, "lube")
    assert time.perf_counter() - started < 1.0
    assert first["mode"] == "keyword-only" and paths(first) == ["Bike chain.md"]
    try:
        assert service.background is not None
        assert service.background.idle.wait(120), service.status()  # loaded, embedded, vectors in the index
        res = service.search(conn, "how do I stop my bicycle from squeaking")
        assert res["mode"] == "hybrid" and paths(res)[0] == "Bike chain.md"
        write(root / "Gate.md", "## Hinges\nOil the garden gate hinges every spring so they stop creaking.\n")
        reindex_file(conn, vault, "Gate.md")
        service.notify_changed()
        assert service.background.idle.wait(120), service.status()
        res = service.search(conn, "noisy door hinge", mode="semantic")
        assert paths(res)[0] == "Gate.md"
        assert service.status()["state"] == "ready"
    finally:
        service.close()


def test_the_first_call_waits_for_a_loading_model_and_later_ones_do_not(
    semantic_db_template: Path, embed_model_dir: Path
) -> None:
    from server.index.semantic import SemanticService

    conn = connect(semantic_db_template)
    waiting = SemanticService(
        semantic_db_template, model_dir=embed_model_dir, background_embedding=False, first_call_wait_s=120
    )
    eager = SemanticService(
        semantic_db_template, model_dir=embed_model_dir, background_embedding=False, first_call_wait_s=0
    )
    try:
        waiting.start()
        assert waiting.embedder.state == "loading"
        first = waiting.search(conn, "my homemade bread came out flat and heavy")
        assert first["mode"] == "hybrid" and paths(first)[0] == "kitchen/Sourdough starter and loaves.md"
        eager.start()
        assert eager.search(conn, "bread came out flat")["mode"] == "keyword-only"  # answered while loading
        assert eager.embedder.wait(120)
        assert eager.search(conn, "bread came out flat")["mode"] == "hybrid"
    finally:
        waiting.close()
        eager.close()
        conn.close()


def test_hybrid_keeps_the_keyword_any_word_fallback(semantic_conn, embedder) -> None:
    """No note holds every word: the keyword side is kms_search's relaxed list, so the notes holding some
    of the words are fused in, not dropped (hybrid used to fall back to semantic-only here)."""
    query = "restic sourdough"
    plain = search(semantic_conn, query, 10)
    assert plain["relaxed"] and plain["allWords"] == 0
    res = semantic_search(semantic_conn, SemanticIndex(embedder), query, 10)
    assert res["relaxed"] is True
    found = {h["path"]: h["matchType"] for h in res["hits"]}
    for hit in plain["hits"][:3]:
        assert found.get(hit["path"]) in ("keyword", "both"), hit["path"]


def test_cli_style_embed_without_an_embedder(conn: apsw.Connection, embed_model_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    write(root / "One.md", "## A\nSomething worth finding later.\n")
    index_vault(conn, add_vault(conn, root, "n"))
    assert embed_pending(conn, model_dir=embed_model_dir).notes == 1
    write(root / "Two.md", "## B\nAnother one.\n")
    index_vault(conn, get_vault(conn, "n"))
    from server.index.embed import ModelNotReady

    with pytest.raises(ModelNotReady):
        embed_pending(conn, model_dir=tmp_path / "missing")
