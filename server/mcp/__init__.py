"""The MCP adapter: the only package that imports the SDK."""
