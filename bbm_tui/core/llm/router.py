"""Many servers behind one model name: litellm's Router, built from a `model_list` file.

The file is the one a LiteLLM proxy reads (its `model_list`, and optionally `router_settings`),
in YAML: each deployment names its model group (`model_name`) and any litellm parameters
(`litellm_params`: the provider's model, `api_base`, `api_key` or `os.environ/VAR`, ...).
The model string of a command then names a group, and the Router balances its calls over
the group's deployments, cools down one that fails, and sends the calls elsewhere meanwhile.

What bbm-tui adds: the steps of one trace stay on one deployment while it is healthy (a
`DeploymentPin`, so the prompt's prefix stays in that server's cache). A new trace starts on
the healthy deployment of its group (not cooling down) that holds the fewest traces now: the
Router's own strategies count requests, and with every trace held to one deployment it is
the traces that must be spread (a batch's first sixteen traces, started at once, all went to
one server of two under `least-busy`). At a batch's tail, a deployment with `max_traces` (a
server whose live traces take turns) that holds two or more hands one over to a deployment of
its group that holds at least two fewer, when no new trace is waiting for a place
(`_emptier_deployment`): the moved trace gives up its prompt cache on the first server once,
so that the traces left do not queue at one server while the other has turns to spare. A call
on the pinned deployment that fails unpins the trace, and its next attempt goes to the group
through the Router, which skips deployments cooling down; the trace is then pinned where that
attempt was served. Retries stay ours (errors.py): the Router's own are off. Each call records
the deployment that served it (`served_by`). A pinned chat call skips the layers the Router
puts around its call of one deployment (fallbacks, retries, a per-call usage count: ~1 ms of
CPU a call) where the file sets nothing they act on (`calls_pinned_deployments`); the
deployment is still called, and cooled down when it fails, by the Router.

Reading the file needs no litellm; building the Router imports it (loader.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from bbm_tui.core.errors import UserError
from bbm_tui.core.llm.loader import (
    call_deployment,
    calls_a_deployment,
    cooldown_deployments,
    litellm_module,
    router_class,
)
from bbm_tui.core.readfile import FileReadError, read_regular_file
from bbm_tui.core.redact import declare_secret, declare_secret_variable, redact, redact_url
from bbm_tui.core.types import ModelSpec

# What bbm-tui sets unless the file's `router_settings` says otherwise: a deployment is
# cooled down at its first failure (a stopped server fails every call at once; the default,
# three a minute, would send three more traces' calls to it), for half a minute.
DEFAULT_ROUTER_SETTINGS: dict[str, Any] = {
    "allowed_fails": 0,
    "cooldown_time": 30,
}
# A router file lists deployments: a thousand of them take ~200 KiB. Bounds on what is read
# (PyYAML reads ~1 MiB a second) and on what its aliases may expand to.
MAX_ROUTER_FILE_BYTES = 2**20
MAX_ROUTER_NODES = 1_000_000
# How the file names a variable that holds a value (LiteLLM's proxy's form).
ENVIRON_PREFIX = "os.environ/"
# Retries are ours (errors.py), each of which goes through the Router again.
FORCED_ROUTER_SETTINGS: dict[str, Any] = {"num_retries": 0}


class RouterFileError(UserError, ValueError):
    """A router file that cannot be used; the message names the file (and line)."""

    title = "A problem with the router file"


@dataclass(frozen=True)
class Deployment:
    """One server of a model group, as the file lists it."""

    name: str  # what is recorded beside each call it served
    group: str  # the file's `model_name`
    model: str  # the litellm model string of its `litellm_params`
    api_base: str | None
    # The live traces it holds at once (`model_info.max_traces`; None: no limit).
    max_traces: int | None = None


# `router_settings` under which litellm's Router (1.103.7) uses nothing its success callbacks
# count at a stream's end: with `allowed_fails` set its cooldown counts failures only, the
# default strategy (simple-shuffle) weighs deployments by their configured weights, fallbacks
# act on failures. Any other setting (a strategy that counts usage, latency or requests in
# flight; `allowed_fails: null`, whose cooldown weighs failures against successes) keeps
# every stream read to its end.
_SETTINGS_BLIND_TO_STREAM_ENDS = frozenset({
    "allowed_fails", "cooldown_time", "num_retries", "retry_after", "timeout",
    "stream_timeout", "fallbacks", "context_window_fallbacks", "content_policy_fallbacks",
    "default_fallbacks", "routing_strategy", "set_verbose", "debug_level",
})


# `router_settings` whose fallbacks litellm's Router applies around its call of a deployment
# (`acompletion`), which a pinned call then keeps going through.
_FALLBACK_SETTINGS = frozenset({
    "fallbacks", "context_window_fallbacks", "content_policy_fallbacks", "default_fallbacks",
})


@dataclass(frozen=True)
class RouterFile:
    path: Path
    model_list: tuple[dict[str, Any], ...]
    settings: dict[str, Any]
    deployments: tuple[Deployment, ...]

    @cached_property
    def counts_stream_ends(self) -> bool:
        """Whether its Router needs each streamed call read to its end: there litellm runs
        the success callbacks through which the Router counts a deployment's tokens and
        requests (for `tpm`/`rpm` limits), latencies and requests in flight (for strategies
        that route by them) and successes (for a cooldown by failure rate). Otherwise a
        stream is closed once the provider's last chunk is in, as a direct call's is
        (transport.py's `_provider_done`): the callbacks' work cost ~5 ms of CPU a call
        (bench/router.py: 16 ms a step through a one-deployment file, 9 ms direct)."""
        settings = {**DEFAULT_ROUTER_SETTINGS, **self.settings}
        if not set(settings) <= _SETTINGS_BLIND_TO_STREAM_ENDS:
            return True
        if settings.get("routing_strategy", "simple-shuffle") != "simple-shuffle" \
                or settings.get("allowed_fails") is None:
            return True
        return any(_counts_usage(entry) for entry in self.model_list)

    @cached_property
    def calls_pinned_deployments(self) -> bool:
        """Whether a call of a trace pinned to a deployment may skip the layers litellm's
        Router puts around its call of one deployment (loader.py's `call_deployment`): they
        act on nothing this file sets (no fallbacks; nothing counted at a call's end, as
        for `counts_stream_ends`; our own retries), and cost ~1 ms of CPU a call
        (bench/router.py --quick: ~10.4 ms a step through a one-deployment file, 9.7 after;
        a direct call ~8-9). The deployment still fails as the Router's: its failure
        callback cools it down, and the trace's next attempt goes through the Router."""
        return not self.counts_stream_ends and not set(self.settings) & _FALLBACK_SETTINGS

    @property
    def groups(self) -> list[str]:
        return list(dict.fromkeys(deployment.group for deployment in self.deployments))

    def group(self, name: str) -> list[Deployment]:
        return [deployment for deployment in self.deployments if deployment.group == name]


def _counts_usage(entry: dict[str, Any]) -> bool:
    """Whether a deployment sets a limit the Router counts on success (`tpm`, `rpm`, and
    their input and output kinds), at its top, in `litellm_params` or in `model_info`."""
    parts = (entry, entry.get("litellm_params") or {}, entry.get("model_info") or {})
    return any(isinstance(key, str) and key.endswith(("tpm", "rpm"))
               for part in parts if isinstance(part, dict) for key in part)


def read_router_file(path: str | Path) -> RouterFile:
    """The file checked: a mapping with a non-empty `model_list` of deployments, each with a
    `model_name` and `litellm_params.model`; `router_settings` a mapping. Each deployment is
    given a name (its `model_info.id` if the file gives one, else its api base, else its
    model), unique in the file. Only a regular file of at most MAX_ROUTER_FILE_BYTES is read,
    and a document whose aliases expand past MAX_ROUTER_NODES values is refused (a "billion
    laughs" of 400 bytes took 62 s and 4 GB). Every key the file gives, and every variable it
    names, is declared a secret (core/redact.py) before anything could print it. Raises
    RouterFileError."""
    path = Path(path)
    try:
        raw = read_regular_file(path, MAX_ROUTER_FILE_BYTES)
    except FileNotFoundError:
        raise RouterFileError(f"{path}: no such router file") from None
    except FileReadError as error:
        raise RouterFileError(f"{path}: the router file {error}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RouterFileError(f"{path}: the router file is not UTF-8 text") from None
    node, data = _parsed_yaml(path, text)
    if not isinstance(data, dict):
        raise RouterFileError(f"{path}: a router file is a mapping with a `model_list`")
    entries = data.get("model_list")
    if not isinstance(entries, list) or not entries:
        raise RouterFileError(f"{path}: `model_list` must be a non-empty list of deployments")
    lines = _item_lines(node)
    model_list: list[dict[str, Any]] = []
    deployments: list[Deployment] = []
    taken: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"{path}, line {lines[index]}" if index < len(lines) else str(path)
        deployment, entry = _checked_entry(entry, where, taken)
        taken.add(deployment.name)
        model_list.append(entry)
        deployments.append(deployment)
    settings = data.get("router_settings") or {}
    if not isinstance(settings, dict):
        raise RouterFileError(f"{path}: `router_settings` must be a mapping")
    return RouterFile(path, tuple(model_list), dict(settings), tuple(deployments))


def _parsed_yaml(path: Path, text: str) -> tuple[Any, Any]:
    """The document's node tree and its value, read once (libyaml's reader where PyYAML has
    it: ~1 s a MiB, against ~4 s); the aliases' expansion is bounded before any value is
    built, and the file's secrets declared."""
    import yaml  # PyYAML, which litellm's proxy reads these files with too

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if _expanded_values(node) > MAX_ROUTER_NODES:
            raise RouterFileError(
                f"{path}: its aliases expand to more than {MAX_ROUTER_NODES:,} values (or "
                "refer to themselves); a router file lists deployments: write them out")
        _declare_secrets(node)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise RouterFileError(f"{path}{where}: not valid YAML ({redact(problem)})") from None
    except RecursionError:
        raise RouterFileError(f"{path}: nested too deeply to read") from None
    except RouterFileError:
        raise
    except ValueError:  # PyYAML's int() of more digits than Python converts
        from bbm_tui.core.tomltext import too_long_number_message

        raise RouterFileError(f"{path}, {too_long_number_message(text)}") from None
    finally:
        loader.dispose()
    return node, data


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _expanded_values(root: Any) -> int:
    """How many values the document holds with every alias written out where it is used
    (a node shared by aliases counts each time); past MAX_ROUTER_NODES, or for an alias
    inside its own anchor, a number above it. Linear in the file: each node is sized once."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)] if root is not None else []
    while stack:
        node, children_sized = stack.pop()
        key = id(node)
        if children_sized:
            total = 1 + sum(sizes[id(child)] for child in _children(node))
            if total > MAX_ROUTER_NODES:
                return total
            sizes[key] = total
            open_nodes.discard(key)
            continue
        if key in sizes:
            continue
        if key in open_nodes:  # an alias inside its own anchor: endless
            return MAX_ROUTER_NODES + 1
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes.get(id(root), 0)


def _declare_secrets(root: Any) -> None:
    """Every `api_key` value (as written, and as YAML reads it: `0x1F` is 31) and every
    variable named as `os.environ/NAME`, anywhere in the file, is redacted from then on
    wherever text is shown or stored (a server may echo a key; litellm's checks print a key
    YAML read as a number)."""
    import yaml

    constructor = yaml.constructor.SafeConstructor()
    stack = [root] if root is not None else []
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode) and isinstance(node.value, str) \
                and node.value.startswith(ENVIRON_PREFIX):
            declare_secret_variable(node.value[len(ENVIRON_PREFIX):].strip())
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if getattr(key, "value", None) == "api_key" and isinstance(
                        value, yaml.ScalarNode):
                    declare_secret(value.value)
                    with contextlib.suppress(yaml.YAMLError, ValueError, OverflowError):
                        declare_secret(str(constructor.construct_object(value)))
        stack.extend(_children(node))


def _item_lines(node: Any) -> list[int]:
    """The 1-based line of each item of the document's `model_list`, for messages."""
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return []
    for key, value in node.value:
        if getattr(key, "value", None) == "model_list" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


def _checked_entry(entry: Any, where: str, taken: set[str]
                   ) -> tuple[Deployment, dict[str, Any]]:
    if not isinstance(entry, dict):
        raise RouterFileError(f"{where}: a deployment is a mapping with `model_name` and "
                              "`litellm_params`")
    group = entry.get("model_name")
    params = entry.get("litellm_params")
    if isinstance(group, bool | int | float):
        # YAML 1.1 reads off/no/false (on/yes/true) and numbers as such, not as names.
        read_as = repr(group) if not isinstance(group, bool) else (
            "true (YAML reads on, yes and true so)" if group
            else "false (YAML reads off, no and false so)")
        raise RouterFileError(f"{where}: `model_name` was read as {read_as}, not as a name: "
                              f"put the name in quotes, e.g. model_name: \"{_yaml_word(group)}\"")
    if not isinstance(group, str) or not group:
        raise RouterFileError(f"{where}: the deployment has no `model_name`")
    if not isinstance(params, dict) or not isinstance(params.get("model"), str):
        raise RouterFileError(f"{where}: the deployment has no `litellm_params.model`")
    info = entry.get("model_info") or {}
    if not isinstance(info, dict):
        raise RouterFileError(f"{where}: `model_info` must be a mapping")
    api_base = params.get("api_base")
    if api_base is not None and not isinstance(api_base, str):
        raise RouterFileError(f"{where}: `api_base` must be a string")
    _check_param_types(params, where)
    given = info.get("id")
    if given is not None:
        name = str(given)
        if name in taken:
            raise RouterFileError(f"{where}: another deployment has the id {name!r}")
    else:
        name = _unique(_default_name(params["model"], api_base), taken)
    entry = {**entry, "model_info": {**info, "id": name}}
    max_traces = info.get("max_traces")
    if max_traces is not None and (not isinstance(max_traces, int) or isinstance(max_traces, bool)
                                   or max_traces < 1):
        raise RouterFileError(f"{where}: `model_info.max_traces` must be a whole number >= 1")
    return Deployment(name, group, params["model"], api_base, max_traces), entry


def _yaml_word(value: bool | int | float) -> str:
    """A word YAML reads as `value`, for the message's example (the file's own is lost)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


# Deployment parameters litellm's Router reads as numbers, and those it reads as text: one of
# another type passed the file check and failed every call (retried as a connection fault).
_NUMBER_PARAMS = ("max_parallel_requests", "rpm", "tpm", "timeout", "stream_timeout",
                  "max_retries", "weight", "order")
_TEXT_PARAMS = ("api_key", "api_version", "organization")


def _check_param_types(params: dict[str, Any], where: str) -> None:
    for key in _NUMBER_PARAMS:
        value = params.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise RouterFileError(f"{where}: `litellm_params.{key}` must be a number, not "
                                  f"{type(value).__name__}")
    for key in _TEXT_PARAMS:
        value = params.get(key)
        if value is not None and not isinstance(value, str):
            # A key YAML reads as a number (`api_key: 0x1234`) is quoted to stay as written.
            raise RouterFileError(f"{where}: `litellm_params.{key}` must be a string (quote "
                                  f"it), not {type(value).__name__}")


def key_sources(spec: ModelSpec) -> list[str]:
    """Where the deployments of a router's model group take their API key: the variable an
    `os.environ/NAME` names, or the file itself for a key written in it (never the key).
    Empty: no deployment names one (each provider's own variable then)."""
    if spec.router is None:
        return []
    try:
        parsed = router_file(spec.router)
    except RouterFileError:
        return []
    found: list[str] = []
    for entry in parsed.model_list:
        if entry.get("model_name") != spec.model:
            continue
        key = (entry.get("litellm_params") or {}).get("api_key")
        if isinstance(key, str) and key.startswith("os.environ/"):
            source = key.removeprefix("os.environ/")
        elif key is not None:
            source = f"the `api_key` written in {parsed.path}"
        else:
            continue
        if source not in found:
            found.append(source)
    return found


def _default_name(model: str, api_base: str | None) -> str:
    if api_base and not api_base.startswith(ENVIRON_PREFIX):
        return redact_url(api_base) or model
    return model


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    number = 2
    while f"{name} #{number}" in taken:
        number += 1
    return f"{name} #{number}"


# -- the Router, built once per file (as it is now) and event loop


_files: dict[tuple[str, int, int], RouterFile] = {}
_routers: dict[tuple[tuple[str, int, int], int], Any] = {}
# How many live traces are pinned to each deployment, by deployment name (one process).
_pinned: dict[str, int] = {}


@dataclass(eq=False)
class _Waiter:
    """A new trace waiting for a place in its model group (`group`: the router file as the
    command named it, and the group's name); `woken` is set when a trace is unpinned."""

    group: tuple[str, str]
    woken: asyncio.Future[None]


# New traces waiting for a deployment with room, the longest waiting first: each keeps its
# place in the line until it has a deployment, so that a batch's traces start in the order
# it started them (a set woke them in no order: a 40-step trace that asked eighth started
# last of sixteen, and its server's partner sat idle for its last two seconds).
_waiting: list[_Waiter] = []
# A deployment with `model_info.max_traces` holds that many live traces at once; a new
# trace beyond waits for whichever deployment frees a place first, so that traces of unknown
# length even out as they end rather than being split by count when they start
# (bench/router.py --quick: 16 traces at once split 8/8, 136 steps on one server, 66 on the
# other). Not litellm's `max_parallel_requests`: its Router refuses the calls past that.


def _file_key(path: str) -> tuple[str, int, int]:
    try:
        status = os.stat(path)
    except OSError as error:
        raise RouterFileError(f"{path}: cannot read the router file ({error})") from None
    return _resolved(path, "" if os.path.isabs(path) else os.getcwd()), \
        status.st_mtime_ns, status.st_size


@lru_cache(maxsize=64)
def _resolved(path: str, cwd: str) -> str:
    """The file's absolute path, its links followed, worked out once per spelling (and
    working folder): a step asks for the file ~7 times (its Router, the questions asked of
    its model), and resolving took ~80 us each at load 10, the stat 7 us."""
    return str((Path(cwd) / path).resolve())


def router_file(path: str) -> RouterFile:
    """The file as it is now, read once per version."""
    key = _file_key(path)
    found = _files.get(key)
    if found is None:
        found = read_router_file(path)
        _files.clear()  # an older version's is not used again
        _files[key] = found
    return found


def _router(path: str) -> tuple[RouterFile, Any]:
    """The file and its Router, built once per version of the file and event loop (a
    Router's clients belong to the loop they were made on)."""
    parsed = router_file(path)
    try:
        loop_id = id(asyncio.get_running_loop())
    except RuntimeError:
        loop_id = 0
    key = (_file_key(path), loop_id)
    router = _routers.get(key)
    if router is None:
        router = _build_router(parsed)
        if len(_routers) >= 4:
            _routers.clear()
        _routers[key] = router
    return parsed, router


def _build_router(parsed: RouterFile) -> Any:
    Router = router_class()
    accepted = set(inspect.signature(Router.__init__).parameters) - {"self", "model_list"}
    unknown = sorted(set(parsed.settings) - accepted)
    if unknown:
        raise RouterFileError(f"{parsed.path}: `router_settings` has what litellm's Router does "
                              f"not take: {', '.join(unknown)}")
    settings = {**DEFAULT_ROUTER_SETTINGS, **parsed.settings, **FORCED_ROUTER_SETTINGS}
    try:
        return Router(model_list=[dict(entry) for entry in parsed.model_list], **settings)
    except Exception as error:  # litellm's own checks of the list and settings
        raise RouterFileError(f"{parsed.path}: litellm's Router refused it ({error})") from None


def deployment_spec(spec: ModelSpec) -> ModelSpec:
    """What a model behind a router is, for the questions asked of a model before a call
    (native stop, log-probabilities, `n`...): the first deployment of its group, as if it were
    called directly. A spec without a router is itself."""
    if spec.router is None:
        return spec
    deployments = router_file(spec.router).group(spec.model)
    if not deployments:
        return replace(spec, router=None)
    first = deployments[0]
    return replace(spec, model=first.model, api_base=first.api_base, router=None)


def check_group(spec: ModelSpec) -> str | None:
    """Why `spec.model` cannot be called through its router file (None: it can)."""
    if spec.router is None:
        return None
    try:
        parsed = router_file(spec.router)
    except RouterFileError as error:
        return str(error)
    if parsed.group(spec.model):
        return None
    return (f"{spec.router} has no model group {spec.model!r} (it has "
            f"{', '.join(repr(group) for group in parsed.groups)})")


@dataclass
class DeploymentPin:
    """The deployment one trace's calls go to while it is healthy (None: the trace has none
    yet, or its deployment failed). Release it when the trace's run ends."""

    deployment: str | None = None
    # Every deployment that served the trace, in order (for the tests and the notes).
    served: list[str] = field(default_factory=list)

    def keep(self, deployment: str | None) -> None:
        if deployment == self.deployment:
            return
        self.forget()
        self.deployment = deployment
        if deployment is not None:
            _pinned[deployment] = _pinned.get(deployment, 0) + 1
            if not self.served or self.served[-1] != deployment:
                self.served.append(deployment)

    def forget(self) -> None:
        if self.deployment is not None:
            _pinned[self.deployment] = max(0, _pinned.get(self.deployment, 0) - 1)
            _wake_waiting()
        self.deployment = None

    release = forget


def _wake_waiting(group: tuple[str, str] | None = None) -> None:
    """Wake the first waiting new trace of each group (of `group` only, if given) that is not
    woken yet: one a place freed, so that a release costs the same however long the line.
    One that takes a place wakes the next of its group (room may be left); one that finds
    none waits again in its place."""
    woken: set[tuple[tuple[str, str], int]] = set()
    for waiter in _waiting:
        loop = waiter.woken.get_loop()
        key = (waiter.group, id(loop))
        if key in woken or (group is not None and waiter.group != group) \
                or waiter.woken.done() or loop.is_closed():
            continue
        waiter.woken.set_result(None)
        woken.add(key)


def _waiting_in(group: tuple[str, str]) -> bool:
    """Whether a new trace of `group` is waiting on this event loop (one of another loop
    never wakes here, and must hold no one up)."""
    loop = asyncio.get_running_loop()
    return any(waiter.group == group and waiter.woken.get_loop() is loop
               for waiter in _waiting)


def _emptier_deployment(parsed: RouterFile, spec: ModelSpec, router: Any, current: str
                        ) -> str | None:
    """The deployment a live trace pinned to `current` moves to before its next call, or None
    (it stays). It moves only at a batch's tail: `current` sets `max_traces` (its live traces
    take turns at one server) and holds two or more, no new trace is waiting for a place
    (a new trace has the first claim on one: it has no prompt cache anywhere yet), and another
    healthy deployment of the group with room holds at least two traces fewer (the fewest
    first; the file's order breaks ties), so that the move evens the two out and never turns
    the difference round. At the tail each server's traces take turns, so the traces left on
    the fuller one go at a fraction of its pace while the other has turns to spare: in
    bench/router.py --quick the 40-step trace shared its server with two others until their
    end while the other server held one (an idle one only, before: 1.76x; see DESIGN §9).
    Mid-batch nothing moves: a deployment that has just ended a trace is about to get a new
    one, so a move then would only throw a prompt cache away."""
    here_count = _pinned.get(current, 0)
    if here_count < 2 or _waiting_in((spec.router or "", spec.model)):
        return None
    deployments = parsed.group(spec.model)
    here = next((deployment for deployment in deployments if deployment.name == current), None)
    if here is None or here.max_traces is None:
        # No `max_traces`: nothing says its traces queue (a provider that runs calls in
        # parallel gains nothing from a move and would pay the prompt's cache write again).
        return None
    emptier = [deployment.name for deployment in deployments
               if deployment.name != current and _has_room(deployment)
               and _pinned.get(deployment.name, 0) <= here_count - 2]
    if not emptier:
        return None
    cooling = set(_cooling_down(router))  # asked only when there is somewhere to move to
    return min((name for name in emptier if name not in cooling),
               key=lambda name: _pinned.get(name, 0), default=None)


def _has_room(deployment: Deployment) -> bool:
    return (deployment.max_traces is None
            or _pinned.get(deployment.name, 0) < deployment.max_traces)


def _least_pinned(parsed: RouterFile, group: str, router: Any) -> str | None:
    """The healthy deployment of the group with room holding the fewest traces (the file's
    order breaks ties); None when every one is cooling down (the Router then says so).
    Raises _NoRoom when each healthy one holds all the traces it takes."""
    cooling = set(_cooling_down(router))
    healthy = [deployment for deployment in parsed.group(group)
               if deployment.name not in cooling]
    if not healthy:
        return None
    with_room = [deployment.name for deployment in healthy if _has_room(deployment)]
    if not with_room:
        raise _NoRoom
    return min(with_room, key=lambda name: _pinned.get(name, 0))


class _NoRoom(Exception):
    """Every healthy deployment of the group holds all the traces it takes."""


async def _free_deployment(spec: ModelSpec) -> str | None:
    """The deployment a new trace goes to: the least pinned healthy one with room, waiting
    for one to free a place (without a time limit of its own, as a call waits its turn at a
    one-request server: the trace's timeouts start with its request). New traces of a group
    get places in the order they asked: one that finds others of its group waiting goes
    behind them, and only the first in line is woken when a place frees."""
    group = (spec.router or "", spec.model)
    me: _Waiter | None = None
    placed = False
    try:
        while True:
            if me is None and _waiting_in(group):
                _wake_waiting(group)  # room may have come with no trace unpinned (a cooldown over)
            else:
                parsed, router = _router(spec.router or "")
                with contextlib.suppress(_NoRoom):
                    found = _least_pinned(parsed, spec.model, router)
                    placed = True
                    return found
            woken = asyncio.get_running_loop().create_future()
            if me is None:
                me = _Waiter(group, woken)
                _waiting.append(me)
            else:
                me.woken = woken  # its place in the line kept
            await woken
    finally:
        if me is not None:
            _waiting.remove(me)
            if placed or me.woken.done():
                # The next in line looks for room too (this one's wake is not lost when it
                # was woken and then cancelled); the caller holds its place before that runs.
                _wake_waiting(group)


def _cooling_down(router: Any) -> list[str]:
    """The deployments the Router is cooling down now (none where litellm keeps the list
    elsewhere: a failed call then unpins as before)."""
    return cooldown_deployments(router)


async def start_call(spec: ModelSpec, kwargs: dict[str, Any], *, chat: bool,
                     pin: DeploymentPin | None = None) -> Any:
    """litellm's `acompletion` (chat) or `atext_completion` with `kwargs`, directly or, with a
    router, through it: to the pinned deployment if there is one (or, at a batch's tail, to
    one holding two traces fewer that it moves to), else (a new trace) to the healthy
    deployment holding the fewest traces, else (an attempt after a failure) to the model
    group. The trace is pinned where the call was served; a failure unpins it. A pinned chat
    call goes to the Router's call of its deployment without the layers around it, where
    the file allows (`RouterFile.calls_pinned_deployments`)."""
    if spec.router is None:
        litellm = litellm_module()
        return await (litellm.acompletion if chat else litellm.atext_completion)(**kwargs)
    parsed, router = _router(spec.router)
    if not parsed.group(spec.model):
        raise RouterFileError(check_group(spec) or spec.model)
    kwargs = {name: value for name, value in kwargs.items() if name not in ("api_base",
                                                                         "api_key")}
    if pin is not None and pin.deployment is None and not pin.served:
        # A new trace (after a failure the Router chooses): held to its deployment from now,
        # before the call goes out, so that traces starting at once spread over them.
        pin.keep(await _free_deployment(spec))
    elif pin is not None and pin.deployment is not None:
        # A live trace: moved at the tail to a deployment holding two fewer (kept there).
        moved_to = _emptier_deployment(parsed, spec, router, pin.deployment)
        if moved_to is not None:
            pin.keep(moved_to)
    kwargs["model"] = pin.deployment if pin is not None and pin.deployment else spec.model
    try:
        if chat and pin is not None and pin.deployment and parsed.calls_pinned_deployments \
                and calls_a_deployment(router):
            stream = await call_deployment(router, kwargs)
        else:
            stream = await (router.acompletion if chat else router.atext_completion)(**kwargs)
    except BaseException:
        if pin is not None:
            pin.forget()
        raise
    if pin is not None:
        pin.keep(served_by(stream))
    return stream


def unwrapped(stream: Any) -> tuple[Any, Any]:
    """A stream the Router handed back, as the step reader needs it: (what to read and close,
    the provider's stream wrapper under it, which knows whether the provider sent a finish
    reason, or None). The Router wraps a chat stream in a generator of its own (litellm
    1.103.7: `FallbackStreamWrapper`, the provider's wrapper a local of that generator) and a
    text-completion stream in a thin iterator (`_inner`) that has no `aclose`, which is read
    and closed through what it wraps. Anything else is left as it is."""
    inner = getattr(stream, "_inner", None)
    if inner is not None and hasattr(inner, "__aiter__"):
        return inner, None
    frame = getattr(getattr(stream, "_async_generator", None), "ag_frame", None)
    provider = frame.f_locals.get("model_response") if frame is not None else None
    return stream, provider if hasattr(provider, "received_finish_reason") else None


def closes_at_the_last_chunk(spec: ModelSpec) -> bool:
    """Whether a streamed call of `spec` through its router may be closed once the
    provider's last chunk is in (its Router counts nothing at the stream's end)."""
    return spec.router is not None and not router_file(spec.router).counts_stream_ends


def served_by(response: Any) -> str | None:
    """The deployment that served a Router call (its name in the file), from the response's
    hidden parameters; None for a call made without a router."""
    hidden = getattr(response, "_hidden_params", None)
    if not isinstance(hidden, dict):
        inner = getattr(response, "completion_stream", None)  # a text completion's wrapper
        hidden = getattr(inner, "_hidden_params", None)
    if isinstance(hidden, dict):
        found = hidden.get("model_id")
        return str(found) if found else None
    return None
