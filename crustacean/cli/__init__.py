"""The command line: a thin edge that parses, calls one core function and renders the result."""
