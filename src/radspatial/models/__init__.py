"""Model backends behind one method (see ``base.Backend``)."""

from radspatial.models.base import (
    Backend,
    Decoding,
    Reply,
    Request,
    create_backend,
    list_backends,
    register_backend,
)

__all__ = [
    "Backend",
    "Decoding",
    "Reply",
    "Request",
    "create_backend",
    "list_backends",
    "register_backend",
]
