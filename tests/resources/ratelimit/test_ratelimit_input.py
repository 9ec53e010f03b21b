"""Bad rate limits, claims and key templates are refused before anything is written, with a
message naming the value."""

from __future__ import annotations

import pytest

import sluice
from sluice.config import load_config
from sluice.errors import ConfigError, DefinitionError, InvalidArgumentError, InvalidRateLimitError
from sluice.resources.backends.ratelimit_memory import MemoryRateLimits
from sluice.resources.ratelimit import RateClaim, RateLimitRule, RateLimits


@pytest.mark.parametrize(
    ("rate", "named"),
    [
        ("0/min", "'0/min': the count must be at least 1"),
        ("5/fortnight", "unknown period 'fortnight'"),
        ("100 per minute", "'100 per minute' is not COUNT/PERIOD"),
        ("10/min, burst 11", "burst must be an int from 1 to the count (10), got 11"),
        ("-3/s", "'-3/s' is not COUNT/PERIOD"),
    ],
)
def test_a_bad_rate_names_itself(rate: str, named: str) -> None:
    with pytest.raises(InvalidRateLimitError) as caught:
        RateLimitRule.parse(rate)
    assert named in str(caught.value)


def test_the_parsed_rule_keeps_every_window_within_the_count() -> None:
    assert RateLimitRule.parse("100/min") == RateLimitRule("100/min", 0.6, 1)
    burst = RateLimitRule.parse("100/min", burst=10)
    assert (burst.rate, burst.burst) == ("100/min, burst 10", 10)
    assert burst.interval == pytest.approx(60 / 91)  # 10 at once, then 91 a minute
    assert RateLimitRule.parse("2/hours").interval == 1800
    with pytest.raises(InvalidRateLimitError, match="burst 3 but burst 4"):
        RateLimitRule.parse("10/s, burst 3", burst=4)


def test_a_bad_configured_rate_names_the_key_and_the_value() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(resources={"rate_limits": {"openai": "5/fortnight"}})
    assert "resources.rate_limits" in str(caught.value)
    assert "'fortnight'" in str(caught.value)
    with pytest.raises(ConfigError, match="'open ai'"):
        load_config(resources={"rate_limits": {"open ai": "5/s"}})


def test_a_key_template_naming_an_unknown_input_is_refused_at_definition() -> None:
    with pytest.raises(DefinitionError) as caught:

        @sluice.task(rate_limits=[sluice.RateLimit("openai", key="{client}")])
        def call(customer: str) -> None: ...

    assert "'{client}'" in str(caught.value) and "'client' is not an input" in str(caught.value)
    with pytest.raises(DefinitionError, match="rate_limits must be RateLimit"):

        @sluice.task(rate_limits=sluice.RateLimit("openai"))  # type: ignore[arg-type]
        def bare(customer: str) -> None: ...


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"name": "open ai"}, "'open ai'"),
        ({"name": "openai", "units": 0}, "got 0"),
        ({"name": "openai", "units": True}, "got True"),
        ({"name": "openai", "key": 7}, "got 7"),
    ],
)
def test_a_bad_rate_limit_claim_names_the_value(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidRateLimitError, match=named):
        sluice.RateLimit(**kwargs)  # type: ignore[arg-type]


async def test_bad_admissions_are_refused_before_asking_the_store() -> None:
    limits = RateLimits(MemoryRateLimits(), config_rules={"a": RateLimitRule.parse("1/s")})
    async with limits:
        with pytest.raises(InvalidArgumentError, match="'a/k' is claimed twice"):
            await limits.admit([RateClaim("a", "k"), RateClaim("a", "k")], "t")
        with pytest.raises(InvalidArgumentError, match="token"):
            await limits.admit([RateClaim("a")], "")
        with pytest.raises(InvalidArgumentError, match="control characters"):
            await limits.admit([RateClaim("a", "bad\nkey")], "t")
        assert await limits.describe("a") != [] and (await limits.describe("a"))[0].keys == ()
