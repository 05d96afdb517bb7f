"""One fresh sandbox per episode on HF Jobs, as the arena's admission starts them: the task's
pinned digest, the command and environment the arena read from its config, the port exposed with
a token (never public), labelled with the run, and canceled when its episode ends, whatever
happens (the run's `pool` starts them ahead of need and cancels them). A sandbox whose server
exits before serving is seen at once, its exit and the last lines of its log said (`exited`).
Then OpenEnv's WebSocket protocol to it (`reset` with the task's reset data, `step`,
`close`), with a token as `Authorization: Bearer`: openenv-core's own client cannot send a header.

Tokens never mixed up. `HF_TOKEN` starts, inspects and cancels the sandboxes: it stays in this
process. What reaches a server (HF's proxy may pass request headers on) is a reader: a read token
of an account whose only organization is the namespace the sandbox runs in, worth nothing to
steal (`reader_refusal`). Training sandboxes run in `ARENA_SANDBOX_NAMESPACE` and get
`ARENA_SANDBOX_TOKEN`; held-out sandboxes run apart, in `ARENA_EVAL_NAMESPACE`, and get
`ARENA_EVAL_TOKEN` (`readers_refusal`: neither reader can read the other's namespace). No request
to a sandbox follows a redirect, keeps cookies or takes a proxy from the environment.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from . import contract

# HF's label keys and values: 1 to 100 of [A-Za-z0-9_-] (the arena's `domain::job_labels`).
_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
# The purpose labels of a training sandbox and of a held-out evaluation's
# (`domain::job_labels::TRAIN`, `EVAL`).
TRAIN_PURPOSE = "openenv-train"
EVAL_PURPOSE = "openenv-eval"
# The biggest message a server may send; the arena's admission reads the same.
MAX_MESSAGE_BYTES = 1 << 20

class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx from a sandbox is its answer, never followed: following would carry the reader's
    token to whatever address the participant's server names."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


# No proxy from the environment, no redirects, and (build_opener adds none) no cookie jar.
_SANDBOX_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


def health(url: str, reader: str) -> int | None:
    """The status a sandbox answers `GET /health` with, asked with the reader's token (a 3xx is an
    answer, never followed); None when nothing answered."""
    request = urllib.request.Request(f"{url}/health", headers={"Authorization": f"Bearer {reader}"})
    try:
        with _SANDBOX_HTTP.open(request, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError, ValueError):
        return None


def reader_refusal(whoami: dict, sandbox_namespace: str) -> str | None:
    """Why a token (HF's whoami-v2 answer for it) may not be sent to participants' sandboxes, as
    the arena's `domain::identity::sandbox_reader_refusal` decides: it must be a read token of an
    account whose only organization is the sandbox namespace. None: it may."""
    who = whoami.get("name", "?")
    role = ((whoami.get("auth") or {}).get("accessToken") or {}).get("role")
    if role == "fineGrained":
        return f"{who}'s token is fine-grained: the cluster cannot tell what it may write; give it a read token"
    if role != "read":
        return f"{who}'s token is a {role} token, which can write; give it a read token"
    orgs = [o.get("name") for o in whoami.get("orgs") or []]
    others = [o for o in orgs if o != sandbox_namespace]
    if others:
        return (f"{who} is a member of {others[0]}: a participant given the token could read its private "
                f"repositories; use an account whose only organization is {sandbox_namespace}")
    if sandbox_namespace not in orgs:
        return f"{who} is not a member of {sandbox_namespace}: HF would refuse it at every sandbox"
    return None


def readers_refusal(sandbox_whoami: dict, eval_whoami: dict, sandbox_namespace: str,
                    eval_namespace: str) -> str | None:
    """Why the two readers may not be used (None: they may), named by their settings: training
    and held-out sandboxes run in namespaces of their own, and neither reader can read the
    other's (a participant's server receives the sandbox reader: with it, it could read the
    held-out environments' jobs)."""
    if eval_namespace == sandbox_namespace:
        return (f"ARENA_EVAL_NAMESPACE is {eval_namespace}, the sandbox namespace: held-out episodes must run "
                "in a namespace of their own")
    orgs = [o.get("name") for o in sandbox_whoami.get("orgs") or []]
    if eval_namespace in orgs:
        return (f"ARENA_SANDBOX_TOKEN: {sandbox_whoami.get('name', '?')} is a member of {eval_namespace}: a "
                "participant given it could read the held-out namespace")
    why = reader_refusal(sandbox_whoami, sandbox_namespace)
    if why:
        return f"ARENA_SANDBOX_TOKEN: {why}"
    why = reader_refusal(eval_whoami, eval_namespace)
    if why:
        return f"ARENA_EVAL_TOKEN: {why}"
    return None


def stage(job) -> str:
    """A job's stage as HF spells it (`JobStage` is a str enum whose `str()` is its name)."""
    value = job.status.stage if job.status else ""
    return str(getattr(value, "value", value) or "")


LIVE = ("SCHEDULING", "RUNNING", "UPDATING")
ENDED = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
# How often a sandbox's stage is read again while its `/health` is asked.
STAGE_EVERY_S = 1.0
# What of an exited server's own log is quoted: its last lines, and at most this many characters.
LOG_LINES = 5
LOG_CHARS = 500


class SandboxError(Exception):
    """A sandbox that did not serve: the episode gets no reward, and an event says why."""


class SandboxEnded(SandboxError):
    """A sandbox whose job ended before it served (its server exited): nothing left to cancel."""


def label(value: str) -> str:
    if not _LABEL.match(value):
        raise ValueError(f"not a label HF accepts: {value!r}")
    return value


def exposed_url(urls, port: int, exposed: list | tuple | None = None) -> str | None:
    """The URL of `port` among a job's exposed URLs: the one whose host holds `--{port}.` (HF's
    `https://{job}--{port}.hf.jobs`, as the arena and huggingface_hub pick it), never by its place
    in a list of several. A job that exposes just that one port has one URL, whatever its host
    (the stand-in's is a loopback port of its own, `http://127.0.0.1:{proxy_port}`): when HF
    lists exactly one, it is that port's."""
    urls = list(urls or [])
    for url in urls:
        host = url.split("://", 1)[-1].split("/", 1)[0]
        if f"--{port}." in host:
            return url.rstrip("/")
    if list(exposed or [port]) == [port] and len(urls) == 1:
        return urls[0].rstrip("/")
    return None


@dataclass
class Sandboxes:
    """Starts sandboxes in `namespace` through `api` (whose token may start jobs there) and talks
    to them with `reader` (the only credential a sandbox there ever sees, the setting named
    `reader_setting`). `secrets` are every credential the cluster holds: none of them is ever
    quoted from a sandbox's status or log."""

    api: object  # huggingface_hub.HfApi
    namespace: str
    reader: str
    run_label: str
    reader_setting: str = "ARENA_SANDBOX_TOKEN"
    secrets: tuple = field(default=(), repr=False)

    def start(self, task: dict, timeout_s: int, purpose: str = TRAIN_PURPOSE):
        """Starts one sandbox of `task`, which HF stops after `timeout_s` whatever happens."""
        env = dict(task.get("env") or {})
        return self.api.run_job(
            image=task["image"],
            command=list(task["command"]),
            env=env or None,
            flavor="cpu-basic",
            timeout=int(timeout_s),
            labels={"arena-run": self.run_label, "arena-purpose": purpose,
                    "arena-task": label(task["task_label"])},
            expose=[int(task["port"])],
            namespace=self.namespace,
        )

    def cancel(self, job_id: str) -> None:
        self.api.cancel_job(job_id=job_id, namespace=self.namespace)

    def connect(self, url: str, timeout_s: float) -> "Connection":
        """An episode's connection to a sandbox that serves at `url`, with the reader."""
        return Connection(url, self.reader, timeout_s)

    def running(self) -> list:
        """This run's sandboxes HF still lists as live (what a cleanup must stop)."""
        jobs = self.api.list_jobs(labels={"arena-run": self.run_label}, namespace=self.namespace)
        mine = (TRAIN_PURPOSE, EVAL_PURPOSE)
        return [j for j in jobs if stage(j) in LIVE and (j.labels or {}).get("arena-purpose") in mine]

    def wait_serving(self, job_id: str, port: int, deadline: float) -> str:
        """The sandbox's URL once HF runs it and its server answers `GET /health` with 200. The
        job's stage is read again every STAGE_EVERY_S while `/health` is asked: a server that
        exited is seen at once (`exited`), not at the deadline."""
        url, looked = None, 0.0
        while time.monotonic() < deadline:
            if time.monotonic() - looked >= STAGE_EVERY_S:
                job = self.api.inspect_job(job_id=job_id, namespace=self.namespace)
                looked, now = time.monotonic(), stage(job)
                if now in ENDED:
                    raise SandboxEnded(self.exited(job_id, now, job.status.message))
                if url is None and now in ("RUNNING", "UPDATING"):
                    url = exposed_url(job.status.expose_urls, port, [port])
            if url is not None:
                status = health(url, self.reader)
                if status == 200:
                    return url
                if status in (401, 403):
                    raise SandboxError(f"the sandbox's proxy refused the cluster's reader ({self.reader_setting}): "
                                       "the arena's fault, not the image's")
            time.sleep(0.5)
        if url is None:
            raise SandboxError(f"HF gave no URL for the sandbox's port {port} within its start allowance")
        raise SandboxError("the image never answered GET /health within its start allowance")

    def exited(self, job_id: str, now: str, message: str | None) -> str:
        """Why a sandbox ended before serving, in words: its stage and status message, and the last
        lines of its own log (HF's job logs), every credential of the cluster written `***`."""
        try:
            lines = [x for x in self.api.fetch_job_logs(job_id=job_id, namespace=self.namespace, tail=LOG_LINES)
                     if x.strip()][-LOG_LINES:]
        except Exception as e:  # noqa: BLE001 - the exit is said without its log
            lines = [f"(its log could not be read: {type(e).__name__})"]
        said = f"the server exited before serving ({now}"
        said += f": {_scrub(message, self.secrets)})" if message else ")"
        tail = _scrub(" | ".join(x.rstrip() for x in lines), self.secrets)
        if len(tail) > LOG_CHARS:
            tail = "…" + tail[-LOG_CHARS:]
        return f"{said}; its last lines: {tail}" if tail else f"{said}; its log is empty"


def _scrub(text: str, secrets) -> str:
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def run_sandboxes(settings, run_label: str) -> tuple:
    """A run's two places: its training sandboxes and its held-out ones, apart."""
    api = settings.hf_api()
    secrets = (settings.hf_token, settings.sandbox_token, settings.eval_token)
    return (Sandboxes(api, settings.sandbox_namespace, settings.sandbox_token, run_label, secrets=secrets),
            Sandboxes(api, settings.eval_namespace, settings.eval_token, run_label, "ARENA_EVAL_TOKEN", secrets))


def cancel_all(places) -> list:
    """Stops every sandbox of the run HF still lists as live, in each place; what could not be
    listed or stopped, in words (the run's cleanup goes on past each)."""
    problems = []
    for place in places:
        try:
            left = place.running()
        except Exception as e:  # noqa: BLE001 - reported, the rest still runs
            problems.append(f"listing the run's sandboxes in {place.namespace} failed: {e}")
            continue
        for job in left:
            try:
                place.cancel(job.id)
            except Exception as e:  # noqa: BLE001
                problems.append(f"canceling sandbox {job.id} failed: {e}")
    return problems


# The shortest run of a credential's characters that is masked (`domain::openenv::evidence`).
MASKED_RUN = 8


def _forms(secret: str) -> list:
    """A credential as sent, reversed, in hex, URL-encoded, and in base64 (standard and URL-safe)
    at each of the three alignments it can take inside a longer encoded text."""
    import base64
    from urllib.parse import quote

    raw = secret.encode()
    forms = [secret, secret[::-1], raw.hex(), raw.hex().upper(), quote(secret, safe="-._~")]
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for pad in range(3):
            data = b"\0" * pad + raw
            text = encode(data).decode()
            skip, keep = -(-pad * 4 // 3), (len(data) // 3) * 4
            if keep > skip:
                forms.append(text[skip:keep])
    return [f for f in forms if len(f) >= MASKED_RUN]


def masked(text: str, secrets) -> str:
    """`text` with every run of MASKED_RUN or more characters of a credential, in any of its forms,
    replaced by `***` (as the arena masks what a server sent)."""
    marked = [False] * len(text)
    for secret in (s for s in secrets if s and len(s) >= MASKED_RUN):
        for form in _forms(secret):
            for start in range(len(form) - MASKED_RUN + 1):
                window, at = form[start:start + MASKED_RUN], text.find(form[start:start + MASKED_RUN])
                while at >= 0:
                    marked[at:at + MASKED_RUN] = [True] * MASKED_RUN
                    at = text.find(window, at + 1)
    out, in_run = [], False
    for c, m in zip(text, marked):
        if m and not in_run:
            out.append("***")
        elif not m:
            out.append(c)
        in_run = m
    return "".join(out)


class Connection:
    """OpenEnv's WebSocket protocol to one sandbox (`/ws`), with the sandbox reader's token.
    websockets' sync client follows no redirect (a 3xx is `InvalidStatus`) and keeps no cookie;
    `proxy=None` takes none from the environment."""

    def __init__(self, url: str, token: str, timeout_s: float):
        from websockets.sync.client import connect

        ws = url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
        self.timeout_s = timeout_s
        self.token = token
        self.ws = connect(
            f"{ws}/ws",
            additional_headers={"Authorization": f"Bearer {token}"},
            max_size=MAX_MESSAGE_BYTES,
            open_timeout=timeout_s,
            proxy=None,
        )

    def exchange(self, message: dict) -> "contract.Observed":
        """Sends one message; the server's observation, or SandboxError for anything else."""
        self.ws.send(json.dumps(message))
        try:
            text = self.ws.recv(timeout=self.timeout_s)
        except TimeoutError as e:
            raise SandboxError(f"the server did not answer within {self.timeout_s:.0f} s") from e
        try:
            answer = json.loads(text)
        except ValueError as e:
            raise SandboxError("the server answered something that is not JSON") from e
        observed = contract.ws_observation(answer)
        if observed is None:
            # What the server answered may echo the reader's token in any form: masked before the
            # text leaves the trainer (editors, the database and backups read it).
            raise SandboxError(f"the server answered {masked(str(text)[:200], [self.token])}")
        return observed

    def close(self) -> None:
        try:
            self.ws.send(json.dumps({"type": "close"}))
        except Exception:  # noqa: BLE001 - the sandbox is canceled anyway
            pass
        self.ws.close()
