"""Service API: curated memories (remember/update/forget/recall), pins and purge."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import Clock, record
from nmem.errors import InvalidArgument, NotFound, ValidationError
from nmem.service.api import Service
from store_engines import fts_count, sql_dicts, sql_rows

T0 = 1_790_000_000
DAY = 86400


def count(service: Service, sql: str, *params: Any) -> int:
    return int(sql_rows(service.store, sql, *params)[0][0])  # type: ignore[call-overload]


def raw_memory(service: Service, uid: str) -> dict[str, Any]:
    return sql_dicts(service.store, "SELECT * FROM memories WHERE uid = ?", uid)[0]


def bash(service: Service, cmd: str, at: int, **kw: Any) -> int:
    out = record(service, "PostToolUse", now=at, tool_name="Bash", tool_input={"command": cmd},
                 tool_response={"exit_code": 0}, **kw)
    return int(out.observation_id)


# -- remember --------------------------------------------------------------------------------------


def test_remember_stores_every_field_and_returns_its_urn(service: Service, clock: Clock) -> None:
    mem = service.remember("Use BEGIN IMMEDIATE for writes.\nOtherwise deadlocks.", summary="Writes: BEGIN IMMEDIATE",
                           namespace="decisions", tags=["sqlite", "concurrency"], project="nmem",
                           source="sess-9", relates_to="nmem://user/learnings/X1", tier="hot")
    assert mem.domain == "project:nmem"
    assert mem.namespace == "decisions"
    assert mem.summary == "Writes: BEGIN IMMEDIATE"
    assert mem.content == "Use BEGIN IMMEDIATE for writes.\nOtherwise deadlocks."
    assert mem.tags == ["sqlite", "concurrency"]
    assert mem.relates_to == ["nmem://user/learnings/X1"]
    assert (mem.source, mem.tier, mem.is_pinned) == ("sess-9", "hot", False)
    assert mem.created_at == mem.updated_at == int(clock.now)
    assert (mem.deleted_at, mem.access_count) == (None, 0)
    assert len(mem.id) == 26
    assert mem.urn == f"nmem://project:nmem/decisions/{mem.id}"
    assert service.get_memory(mem.urn) == mem
    assert service.get_memory(mem.id) == mem


def test_remember_defaults_summary_to_first_line_and_namespace_to_context(service: Service) -> None:
    mem = service.remember("  First line here\nsecond line", project="p")
    assert (mem.summary, mem.namespace, mem.tier) == ("First line here", "context", "warm")


def test_remember_accepts_namespace_aliases_and_comma_tags(service: Service) -> None:
    mem = service.remember("x", namespace="Decision", tags="a, b,,c", project="p")
    assert mem.namespace == "decisions"
    assert mem.tags == ["a", "b", "c"]


@pytest.mark.parametrize(("domain", "expected"), [
    ("user", "user"), ("org", "org"), ("project:other", "project:other"), ("project", "project:p"),
])
def test_remember_domains(service: Service, domain: str, expected: str) -> None:
    assert service.remember("x", domain=domain, project="p").domain == expected


def test_remember_cuts_a_long_first_line_to_100_chars(service: Service) -> None:
    mem = service.remember("y" * 300, project="p")
    assert mem.summary == "y" * 99 + "…"
    assert mem.content == "y" * 300


def test_remember_cuts_a_long_first_line_at_a_word_boundary(service: Service) -> None:
    line = "The invoice export rounds half-even where finance expects half-up; see ticket FIN-2231 " * 3
    mem = service.remember(line, project="p")
    assert len(mem.summary) <= 100 and mem.summary.endswith("…")
    assert line.startswith(mem.summary[:-1]) and line[len(mem.summary) - 1] == " ", "cut mid-word"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"content": "  "}, "content must not be empty"),
    ({"content": "x", "summary": "s" * 101}, "summary is 101 characters; the limit is 100"),
    ({"content": "x", "tier": "lukewarm"}, "invalid tier 'lukewarm'"),
    ({"content": "x", "namespace": "Not A Slug!"}, "invalid namespace 'Not A Slug!'"),
    ({"content": "x", "domain": "galaxy"}, "invalid domain 'galaxy'"),
])
def test_remember_rejects_bad_input(service: Service, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as err:
        service.remember(project="p", **kwargs)
    assert message in err.value.message
    assert err.value.exit_code == 11
    assert count(service, "SELECT COUNT(*) FROM memories") == 0


# -- update ----------------------------------------------------------------------------------------


def test_a_spec_is_a_tag_capture_stores_and_recall_filters_on_and_a_blank_one_is_refused(service: Service) -> None:
    kept = service.capture("Invoices stream their rows", namespace="decisions", tags="billing, export",
                           spec=" feature-export ")
    assert service.get_memory(kept["id"]).tags == ["billing", "export", "spec:feature-export"]
    service.capture("Invoices are kept for ten years", namespace="decisions", tags=["billing"])
    assert [hit.record.id for hit in service.recall(None, spec="feature-export")] == [kept["id"]]
    for call in (lambda: service.capture("x", spec="  "), lambda: service.recall("invoices", spec="")):
        with pytest.raises(InvalidArgument, match=r"^spec must not be empty$"):
            call()
    assert sql_rows(service.store, "SELECT COUNT(*) FROM memories") == [(2,)]


def test_update_changes_fields_and_bumps_updated_at(service: Service, clock: Clock) -> None:
    mem = service.remember("old body", namespace="learnings", tags=["a"], project="p")
    clock.advance(120)
    new = service.update(mem.urn, content="new body", summary="new title", tags=["b", "c"], tier="cold",
                         namespace="gotchas", relates_to=["nmem://user/context/Z"])
    assert (new.id, new.created_at) == (mem.id, mem.created_at)
    assert new.updated_at == mem.updated_at + 120
    assert (new.content, new.summary, new.tags, new.tier, new.namespace) == (
        "new body", "new title", ["b", "c"], "cold", "gotchas")
    assert new.relates_to == ["nmem://user/context/Z"]
    assert new.urn == f"nmem://project:p/gotchas/{mem.id}"


def test_update_reindexes_full_text(service: Service) -> None:
    mem = service.remember("the cache uses memcached", summary="cache choice", project="p")
    service.update(mem.id, content="the cache uses redis")
    assert service.search("memcached", scope="memories").hits == []
    hits = service.search("redis", scope="memories").hits
    assert [h.record.id for h in hits] == [mem.id]


def test_update_with_nothing_to_change_is_invalid(service: Service) -> None:
    mem = service.remember("x", project="p")
    with pytest.raises(InvalidArgument, match="nothing to update"):
        service.update(mem.id)


def test_update_of_unknown_memory_is_not_found(service: Service) -> None:
    with pytest.raises(NotFound, match="memory not found: 01NOPE"):
        service.update("01NOPE", content="x")


@pytest.mark.parametrize("kwargs", [{"content": " "}, {"summary": ""}, {"summary": "z" * 101}, {"tier": "hotter"}])
def test_update_rejects_bad_values_without_changing_anything(service: Service, kwargs: dict[str, Any]) -> None:
    mem = service.remember("keep me", project="p")
    with pytest.raises(ValidationError):
        service.update(mem.id, **kwargs)
    assert service.get_memory(mem.id) == mem


# -- forget ----------------------------------------------------------------------------------------


def test_forget_erases_text_but_keeps_a_tombstone_with_the_uid(service: Service, clock: Clock) -> None:
    mem = service.remember("the staging password policy", summary="policy", namespace="security",
                           tags=["ops"], project="p", relates_to=["nmem://user/context/Q"])
    clock.advance(30)
    returned = service.forget(mem.urn)
    assert returned.id == mem.id
    row = raw_memory(service, mem.id)
    assert (row["uid"], row["domain"], row["namespace"]) == (mem.id, "project:p", "security")
    assert (row["summary"], row["content"], row["tags"], row["relates_to"]) == ("", "", "[]", "[]")
    assert row["deleted_at"] == row["updated_at"] == int(clock.now)


def test_forgotten_memory_is_gone_from_every_read(service: Service) -> None:
    mem = service.remember("zanzibar deployment notes", project="p")
    service.forget(mem.id)
    with pytest.raises(NotFound, match=f"memory not found: {mem.id}"):
        service.get_memory(mem.id)
    assert service.search("zanzibar", scope="memories").hits == []
    assert service.search("zanzibar", scope="all").hits == []
    assert service.recall("zanzibar") == []
    # the FTS index no longer holds the words either
    assert fts_count(service.store, "memories", "zanzibar") == 0
    with pytest.raises(NotFound):
        service.update(mem.id, content="resurrect")
    with pytest.raises(NotFound):
        service.forget(mem.id)


# -- recall ----------------------------------------------------------------------------------------


def test_recall_counts_an_access(service: Service, clock: Clock) -> None:
    mem = service.remember("pytest fixtures close connections", namespace="testing", project="p")
    clock.advance(10)
    hits = service.recall("fixtures", project="p")
    assert [h.record.id for h in hits] == [mem.id]
    row = raw_memory(service, mem.id)
    assert (row["access_count"], row["accessed_at"]) == (1, int(clock.now))


def test_recall_sees_own_project_user_and_org_but_not_other_projects(service: Service) -> None:
    mine = service.remember("quokka one", project="p")
    user = service.remember("quokka two", domain="user")
    org = service.remember("quokka three", domain="org")
    service.remember("quokka four", project="other")
    got = {h.record.id for h in service.recall("quokka", project="p")}
    assert got == {mine.id, user.id, org.id}


def test_recall_hides_archived_unless_asked(service: Service) -> None:
    mem = service.remember("archived wombat", project="p", tier="archived")
    assert service.recall("wombat") == []
    assert [h.record.id for h in service.recall("wombat", include_archived=True)] == [mem.id]


# -- pin / unpin -----------------------------------------------------------------------------------


def test_pin_and_unpin_an_observation(service: Service) -> None:
    oid = bash(service, "make deploy", T0)
    assert service.pin(f"o{oid}") == {"kind": "observation", "id": oid, "is_pinned": True}
    assert service.get_observations([oid])[0].is_pinned is True
    assert service.pin(f"#{oid}", pinned=False) == {"kind": "observation", "id": oid, "is_pinned": False}
    assert service.get_observations([oid])[0].is_pinned is False


def test_pin_and_unpin_a_memory_by_urn(service: Service) -> None:
    mem = service.remember("pin me", project="p")
    out = service.pin(mem.urn)
    assert out == {"kind": "memory", "id": mem.id, "urn": mem.urn, "is_pinned": True}
    assert service.get_memory(mem.id).is_pinned is True
    service.pin(mem.id, pinned=False)
    assert service.get_memory(mem.id).is_pinned is False


def test_pinned_memory_sorts_first_in_recall(service: Service) -> None:
    plain = service.remember("llama llama llama facts", project="p")
    pinned = service.remember("one llama", project="p")
    service.pin(pinned.id)
    assert [h.record.id for h in service.recall("llama", project="p")] == [pinned.id, plain.id]


def test_pin_unknown_observation_is_not_found(service: Service) -> None:
    with pytest.raises(NotFound, match="observation not found: o999"):
        service.pin("o999")


def test_a_bare_integer_names_the_memory_recall_numbers_in_pin_update_and_forget(service: Service) -> None:
    oid = bash(service, "make deploy", T0)
    memory = service.remember("numbered memory", project="p")
    number = service.recall_results("numbered", project="p")[0]["number"]
    assert service.pin(number)["id"] == memory.id
    assert service.update(str(number), summary="renamed").summary == "renamed"
    assert service.forget(number).id == memory.id
    assert service.get_observations([oid])[0].is_pinned is False  # the observation of that number is untouched
    with pytest.raises(NotFound, match="the `number` recall shows"):
        service.pin(number + 1000)


def test_pin_unknown_memory_is_not_found(service: Service) -> None:
    with pytest.raises(NotFound, match="memory not found: nmem://user/context/NOPE"):
        service.pin("nmem://user/context/NOPE")


# -- purge -----------------------------------------------------------------------------------------


def test_purge_requires_confirm_and_deletes_nothing_without_it(service: Service) -> None:
    oid = bash(service, "rm -rf build", T0)
    with pytest.raises(InvalidArgument, match="confirm") as err:
        service.purge(ids=[oid])
    assert err.value.exit_code == 2
    assert service.get_observations([oid]) != []


def test_purge_by_ids(service: Service) -> None:
    a, b, c = (bash(service, f"cmd {i}", T0 + i) for i in range(3))
    assert service.purge(ids=[a, str(c), 12345], confirm=True) == 2
    assert [o.id for o in service.get_observations([a, b, c])] == [b]
    assert service.search("cmd").to_list() and [h.record.id for h in service.search("cmd").hits] == [b]


def test_purge_by_id_removes_even_a_pinned_row(service: Service) -> None:
    oid = bash(service, "pinned but explicit", T0)
    service.pin(f"o{oid}")
    assert service.purge(ids=[oid], confirm=True) == 1


def test_purge_by_type_and_age_keeps_pinned_and_recent_rows(service: Service, clock: Clock) -> None:
    clock.now = T0 + 40 * DAY
    old_cmd = bash(service, "old command", T0)
    old_pinned = bash(service, "old pinned command", T0 + 1)
    service.pin(f"o{old_pinned}")
    new_cmd = bash(service, "new command", T0 + 39 * DAY)
    old_read = record(service, "PostToolUse", now=T0 + 2, tool_name="Read",
                      tool_input={"file_path": "/w/x.py"}).observation_id
    deleted = service.purge(obs_type="command", older_than=30 * DAY, confirm=True)
    assert deleted == 1
    left = {o.id for o in service.get_observations([old_cmd, old_pinned, new_cmd, old_read])}
    assert left == {old_pinned, new_cmd, old_read}


def test_purge_by_age_only_spans_types(service: Service, clock: Clock) -> None:
    clock.now = T0 + 10 * DAY
    bash(service, "old", T0)
    record(service, "PostToolUse", now=T0, tool_name="Read", tool_input={"file_path": "/w/x.py"})
    keep = bash(service, "fresh", T0 + 10 * DAY - 60)
    assert service.purge(older_than=DAY, confirm=True) == 2
    assert count(service, "SELECT COUNT(*) FROM observations") == 1
    assert service.get_observations([keep])[0].content == "fresh"


def test_purge_by_type_scoped_to_a_project(service: Service) -> None:
    bash(service, "in demo", T0, cwd="/w/demo")
    other = bash(service, "in other", T0, session_id="s-other", cwd="/w/other")
    assert service.purge(obs_type="command", project="demo", confirm=True) == 1
    assert [o.id for o in service.get_observations([other])] == [other]


def test_purge_removes_rows_from_full_text_search(service: Service) -> None:
    oid = bash(service, "kubectl rollout restart", T0)
    assert [h.record.id for h in service.search("kubectl").hits] == [oid]
    service.purge(ids=[oid], confirm=True)
    assert service.search("kubectl").hits == []
    assert fts_count(service.store, "observations", "kubectl") == 0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "purge needs ids, a query, a type or an age"),
    ({"ids": [1], "obs_type": "command"}, "either ids or a query/type/age selector"),
    ({"obs_type": "bogus"}, "unknown obs_type 'bogus'"),
    ({"ids": [1, "two"]}, "id must be an integer, got 'two'"),
])
def test_purge_errors_delete_nothing(service: Service, kwargs: dict[str, Any], message: str) -> None:
    first = bash(service, "survivor", T0)
    assert first == 1
    with pytest.raises(InvalidArgument) as err:
        service.purge(confirm=True, **kwargs)
    assert message in err.value.message
    assert count(service, "SELECT COUNT(*) FROM observations") == 1


def test_recall_works_on_a_read_only_service(service: Service) -> None:
    mem = service.remember("read-only recall still finds this", project="p")
    with Service.open(service.settings, readonly=True) as reader:
        assert [h.record.id for h in reader.recall("recall", project="p")] == [mem.id]
    assert service.get_memory(mem.id).access_count == 0


def test_purge_never_reads_a_string_of_ids_digit_by_digit(service: Service) -> None:
    ids = [bash(service, f"cmd {i}", T0 + i) for i in range(15)]
    assert ids[0] == 1 and ids[4] == 5 and ids[14] == 15
    try:
        deleted = service.purge(ids="15", confirm=True)  # type: ignore[arg-type]
    except InvalidArgument:
        deleted = 0
    survivors = {o.id for o in service.get_observations(ids)}
    assert {1, 5} <= survivors, "purge('15') deleted observations 1 and 5"
    assert deleted in (0, 1)


def test_a_memory_is_found_by_its_urn_in_either_form(service: Service) -> None:
    # MCP listings hand out the RFC 3986 form (`project%3Aacme%2Fweb`); tools must take it back
    mem = service.remember("Use the pooled client", namespace="decisions", project="web")
    encoded = f"nmem://project%3Aweb/decisions/{mem.id}"
    assert service.get_memory(encoded) == service.get_memory(mem.urn) == service.get_memory(mem.id) == mem
    assert service.get_memory(encoded + "/") == mem
    with pytest.raises(NotFound):   # the right id under another namespace
        service.get_memory(f"nmem://project%3Aweb/gotchas/{mem.id}")
    # a project whose name holds a `/` is named unambiguously only in the encoded form
    slashed = service.remember("Pin the SDK", namespace="decisions", project="acme/web")
    assert service.get_memory(f"nmem://project%3Aacme%2Fweb/decisions/{slashed.id}") == slashed
    with pytest.raises(NotFound):   # the written form is taken verbatim: `%2F` is no `/` there
        service.get_memory(f"nmem://project:acme%2Fweb/decisions/{slashed.id}")
    service.forget(encoded)
    with pytest.raises(NotFound):
        service.get_memory(mem.id)
