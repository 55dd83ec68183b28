"""The model runtime: client, tools, agent loop and stage runner (DESIGN.md §3, §5)."""
