"""The aclnn error model: every rejected call raises :class:`AclnnError` before anything is written."""

from __future__ import annotations

from enum import IntEnum


class AclnnStatus(IntEnum):
    """The two aclnn status codes these operators can return (CANN ``aclnn_base.h``)."""

    ACLNN_ERR_PARAM_NULLPTR = 161001
    ACLNN_ERR_PARAM_INVALID = 161002


class AclnnError(ValueError):
    """A parameter error, carrying the aclnn code and status name.

    ``code`` is 161001 (a missing tensor) or 161002 (anything else invalid); ``status`` is the
    ACLNN name of that code. The message names the argument, what was expected and what was given.
    """

    def __init__(self, status: AclnnStatus, message: str) -> None:
        super().__init__(f"{status.name} ({int(status)}): {message}")
        self.code: int = int(status)
        self.status: str = status.name


def null_error(arg: str) -> AclnnError:
    return AclnnError(AclnnStatus.ACLNN_ERR_PARAM_NULLPTR, f"{arg}: expected a tensor, got None")


def invalid(arg: str, expected: str, got: object) -> AclnnError:
    return AclnnError(AclnnStatus.ACLNN_ERR_PARAM_INVALID, f"{arg}: expected {expected}, got {got}")
