"""Running the app as the `bbm-tui` command does: the collector's schedule after the first
frame, the termination signals held, and the store's failure said again once the screen is
gone."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

from bbm_tui.core.config import Config
from bbm_tui.core.types import ModelSpec
from bbm_tui.ui.app import EXIT_OK, EXIT_STORE_FAILED, BbmApp
from bbm_tui.ui.queues import AnnotateRequest
from bbm_tui.ui.termination import collect_from_now_on


def run_app(
    config: Config,
    task: str | None = None,
    question: int | None = None,
    session_id: int | None = None,
    model_given: frozenset[str] = frozenset(),
    annotate: AnnotateRequest | None = None,
    task_problems: Iterable[str] = (),
    models: Sequence[ModelSpec] = (),
) -> int:
    """Run the app; the exit code is non-zero when the session store could not be opened."""
    app = BbmApp(config, task=task, question=question, session_id=session_id,
                 model_given=model_given, annotate=annotate, task_problems=task_problems,
                 models=models)
    app.call_after_first_frame(collect_from_now_on)
    with app.termination_signals_held():
        app.run()
    if app.store_error is not None:
        # Said again once the app's screen is gone, so that the message stays in view.
        from bbm_tui.core.redact import redact
        from bbm_tui.core.textsafe import printable

        print(f"bbm-tui: {printable(redact(app.store_error))}", file=sys.stderr)
        return EXIT_STORE_FAILED
    return app.return_code or EXIT_OK

