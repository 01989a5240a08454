"""The config file: defaults, overrides, and a clear message (file and line) when broken."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bbm_tui.core.config import Config, ConfigError, config_path, load_config, tasks_folder


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "none.toml")
    assert config.model == "replay/bbm" and config.api_base is None and config.mode == "chat"


def test_env_points_at_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BBM_TUI_CONFIG", str(tmp_path / "c.toml"))
    assert config_path() == tmp_path / "c.toml"


def test_full_file_and_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, 'model = "openai/gpt-4o-mini"\napi_base = "http://h/v1"\n'
                 'mode = "completion"\nstep_limit = 40\nmax_tokens = 300\nlogprobs = true\n'
                 'timeout = 300\n[keymap]\nstep = "n,space"\n')
    config = load_config(path)
    assert config == Config("openai/gpt-4o-mini", "http://h/v1", "completion", 40, 300, True,
                            300.0, {"step": "n,space"}, path)
    assert config.stepper_settings().call.timeout_s == 300.0
    finder = config.finder_settings()
    assert (finder.temperature, finder.timeout_s, finder.logprobs) == (0.0, 300.0, False)
    settings = config.stepper_settings()
    assert (settings.step_limit, settings.call.max_tokens, settings.call.logprobs) == (40, 300,
                                                                                      True)
    assert config.stepper_settings(7).step_limit == 7
    assert settings.call.temperature == 0.0  # the paper's, unless the file says otherwise
    warm = load_config(write(tmp_path, "temperature = 0.7\n"))
    assert warm.temperature == 0.7 and warm.stepper_settings().call.temperature == 0.7
    overridden = config.with_overrides(model="replay/bbm", api_base="", mode=None)
    assert overridden.model == "replay/bbm" and overridden.api_base is None
    assert overridden.mode == "completion"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('model = "x"\nmode = chat\n', "line 2, column 8: invalid TOML"),
        ('mode = "stream"\n', "line 1: 'mode' must be one of chat, completion"),
        ("model = 3\n", "line 1: 'model' must be a string"),
        ('model = ""\n', "'model' must not be empty"),
        ("step_limit = 0\n", "line 1: 'step_limit' must be a whole number"),
        ("max_tokens = true\n", "'max_tokens' must be a whole number"),
        ('colour = "red"\n', "line 1: unknown setting 'colour'"),
        ('\napi_key = "sk-123"\n', "line 2: 'api_key': API keys do not belong in the config"),
        ("keymap = 3\n", "[keymap] must map binding ids"),
        ('logprobs = "yes"\n', "line 1: 'logprobs' must be true or false"),
        ("timeout = 0\n", "line 1: 'timeout' must be a number of seconds above 0"),
        ('timeout = "60"\n', "'timeout' must be a number of seconds above 0"),
        ("temperature = 2.5\n", "line 1: 'temperature' must be a number from 0 to 2"),
        ("temperature = -1\n", "line 1: 'temperature' must be a number from 0 to 2"),
        ('temperature = "hot"\n', "'temperature' must be a number from 0 to 2"),
    ],
)
def test_broken_files_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert message in str(raised.value)
    assert path.read_text(encoding="utf-8") == text


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b'model = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_router_and_one_call(tmp_path: Path) -> None:
    """`router` names a litellm Router file (relative: beside the config file; `~`: home);
    `one_call` turns one call for many steps on; both reach the model and the stepper."""
    path = tmp_path / "config.toml"
    path.write_text('model = "llama"\nrouter = "servers.yaml"\none_call = true\n')
    config = load_config(path)
    assert config.router == str(tmp_path / "servers.yaml")
    assert config.model_spec().router == config.router
    assert config.model_spec().model == "llama"
    assert config.stepper_settings().one_call is True
    assert Config().stepper_settings().one_call is False  # never the default
    assert config.with_overrides(router="").router is None
    assert config.with_overrides(router="other.yaml").model_spec().router == "other.yaml"
    path.write_text('router = "~/servers.yaml"\n')
    assert load_config(path).router == str(Path.home() / "servers.yaml")
    path.write_text("one_call = 1\n")
    with pytest.raises(ConfigError, match=r"line 1.*'one_call' must be true or false"):
        load_config(path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG is Linux's convention")
def test_the_config_and_tasks_folder_follow_xdg_config_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without BBM_TUI_CONFIG, config.toml and tasks/ are under $XDG_CONFIG_HOME when it is
    set (platformdirs), as the docs say; ~/.config only when it is not."""
    monkeypatch.delenv("BBM_TUI_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_path() == tmp_path / "xdg" / "bbm-tui" / "config.toml"
    assert tasks_folder() == tmp_path / "xdg" / "bbm-tui" / "tasks"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert tasks_folder() == tmp_path / "home" / ".config" / "bbm-tui" / "tasks"
