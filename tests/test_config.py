"""Config: defaults, SLUICE_* environment variables, a TOML file, precedence and errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluice.config import DEFAULT_DATABASE_URL, Settings, load_config
from sluice.errors import ConfigError


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No SLUICE_* variable from the caller's shell, and a working directory without a
    sluice.toml."""
    for name in list(os.environ):
        if name.upper().startswith("SLUICE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_toml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


TOML = """
project = "toml-project"
domain = "toml-domain"

[engine]
workers = 7
parallelism = 11

[resources]
quotas = { hive = 3 }

[plugins]
enabled = ["python", "shell"]
"""


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    settings = load_config()
    assert isinstance(settings, Settings)
    assert settings.database_url == DEFAULT_DATABASE_URL == "sqlite:///.sluice/sluice.db"
    assert (settings.project, settings.domain) == ("default", "development")
    assert settings.engine.workers == 16
    assert settings.engine.parallelism == 200
    assert settings.engine.max_plugin_phase_versions == 100_000
    assert settings.engine.scheduler_policy == "default"
    assert settings.plugins.enabled is None
    assert settings.plugins.default_for_task_types == {}
    assert settings.resources.url is None
    assert settings.resources.quotas == {}
    assert settings.resources.key_prefix == "sluice"
    assert settings.concurrency.catch_up == "latest"


def test_default_workers_is_at_least_two(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert load_config().engine.workers == 2
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert load_config().engine.workers == 2


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_DATABASE_URL", "postgresql://db.example/sluice")
    monkeypatch.setenv("SLUICE_PROJECT", "env-project")
    monkeypatch.setenv("SLUICE_ENGINE__WORKERS", "9")
    monkeypatch.setenv("SLUICE_ENGINE__RESYNC_INTERVAL", "2.5")
    monkeypatch.setenv("SLUICE_RESOURCES__QUOTAS", '{"hive": 4, "api/paid": 1}')
    monkeypatch.setenv("SLUICE_PLUGINS__ENABLED", '["python"]')
    monkeypatch.setenv("SLUICE_CONCURRENCY__MAX_PER_PROJECT", '{"etl": 3}')
    settings = load_config()
    assert settings.database_url == "postgresql://db.example/sluice"
    assert settings.project == "env-project"
    assert settings.engine.workers == 9
    assert settings.engine.resync_interval == 2.5
    assert settings.resources.quotas == {"hive": 4, "api/paid": 1}
    assert settings.plugins.enabled == ["python"]
    assert settings.concurrency.max_per_project == {"etl": 3}


def test_environment_variable_names_are_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("sluice_engine__parallelism", "33")
    assert load_config().engine.parallelism == 33


def test_toml_file_by_explicit_path(tmp_path: Path) -> None:
    path = write_toml(tmp_path / "custom.toml", TOML)
    settings = load_config(path)
    assert (settings.project, settings.domain) == ("toml-project", "toml-domain")
    assert (settings.engine.workers, settings.engine.parallelism) == (7, 11)
    assert settings.resources.quotas == {"hive": 3}
    assert settings.plugins.enabled == ["python", "shell"]
    assert load_config(str(path)).engine.workers == 7


def test_toml_file_named_by_sluice_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = write_toml(tmp_path / "elsewhere.toml", TOML)
    monkeypatch.setenv("SLUICE_CONFIG", str(path))
    assert load_config().engine.workers == 7


def test_sluice_toml_in_the_working_directory_is_read(tmp_path: Path) -> None:
    write_toml(tmp_path / "sluice.toml", TOML)
    assert load_config().project == "toml-project"


def test_explicit_path_wins_over_sluice_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLUICE_CONFIG", str(write_toml(tmp_path / "a.toml", 'project = "a"')))
    assert load_config(write_toml(tmp_path / "b.toml", 'project = "b"')).project == "b"


def test_precedence_overrides_then_env_then_toml_then_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = write_toml(tmp_path / "custom.toml", TOML)
    monkeypatch.setenv("SLUICE_PROJECT", "env-project")
    monkeypatch.setenv("SLUICE_DOMAIN", "env-domain")
    monkeypatch.setenv("SLUICE_ENGINE__WORKERS", "9")
    settings = load_config(path, project="override-project")
    assert settings.project == "override-project"  # override > env > toml
    assert settings.domain == "env-domain"  # env > toml
    assert settings.engine.workers == 9  # env > toml
    assert settings.engine.parallelism == 11  # toml > default
    assert settings.engine.resync_interval == 10.0  # default
    nested = load_config(path, engine={"workers": 3})
    assert nested.engine.workers == 3  # a nested override wins over env and toml...
    assert nested.engine.parallelism == 11  # ...and keeps the other keys of the section


def test_env_dict_merges_with_toml_dict(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = write_toml(tmp_path / "custom.toml", TOML)
    monkeypatch.setenv("SLUICE_RESOURCES__QUOTAS", '{"api": 2}')
    assert load_config(path).resources.quotas == {"hive": 3, "api": 2}


@pytest.mark.parametrize(
    ("env_name", "value", "key"),
    [
        ("SLUICE_ENGINE__WORKERS", "zero", "engine.workers"),
        ("SLUICE_ENGINE__WORKERS", "0", "engine.workers"),
        ("SLUICE_ENGINE__WORKERS", "100000", "engine.workers"),
        ("SLUICE_ENGINE__RESYNC_INTERVAL", "-1", "engine.resync_interval"),
        ("SLUICE_ENGINE__SCHEDULER_POLICY", "random", "engine.scheduler_policy"),
        ("SLUICE_CONCURRENCY__CATCH_UP", "everything", "concurrency.catch_up"),
        ("SLUICE_RESOURCES__MAX_QUOTA", "0", "resources.max_quota"),
    ],
)
def test_bad_env_value_names_key_env_var_and_value(
    monkeypatch: pytest.MonkeyPatch, env_name: str, value: str, key: str
) -> None:
    monkeypatch.setenv(env_name, value)
    with pytest.raises(ConfigError) as caught:
        load_config()
    message = str(caught.value)
    assert key in message
    assert env_name in message
    assert repr(value) in message


def test_bad_value_inside_a_json_dict_names_the_item(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_RESOURCES__QUOTAS", '{"hive": "many"}')
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert "resources.quotas.hive" in str(caught.value)
    assert "'many'" in str(caught.value)


def test_malformed_json_in_env_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_RESOURCES__QUOTAS", "{hive: 3")
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert "SLUICE_RESOURCES__QUOTAS" in str(caught.value)
    assert "{hive: 3" in str(caught.value)


def test_bad_toml_value_names_key_and_value(tmp_path: Path) -> None:
    path = write_toml(tmp_path / "bad.toml", "[engine]\nworkers = -3\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "engine.workers" in str(caught.value)
    assert "-3" in str(caught.value)


def test_bad_override_names_key_and_value() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(engine={"parallelism": "lots"})
    assert "engine.parallelism" in str(caught.value)
    assert "'lots'" in str(caught.value)


def test_every_bad_key_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_ENGINE__WORKERS", "0")
    monkeypatch.setenv("SLUICE_ENGINE__PARALLELISM", "none")
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert "SLUICE_ENGINE__WORKERS" in str(caught.value)
    assert "SLUICE_ENGINE__PARALLELISM" in str(caught.value)


def test_unknown_nested_env_key_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_ENGINE__WROKERS", "4")
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert "engine.wrokers" in str(caught.value).lower()
    assert "unknown key" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [("colour = 'blue'\n", "colour"), ("[engine]\nwrokers = 4\n", "engine.wrokers")],
)
def test_unknown_toml_key_is_an_error(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_toml(tmp_path / "unknown.toml", text))
    assert key in str(caught.value)
    assert "unknown key" in str(caught.value)


def test_unknown_override_is_an_error() -> None:
    with pytest.raises(ConfigError, match="colour"):
        load_config(colour="blue")


def test_missing_config_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "sluice.toml"
    with pytest.raises(ConfigError) as caught:
        load_config(missing)
    assert str(missing) in str(caught.value)


def test_missing_file_named_by_sluice_config_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLUICE_CONFIG", str(tmp_path / "gone.toml"))
    with pytest.raises(ConfigError, match=r"gone\.toml"):
        load_config()


def test_malformed_toml_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    path = write_toml(tmp_path / "broken.toml", "[engine\nworkers = 2\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "broken.toml" in str(caught.value)


def test_config_error_is_a_sluice_error() -> None:
    from sluice.errors import SluiceError

    with pytest.raises(SluiceError):
        load_config(engine={"workers": 0})


def test_each_call_reads_its_own_file(tmp_path: Path) -> None:
    """The TOML file is chosen per call: loading one file does not leak into the next call."""
    first = load_config(write_toml(tmp_path / "one.toml", 'project = "one"'))
    second = load_config()
    assert (first.project, second.project) == ("one", "default")


@pytest.mark.parametrize(
    ("overrides", "key", "shown"),
    [
        ({"resources": {"lock_rules": {"db/*": 0}}}, "resources.lock_rules.db/*", "0"),
        ({"resources": {"lock_rules": {"db/*": -2}}}, "resources.lock_rules.db/*", "-2"),
        ({"resources": {"lock_rules": {"db/*": 5000}}}, "resources.lock_rules", "5000"),
        ({"resources": {"quotas": {"hive": 0}}}, "resources.quotas.hive", "0"),
        ({"resources": {"quotas": {"hive": 10**30}}}, "resources.quotas", str(10**30)),
        ({"resources": {"quotas": {"bad name": 1}}}, "resources.quotas", "'bad name'"),
        ({"resources": {"lease": float("nan")}}, "resources.lease", "nan"),
        ({"resources": {"lease": float("inf")}}, "resources.lease", "inf"),
        ({"engine": {"resync_interval": float("inf")}}, "engine.resync_interval", "inf"),
        ({"engine": {"backoff_max": float("nan")}}, "engine.backoff_max", "nan"),
        ({"engine": {"parallelism": 10**30}}, "engine.parallelism", str(10**30)),
        ({"cache": {"max_reservation_heartbeat": float("nan")}}, "cache.max_reserv", "nan"),
        ({"concurrency": {"max_per_project": {"p": 0}}}, "concurrency.max_per_project.p", "0"),
        ({"concurrency": {"max_per_domain": {"p/d": -1}}}, "concurrency.max_per_domain", "-1"),
        ({"concurrency": {"catch_up_max": 10**30}}, "concurrency.catch_up_max", str(10**30)),
        ({"project": "a/b"}, "project", "'a/b'"),
        ({"domain": "x:y"}, "domain", "'x:y'"),
        ({"project": "p" * 5000}, "project", "5000 characters"),
        ({"logs": {"segment_bytes": 10}}, "logs.segment_bytes", "10"),
        ({"logs": {"max_bytes_per_attempt": 1024 * 1024}}, "logs.segment_bytes", "1048576"),
        ({"logs": {"flush_interval": 0}}, "logs.flush_interval", "0"),
        ({"logs": {"enabled": "maybe"}}, "logs.enabled", "'maybe'"),
    ],
)
def test_values_that_could_never_work_are_refused_naming_key_and_value(
    overrides: dict[str, object], key: str, shown: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(**overrides)
    message = str(caught.value)
    assert key in message and shown in message, message
    assert "pydantic" not in message and "\n" not in message, message


def test_lock_rules_and_caps_within_range_are_accepted() -> None:
    settings = load_config(
        resources={"lock_rules": {"db/partition/*": 1, "api/*": 4}},
        concurrency={"max_per_domain": {"p/d": 2}},
    )
    assert settings.resources.lock_rules == {"db/partition/*": 1, "api/*": 4}


def test_logs_section_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_LOGS__URL", "memory://logs")
    monkeypatch.setenv("SLUICE_LOGS__MAX_BYTES_PER_ATTEMPT", "4194304")
    logs = load_config().logs
    assert (logs.url, logs.max_bytes_per_attempt, logs.segment_bytes) == (
        "memory://logs",
        4 * 1024 * 1024,
        1024 * 1024,
    )
