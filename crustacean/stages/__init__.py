"""The four 4C stages: deterministic pre-pass, model run, deterministic post-pass."""
