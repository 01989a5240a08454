"""`bbm-tui serve` (docs/DESIGN.md §17): a thin front (front.py: sign-in, sessions, roles)
before textual-serve's app processes, one per browser. It knows nothing of Textual; the app
process it starts is `bbm-tui served-app`, which reads who its user is from the environment
variables named here (set by the front, never by the browser)."""

USER_ENV = "BBM_TUI_SERVED_USER"
ROLE_ENV = "BBM_TUI_SERVED_ROLE"
