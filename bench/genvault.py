"""Deterministic, realistic vault for benchmarks (no external data needed).

Prose comes from the docstrings of a fixed list of standard-library modules, so the text
is real English with technical vocabulary; structure mimics an Obsidian vault: folders,
YAML frontmatter, headings, wiki-links (some forward), inline tags and code blocks.
About 5.8 KB per note, like the genvault tool the issue names.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import random
import re
from pathlib import Path

MODULES = [
    "os",
    "json",
    "logging",
    "threading",
    "asyncio",
    "pathlib",
    "sqlite3",
    "email",
    "http.client",
    "argparse",
    "collections",
    "functools",
    "itertools",
    "subprocess",
    "textwrap",
    "unittest",
    "zipfile",
    "tarfile",
    "csv",
    "shutil",
    "socket",
    "ssl",
    "string",
    "typing",
    "dataclasses",
    "decimal",
]
FOLDERS = [
    "projects",
    "areas/work",
    "areas/home",
    "areas/finance",
    "journal/2026",
    "reference",
    "people",
    "meetings",
    "archive/old-notes",
    "inbox",
]
TOPICS = [
    "Auth Error Handling",
    "Release Checklist",
    "Incident Postmortem",
    "Api Design Review",
    "Reading List",
    "Onboarding retro",
    "Hiring Loop",
    "Osprey Launch",
    "Budget Planning",
    "Database Migration",
]
KINDS = ["notes", "plan", "summary", "ideas", "checklist", "questions", "log"]
TAGS = [
    "project",
    "meeting",
    "people",
    "reference",
    "journal",
    "draft",
    "review",
    "design",
    "bug",
    "health",
    "area/home",
    "area/work",
    "status/active",
    "status/done",
    "idea",
    "python",
]


def sentences() -> list[str]:
    out: set[str] = set()
    for name in MODULES:
        mod = importlib.import_module(name)
        for _, obj in sorted(inspect.getmembers(mod), key=lambda kv: kv[0]):
            doc = inspect.getdoc(obj) or ""
            for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())):
                if 40 <= len(s) <= 220 and s[0].isupper() and s.endswith("."):
                    out.add(s)
    return sorted(out)


def generate(out: Path, notes: int = 10_000, seed: int = 42) -> list[Path]:
    rng = random.Random(seed)
    pool = sentences()
    titles = [f"{rng.choice(TOPICS)} {rng.choice(KINDS)} {i:05d}" for i in range(notes)]
    paths = []
    for i, title in enumerate(titles):
        folder = FOLDERS[i % len(FOLDERS)]
        tags = rng.sample(TAGS, rng.randint(1, 3))
        parts = [
            "---",
            f"tags: [{', '.join(tags[:2])}]",
            f'aliases: ["{title.split()[0]} {i}"]',
            f"created: 2026-{1 + i % 12:02d}-{1 + i % 28:02d}",
            f"status: {rng.choice(['active', 'done', 'someday'])}",
            "---",
            "",
        ]
        for section in range(rng.randint(3, 6)):
            parts.append(f"## {rng.choice(['Context', 'Summary', 'Decision', 'Next steps', 'Notes'])} {section}")
            parts.append("")
            para = " ".join(rng.choice(pool) for _ in range(rng.randint(9, 19)))
            if rng.random() < 0.5:
                target = rng.choice(titles) if rng.random() < 0.93 else f"Missing note {rng.randint(0, 999)}"
                para += f" See [[{target}]]."
            if rng.random() < 0.2:
                para += f" #{tags[-1]}"
            parts.append(para)
            parts.append("")
            if rng.random() < 0.15:
                parts += ["```python", f"def step_{i}(x):", "    return x * 2  # #not-a-tag [[not-a-link]]", "```", ""]
        path = out / folder / f"{title}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(parts), encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()
    files = generate(a.out, a.notes, a.seed)
    print(f"{len(files)} notes, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB in {a.out}")
