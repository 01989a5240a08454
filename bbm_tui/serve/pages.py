"""The front's two pages: the sign-in form, and the page that holds the app (textual-serve's
terminal script in a frame of the app's colours, with who is signed in and a sign-out
button). Every asset is the front's own (no third-party host: textual-serve 1.1.3's page
links a web font from fonts.googleapis.com; its Roboto Mono file is served from here). Every
value put in a page is HTML-escaped."""

from __future__ import annotations

from html import escape

TITLE = "bbm-tui"

_HEAD = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="preload" href="/static/roboto-mono.ttf" as="font" type="font/ttf" crossorigin>
<link rel="stylesheet" href="/static/bbm.css">
{extra}</head>
"""


def sign_in_page(*, error: str = "", name: str = "", dataset: str = "") -> str:
    """The sign-in form: it posts `name` and `password` to /login."""
    said = f'<p class="error" role="alert">{escape(error)}</p>' if error else ""
    what = f" · {escape(dataset)}" if dataset else ""
    return _HEAD.format(title=f"Sign in · {TITLE}", extra="") + f"""<body>
<main class="login">
<form class="card" method="post" action="/login">
<h1>bbm-tui</h1>
<p>Step-level labelling{what}. Sign in to your queue.</p>
<label for="name">Name</label>
<input id="name" name="name" autocomplete="username" autofocus required maxlength="64"
 value="{escape(name)}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required
 maxlength="1024">
{said}
<button type="submit">Sign in</button>
</form>
</main>
</body>
</html>
"""


def app_page(*, name: str, role: str, websocket_url: str, font_size: int = 16) -> str:
    """The page the app runs in: textual-serve's script connects to `websocket_url`."""
    extra = ('<link rel="stylesheet" href="/static/xterm.css">\n'
             '<script src="/static/textual.js"></script>\n')
    return _HEAD.format(title=f"{escape(name)} · {TITLE}", extra=extra) + f"""<body>
<header class="bar">
<span class="who">bbm-tui · <b>{escape(name)}</b> ({escape(role)})</span>
<form method="post" action="/logout"><button type="submit">Sign out</button></form>
</header>
<div class="notice starting"><div class="card"><h1>bbm-tui</h1>
<p>Opening your queue…</p></div></div>
<div class="notice ended"><div class="card"><h1>Session ended</h1>
<p>Every label you gave is saved. Open the queue again to go on at your next trace.</p>
<a class="button" href="/">Open the queue again</a></div></div>
<div id="terminal" class="textual-terminal"
 data-session-websocket-url="{escape(websocket_url)}" data-font-size="{font_size}"></div>
</body>
</html>
"""
