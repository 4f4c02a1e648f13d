"""Standard Webhooks signatures (https://www.standardwebhooks.com/).

``webhook-signature`` is ``v1,`` followed by the base64 HMAC-SHA256, keyed by
the base64-decoded part of a ``whsec_`` secret, over ``{id}.{timestamp}.{body}``
where body is the exact bytes sent.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

SECRET_PREFIX = "whsec_"


def secret_key(secret: str) -> bytes | None:
    """The HMAC key of a ``whsec_`` secret; None for any other value (unsigned).

    Raises ValueError for a ``whsec_`` secret whose key is not base64 or is
    empty: signing with a wrong key would make every receiver reject us.
    """
    if not secret.startswith(SECRET_PREFIX):
        return None
    encoded = secret[len(SECRET_PREFIX) :].strip()
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("whsec_ secret is not valid base64") from None
    if not key:
        raise ValueError("whsec_ secret is empty")
    return key


def signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def webhook_headers(key: bytes | None, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers; ``webhook-signature`` only with a key.

    The id goes out unsigned too: receivers deduplicate redeliveries on it.
    """
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(timestamp)}
    if key is not None:
        headers["webhook-signature"] = signature(key, msg_id, timestamp, body)
    return headers
