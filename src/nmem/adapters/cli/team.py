"""`nmem user`, `nmem token` and `nmem audit`: the team server's users, tokens and audit trail
(nmem.team.accounts, docs/team.md). Run on the server's machine, against the server's store."""

from __future__ import annotations

import click

from nmem.adapters.cli.app import State, emit, format_option, note, pass_state
from nmem.adapters.cli.output import Table, when
from nmem.adapters.cli.params import Integer
from nmem.team import accounts as team
from nmem.team import stamp as team_stamp


@click.group("user")
def user() -> None:
    """Users of a team server. The first `user add` turns the server multi-user: every
    HTTP request then needs one user's token (`nmem token create`)."""


@user.command("add")
@click.argument("name")
@click.option("--admin", is_flag=True, help="May manage users and read every user's audit rows over HTTP.")
@format_option
@pass_state
def user_add(state: State, name: str, admin: bool, fmt: str | None) -> None:
    """Add a user NAME (lower-case letters, digits, '.', '_', '-')."""
    service = state.service()
    data = team.add_user(service.store, name, admin, service.now())
    emit(state, fmt, data, list)
    note(f"added user {data['name']}{' (admin)' if admin else ''}; create a token with `nmem token create {name}`")


@user.command("list")
@format_option
@pass_state
def user_list(state: State, fmt: str | None) -> None:
    """Users and how many live tokens each holds."""
    rows = team.users(state.service().store)
    emit(state, fmt, {"users": rows}, lambda: [Table(("user", "admin", "tokens", "added"), [
        (r["name"], "yes" if r["admin"] else "", str(r["tokens"]), when(r["created_at"])) for r in rows])])


@click.group("token")
def token() -> None:
    """Tokens of a team server's users (only a digest is stored)."""


@token.command("create")
@click.argument("name")
@format_option
@pass_state
def token_create(state: State, name: str, fmt: str | None) -> None:
    """Create a token for user NAME and print it: it is shown this once."""
    service = state.service()
    data = team.create_token(service.store, name, service.now())
    emit(state, fmt, data, list)
    if state.format(fmt) in ("text", "markdown"):
        click.echo(data["token"])
    note(f"token {data['id']} for {name}: store it now, nmem keeps only its digest")


@token.command("revoke")
@click.argument("ref")
@format_option
@pass_state
def token_revoke(state: State, ref: str, fmt: str | None) -> None:
    """Revoke token REF (its id, from `token list`), or every token of the user named REF."""
    service = state.service()
    data = team.revoke(service.store, ref, service.now())
    if not team_stamp.bump(state.settings.home):   # a server on this home drops what it kept at once
        note(f"could not write {team_stamp.path(state.settings.home)}: a server on this home refuses the "
             "token once its kept check runs out (http.token_cache_ms)")
    emit(state, fmt, data, list)
    note(f"revoked {data['revoked']} token(s)")


@token.command("list")
@click.option("--user", "name", help="Only this user's tokens.")
@format_option
@pass_state
def token_list(state: State, name: str | None, fmt: str | None) -> None:
    """Token ids, owners, and when each was created or revoked (never the secrets)."""
    rows = team.tokens(state.service().store, name)
    emit(state, fmt, {"tokens": rows}, lambda: [Table(("id", "user", "created", "revoked"), [
        (str(r["id"]), r["name"], when(r["created_at"]), when(r["revoked_at"]) if r["revoked_at"] else "")
        for r in rows])])


@click.command("audit")
@click.option("--user", "name", help="Only this user's rows.")
@click.option("--after", type=Integer(), default=0, help="Rows after this audit id (paging).")
@click.option("--limit", "-n", type=Integer(), default=100, show_default=True, help="At most this many rows.")
@format_option
@pass_state
def audit(state: State, name: str | None, after: int, limit: int, fmt: str | None) -> None:
    """Who wrote, changed and forgot what on a team server, oldest first."""
    rows = team.audit(state.service().store, name, after, limit)
    emit(state, fmt, {"audit": rows}, lambda: [Table(("id", "when", "user", "action", "urn"), [
        (str(r["id"]), when(r["at"]), r["user"], r["action"], r["urn"]) for r in rows])])


COMMANDS = (user, token, audit)
