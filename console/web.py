"""The console's Flask application: log-in and sessions, the checks every request passes, security
headers, the audit log, and the page blueprints (`pages_*`).

Every request but the log-in page and static files needs a session of an account that still
exists, used within `session_idle_ms`. Every request that is not GET or HEAD must carry the
session's CSRF token (`guard`); a view marked `@change("what")` also needs the admin role, and
its outcome is written to the audit log (`rocketstore.console.audit`) with the account, the
address it came from and what was asked. Passwords and the admin secret never reach a log or a
page. Sessions are Flask's signed cookies (HttpOnly, SameSite=Strict) under a key made at start,
so a restart logs everyone out.

Thread-safety: waitress calls the application from its worker threads; what they share (the
sampler, the accounts, the throttle) is thread-safe.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import Blueprint, Flask, abort, current_app, flash, g, redirect, render_template, request, session, url_for
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from client import AdminClient, RocketStoreError

from . import render
from .accounts import Accounts, Role
from .config import ConsoleConfig
from .fleet import BrokerState, Snapshot
from .guard import (
    CSRF_FIELD,
    CSRF_HEADER,
    SAFE_METHODS,
    LoginThrottle,
    csrf_ok,
    may_change,
    new_csrf_token,
    session_fresh,
)
from .sampler import Sampler

log = logging.getLogger("rocketstore.console")
audit_log = logging.getLogger("rocketstore.console.audit")
T = TypeVar("T")

EXTENSION = "rocketstore_console"
MAX_FLASH_CHARS = 600
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Console:
    config: ConsoleConfig
    sampler: Sampler
    accounts: Accounts
    throttle: LoginThrottle
    clock_ms: Callable[[], int]


def console() -> Console:
    return current_app.extensions[EXTENSION]


def snapshot() -> Snapshot:
    return console().sampler.latest()


def change(action: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Marks a view that changes something: admin role only, audited as `action`."""

    def mark(view: Callable[..., Any]) -> Callable[..., Any]:
        view.change_action = action  # type: ignore[attr-defined]
        return view

    return mark


def audit(action: str, result: str, **details: Any) -> None:
    """One line of the audit log: who, from where, what, how it ended, and what was asked."""
    account = getattr(g, "account", None) or session.get("account") or "-"
    asked = " ".join(f"{k}={v!r}" for k, v in details.items())
    audit_log.info("account=%s from=%s action=%s result=%s %s", account, request.remote_addr, action, result, asked)


def say(text: str, category: str = "info") -> None:
    flash(text if len(text) <= MAX_FLASH_CHARS else text[:MAX_FLASH_CHARS] + "...", category)


def ask_broker(broker: BrokerState, call: Callable[[AdminClient], T]) -> tuple[T | None, str]:
    """(`call`'s answer on the broker's admin client, "") or (None, why it failed)."""
    try:
        return call(console().sampler.fleet.admin(broker.endpoint)), ""
    except (RocketStoreError, ValueError) as exc:
        return None, str(exc)


def ask(group: str, call: Callable[[AdminClient], T], *, write: bool = False) -> tuple[T | None, str]:
    """`ask_broker` of the group's master; for a read, of any broker that answers when the group
    has no master. (None, why) when the group is unknown or none of its brokers fits."""
    now = snapshot()
    if group not in now.groups():
        return None, f"no broker group {group!r} is known"
    broker = now.master(group)
    if broker is None and not write:
        broker = next(iter(now.reachable(group)), None)
    if broker is None:
        return None, f"no {'master' if write else 'broker'} of {group} answers"
    return ask_broker(broker, call)


def broker_groups() -> list[str]:
    """The groups known by name (brokers that never answered have none)."""
    return [group for group in snapshot().groups() if group]


def ask_every_group(call: Callable[[AdminClient], T]) -> list[tuple[str, T | None, str]]:
    """(group, answer, error) of `call` asked of each group (reads: its master, else any broker)."""
    return [(group, *ask(group, call)) for group in broker_groups()]


def safe_next(target: str | None) -> str:
    """A place to go after logging in: a path of this site only."""
    if not target:
        return url_for("cluster.cluster")
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return url_for("cluster.cluster")
    return target


# -- log-in --------------------------------------------------------------------------------------

auth = Blueprint("auth", __name__)


@auth.get("/login")
def login_page() -> str:
    session.setdefault("csrf", new_csrf_token())
    return render_template("login.html", next=request.args.get("next", ""))


@auth.post("/login")
def login() -> Response | tuple[str, int]:
    state = console()
    source = request.remote_addr or "-"
    now = state.clock_ms()
    name = request.form.get("account", "")
    wait_ms = state.throttle.retry_after_ms(source, now)
    if wait_ms:
        audit("login", "throttled", name=name)
        say(f"Too many failed log-ins from {source}: try again in {wait_ms // 1000 + 1} s.", "error")
        return render_template("login.html", next=request.form.get("next", "")), 429
    account = state.accounts.verify(name, request.form.get("password", ""))
    if account is None:
        state.throttle.failed(source, now)
        audit("login", "refused", name=name)
        say("Wrong account or password.", "error")
        return render_template("login.html", next=request.form.get("next", "")), 401
    state.throttle.succeeded(source)
    session.clear()
    session.update(account=account.name, csrf=new_csrf_token(), seen_ms=now)
    g.account = account.name
    audit("login", "ok", role=account.role.value)
    return redirect(safe_next(request.form.get("next")))


@auth.post("/logout")
def logout() -> Response:
    audit("logout", "ok")
    session.clear()
    return redirect(url_for("auth.login_page"))


# -- the checks of every request -----------------------------------------------------------------


def _guard() -> Response | None:
    if request.endpoint == "static":
        return None
    state = console()
    if request.method not in SAFE_METHODS:
        sent = request.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
        if not csrf_ok(session.get("csrf"), sent):
            audit("csrf", "refused", method=request.method, path=request.path)
            abort(400, "the form's CSRF token is missing or stale: reload the page and try again")
    if request.endpoint in ("auth.login_page", "auth.login"):
        return None
    name = session.get("account")
    role = state.accounts.role_of(name) if name else None
    now = state.clock_ms()
    if role is None or not session_fresh(session.get("seen_ms"), now, state.config.session_idle_ms):
        # The CSRF token stays: a log-in page open in another tab must still work.
        session.pop("account", None)
        session.pop("seen_ms", None)
        if request.path.startswith("/api/"):
            abort(401, "log in first")
        return redirect(url_for("auth.login_page", next=request.full_path if request.method == "GET" else None))
    session["seen_ms"] = now
    g.account, g.role = name, role
    view = current_app.view_functions.get(request.endpoint or "")
    action = getattr(view, "change_action", None)
    if action is not None and not may_change(role):
        audit(action, "forbidden", path=request.path)
        abort(403, f"account {name} is {role.value}: it cannot change anything")
    return None


def _headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = _CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "same-origin"
    if request.endpoint != "static":
        response.headers["Cache-Control"] = "no-store"
    return response


def _http_error(error: HTTPException) -> tuple[str, int]:
    return render_template("error.html", code=error.code, text=error.description), error.code or 500


def _unexpected(error: Exception) -> tuple[str, int]:
    log.exception("%s %s failed", request.method, request.path)
    return render_template("error.html", code=500, text="internal error; see the console's log"), 500


def _context() -> dict[str, Any]:
    role: Role | None = getattr(g, "role", None)
    state = console()
    return {
        "account": getattr(g, "account", None),
        "role": role.value if role else None,
        "may_change": may_change(role),
        "csrf_field": CSRF_FIELD,
        "csrf_token": session.get("csrf", ""),
        "now_ms": state.clock_ms(),
        "refresh_ms": state.config.sample_interval_ms,
        "uses_secret": state.accounts.uses_secret,
        "age": lambda ms: render.age_text(ms, state.clock_ms()),
    }


def create_app(
    config: ConsoleConfig,
    sampler: Sampler,
    accounts: Accounts,
    *,
    clock_ms: Callable[[], int] = wall_ms,
    throttle: LoginThrottle | None = None,
) -> Flask:
    from . import pages_cluster, pages_connections, pages_groups, pages_messages, pages_topics

    app = Flask(__name__, static_folder="static", template_folder="templates")
    app.secret_key = secrets.token_bytes(32)
    app.config.update(
        SESSION_COOKIE_NAME="rocketstore_console",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        MAX_CONTENT_LENGTH=1024 * 1024,
    )
    app.extensions[EXTENSION] = Console(config, sampler, accounts, throttle or LoginThrottle(), clock_ms)
    app.jinja_env.filters.update(render.filters())
    app.before_request(_guard)
    app.after_request(_headers)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected)
    app.context_processor(_context)
    for blueprint in (
        auth,
        pages_cluster.pages,
        pages_topics.pages,
        pages_groups.pages,
        pages_messages.pages,
        pages_connections.pages,
    ):
        app.register_blueprint(blueprint)
    return app
