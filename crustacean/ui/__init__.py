"""`crustacean ui`: a local web page over the same core functions as the CLI.

It is an edge like `cli/` and `mcp_server.py`: it parses requests, calls one core function and
renders the result. `security` keeps it local (Host check, token, CSRF), `views` turns core
results into what a page shows, `render` holds the templates, markdown and the cost chart, and
`server` wires routes and runs uvicorn.
"""
