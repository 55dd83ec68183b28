"""Code's one writer of the folder READMEs' `## Index` (crustacean/folder_index.py's rule): each
file a stage created gets its line there after the stage's model pass."""

from __future__ import annotations

from crustacean.documents import parse_document
from crustacean.folder_index import insert_line, is_indexed
from crustacean.markdown import first_heading
from crustacean.store import Store
from crustacean.store.changes import Change, sha256_hex


def index_created(store: Store, created: list[str], actor: str, run_id: str) -> list[str]:
    """Add each created file to its folder README's `## Index`, in one version (code owns the
    Index: the model is told so and refused when it writes a folder README)."""
    texts: dict[str, str] = {}
    added: list[str] = []
    for rel in created:
        top, sub, name = _split(rel)
        readme = f"{top}/README.md"
        if readme not in texts:
            data = store.read_bytes(readme)
            if data is None:
                continue
            texts[readme] = data.decode("utf-8", "replace")
        if name == "README.md" or is_indexed(texts[readme], f"{sub}/{name}" if sub else name):
            continue
        line = f"  - `{name}` — {title(store.read_bytes(rel) or b'', rel)[:80] or 'new file'}"
        texts[readme] = insert_line(texts[readme], sub, line)
        added.append(f"{readme}: {line.strip()}")
    changes = []
    for readme, text in texts.items():
        current = store.read_bytes(readme) or b""
        if text.encode() != current:  # an edit of the index (curate may edit, never overwrite)
            changes.append(
                Change(
                    readme,
                    "edit",
                    old=current,
                    new=text.encode(),
                    expected_sha256=sha256_hex(current),
                )
            )
    if changes:
        store.write_context(
            changes, actor=actor, message=f"{actor}: index new files", run_id=run_id
        )
    return added


def _split(rel: str) -> tuple[str, str, str]:
    top, _, rest = rel.partition("/")
    sub, _, name = rest.partition("/")
    return (top, sub, name) if name else (top, "", sub)


def title(data: bytes, rel: str) -> str:
    """What a file is listed by (its Index line, curate's map): its `name:`, else its first
    heading (from its first 4 KB)."""
    doc = parse_document(data[:4096].decode("utf-8", "replace"), rel)
    return str(doc.meta.get("name") or first_heading(doc.body))
