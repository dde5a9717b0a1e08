"""Model backends behind one method (see ``base.Backend``)."""

from radspatial.models.base import (
    ORACLE_MARK,
    Backend,
    Decoding,
    Reply,
    Request,
    create_backend,
    is_oracle,
    is_remote,
    list_backends,
    register_backend,
)

__all__ = [
    "ORACLE_MARK",
    "Backend",
    "Decoding",
    "Reply",
    "Request",
    "create_backend",
    "is_oracle",
    "is_remote",
    "list_backends",
    "register_backend",
]
