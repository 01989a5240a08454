"""`bbm-tui serve`: a thin front (docs/DESIGN.md §17) before textual-serve's app processes.

It signs people in (users.py), keeps their sessions (signin.py) and, for a signed-in browser's
WebSocket, starts one app process through textual-serve's `AppService`, with the user's name
and role in that process's environment: the browser sends only keys and sizes, so it can
neither choose nor change who it labels as. It serves nothing but the sign-in page, the app's
page, and that page's assets (files named one by one: no folder is served), and knows
nothing of Textual: the app process is a command (`bbm-tui served-app ...`).

Cookies are HttpOnly and SameSite=Strict, and Secure when the request came over HTTPS (to
this server, or to a proxy at a trusted address that says so in X-Forwarded-Proto). A POST
or a WebSocket from another origin is refused. Failed sign-ins are logged and slowed down.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shlex
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from bbm_tui.core.textsafe import one_line
from bbm_tui.serve import ROLE_ENV, USER_ENV, pages
from bbm_tui.serve.signin import FIRST_DELAY_S, Sessions, SignedIn, Throttle
from bbm_tui.serve.users import MAX_PASSWORD, check_sign_in, load_users

log = logging.getLogger("bbm_tui.serve")

COOKIE = "bbm_session"
# Environment variables an app process does not need and must not hold: the served app calls
# no model, so the server's API keys stay out of reach of anything that runs in it.
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
# A sign-in form is small; anything bigger is refused before it is read.
_MAX_BODY = 16 * 1024

_CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "font-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'")


def _textual_serve_static() -> Path:
    import textual_serve

    return Path(textual_serve.__file__).parent / "static"


def _assets() -> dict[str, tuple[Path, str]]:
    """The only files served: name under /static/ -> (file, content type)."""
    ours = Path(__file__).parent / "assets"
    theirs = _textual_serve_static()
    return {
        "bbm.css": (ours / "bbm.css", "text/css"),
        "favicon.svg": (ours / "favicon.svg", "image/svg+xml"),
        "textual.js": (theirs / "js" / "textual.js", "text/javascript"),
        "xterm.css": (theirs / "css" / "xterm.css", "text/css"),
        # Apache-2.0, shipped in textual-serve's wheel: the font its page asks Google for.
        "roboto-mono.ttf": (theirs / "fonts" / "RobotoMono-VariableFont_wght.ttf", "font/ttf"),
    }


@dataclass(frozen=True)
class FrontSettings:
    users_path: Path
    # The app process's command line, without the user (who comes in its environment).
    app_argv: Sequence[str]
    # Addresses whose X-Forwarded-Proto and X-Forwarded-For are believed (a reverse proxy).
    trusted_proxies: frozenset[str] = frozenset({"127.0.0.1", "::1"})
    # App processes one user may have at once (a browser each): more are refused.
    apps_per_user: int = 4
    # What the sign-in page says is being labelled.
    dataset: str = ""


class UserAppService(AppService):
    """textual-serve's app process, with the signed-in user in its environment and the
    server's secrets out of it."""

    def __init__(self, command: str, user: SignedIn, **kwargs) -> None:
        super().__init__(command, **kwargs)
        self.user = user

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = {name: value for name, value
                       in super()._build_environment(width, height).items()
                       if not _SECRET_NAME.search(name)}
        environment[USER_ENV] = self.user.name
        environment[ROLE_ENV] = str(self.user.role)
        return environment


@dataclass
class Front:
    settings: FrontSettings
    sessions: Sessions = field(default_factory=Sessions)
    throttle: Throttle = field(default_factory=Throttle)
    # Each session's open app WebSockets (closed when it signs out).
    _sockets: dict[str, set[web.WebSocketResponse]] = field(default_factory=dict)
    # Each user's app processes running now.
    _apps: dict[str, int] = field(default_factory=dict)
    _downloads: DownloadManager = field(default_factory=DownloadManager)

    def application(self) -> web.Application:
        app = web.Application(client_max_size=_MAX_BODY, middlewares=[_headers])
        assets = _assets()
        app.add_routes([
            web.get("/", self.index),
            web.get("/login", self.login_form),
            web.post("/login", self.login),
            web.post("/logout", self.logout),
            web.get("/ws", self.websocket),
            web.get("/static/{name}", lambda request: _asset(request, assets)),
        ])
        app.on_shutdown.append(self._close_all)
        return app

    # -- pages

    async def index(self, request: web.Request) -> web.StreamResponse:
        user = self._user(request)
        if user is None:
            raise web.HTTPSeeOther("/login")
        scheme = "wss" if _is_https(request, self.settings) else "ws"
        page = pages.app_page(name=user.name, role=str(user.role),
                              websocket_url=f"{scheme}://{request.host}/ws",
                              font_size=_font_size(request))
        return web.Response(text=page, content_type="text/html")

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        if self._user(request) is not None:
            raise web.HTTPSeeOther("/")
        return _page(pages.sign_in_page(dataset=self.settings.dataset))

    async def login(self, request: web.Request) -> web.StreamResponse:
        _same_origin(request, self.settings)
        form = await request.post()
        name = " ".join(str(form.get("name", "")).split())[:64]
        password = str(form.get("password", ""))[:MAX_PASSWORD + 1]
        address = _client_address(request, self.settings)
        keys = (f"name:{name.casefold()}", f"address:{address}")
        wait = self.throttle.wait_left(*keys)
        if wait > 0:
            log.warning("sign-in refused (too many failures): name %r from %s",
                        one_line(name, 64), address)
            return _page(pages.sign_in_page(
                error=f"Too many failed sign-ins: try again in {int(wait) + 1} s.", name=name,
                dataset=self.settings.dataset), status=429)
        users = await asyncio.to_thread(load_users, self.settings.users_path)
        user = await asyncio.to_thread(check_sign_in, users, name, password)
        if user is None:
            self.throttle.failed(*keys)
            log.warning("failed sign-in: name %r from %s", one_line(name, 64), address)
            await asyncio.sleep(FIRST_DELAY_S)
            return _page(pages.sign_in_page(error="Wrong name or password.", name=name,
                                            dataset=self.settings.dataset), status=401)
        self.throttle.succeeded(keys[0])
        log.info("signed in: %r (%s) from %s", user.name, user.role, address)
        token = self.sessions.start(user.name, user.role)
        response = web.HTTPSeeOther("/")
        response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/",
                            secure=_is_https(request, self.settings))
        raise response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        _same_origin(request, self.settings)
        token = request.cookies.get(COOKIE)
        user = self.sessions.find(token)
        if user is not None and token is not None:
            log.info("signed out: %r", user.name)
            for socket in list(self._sockets.pop(token, ())):
                await socket.close()
        self.sessions.end(token)
        response = web.HTTPSeeOther("/login")
        response.del_cookie(COOKIE, path="/")
        raise response

    # -- the app

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        token = request.cookies.get(COOKIE)
        user = self.sessions.find(token)
        if user is None or token is None:
            raise web.HTTPForbidden(text="Sign in first.")
        _same_origin(request, self.settings)
        # A user taken out of the users file (or given another role) since signing in gets
        # no new app: the file is read again for each.
        current = (await asyncio.to_thread(load_users, self.settings.users_path)).get(user.name)
        if current is None or current.role != user.role:
            self.sessions.end(token)
            raise web.HTTPForbidden(text="Sign in again.")
        if self._apps.get(user.name, 0) >= self.settings.apps_per_user:
            raise web.HTTPTooManyRequests(text="Too many windows open: close one first.")
        socket = web.WebSocketResponse(heartbeat=15, max_msg_size=64 * 1024)
        await socket.prepare(request)
        open_here = self._sockets.setdefault(token, set())
        open_here.add(socket)
        self._apps[user.name] = self._apps.get(user.name, 0) + 1
        service = UserAppService(
            shlex.join(self.settings.app_argv), user, write_bytes=socket.send_bytes,
            write_str=socket.send_str, close=socket.close, download_manager=self._downloads)
        log.info("app started for %r", user.name)
        try:
            await service.start(_int(request.query.get("width"), 80),
                                _int(request.query.get("height"), 24))
            await _relay(socket, service)
        finally:
            open_here.discard(socket)
            self._apps[user.name] -= 1
            await service.stop()
            log.info("app ended for %r", user.name)
        return socket

    async def _close_all(self, _app: web.Application) -> None:
        """On shutdown: each app is told to quit (every label is saved already)."""
        for sockets in list(self._sockets.values()):
            for socket in list(sockets):
                await socket.close()

    def _user(self, request: web.Request) -> SignedIn | None:
        return self.sessions.find(request.cookies.get(COOKIE))


async def _relay(socket: web.WebSocketResponse, service: AppService) -> None:
    """The browser's messages, as textual-serve's page sends them, to the app process: keys
    (stdin), the window's size, focus; anything else is dropped."""
    async for message in socket:
        if message.type != WSMsgType.TEXT:
            continue
        try:
            envelope = json.loads(message.data)
            kind = envelope[0]
        except (ValueError, TypeError, IndexError, KeyError):
            continue
        if kind == "stdin" and isinstance(envelope[1], str):
            await service.send_bytes(envelope[1].encode("utf-8"))
        elif kind == "resize" and isinstance(envelope[1], dict):
            size = envelope[1]
            await service.set_terminal_size(_int(size.get("width"), 80),
                                            _int(size.get("height"), 24))
        elif kind == "ping" and isinstance(envelope[1], str):
            await socket.send_json(["pong", envelope[1][:32]])
        elif kind == "blur":
            await service.blur()
        elif kind == "focus":
            await service.focus()


@web.middleware
async def _headers(request: web.Request,
                   handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                   ) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as error:
        response = error
        _secure(response)
        raise
    _secure(response)
    return response


def _secure(response: web.StreamResponse) -> None:
    headers = response.headers
    headers.setdefault("Content-Security-Policy", _CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    # "same-origin", not "no-referrer": with that, Chrome sends a form post's Origin as
    # "null", which the same-origin check refuses.
    headers.setdefault("Referrer-Policy", "same-origin")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Cache-Control", "no-store")


async def _asset(request: web.Request,
                 assets: dict[str, tuple[Path, str]]) -> web.StreamResponse:
    found = assets.get(request.match_info["name"])
    if found is None:
        raise web.HTTPNotFound()
    path, content_type = found
    return web.Response(body=path.read_bytes(), content_type=content_type,
                        headers={"Cache-Control": "public, max-age=3600"})


def _page(html: str, status: int = 200) -> web.Response:
    return web.Response(text=html, content_type="text/html", status=status)


def _int(value: object, default: int) -> int:
    """A size from the browser, kept to what a terminal can be."""
    try:
        number = int(str(value))
    except ValueError:
        return default
    return min(max(number, 10), 1000)


def _font_size(request: web.Request) -> int:
    return min(max(_int(request.query.get("fontsize"), 16), 8), 40)


def _from_proxy(request: web.Request, settings: FrontSettings) -> bool:
    return request.remote in settings.trusted_proxies


def _is_https(request: web.Request, settings: FrontSettings) -> bool:
    if request.secure:
        return True
    proto = request.headers.get("X-Forwarded-Proto", "")
    return _from_proxy(request, settings) and proto.split(",")[0].strip() == "https"


def _client_address(request: web.Request, settings: FrontSettings) -> str:
    forwarded = request.headers.get("X-Forwarded-For", "")
    if forwarded and _from_proxy(request, settings):
        return one_line(forwarded.split(",")[-1].strip(), 64)
    return request.remote or "?"


def _same_origin(request: web.Request, settings: FrontSettings) -> None:
    """A form post or a WebSocket from a page of another site is refused (SameSite=Strict
    keeps the cookie from it already; this also refuses a sign-in forced on a browser)."""
    origin = request.headers.get("Origin")
    if origin is None:
        return  # not sent by a browser page (a script, a test client): the cookie decides
    scheme = "https" if _is_https(request, settings) else "http"
    if origin != f"{scheme}://{request.host}":
        log.warning("refused a request from origin %r", one_line(origin, 100))
        raise web.HTTPForbidden(text="Not from this site.")


def run_front(front: Front, host: str, port: int,
              ready: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted (Ctrl+C or SIGTERM): each app is told to quit first."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    url = f"http://{host}:{port}"

    def said(*_args: object) -> None:
        if ready is not None:
            ready(url)

    web.run_app(front.application(), host=host, port=port, print=said,
                access_log=None, shutdown_timeout=10)
