"""The pipeline instructions a workspace holds in `memory/.system/`, kept in step with the ones
crustacean ships.

Every shipped doc carries a `Version: N` line, and `pipeline/versions.json` lists the sha256 of
every text crustacean ever shipped for it. A workspace copy whose hash is in that list was never
edited by its user, so `init` and `crustacean upgrade` replace it with the current one; an
edited copy is left alone and the new version waits as a proposal whose diff the user reviews.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from crustacean.store import Store, proposals
from crustacean.store.changes import Change, sha256_hex
from crustacean.workspace import PIPELINE_DOCS, SYSTEM_DIR, data_dir

VERSIONS_FILE = "versions.json"
_VERSION = re.compile(r"^Version:\s*(\d+)\s*$", re.MULTILINE)


def doc_version(text: str) -> int | None:
    match = _VERSION.search(text)
    return int(match.group(1)) if match else None


def shipped_version() -> int:
    """The docs' version as a whole: the highest `Version:` of the shipped docs."""
    texts = [(data_dir("pipeline") / n).read_text("utf-8") for n in PIPELINE_DOCS]
    return max(doc_version(t) or 0 for t in texts)


def shipped_hashes() -> dict[str, dict[str, list[str]]]:
    """doc name -> version -> every sha256 shipped under it."""
    path = data_dir("pipeline") / VERSIONS_FILE
    data: dict[str, dict[str, list[str]]] = json.loads(path.read_text("utf-8"))
    return data


def record_current(known: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, list[str]]]:
    """`known` with the hash of each packaged doc added under its version (docs/generate.py)."""
    out = {name: {v: list(h) for v, h in known.get(name, {}).items()} for name in PIPELINE_DOCS}
    for name in PIPELINE_DOCS:
        data = (data_dir("pipeline") / name).read_bytes()
        version = str(doc_version(data.decode("utf-8")))
        hashes = out[name].setdefault(version, [])
        if sha256_hex(data) not in hashes:
            hashes.append(sha256_hex(data))
    return out


@dataclass
class DocsUpgrade:
    updated: list[str] = field(default_factory=list)  # replaced: the user never edited them
    created: list[str] = field(default_factory=list)
    proposed: dict[str, int] = field(default_factory=dict)  # edited: path -> proposal id
    current: list[str] = field(default_factory=list)
    version: str | None = None

    def notes(self) -> list[str]:
        out = [f"Updated {p} to the shipped version (you had not edited it)." for p in self.updated]
        out += [
            f"{p} has your edits, so it was kept; the new shipped version is proposal {pid}: "
            f"`crustacean review show {pid}` shows the diff, `crustacean review approve {pid}` "
            "takes it."
            for p, pid in self.proposed.items()
        ]
        return out

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def upgrade_docs(store: Store) -> DocsUpgrade:
    """Bring `memory/.system/` to the shipped docs without overwriting a user's edit."""
    known = shipped_hashes()
    pending = {p.message for p in proposals.list_proposals(store.ws)}
    report = DocsUpgrade()
    changes: list[Change] = []
    for name in PIPELINE_DOCS:
        rel = f"{SYSTEM_DIR}/{name}"
        new = (data_dir("pipeline") / name).read_bytes()
        old = store.read_bytes(rel)
        version = doc_version(new.decode("utf-8"))
        if old is None:
            changes.append(Change(rel, "create", content=new))
            report.created.append(rel)
        elif old == new:
            report.current.append(rel)
        elif any(sha256_hex(old) in h for h in known.get(name, {}).values()):
            changes.append(Change(rel, "overwrite", content=new, expected_sha256=sha256_hex(old)))
            report.updated.append(rel)
        else:
            message = f"crustacean upgrade: {rel} version {version} (you edited yours)"
            if message in pending:
                continue
            change = Change(rel, "overwrite", content=new, expected_sha256=sha256_hex(old))
            plan = store.plan([change], actor="user", max_files=1)
            report.proposed[rel] = proposals.add(
                store.ws,
                plan.changes,
                plan.before,
                now=store.clock(),
                actor="user",
                message=message,
                run_id=None,
                reason=f"{rel} differs from every version crustacean shipped: you edited it",
            )
    if changes:
        result = store.write_context(
            changes,
            actor="user",
            message="crustacean upgrade: pipeline instructions",
            max_files=len(changes),
        )
        report.version = result.version
    return report
