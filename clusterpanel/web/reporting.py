"""Error pages that keep secrets hidden even with DEBUG on; refusals logged in one line."""

import logging

from django.views.debug import SafeExceptionReporterFilter


class SecretsHiddenFilter(SafeExceptionReporterFilter):
    """Django hides the variables and POST fields marked sensitive (`sensitive_variables`,
    `sensitive_post_parameters`) only when DEBUG is off. A lab may well turn DEBUG on to chase a bug while
    admins type laptop passwords and paste private keys, so here they stay hidden on DEBUG pages too."""

    def is_active(self, request) -> bool:
        return True


class RefusalsInOneLine(logging.Filter):
    """Django logs each 403 ("Forbidden (Permission denied): /nodes/") with the PermissionDenied's traceback,
    some 30 lines of the panel working as meant. The line stays; the traceback goes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = record.exc_text = None
        return True
