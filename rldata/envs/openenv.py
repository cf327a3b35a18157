"""``openenv``: an OpenEnv environment served over HTTP/WebSocket, driven as an rldata environment.

OpenEnv (``openenv``) serves a gym-style environment: ``reset`` / ``step`` / ``state``.  Its
HTTP ``/reset`` and ``/step`` endpoints build a fresh environment per request (stateless), so an
episode holds one WebSocket session on ``/ws``: the server gives each connection its own
environment instance.  The protocol is JSON messages ``{"type": "reset" | "step" | "close", "data":
{...}}`` answered by ``{"type": "observation", "data": {"observation": {...}, "reward", "done"}}``
or ``{"type": "error", "data": {"message": ...}}``.

One episode here is one session:

- ``reset(task, seed)``: connect, send ``reset`` with the task's stored reset arguments
  (``metadata["reset"]``, written by ``rldata ingest --env``) or ``{"seed": seed}``; the opening
  messages are the spec's system prompt and the observation's text as a user message;
- ``step(assistant_message)``: send ``step`` with ``{action_field: content}``; the observation's
  text comes back as one message (role ``observation_role``: ``user``, or ``tool`` for a tool env),
  ``done`` is the server's, and ``info["env_reward"]`` the episode's return so far (the sum of the
  step rewards), which the ``env-reward`` verifier turns into the verdict (``pass_reward``: the
  return that counts as a pass);
- ``close()``: send ``close`` and drop the connection.

Anything else the server sends (not JSON, an error message, no observation, a non-numeric reward)
raises, and :mod:`rldata.envs.guard` makes it the episode's ``env_error``; every receive waits at
most ``step_timeout_s``, so a slow or killed server ends the episode, never the job.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from rldata.envs.base import BaseEnv, EpisodeConfig, Message, StepResult, make_env, register
from rldata.envs.guard import guarded_close, guarded_reset
from rldata.errors import RldataError

__all__ = [
    "OpenEnvEnv",
    "OpenEnvError",
    "connect_session",
    "exchange",
    "observation_text",
    "probe",
    "reset_tasks",
    "step_reward",
    "ws_url",
]

_TEXT_FIELDS = ("prompt", "text", "message", "content", "output", "observation")
_ROLES = ("user", "tool")
MAX_REPLY_BYTES = 4_000_000  # a reply bigger than this is garbage, not an observation


class OpenEnvError(RldataError):
    """The server's reply was not an OpenEnv observation (becomes the episode's env_error)."""


def ws_url(url: str) -> str:
    """``http://host:port[/prefix]`` -> ``ws://host:port[/prefix]/ws``."""
    u = url.rstrip("/")
    if u.startswith("https://"):
        u = "wss://" + u[len("https://") :]
    elif u.startswith("http://"):
        u = "ws://" + u[len("http://") :]
    elif not u.startswith(("ws://", "wss://")):
        raise RldataError(f"OpenEnv url {url!r}: expected http://HOST:PORT (or https://, ws://)")
    return u if u.endswith("/ws") else u + "/ws"


def _http_url(url: str) -> str:
    u = url.rstrip("/")
    u = u.removesuffix("/ws")
    return "http" + u[len("ws") :] if u.startswith("ws") else u


def probe(url: str, *, timeout_s: float = 5.0) -> dict[str, Any]:
    """The server's ``/health`` answer; RldataError (one line, naming the url) when it is not up."""
    ws_url(url)  # the url's form first
    health = _http_url(url) + "/health"
    try:
        with urllib.request.urlopen(health, timeout=timeout_s) as r:
            body = r.read(65536)
    except urllib.error.HTTPError as e:
        raise RldataError(f"OpenEnv server at {url}: /health answered HTTP {e.code}") from None
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, "reason", e)
        raise RldataError(f"OpenEnv server at {url} is not reachable: {why} (is it running?)") from None
    try:
        data = json.loads(body)
    except ValueError:
        raise RldataError(f"OpenEnv server at {url}: /health did not answer JSON") from None
    if not isinstance(data, dict):
        raise RldataError(f"OpenEnv server at {url}: /health did not answer a JSON object")
    return data


def observation_text(obs: Mapping[str, Any], field: str | None = None) -> str:
    """What the model reads of an observation: ``field`` if given, else the first text field among
    prompt/text/message/content/output/observation, else a chat ``messages`` list's last content,
    else the observation as JSON."""
    if field is not None:
        v = obs.get(field)
        if not isinstance(v, str):
            raise OpenEnvError(f"observation field {field!r} is not text (got {type(v).__name__})")
        return v
    for k in _TEXT_FIELDS:
        if isinstance(obs.get(k), str):
            return obs[k]
    msgs = obs.get("messages")
    if isinstance(msgs, list) and msgs and isinstance(msgs[-1], Mapping):
        content = msgs[-1].get("content")
        if isinstance(content, str):
            return content
    return json.dumps(dict(obs), sort_keys=True, default=str)


def step_reward(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise OpenEnvError(f"reward {value!r} is not a finite number")
    return float(value)


def exchange(conn, msg: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
    """Send one message on a session and read the server's answer: the observation reply's ``data``
    (``observation``, ``reward``, ``done``); OpenEnvError for anything else."""
    conn.send(json.dumps(msg))
    raw = conn.recv(timeout=timeout_s)
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if len(raw) > MAX_REPLY_BYTES:
        raise OpenEnvError(f"reply of {len(raw)} characters (at most {MAX_REPLY_BYTES})")
    try:
        reply = json.loads(raw)
    except ValueError:
        raise OpenEnvError(f"reply is not JSON: {raw[:80]!r}") from None
    if not isinstance(reply, dict):
        raise OpenEnvError(f"reply is not a JSON object: {raw[:80]!r}")
    if reply.get("type") == "error":
        data = reply.get("data") if isinstance(reply.get("data"), dict) else {}
        raise OpenEnvError(f"server error: {str(data.get('message', reply))[:300]}")
    data = reply.get("data")
    if reply.get("type") != "observation" or not isinstance(data, dict):
        raise OpenEnvError(f"reply is not an observation: {raw[:80]!r}")
    if not isinstance(data.get("observation"), dict):
        raise OpenEnvError("reply has no observation object")
    if not isinstance(data.get("done", False), bool):
        raise OpenEnvError(f"done is {data.get('done')!r}, not a bool")
    return data


def connect_session(url: str, *, timeout_s: float):
    """An open WebSocket session on the server's ``/ws`` (the server gives it its own environment)."""
    from websockets.sync.client import connect

    # entered as the context manager it is (websockets >= 15 warns on a bare connect()); the
    # caller's close() ends it
    return connect(ws_url(url), open_timeout=timeout_s, close_timeout=1, max_size=MAX_REPLY_BYTES).__enter__()


@register("openenv")
class OpenEnvEnv(BaseEnv):
    """One WebSocket session per episode against an OpenEnv server (module docstring)."""

    name = "openenv"
    version = "1"
    spec_fields = ("step_timeout_s",)
    needs_config = True  # no default spec: not listed as a bundled environment before it is registered

    def __init__(
        self,
        *,
        system_prompt: str | None = None,
        url: str | None = None,
        action_field: str = "message",
        observation_field: str | None = None,
        observation_role: str = "user",
        pass_reward: float = 1.0,
        step_timeout_s: float = EpisodeConfig.step_timeout_s,
        image: str | None = None,  # the container image that serves it (--openenv-image), if any
        **config: Any,
    ):
        super().__init__(system_prompt=system_prompt, **config)
        self.image = image
        if not isinstance(url, str) or not url:
            raise RldataError("config key 'url': expected the OpenEnv server's http://HOST:PORT")
        self.url, self.ws = url, ws_url(url)
        if not isinstance(action_field, str) or not action_field:
            raise RldataError("config key 'action_field': expected the action's text field name")
        if observation_field is not None and not isinstance(observation_field, str):
            raise RldataError("config key 'observation_field': expected a field name")
        if observation_role not in _ROLES:
            raise RldataError(f"config key 'observation_role': expected one of {', '.join(_ROLES)}")
        if isinstance(pass_reward, bool) or not isinstance(pass_reward, (int, float)):
            raise RldataError("config key 'pass_reward': expected a number")
        if not math.isfinite(pass_reward):
            raise RldataError("config key 'pass_reward': expected a finite number")
        self.action_field, self.observation_field = action_field, observation_field
        self.observation_role, self.pass_reward = observation_role, float(pass_reward)
        self.timeout = float(step_timeout_s)
        self.conn = None
        self.total: float | None = None
        self.steps = 0
        self.initial_info: dict[str, Any] = {}

    @classmethod
    def task_rows(cls, spec, *, n: int, seed: int = 0) -> list[dict[str, Any]]:
        """``rldata ingest --env NAME --n K``: see :func:`reset_tasks`."""
        return reset_tasks(spec, n=n, seed=seed)

    @classmethod
    def preflight(cls, config: Mapping[str, Any], *, timeout_s: float) -> None:
        """Before a job or a registration: is the server up?  One line when it is not."""
        url = str(config.get("url") or "")
        try:
            probe(url, timeout_s=min(timeout_s, 10.0))
        except RldataError as e:
            image, port = config.get("image"), urllib.parse.urlsplit(url).port
            if not isinstance(image, str) or not image or port is None:
                raise
            # registered from its image (rldata.envs.openenv_container): say how to serve it again
            raise RldataError(
                f"{e}; start its image: docker run -d -p 127.0.0.1:{port}:8000 {image}"
            ) from None

    def _send(self, msg: dict[str, Any]) -> dict[str, Any]:
        return exchange(self.conn, msg, timeout_s=self.timeout)

    def reset(self, task: Mapping[str, Any], seed: int | None) -> list[Message]:
        args = _reset_args(task, seed)
        self.conn = connect_session(self.url, timeout_s=self.timeout)
        data = self._send({"type": "reset", "data": args})
        self.total, self.steps = step_reward(data.get("reward")), 0
        # the episode's info from the start: an episode cut short (length) is scored by what it has
        self.initial_info = {"env_reward": self.total or 0.0, "pass_reward": self.pass_reward}
        text = observation_text(data["observation"], self.observation_field)
        out = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return out + [{"role": "user", "content": text}]

    def step(self, assistant_message: Message) -> StepResult:
        if self.conn is None:
            raise OpenEnvError("step() before reset()")
        data = self._send({"type": "step", "data": {self.action_field: assistant_message["content"]}})
        self.steps += 1
        r = step_reward(data.get("reward"))
        if r is not None:
            self.total = r if self.total is None else self.total + r
        done = bool(data.get("done", False))
        info: dict[str, Any] = {"env_reward": self.total or 0.0, "pass_reward": self.pass_reward}
        if self.observation_role == "tool":
            info["tool_calls"] = self.steps
        text = observation_text(data["observation"], self.observation_field)
        # the last observation too: the stored conversation shows how the episode ended
        obs = [{"role": self.observation_role, "content": text}] if text else []
        return StepResult(observations=obs, done=done, info=info)

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is None:
            return
        try:
            conn.send(json.dumps({"type": "close", "data": {}}))
        except Exception:  # noqa: BLE001, S110 - the server may be gone already: closing is best effort
            pass
        conn.close()


def _reset_args(task: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    meta = task.get("metadata")
    if isinstance(meta, str) and meta:
        try:
            meta = json.loads(meta)
        except ValueError:
            meta = None
    if isinstance(meta, Mapping) and isinstance(meta.get("reset"), Mapping):
        return dict(meta["reset"])
    return {} if seed is None else {"seed": seed}


def reset_tasks(spec, *, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Tasks from the environment's own reset: seeds ``seed .. seed+n-1``, each opening observation a
    task prompt (``domain`` env-reward: the environment's reward is the verdict).  The reset
    arguments are stored in the task's metadata, so every episode of the task replays that reset."""
    probe(str(spec.config.get("url") or ""), timeout_s=min(spec.episode.step_timeout_s, 10.0))

    rows = []
    for i in range(n):
        args = {"seed": seed + i}
        task = {"metadata": json.dumps({"reset": args})}
        env = make_env(spec)
        g = guarded_reset(env, task, None, timeout_s=spec.episode.step_timeout_s)
        if g.finish_reason == "env_error":
            raise RldataError(f"OpenEnv reset(seed={seed + i}) failed: {g.error}")
        guarded_close(env, timeout_s=spec.episode.step_timeout_s)
        prompt = g.messages[-1]["content"]
        rows.append(
            {
                "source": "openenv",
                "domain": "env-reward",
                "prompt": prompt,
                "answer": None,
                "metadata": json.dumps({"reset": args}),
            }
        )
    return rows
