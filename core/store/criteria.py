"""A vendor's criteria lists in the store: one record per list used with the vendor (its name
as the id's source, its criteria as JSON text), replaced when the same list is used again.
What a criteria list holds is `core.ingest.criteria_lists`'."""

from __future__ import annotations

from core.store.texts import TextRecords


class CriteriaListRecords(TextRecords):
    """The records of one vendor's criteria lists collection: (id, criteria as JSON,
    metadata), each upserted."""
