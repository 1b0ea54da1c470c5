"""Ingestion: vendor documents into chunks, questionnaire rounds into follow-up records."""
