"""anonymask.models.anonymizer.pose."""
