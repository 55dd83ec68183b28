"""The store: the only code that writes workspace files (DESIGN.md §4).

The write path is `store/write.py` (`Store.write_context`); import from the submodules, so an
import names what it uses and the layering test sees every arrow.
"""
