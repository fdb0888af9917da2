"""Request authentication as Rasa does it: a shared token (``?token=``) or a JWT (HS256).

The token may also come as ``Authorization: Bearer <token>``, and on the parse endpoints as
``"token"`` in the JSON body (where Rasa's dialogue server sends it). Every comparison of a secret is
constant-time (:func:`hmac.compare_digest`). JWTs are verified with the standard library only:
the header must name ``HS256`` (``none`` and every other algorithm are refused), the signature
must match, and ``exp`` / ``nbf`` are honoured when present.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Any

MAX_JWT_CHARS = 8192


def _b64url_decode(part: str) -> bytes:
    if not part or len(part) > MAX_JWT_CHARS:
        raise ValueError("empty or oversized JWT segment")
    padded = part + "=" * (-len(part) % 4)
    try:
        return base64.urlsafe_b64decode(padded.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError) as error:
        raise ValueError("JWT segment is not base64url") from error


def _b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def encode_jwt(payload: dict[str, Any], secret: str) -> str:
    """An HS256 JWT for ``payload`` (for clients and tests)."""
    header = _b64url_encode(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    body = _b64url_encode(json.dumps(payload, separators=(",", ":")).encode())
    signing_input = f"{header}.{body}".encode("ascii")
    signature = hmac.new(secret.encode("utf-8"), signing_input, hashlib.sha256).digest()
    return f"{header}.{body}.{_b64url_encode(signature)}"


def decode_jwt(
    token: str, secret: str, now: float | None = None, leeway: float = 0.0
) -> dict[str, Any] | None:
    """The payload of a valid HS256 JWT signed with ``secret``; ``None`` for anything else."""
    if not token or len(token) > MAX_JWT_CHARS or token.count(".") != 2:
        return None
    header_b64, payload_b64, signature_b64 = token.split(".")
    try:
        header = json.loads(_b64url_decode(header_b64))
        signature = _b64url_decode(signature_b64)
        signing_input = f"{header_b64}.{payload_b64}".encode("ascii")
    except (ValueError, UnicodeError, RecursionError):
        return None
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        return None
    expected = hmac.new(secret.encode("utf-8"), signing_input, hashlib.sha256).digest()
    if not hmac.compare_digest(expected, signature):
        return None
    try:
        payload = json.loads(_b64url_decode(payload_b64))
    except (ValueError, UnicodeError, RecursionError):
        return None
    if not isinstance(payload, dict):
        return None
    current = time.time() if now is None else now
    exp = payload.get("exp")
    if exp is not None and (not _is_number(exp) or current > float(exp) + leeway):
        return None
    nbf = payload.get("nbf")
    if nbf is not None and (not _is_number(nbf) or current + leeway < float(nbf)):
        return None
    return payload


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class Authenticator:
    """Decides whether a request may use a protected endpoint."""

    def __init__(self, token: str | None = None, jwt_secret: str | None = None) -> None:
        self.token = token or None
        self.jwt_secret = jwt_secret or None

    @property
    def enabled(self) -> bool:
        return self.token is not None or self.jwt_secret is not None

    def check(self, query_token: str | None, authorization: str | None) -> bool:
        """True when no auth is configured, or the token or a valid JWT is presented."""
        if not self.enabled:
            return True
        bearer = _bearer(authorization)
        if any(self.check_token(candidate) for candidate in (query_token, bearer)):
            return True
        return bool(
            self.jwt_secret is not None
            and bearer is not None
            and decode_jwt(bearer, self.jwt_secret) is not None
        )

    def check_token(self, candidate: str | None) -> bool:
        """Whether ``candidate`` is the shared token (constant-time); False without a token."""
        if self.token is None or candidate is None:
            return False
        try:
            given = candidate.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from a JSON body: not the token
            return False
        return hmac.compare_digest(self.token.encode("utf-8"), given)


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()
