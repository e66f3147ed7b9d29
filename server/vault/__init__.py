"""A vault's files: registry, parser, frontmatter, Markdown lines, path safety, atomic files."""
