"""A dry-run store: every check of the real one, but writes land in memory.

The model reads its own writes back through the overlay, so a dry run behaves like the real run;
at the end `diff()` shows what would have changed, and nothing was written, versioned or queued.
"""

from __future__ import annotations

from typing import Any

from crustacean.store.changes import sha256_hex, unified_diff
from crustacean.store.files import FileContent, FileInfo
from crustacean.store.paths import jail
from crustacean.store.plan import Plan
from crustacean.store.write import Store, WriteResult, new_id


class OverlayStore(Store):
    """`Store` with writes kept in a dict: path -> bytes, or None for a file moved away."""

    overlay: dict[str, bytes | None]
    proposed: list[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # Store's own, passed on as they are
        super().__init__(*args, **kwargs)
        self.overlay = {}
        self.proposed = []

    def read_bytes(self, path: str) -> bytes | None:
        if path in self.overlay:
            return self.overlay[path]
        return super().read_bytes(path)

    def read_context_file(self, path: str) -> FileContent:
        rel = jail(self.root, path)
        if rel in self.overlay and self.overlay[rel] is not None:
            data = self.overlay[rel] or b""
            return FileContent(rel, data.decode("utf-8", "replace"), sha256_hex(data))
        return super().read_context_file(path)

    def list_context_files(self, prefix: str | None = None) -> list[FileInfo]:
        listed = {f.path: f for f in super().list_context_files(prefix)}
        stamp = self.clock().isoformat(timespec="seconds")
        for path, data in self.overlay.items():
            if data is None:
                listed.pop(path, None)
            elif path.startswith((prefix or "").lstrip("./")):
                listed[path] = FileInfo(path, len(data), stamp)
        return sorted(listed.values(), key=lambda f: f.path)

    def write_context(
        self,
        changes: object,
        *,
        actor: str,
        message: str,
        run_id: str | None = None,
        approved: bool = False,
        max_files: int | None = None,
    ) -> WriteResult:
        """Validate exactly as a real call would, then keep the result in memory."""
        plan = self.plan(changes, actor=actor, max_files=max_files, run_id=run_id)
        if not message.strip():
            from crustacean.errors import WriteError

            raise WriteError("message must say what the change is (a non-empty string).")
        if plan.ask and not approved:
            self.proposed.append(message)
            return WriteResult(
                files=tuple(c.path for c in plan.changes), proposal=0, call_id=new_id()
            )
        for path in plan.touched:
            self.overlay[path] = plan.after[path]
        self._loss_tally.update({(run_id, p): t for p, t in plan.loss.items()})
        return WriteResult(
            files=tuple(plan.touched),
            version=None,
            call_id=new_id(),
            sha256=_hashes(plan, plan.touched),
        )

    def diff(self) -> str:
        """A unified diff of the overlay against the files on disk."""
        return unified_diff(
            (path, Store.read_bytes(self, path), self.overlay[path])
            for path in sorted(self.overlay)
        )


def _hashes(plan: Plan, touched: list[str]) -> dict[str, str | None]:
    """Each changed file's new sha256, so the next change to it needs no second read."""
    return {p: None if plan.after[p] is None else sha256_hex(plan.after[p] or b"") for p in touched}
