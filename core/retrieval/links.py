"""Which criterion each stored follow-up answers: read once per response, kept per vendor."""

from __future__ import annotations

import threading

from core.models import FOLLOWUP_SOURCE_TYPE
from core.retrieval.source import RecordReader
from core.store import followup_link

# follow-up id -> (criterion hash, canonical criterion hash, linked criterion text); None, None
# and "" for an ad-hoc question.
Links = dict[str, tuple[str | None, str | None, str]]


class FollowupLinks:
    """Every stored follow-up's link, per vendor, safe to share between threads.

    A response's id is made from its criterion and question, so what it links to never
    changes: each read lists the ids (one id-only lookup) and fetches only the ids not seen
    before."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, Links] = {}

    def read(self, vendor_id: str, records: RecordReader) -> Links:
        ids = records.ids({"source_type": FOLLOWUP_SOURCE_TYPE})
        with self._lock:
            known = self._known.get(vendor_id, {})
        new = [i for i in ids if i not in known]
        found = {chunk.id: followup_link(chunk.metadata) for chunk in records.by_ids(new)}
        links = {i: known.get(i) or found[i] for i in ids if i in known or i in found}
        with self._lock:
            self._known[vendor_id] = links
        return links
