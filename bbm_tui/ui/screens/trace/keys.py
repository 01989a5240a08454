"""A trace view's keys, in the order the footer and the help show them, and the command
palette's entries for them (their help is the binding's tooltip). Every binding has an id, so
that a user's [keymap] can remap it."""

from __future__ import annotations

from textual.binding import Binding, BindingType

_MOVE = Binding.Group("move", compact=True)
_COPY = Binding.Group("copy", compact=True)

TRACE_BINDINGS: list[BindingType] = [
    Binding("n", "step", "step", id="step",
            tooltip="Generate the next thought (one model call)"),
    Binding("r", "run", "run", id="run",
            tooltip="Generate thoughts until the answer"),
    Binding("escape", "stop", "stop", id="stop",
            tooltip="Stop; the thought being streamed is dropped"),
    Binding("j,down", "move(1)", "next", id="select_next", group=_MOVE,
            tooltip="Select the next thought"),
    Binding("k,up", "move(-1)", "previous", id="select_previous", group=_MOVE,
            tooltip="Select the previous thought"),
    Binding("G,end", "last", "last", id="select_last", show=False,
            tooltip="Select the last thought (and follow new ones again)"),
    Binding("home", "first", "first", id="select_first", show=False,
            tooltip="Select the first thought"),
    Binding("pagedown", "page(1)", "page down", id="page_down", show=False,
            tooltip="Move the selection down by a screenful of thoughts"),
    Binding("pageup", "page(-1)", "page up", id="page_up", show=False,
            tooltip="Move the selection up by a screenful of thoughts"),
    Binding("enter", "jump", "go to", id="jump_to_thought", show=False,
            tooltip="Type a thought's number, then enter, to select it"),
    Binding("J,shift+down", "scroll_thoughts(3)", "scroll down", id="scroll_down",
            show=False, tooltip="Scroll the thoughts down a few lines (a long thought)"),
    Binding("K,shift+up", "scroll_thoughts(-3)", "scroll up", id="scroll_up",
            show=False, tooltip="Scroll the thoughts up a few lines (a long thought)"),
    Binding("]", "scroll_question(3)", "question ↓", id="question_down", show=False,
            tooltip="Scroll the question pane down"),
    Binding("[", "scroll_question(-3)", "question ↑", id="question_up", show=False,
            tooltip="Scroll the question pane up"),
    Binding("x", "flag", "first mistake", id="flag_mistake",
            tooltip="Flag the selected thought as the first mistake"),
    Binding("c", "no_mistake", "no mistake", id="no_mistake",
            tooltip="Label the trace as having no mistake"),
    Binding("u", "undo", "undo", id="undo_label", tooltip="Undo the last label"),
    Binding("f", "find", "find", id="find_mistake",
            tooltip="Ask a model where the first mistake is (method, model)"),
    Binding("e", "reasoning", "answer", id="show_answer",
            tooltip="Show or hide the model's answer (CoT: its reasoning)"),
    # In the help screen and the palette, not the footer: the gold label stays out of
    # the way of annotators, and the footer has no room for copying.
    Binding("g", "gold", "gold label", id="show_gold", show=False,
            tooltip="Show or hide the dataset's gold label (hidden at first)"),
    Binding("y", "copy", "thought", id="copy_thought", group=_COPY, show=False,
            tooltip="Copy the selected thought"),
    Binding("Y", "copy_trace", "trace", id="copy_trace", group=_COPY, show=False,
            tooltip="Copy the whole trace as 'Thought N: …' lines"),
    Binding("Q", "copy_question", "question", id="copy_question", group=_COPY,
            show=False, tooltip="Copy the whole question"),
    Binding("b", "backtrack", "backtrack", id="backtrack",
            tooltip="Backtrack from the flagged (else the selected) thought: sample it "
            "8 times at temperature 1, continue from the best that differs (a new "
            "branch; paper §4)"),
    Binding("I", "importance", "importance", id="step_importance", show=False,
            tooltip="A thinking trace's thoughts by importance: M rollouts from each prefix "
            "of the reasoning go on to the answer; accuracy keeping a thought minus "
            "resampling it (Thought Anchors)"),
    Binding("w", "rewrite", "rewrite", id="edit_thought", show=False,
            tooltip="Rewrite the selected thought yourself and let the model go on from "
            "it (a new branch)"),
    Binding("ctrl+e", "edit_model", "model", id="trace_edit_model", show=False,
            tooltip="Change the model, api base, mode or temperature from the next step "
            "on (each call records its model); test the connection"),
    Binding("V", "verify_live", "live verifier", id="verify_live", show=False,
            tooltip="Turn the task verifier's live marks on or off: each thought is "
            "checked the moment it finishes (e shows why); the config's verify_live"),
    Binding("S", "recut", "re-cut", id="recut_reasoning", show=False,
            tooltip="Cut a thinking model's reasoning into steps by the next rule "
            "(paragraphs, sentences, lines): no new call"),
    Binding("t", "branch_tree", "branches", id="branch_tree", show=False,
            tooltip="The tree of the session's branches: where they part, each one's "
            "answer and whether it is right; enter shows one"),
    Binding("v", "compare", "compare", id="compare_branches", show=False,
            tooltip="The branch on show beside another (the other version of the "
            "selected thought, else the newest other branch)"),
    Binding("l", "tokens", "tokens", id="token_view", show=False,
            tooltip="The selected thought's tokens shaded by probability"),
    Binding("less_than_sign", "version(-1)", "older version", id="previous_version",
            show=False, tooltip="Show the previous version of the selected thought "
            "(another branch)"),
    Binding("greater_than_sign", "version(1)", "newer version", id="next_version",
            show=False, tooltip="Show the next version of the selected thought "
            "(another branch)"),
]

# The command palette's entries (ctrl+p), by binding id: their help is the binding's
# tooltip, and they act on the view that has the focus (ui/palette.py).
TRACE_PALETTE: dict[str, str] = {
    "step": "Step once",
    "run": "Run to the answer",
    "stop": "Stop",
    "flag_mistake": "Flag the first mistake",
    "no_mistake": "No mistake",
    "undo_label": "Undo the label",
    "find_mistake": "Find the mistake",
    "show_answer": "Show the model's answer",
    "show_gold": "Gold label",
    "recut_reasoning": "Cut the reasoning by another rule",
    "copy_trace": "Copy the trace",
    "backtrack": "Backtrack",
    "step_importance": "Each thought's importance",
    "edit_thought": "Rewrite the thought",
    "branch_tree": "Branches",
    "compare_branches": "Compare branches",
    "token_view": "Tokens",
    "verify_live": "Live verifier",
}
