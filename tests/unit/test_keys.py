"""Per-provider keys: the provider ``default`` keeps keys without a name, so a rolling
deploy mixing versions shares one budget and one learned limit; others get their own."""

from __future__ import annotations

from captcha_tasks.state.keys import BREAKER_TTL, Keys


def test_the_default_provider_uses_todays_budget_and_limit_keys() -> None:
    keys = Keys("ct:")
    assert keys.provider_budget("default") == keys.budget == "ct:solve:budget"
    assert keys.provider_limit_of("default") == keys.provider_limit == "ct:solve:provider_limit"
    assert keys.due_of("default") == keys.due == "ct:solve:due"


def test_named_providers_get_keys_of_their_own() -> None:
    keys = Keys("app:")
    assert keys.provider_budget("main") == "app:solve:budget:main"
    assert keys.provider_limit_of("main") == "app:solve:provider_limit:main"
    assert keys.breaker("main") == "app:provider:main:breaker"
    assert keys.due_of("main") == "app:solve:due:main"
    names = ["default", "main", "backup", "main_2"]
    every = [
        f(n)
        for n in names
        for f in (keys.provider_budget, keys.provider_limit_of, keys.breaker, keys.due_of)
    ]
    assert len(set(every)) == len(every)  # no two providers share a key
    assert BREAKER_TTL >= 3600  # outlives any cool-down
