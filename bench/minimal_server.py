"""Baseline MCP server: the SDK's MCPServer with one trivial tool (what start-up and a round trip cost
with no kms code at all)."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("baseline")


@server.tool()
def echo(query: str) -> str:
    """Return the query."""
    return query


if __name__ == "__main__":
    server.run()
