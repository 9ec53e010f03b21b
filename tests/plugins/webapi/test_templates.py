"""Templates over task inputs, dotted fields of responses, and Retry-After."""

from __future__ import annotations

import email.utils

import pytest

from sluice.plugins.webapi.templates import (
    TemplateError,
    json_placeholders,
    lookup_in,
    placeholders,
    read_field,
    render,
    render_json,
    retry_after,
)

VALUES = {"name": "a b/c", "n": 3, "flag": True, "items": [1, 2]}
LOOKUP = lookup_in(VALUES, "the task inputs")


def test_render_fills_quotes_for_urls_and_keeps_escaped_braces() -> None:
    assert render("{name}-{n}", LOOKUP) == "a b/c-3"
    assert render("http://h/{name}/{n}", LOOKUP, url=True) == "http://h/a%20b%2Fc/3"
    assert render("{{literal}} {flag}", LOOKUP) == "{literal} true"


def test_a_lone_placeholder_keeps_the_json_type() -> None:
    body = {"count": "{n}", "list": "{items}", "text": "n={n}", "nested": [{"f": "{flag}"}], "k": 1}
    assert render_json(body, LOOKUP) == {
        "count": 3,
        "list": [1, 2],
        "text": "n=3",
        "nested": [{"f": True}],
        "k": 1,
    }
    assert json_placeholders(body) == {"n", "items", "flag"}


def test_missing_and_malformed_placeholders_are_named() -> None:
    with pytest.raises(TemplateError, match="the task inputs has no value 'nope'"):
        render("{nope}", LOOKUP)
    with pytest.raises(TemplateError, match="bad placeholder"):
        placeholders("{not valid}")
    assert placeholders("Bearer {secret:API_TOKEN}") == {"secret:API_TOKEN"}


def test_read_field_follows_dotted_paths() -> None:
    data = {"a": {"b": [{"c": 5}]}}
    assert read_field(data, "a.b.0.c") == 5
    with pytest.raises(KeyError):
        read_field(data, "a.b.1.c")
    with pytest.raises(KeyError):
        read_field(data, "a.x")


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = 1_700_000_000.0
    assert retry_after("7", now) == 7.0
    assert retry_after(email.utils.formatdate(now + 30, usegmt=True), now) == 30.0
    assert retry_after(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0
    assert retry_after(None, now) is None
    assert retry_after("soon", now) is None
