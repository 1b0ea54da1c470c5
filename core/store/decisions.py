"""A vendor's reviewer decisions in the store: one record per decision, added and never
replaced, its note as the text and its fields as metadata. What a decision means is
`core.review.decisions`'s."""

from __future__ import annotations

from core.store.texts import TextRecords


class DecisionRecords(TextRecords):
    """The records of one vendor's decisions collection: (id, note, metadata), each added."""
