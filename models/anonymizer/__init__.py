"""anonymask.models.anonymizer."""
