"""`bbm-tui serve` over real HTTP (issue 37): a real server process on 127.0.0.1, the users
file made by `bbm-tui users add`, the sign-in, its cookie and its refusals, what is served
and what is not, and the app each browser gets, driven over the page's WebSocket protocol.
(The same in a real browser: tests/test_serve_browser.py.)"""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from bbm_tui.serve.signin import FIRST_DELAY_S, Sessions, Throttle
from bbm_tui.serve.users import (
    Role,
    add_user,
    check_sign_in,
    load_users,
    password_matches,
)
from tests.serve_helpers import (
    PASSWORDS,
    AppClient,
    add_users,
    screen_text,
    serving,
    word_sorting_file,
)


def test_users_add_keeps_only_a_salted_hash_in_a_private_file(tmp_path: Path) -> None:
    users = tmp_path / "team" / "users.json"
    add_users(users, ("alice", "lee"))
    text = users.read_text()
    assert PASSWORDS["alice"] not in text and PASSWORDS["lee"] not in text
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    found = load_users(users)
    assert {name: user.role for name, user in found.items()} == {
        "alice": Role.ANNOTATOR, "lee": Role.LEAD}
    assert found["alice"].password_hash.startswith("scrypt$")
    assert check_sign_in(found, "alice", PASSWORDS["alice"]) == found["alice"]
    assert check_sign_in(found, "alice", PASSWORDS["lee"]) is None
    assert check_sign_in(found, "nobody", PASSWORDS["alice"]) is None
    # Salted: the same password twice gives two hashes.
    again = add_user(tmp_path / "other.json", "bob", Role.ANNOTATOR, PASSWORDS["alice"])
    assert again.password_hash != found["alice"].password_hash
    assert password_matches(PASSWORDS["alice"], again.password_hash)


def test_users_add_refuses_a_name_the_store_keeps_and_a_bad_file(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    refused = subprocess.run(
        [sys.executable, "-m", "bbm_tui", "users", "add", "(adjudicated)", "--role", "lead",
         "--users", str(users)], input="pw\n", text=True, capture_output=True)
    assert refused.returncode != 0 and "keeps for itself" in refused.stderr
    assert not users.exists()
    users.write_text("{not json")
    broken = subprocess.run(
        [sys.executable, "-m", "bbm_tui", "users", "add", "alice", "--role", "annotator",
         "--users", str(users)], input="pw\n", text=True, capture_output=True)
    assert broken.returncode != 0 and "not a bbm-tui users file" in broken.stderr
    assert "Traceback" not in broken.stderr
    assert users.read_text() == "{not json"  # a bad file is never overwritten


def test_the_throttle_doubles_the_wait_and_forgets_a_success() -> None:
    now = [100.0]
    throttle = Throttle(clock=lambda: now[0])
    assert throttle.wait_left("name:alice") == 0
    throttle.failed("name:alice", "address:1.2.3.4")
    assert throttle.wait_left("name:alice") == FIRST_DELAY_S
    throttle.failed("name:alice")
    assert throttle.wait_left("name:alice") == 2 * FIRST_DELAY_S
    assert throttle.wait_left("address:1.2.3.4") == FIRST_DELAY_S
    now[0] += 2 * FIRST_DELAY_S
    assert throttle.wait_left("name:alice", "address:1.2.3.4") == 0
    throttle.succeeded("name:alice")
    assert throttle.wait_left("name:alice") == 0


def test_sessions_end_and_go_stale() -> None:
    now = [0.0]
    sessions = Sessions(clock=lambda: now[0])
    token = sessions.start("alice", Role.ANNOTATOR)
    found = sessions.find(token)
    assert found is not None and found.name == "alice"
    assert sessions.find("forged") is None and sessions.find(None) is None
    now[0] += 13 * 3600
    assert sessions.find(token) is None
    token = sessions.start("alice", Role.ANNOTATOR)
    sessions.end(token)
    assert sessions.find(token) is None


@pytest.fixture
def team(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    users = tmp_path / "users.json"
    add_users(users)
    return word_sorting_file(data), users


async def _get(http: aiohttp.ClientSession, url: str, **kwargs) -> aiohttp.ClientResponse:
    response = await http.get(url, allow_redirects=False, **kwargs)
    await response.read()
    return response


def test_sign_in_sessions_and_refusals_over_http(tmp_path: Path, team) -> None:
    """Nobody reaches a page or an app without signing in; a wrong password is logged and
    slowed, and a second try at once is refused unchecked; the cookie is HttpOnly and
    SameSite=Strict, Secure when a trusted proxy says the browser came over HTTPS; a forged
    cookie and another site's post get nothing; sign-out ends the session."""
    data, users = team

    async def scenario(url: str) -> None:
        forged_cookie = {"Cookie": "bbm_session=forged-token"}
        async with aiohttp.ClientSession(headers=forged_cookie) as forged:
            assert (await _get(forged, f"{url}/")).headers["Location"] == "/login"
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await forged.ws_connect(f"{url.replace('http', 'ws')}/ws")
            assert refused.value.status == 403
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            other_site = await http.post(f"{url}/login", allow_redirects=False,
                                         headers={"Origin": "https://evil.example"},
                                         data={"name": "bob", "password": PASSWORDS["bob"]})
            assert other_site.status == 403
            signed = await http.post(f"{url}/login", allow_redirects=False,
                                     data={"name": "bob", "password": PASSWORDS["bob"]})
            assert signed.status == 303
            cookie = signed.headers["Set-Cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            assert "Secure" not in cookie
            page = await _get(http, f"{url}/")
            html = await page.text()
            assert page.status == 200 and "bob" in html and "/static/textual.js" in html
            assert "googleapis" not in html and "https://" not in html
            assert "default-src 'none'" in page.headers["Content-Security-Policy"]
            assert (await http.post(f"{url}/logout", allow_redirects=False)).status == 303
            assert (await _get(http, f"{url}/")).headers["Location"] == "/login"
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            proxied = await http.post(f"{url}/login", allow_redirects=False,
                                      headers={"X-Forwarded-Proto": "https"},
                                      data={"name": "bob", "password": PASSWORDS["bob"]})
            assert "Secure" in proxied.headers["Set-Cookie"]
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            # Last: the failures slow down every sign-in from this address for a while.
            start = time.monotonic()
            wrong = await http.post(f"{url}/login", allow_redirects=False,
                                    data={"name": "alice", "password": "guess"})
            assert wrong.status == 401 and "Wrong name or password" in await wrong.text()
            assert time.monotonic() - start >= FIRST_DELAY_S
            await http.post(f"{url}/login", data={"name": "alice", "password": "guess 2"})
            again = await http.post(f"{url}/login", allow_redirects=False,
                                    data={"name": "alice", "password": PASSWORDS["alice"]})
            assert again.status == 429 and "bbm_session" not in again.cookies

    with serving(tmp_path, [data], users) as served:
        asyncio.run(scenario(served.url))
    log = served.log.read_text()
    assert "failed sign-in: name 'alice' from 127.0.0.1" in log
    assert "sign-in refused (too many failures): name 'alice'" in log
    assert PASSWORDS["alice"] not in log and "guess" not in log


def test_only_the_pages_and_their_assets_are_served(tmp_path: Path, team) -> None:
    data, users = team

    async def scenario(url: str) -> None:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            for name in ("textual.js", "xterm.css", "bbm.css", "favicon.svg",
                         "roboto-mono.ttf"):
                assert (await _get(http, f"{url}/static/{name}")).status == 200, name
            for path in ("/static/", "/static/js/textual.js", "/static/%2e%2e/users.json",
                         "/users.json", f"/{data.name}", "/download/x", "/static/images/"
                         "background.png", "/sessions.sqlite3"):
                assert (await _get(http, url + path)).status == 404, path
            login = await (await _get(http, f"{url}/login")).text()
            assert 'name="name"' in login and 'name="password"' in login
            assert 'action="/login"' in login and "favicon.svg" in login
            assert "googleapis" not in login

    with serving(tmp_path, [data], users) as served:
        asyncio.run(scenario(served.url))


def test_trusting_no_proxy_ignores_forwarded_https(tmp_path: Path, team) -> None:
    data, users = team

    async def scenario(url: str) -> None:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            signed = await http.post(f"{url}/login", allow_redirects=False,
                                     headers={"X-Forwarded-Proto": "https"},
                                     data={"name": "bob", "password": PASSWORDS["bob"]})
            assert signed.status == 303 and "Secure" not in signed.headers["Set-Cookie"]

    with serving(tmp_path, [data], users, ("--trusted-proxy", "10.9.9.9")) as served:
        asyncio.run(scenario(served.url))


def test_each_browser_gets_its_users_app(tmp_path: Path, team) -> None:
    """An annotator's app is their queue under their name (from the sign-in, through the
    app process's environment), and keys label into the store under it. A lead's app is the
    agreement with everyone's progress. (What else the served app refuses:
    tests/ui/test_ui_served.py.)"""
    data, users = team

    async def scenario(url: str) -> None:
        alice = await AppClient.open(url, "alice")
        try:
            await alice.wait_for("Judge Thought 1")
            assert "alice" in screen_text(alice.seen)
            await alice.press("x")
            await alice.press("\r")
            await alice.wait_for("1 / 6 done")
        finally:
            await alice.close()
        lee = await AppClient.open(url, "lee")
        try:
            await lee.wait_for("Progress")
            await lee.wait_for("alice", fresh=False)
        finally:
            await lee.close()

    with serving(tmp_path, [data], users) as served:
        asyncio.run(scenario(served.url))
    from bbm_tui.core.store import Store

    with Store.open() as store:
        labels = [label for label in store.annotator_labels()]
    assert [(label.annotator, label.mistake_index) for label in labels] == [("alice", 0)]


def test_serve_refuses_bad_files_and_no_users_before_serving(tmp_path: Path) -> None:
    data = tmp_path / "word_sorting.jsonl"
    data.write_text('{"input": "x"\n')
    bad = subprocess.run([sys.executable, "-m", "bbm_tui", "serve", "--annotate", str(data),
                          "--users", str(tmp_path / "users.json")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and f"{data}:" in bad.stderr and "malformed JSON" in bad.stderr
    assert "Traceback" not in bad.stderr
    good = word_sorting_file(tmp_path)
    none = subprocess.run([sys.executable, "-m", "bbm_tui", "serve", "--annotate", str(good),
                           "--users", str(tmp_path / "users.json")],
                          capture_output=True, text=True, timeout=60)
    assert none.returncode != 0 and "bbm-tui users add" in none.stderr


def test_served_app_refuses_to_start_without_a_user_from_the_front(tmp_path: Path) -> None:
    good = word_sorting_file(tmp_path)
    started = subprocess.run([sys.executable, "-m", "bbm_tui", "served-app", str(good)],
                             capture_output=True, text=True, timeout=60)
    assert started.returncode != 0 and "started by `bbm-tui serve`" in started.stderr


def test_the_users_file_is_json_with_no_password(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    add_user(users, "alice", Role.ANNOTATOR, "correct horse")
    data = json.loads(users.read_text())
    assert data["version"] == 1 and set(data["users"]["alice"]) == {"role", "hash"}


def test_an_app_process_gets_its_user_and_none_of_the_servers_keys(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from textual_serve.download_manager import DownloadManager

    from bbm_tui.serve import ROLE_ENV, USER_ENV
    from bbm_tui.serve.front import UserAppService
    from bbm_tui.serve.signin import SignedIn

    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "server-secret")
    monkeypatch.setenv(USER_ENV, "mallory")  # whatever the server had, the user's wins

    async def nothing(*_args: object) -> None:
        return None

    service = UserAppService("true", SignedIn("alice", Role.ANNOTATOR, 0.0),
                             write_bytes=nothing, write_str=nothing, close=nothing,
                             download_manager=DownloadManager())
    environment = service._build_environment(80, 24)
    assert environment[USER_ENV] == "alice" and environment[ROLE_ENV] == "annotator"
    assert "OPENAI_API_KEY" not in environment and "AWS_SECRET_ACCESS_KEY" not in environment
    assert "sk-server-key" not in environment.values()
    assert environment["TEXTUAL_DRIVER"].endswith("WebDriver")


def _all_ended(pids: list[int], within_s: float = 20.0) -> bool:
    """Whether every process has ended within `within_s` (an app process ends a moment after
    the server under it stops: on a loaded machine, not at once). One that has ended but not
    been reaped yet (a zombie: its parent, the server, is gone) has ended."""
    deadline = time.monotonic() + within_s
    while any(_running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _running(pid: int) -> bool:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rsplit(")", 1)[1].split()[0] != "Z"


def _app_pids(server_pid: int) -> list[int]:
    """The app processes (`served-app`) under a server process, from /proc."""
    children: dict[int, list[int]] = {}
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(status.parent.name))
    found, todo = [], [server_pid]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                if b"served-app" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(child)
            except OSError:
                pass
    return found


def test_the_server_restarted_each_annotator_resumes_at_their_next_trace(
        tmp_path: Path, team) -> None:
    """Labels given, the server stopped under an open app (its process ends with it) and
    started again: each annotator signs in again and goes on at their own next trace."""
    data, users = team
    apps: list[int] = []

    async def label_two(url: str, server_pid: int) -> None:
        for name, keys in (("alice", ("x", "\r", "x", "\r")), ("bob", ("x", "\r"))):
            client = await AppClient.open(url, name)
            await client.wait_for("Judge Thought 1")
            for key in keys:
                await client.press(key)
            await client.wait_for(f"{len(keys) // 2} / 6 done")
            if name == "bob":  # left open: the server stops under it
                apps.extend(_app_pids(server_pid))
                return
            await client.close()

    async def resume(url: str) -> None:
        for name, trace, done in (("alice", 3, 2), ("bob", 2, 1)):
            client = await AppClient.open(url, name)
            try:
                await client.wait_for(f"word_sorting.jsonl:{trace}")
                await client.wait_for(f"{done} / 6 done", fresh=False)
            finally:
                await client.close()

    with serving(tmp_path, [data], users) as served:
        asyncio.run(label_two(served.url, served.process.pid))
    assert apps and _all_ended(apps)
    with serving(tmp_path, [data], users) as served:
        asyncio.run(resume(served.url))
    from bbm_tui.core.store import Store

    with Store.open() as store:
        assert sorted(label.annotator for label in store.annotator_labels()) == [
            "alice", "alice", "bob"]


def test_a_user_taken_out_of_the_file_gets_no_new_app(tmp_path: Path, team) -> None:
    data, users = team

    async def scenario(url: str) -> None:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            signed = await http.post(f"{url}/login", allow_redirects=False,
                                     data={"name": "bob", "password": PASSWORDS["bob"]})
            assert signed.status == 303
            kept = {name: user for name, user in load_users(users).items() if name != "bob"}
            from bbm_tui.serve.users import save_users

            save_users(users, kept)
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(f"{url.replace('http', 'ws')}/ws")
            assert refused.value.status == 403
            assert (await _get(http, f"{url}/")).headers["Location"] == "/login"

    with serving(tmp_path, [data], users) as served:
        asyncio.run(scenario(served.url))


def _users_add_on_a_terminal(users: Path, answers: list[str]) -> tuple[int, str]:
    """`bbm-tui users add carol` with a pseudo-terminal as its controlling terminal (where
    getpass asks), answering its prompts in turn."""
    import fcntl
    import os
    import pty
    import select
    import termios

    main_end, child_end = pty.openpty()

    def take_the_terminal() -> None:  # in the child: its own session, the pty its terminal
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    process = subprocess.Popen(
        [sys.executable, "-m", "bbm_tui", "users", "add", "carol", "--role", "annotator",
         "--users", str(users)],
        stdin=child_end, stdout=child_end, stderr=child_end, preexec_fn=take_the_terminal)
    os.close(child_end)
    said = b""
    answered = 0  # where the text after the last answer starts
    pending = list(answers)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main_end], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(main_end, 1024)
        except OSError:  # the child has ended and closed the terminal
            break
        if not chunk:
            break
        said += chunk
        # Each answer only once its prompt is out: getpass flushes what was typed before.
        if pending and said[answered:].rstrip().endswith(b":"):
            os.write(main_end, (pending.pop(0) + "\n").encode())
            answered = len(said)
    os.close(main_end)
    return process.wait(timeout=30), said.decode("utf-8", "replace")


def test_users_add_asks_twice_on_a_terminal_and_echoes_nothing(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    code, said = _users_add_on_a_terminal(users, ["first secret", "other secret"])
    assert code != 0 and "differ" in said and not users.exists()
    assert "first secret" not in said  # typed, never echoed
    code, said = _users_add_on_a_terminal(users, ["same secret", "same secret"])
    assert code == 0 and "carol (annotator) saved" in said
    assert check_sign_in(load_users(users), "carol", "same secret") is not None


def test_users_add_refuses_an_empty_password(tmp_path: Path) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "bbm_tui", "users", "add", "dan", "--role", "annotator",
         "--users", str(tmp_path / "users.json")], input="\n", text=True, capture_output=True)
    assert refused.returncode != 0 and "the password is empty" in refused.stderr


def test_served_apps_cut_a_reasoning_by_serves_split() -> None:
    """`serve --split sentence` (as `annotate --split`): the served app process is started
    with the same rule, so each browser's queue holds the steps the server checked, cut by
    sentence, not by the default paragraph."""
    from bbm_tui.cli import build_parser
    from bbm_tui.cli.inputs import reasoning_cut
    from bbm_tui.cli.serve import _app_argv
    from bbm_tui.core.annotation.queue import read_queue_file

    deltabench = Path(__file__).parent / "fixtures" / "formats" / "deltabench.csv"
    serve = build_parser(["serve"]).parse_args(
        ["serve", "--annotate", str(deltabench), "--split", "sentence"])
    argv = _app_argv(serve, [deltabench])
    assert argv[argv.index("--split") + 1] == "sentence"
    served = build_parser(["served-app"]).parse_args(argv[3:])
    checked = read_queue_file(deltabench, cut=reasoning_cut(serve))
    shown = read_queue_file(deltabench, cut=reasoning_cut(served))
    by_paragraph = read_queue_file(deltabench)
    assert [trace.row.steps for trace in shown] == [trace.row.steps for trace in checked]
    assert shown[0].row.extra["split"] == "sentence"
    assert len(shown[0].row.steps) > len(by_paragraph[0].row.steps)
