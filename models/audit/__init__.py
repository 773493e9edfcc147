"""anonymask.models.audit: an independent check that no real person is left in an output video."""

from anonymask.models.audit.detectors import (
    AuditFinding,
    AuditReport,
    audit_frames,
    available_auditors,
    get_auditor,
    register_auditor,
)

__all__ = ["AuditFinding", "AuditReport", "audit_frames", "available_auditors", "get_auditor", "register_auditor"]
