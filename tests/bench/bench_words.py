"""Filler vocabulary shared by the benchmark scripts that generate memory text."""

FILLER_WORDS: list[str] = (
    "the user prefers dark mode in every application and wants short answers about python "
    "decided to migrate analytics warehouse postgres pgvector because hybrid search over notes "
    "matters meeting tomorrow with sarah about quarterly roadmap budget hiring plan train lisbon "
    "conference hotel near alfama booked flights return friday remember dog luna vet appointment "
    "refactor chunker overlap tokens heading path markdown bullets code fences sqlite index "
    "embeddings cosine similarity reranking recency decay confidence memory file daily log "
    "garden tomatoes basil watering schedule weekend bicycle repair chain brakes tyre pressure "
    "kubernetes deployment failed because readiness probe timeout increased to thirty seconds "
    "invoice overdue client asked for revised estimate deadline moved next sprint retrospective"
).split()
