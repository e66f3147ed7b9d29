"""A generated vault for index tests: deterministic (a seeded generator, fixed mtimes), large enough for
the cold index's worker processes (``server.index.records.PARALLEL_THRESHOLD``) and the history's seed
dictionary, and full of what makes parsing hard: links of every form (wiki, Markdown, reference-style,
embeds, headings, blocks, aliases, to attachments, to names several notes share, to nothing), tags in
code, headings, URLs and aliases, frontmatter good and bad, CRLF, a BOM, non-ASCII and CJK text, and
plain notes with no Markdown at all.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

FIXED_NS = 1_700_000_000_000_000_000  # the first file's mtime; each next file one second later

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu river stone garden kernel index "
    "window harbor lantern meadow orbit prism quartz saddle timber velvet willow zephyr amber cobalt"
).split()
FOLDERS = ["", "projects", "projects/alpha", "areas/work", "areas/home", "journal/2024", "ref", "ref/deep/er"]
TAGS = ["work", "home", "idea", "project/alpha", "project/beta", "read-later", "todo", "x_y", "Ünïcode"]


def _words(rnd: random.Random, n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def _plain(rnd: random.Random) -> str:
    """Prose with no construct a Markdown parser must settle."""
    return "\n\n".join(_words(rnd, rnd.randint(8, 40)).capitalize() + "." for _ in range(rnd.randint(1, 4))) + "\n"


def _rich(rnd: random.Random, names: list[str], paths: list[str], here: str) -> str:
    parts = []
    for _ in range(rnd.randint(2, 7)):
        kind = rnd.randrange(24)
        target = rnd.choice(names)
        if kind == 0:
            parts.append(f"# {_words(rnd, 3)} #{rnd.choice(TAGS)}")
        elif kind == 1:
            parts.append(f"{_words(rnd, 3)}\n{'=' * rnd.randint(1, 6)}")
        elif kind == 2:
            parts.append(f"See [[{target}]] and [[{target}|the {_words(rnd, 1)}]] {_words(rnd, 4)}.")
        elif kind == 3:
            parts.append(
                f"![[{target}#{_words(rnd, 1)}]] then [[{target}#^blk{rnd.randint(1, 9)}]] ^blk{rnd.randint(1, 9)}"
            )
        elif kind == 4:
            rel = os.path.relpath(rnd.choice(paths), os.path.dirname(here) or ".").replace(os.sep, "/")
            parts.append(f"A [markdown link]({rel.replace(' ', '%20')}) and [abs](/{rnd.choice(paths)}#Head).")
        elif kind == 5:
            parts.append(f"```python\n# not a heading #nottag [[not a link]]\nx = '{_words(rnd, 2)}'\n```")
        elif kind == 6:
            parts.append(f"Inline `#code [[nolink]]` and #{rnd.choice(TAGS)} and #1234 and a#b and #{_words(rnd, 1)}/.")
        elif kind == 7:
            parts.append(f"https://example.com/page?q=1#frag and <https://x.org/#y> {_words(rnd, 3)}")
        elif kind == 8:
            parts.append(f"| a | b |\n|---|---|\n| [[{target}]] | #{rnd.choice(TAGS)} |")
        elif kind == 9:
            parts.append(f"- [ ] task [[{target}]]\n- [x] done #{rnd.choice(TAGS)}\n  - nested *{_words(rnd, 2)}*")
        elif kind == 10:
            parts.append(f"日本語のテキスト {_words(rnd, 2)} 中文 한국어 émigré naïve")
        elif kind == 11:
            parts.append(f"<div>html [[{target}]] #{rnd.choice(TAGS)}</div>\n\n<!-- comment #hidden -->")
        elif kind == 12:
            parts.append(f"Ref [{target}] and [text][r1].\n\n[r1]: {rnd.choice(paths)}\n[{target}]: ../x.md")
        elif kind == 13:
            parts.append(f"![image](img/pic.png) ![[pic.png]] [[doc.pdf]] [[missing {_words(rnd, 1)}]]")
        elif kind == 14:
            parts.append(f"    indented code #nottag [[nolink]]\n\n{_words(rnd, 5)}")
        elif kind == 15:
            parts.append(f"> quote [[{target}]] #{rnd.choice(TAGS)}\n> more")
        elif kind == 16:
            parts.append(f"[[{target}|#alias-not-tag]] and \\[[escaped]] and [[a\\|b]]")
        elif kind == 17:
            parts.append(f"$x^2$ and $$\\sum #nottag$$ {_words(rnd, 2)} ~~strike~~ **bold [[{target}]]**")
        elif kind == 18:
            parts.append(f"Title line\n---\n{_words(rnd, 3)} - dash - and = equals")
        elif kind == 19:
            parts.append(f"[[dendron://other/{target}]] and [x](mailto:a@b.c) and [y](#local)")
        else:
            parts.append(_plain(rnd))
    return "\n\n".join(parts) + "\n"


def _frontmatter(rnd: random.Random, names: list[str]) -> str:
    kind = rnd.randrange(8)
    if kind == 0:
        return f"---\ntags: [{rnd.choice(TAGS)}, {rnd.choice(TAGS)}]\naliases: [{_words(rnd, 2)}]\n---\n"
    if kind == 1:
        return f"---\ntitle: {_words(rnd, 3).title()}\ncreated: 2023-0{rnd.randint(1, 9)}-1{rnd.randint(0, 9)}\n---\n"
    if kind == 2:
        return f'---\nrelated: "[[{rnd.choice(names)}]]"\nstatus: draft\ncount: {rnd.randint(1, 99)}\n---\n'
    if kind == 3:
        return "---\ntags: [unclosed\nbad: : yaml\n---\n"
    if kind == 4:
        return f"---\ndescription: {_words(rnd, 4)}\nupdated: 2024-02-0{rnd.randint(1, 9)}T10:00:00\n---\n"
    return ""


def generate(root: Path, notes: int = 450, seed: int = 42) -> Path:
    """Write the vault under ``root`` (its files' mtimes fixed, in path order) and return ``root``."""
    rnd = random.Random(seed)
    paths: list[str] = []
    for i in range(notes):
        folder = rnd.choice(FOLDERS)
        name = f"{_words(rnd, rnd.randint(1, 2)).title()} {i}" if i % 7 else f"Shared {i % 5}"
        paths.append(f"{folder}/{name}.md" if folder else f"{name}.md")
    paths = list(dict.fromkeys(paths))
    names = [p.rsplit("/", 1)[-1][:-3] for p in paths] + ["Nowhere", "ref/deep/er/Shared 0", "Shared 3"]
    files: dict[str, bytes] = {}
    for i, path in enumerate(paths):
        if i % 3 == 0:
            text = _plain(rnd)
        else:
            text = _frontmatter(rnd, names) + _rich(rnd, names, paths, path)
        if i % 3 == 0 and rnd.random() < 0.3:
            text = _frontmatter(rnd, names) + text
        data = text.encode()
        if i % 41 == 5:
            data = data.replace(b"\n", b"\r\n")
        if i % 53 == 7:
            data = b"\xef\xbb\xbf" + data
        if i % 97 == 11:
            data = data + b"\xff\xfe broken utf-8\n"
        files[path] = data
    files["empty.md"] = b""
    files["only frontmatter.md"] = b"---\ntags: [work]\n---\n"
    files["img/pic.png"] = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
    files["doc.pdf"] = b"%PDF-1.4\n"
    files[".kmsignore"] = b"ref/deep/\n"  # a privacy rule: the notes under it are hidden
    for at, (path, data) in enumerate(sorted(files.items())):
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
        ns = FIXED_NS + at * 1_000_000_000
        os.utime(full, ns=(ns, ns))
    return root
