import base64
import time

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from orchestrator.events.attempt import secret_key, signature, webhook_headers

SECRET = "whsec_" + base64.b64encode(b"a test key of thirty-two bytes!!").decode()


def test_known_vector_from_the_standard_webhooks_test_suite() -> None:
    key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    assert key is not None
    sig = signature(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert sig == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_headers_verify_with_the_reference_library() -> None:
    key = secret_key(SECRET)
    assert key is not None
    body = '{"id":"e1","data":{"name":"caf\u00e9"}}'.encode()
    headers = webhook_headers(key, "e1", int(time.time()), body)
    assert Webhook(SECRET).verify(body, headers) == {"id": "e1", "data": {"name": "caf\u00e9"}}


def test_signature_covers_the_exact_bytes() -> None:
    key = secret_key(SECRET)
    assert key is not None
    body = b'{"a":1}'
    headers = webhook_headers(key, "e1", int(time.time()), body)
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(b'{"a": 1}', headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(body, {**headers, "webhook-id": "e2"})


def test_unpadded_secret_is_accepted() -> None:
    raw = base64.b64encode(b"12345").decode().rstrip("=")
    assert secret_key("whsec_" + raw) == b"12345"


@pytest.mark.parametrize("secret", ["", "plain-shared-secret", "WHSEC_abc"])
def test_secrets_without_the_whsec_prefix_mean_unsigned(secret: str) -> None:
    assert secret_key(secret) is None


@pytest.mark.parametrize("secret", ["whsec_", "whsec_not base64!", "whsec_@@@@"])
def test_broken_whsec_secret_is_an_error(secret: str) -> None:
    with pytest.raises(ValueError, match="whsec_"):
        secret_key(secret)


def test_without_a_key_the_id_and_timestamp_still_go_out() -> None:
    assert webhook_headers(None, "e1", 1700000000, b"{}") == {
        "webhook-id": "e1",
        "webhook-timestamp": "1700000000",
    }
