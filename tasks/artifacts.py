"""Prefect artifact keys: one rule for every flow and task that publishes an artifact."""


def artifact_key(*parts: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    raw = "-".join(parts).lower()
    key = "".join(c if c.isalnum() else "-" for c in raw)
    return "-".join(filter(None, key.split("-")))[:100]
