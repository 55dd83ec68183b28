"""The four 4C stages on one skeleton (`skeleton.py`: pre-pass → model → post-pass, one runner,
one result type), and the registry `tick` runs them from (`registry.py`)."""
