"""Retrieval candidates as the stage and tier tests build them by hand: a document excerpt
with its scores and ranks."""

from __future__ import annotations

from core.models import Candidate


def document(cid: str, score: float | None = 0.5, *, doc_type: str = "tc_files",
             first_stage: float | None = None, rank: int | None = None) -> Candidate:
    return Candidate(id=cid, type=doc_type, source=f"{cid}.md", text=f"text of {cid}",
                     first_stage_score=first_stage if first_stage is not None else score,
                     final_score=score, rank_before_boost=rank, rank_after_boost=rank,
                     metadata={"source_type": "document", "type": doc_type})
