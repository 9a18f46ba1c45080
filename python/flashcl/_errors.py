"""flashcl.Error: a failure of the library (its fcl_status) or an argument
the binding rejected before calling it."""
from . import _lib


class Error(Exception):
    """A flashcl failure.

    status: the fcl_status code (positive: flashcl's, negative: an OpenCL
    error passed through; None for an argument rejected in Python),
    name: its name ("FCL_ERROR_HEAD_DIM_UNSUPPORTED", "CL_OUT_OF_RESOURCES"),
    message: fcl_status_string's text, plus what the call was and, for a
    failed kernel build, the build log."""

    def __init__(self, status, name, message):
        super().__init__("%s: %s" % (name, message))
        self.status = status
        self.name = name
        self.message = message


class ArgumentError(Error, ValueError):
    """An array or option the binding rejected before the C call (a wrong
    shape, dtype, kind of array, or layout flashcl cannot describe)."""

    def __init__(self, message):
        super().__init__(None, "invalid argument", message)


def status_name(status):
    """The header's name of an fcl_status; OpenCL codes by their CL_ name."""
    name = _lib.STATUS_NAMES.get(status)
    if name is None:
        name = _lib.fcl_status_string(status).decode()
    return name


def check(status, what, ctx_handle=None):
    """Raises Error for a status other than FCL_OK."""
    if status == 0:
        return
    text = _lib.fcl_status_string(status).decode()
    message = "%s (in %s)" % (text, what)
    if status == 10 and ctx_handle:  # FCL_ERROR_BUILD_FAILED
        message += "\n" + _lib.fcl_context_build_log(ctx_handle).decode(errors="replace")
    raise Error(status, status_name(status), message)
