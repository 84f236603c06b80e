"""The errors of the trainq API (docs/api.md, "Errors") as Python exceptions."""

__all__ = ["TrainqError", "Invalid", "NotFound", "NotAllowed", "Unavailable", "Timeout",
           "error_for"]


class TrainqError(Exception):
    """An error the daemon answered, or one found before anything was sent.

    `code` is the API's stable code ("invalid", "not_found", "permission", "conflict", ...),
    `message` its text (naming the field or file at fault), `http_status` the HTTP status of
    the answer, or None when no answer came (the daemon was not reached).
    """

    def __init__(self, code, message, http_status=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"{type(self).__name__}({self.code!r}, {self.message!r}, {self.http_status!r})"


class Invalid(TrainqError):
    """A request the daemon refused as malformed (400, 413), or a bad argument or URL."""


class NotFound(TrainqError):
    """No such job, node, token or route (404)."""


class NotAllowed(TrainqError):
    """The caller may not do this (403 `permission`, 401 `unauthenticated`), or the daemon
    found is not to be trusted (another user's socket, a certificate that does not verify)."""


class Unavailable(TrainqError):
    """No daemon answers (503, or nothing listens), or the answer was lost on the way."""


class Timeout(TrainqError, TimeoutError):
    """A wait ran past its timeout; the job goes on."""


_BY_CODE = {"invalid": Invalid, "not_found": NotFound, "permission": NotAllowed,
            "unauthenticated": NotAllowed, "unavailable": Unavailable}
_BY_STATUS = {400: Invalid, 413: Invalid, 404: NotFound, 401: NotAllowed, 403: NotAllowed,
              503: Unavailable}


def error_for(code, message, http_status=None):
    """The exception for an API error: chosen by its code, else by its HTTP status."""
    cls = _BY_CODE.get(code) or _BY_STATUS.get(http_status, TrainqError)
    return cls(code, message, http_status)
