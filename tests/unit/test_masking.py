"""URL masking for task arguments: passwords, bare user names, query and fragment values."""

from __future__ import annotations

import pytest

from captcha_tasks.masking import mask_credentials_in, mask_url, mask_url_values


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://u:pw@h/p?sid=1&x=2#t=3", "https://u:***@h/p?sid=***&x=***#t=***"),
        ("https://user@h/p", "https://***@h/p"),  # a user name alone is hidden too
        ("https://h/p?token", "https://h/p?***"),  # a bare item is a value
        ("https://h/p#section", "https://h/p#section"),  # an anchor, not pairs
        ("http://[::1", "http://[::1"),  # unreadable, and nothing to hide
        ("http://a:b@[::1", "http://a:***@[::1"),  # unreadable: its credentials still go
    ],
)
def test_mask_url_values_hides_what_task_arguments_may_carry(url: str, shown: str) -> None:
    assert mask_url_values(url) == shown


def test_mask_url_keeps_what_mask_url_values_hides() -> None:
    url = "https://user@h/p?sid=1"
    assert mask_url(url) == url  # only a password is masked there


def test_credentials_are_masked_with_or_without_a_scheme() -> None:
    text = "proxy u:s3cret@203.0.113.5:8080 and socks5://a:b@h:1080"
    assert mask_credentials_in(text) == "proxy u:***@203.0.113.5:8080 and socks5://a:***@h:1080"
