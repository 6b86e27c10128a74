"""``fetch_page`` through a page behind ALTCHA: the demo site's widget, its challenge made
and its payload judged by the official ``altcha`` library; solved on the worker, no
provider called, the form posted fresh as the visitor that loaded it."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks.worker.page_tasks import fetch_page
from tests.integration.test_acceptance import _env

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("isolated", [True, False], ids=["isolated", "shared"])
def test_fetch_page_passes_altcha_v2_v1_and_inline_challenges_on_the_worker(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any, isolated: bool
) -> None:
    worker_factory(_env(demo_sandbox), concurrency=2)
    demo = demo_sandbox.demo_url
    for n, variant in enumerate(("", "&altcha=v1", "&altcha=inline")):
        demo_sandbox.demo.reset()
        page = fetch_page.delay(f"{demo}/page/{n}?widget=altcha{variant}", isolated=isolated)
        result = page.get(timeout=60)
        assert (result["status"], result["solved"], result["attempts"]) == (200, True, 1)
        site = demo_sandbox.demo.stats()
        assert (site["tokens_accepted"], site["tokens_rejected"], site["stale_forms"]) == (1, 0, 0)
        assert site["pages_served"] == 1
        assert site["altcha_challenges"] == 1  # the worker fetched the challenge once
        if not isolated:
            demo_sandbox.demo.reset()
            break  # the validation cookie opens every later page of the host
    assert demo_sandbox.stats()["submitted"] == 0  # no provider was asked
