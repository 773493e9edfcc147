"""anonymask.models.anonymizer.audit: an independent check that no real person is left in an output video."""

from anonymask.models.anonymizer.audit.detectors import (
    AuditFinding,
    AuditReport,
    audit_frames,
    available_auditors,
    get_auditor,
)
from anonymask.models.anonymizer.audit.ground_truth import gt_leak

__all__ = ["AuditFinding", "AuditReport", "audit_frames", "available_auditors", "get_auditor", "gt_leak"]
