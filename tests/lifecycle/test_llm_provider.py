"""The optional LLM provider, against a small HTTP server on loopback that speaks both APIs:
OpenAI-compatible chat completions and Anthropic messages. Real sockets, real HTTP."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mcp_support import free_port
from nmem.config import load_settings
from nmem.errors import ConfigError, LLMError
from nmem.lifecycle.llm import Provider
from nmem.service.api import Service
from test_cli_support import invoke

KEY = "sk-test-123"
MERGED = "Use PostgreSQL 15 for billing (transactions); migrations through Alembic."
ORIGINAL = "Use PostgreSQL 15 for the billing service because it supports transactions."
RESTATED = "Decision: we use PostgreSQL 15 for the billing service, because it supports transactions."


class FakeLLM(ThreadingHTTPServer):
    """Answers /v1/chat/completions (OpenAI) and /v1/messages (Anthropic) as those APIs do;
    the wrong key gets each API's 401 error body, model `broken` a body that is not JSON."""

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []


class Handler(BaseHTTPRequestHandler):
    server: FakeLLM

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append((self.path, headers, body))
        if self.path == "/v1/chat/completions":
            authorised = headers.get("authorization") == f"Bearer {KEY}"
            answer = {"id": "c1", "object": "chat.completion", "model": body["model"],
                      "choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": MERGED}}]}
            error = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
        elif self.path == "/v1/messages":
            authorised = headers.get("x-api-key") == KEY and headers.get("anthropic-version") == "2023-06-01"
            answer = {"id": "m1", "type": "message", "role": "assistant", "model": body["model"],
                      "content": [{"type": "text", "text": MERGED}], "stop_reason": "end_turn"}
            error = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
        else:
            self.send_error(404)
            return
        if not authorised:
            self._send(401, json.dumps(error).encode())
        elif body["model"] == "broken":
            self._send(200, b"<html>gateway</html>")
        else:
            self._send(200, json.dumps(answer).encode())

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM(free_port())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def env_for(kind: str, server: FakeLLM, model: str = "m-1", key: str = KEY) -> dict[str, str]:
    port = server.server_address[1]
    base = f"http://127.0.0.1:{port}" + ("/v1" if kind == "openai" else "")
    return {"NMEM_LLM_PROVIDER": kind, "NMEM_LLM_BASE_URL": base, "NMEM_LLM_MODEL": model, "NMEM_LLM_API_KEY": key}


def service_with(nmem_home: Path, service: Service, extra: dict[str, str]) -> Service:
    return Service(service.store, load_settings({"NMEM_HOME": str(nmem_home), **extra}), clock=service.clock)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_consolidate_writes_the_providers_merged_note(kind: str, nmem_home: Path, service: Service,
                                                      llm: FakeLLM) -> None:
    a = service.remember(ORIGINAL, namespace="decisions", project="demo")
    b = service.remember(RESTATED, namespace="decisions", project="demo")
    svc = service_with(nmem_home, service, env_for(kind, llm))
    report = svc.consolidate()
    assert report["summarizer"] == f"{kind}:m-1"
    kept = service.get_memory(report["merges"][0]["survivor"])
    assert kept.content == MERGED and {a.id, b.id} - {kept.id} <= set(kept.relates_to)
    path, headers, body = llm.requests[-1]
    assert body["model"] == "m-1"
    if kind == "openai":
        assert path == "/v1/chat/completions" and headers["authorization"] == f"Bearer {KEY}"
        system, user = body["messages"]
        assert system["role"] == "system" and user["role"] == "user"
        prompt = user["content"]
    else:
        assert path == "/v1/messages" and headers["x-api-key"] == KEY and "system" in body
        prompt = body["messages"][0]["content"]
    assert ORIGINAL in prompt and RESTATED in prompt


def test_a_refused_key_exits_6_with_the_providers_message_and_changes_nothing(nmem_home: Path, service: Service,
                                                                                llm: FakeLLM) -> None:
    a = service.remember(ORIGINAL, namespace="decisions", project="demo")
    b = service.remember(RESTATED, namespace="decisions", project="demo")
    ops = len(service.store.sync_outbox())
    for kind, message in (("openai", "Incorrect API key provided"), ("anthropic", "invalid x-api-key")):
        result = invoke("consolidate", env=env_for(kind, llm, key="wrong"))
        assert result.exit_code == 6, result.stderr
        assert "HTTP 401" in result.stderr and message in result.stderr
    assert service.get_memory(a.id).to_dict() == a.to_dict() and service.get_memory(b.id).to_dict() == b.to_dict()
    assert len(service.store.sync_outbox()) == ops
    assert service.consolidation_runs() == []


def test_unreadable_answers_and_unreachable_servers_are_llm_errors(nmem_home: Path, service: Service,
                                                                   llm: FakeLLM) -> None:
    settings = load_settings({"NMEM_HOME": str(nmem_home), **env_for("openai", llm, model="broken")})
    provider = Provider.from_settings(settings)
    assert provider is not None
    with pytest.raises(LLMError, match="cannot read"):
        provider.complete("system", "hello")
    closed = Provider("anthropic", f"http://127.0.0.1:{free_port()}", "m", KEY, 5.0)
    with pytest.raises(LLMError, match="failed"):
        closed.complete("system", "hello")


def test_provider_settings_are_checked(nmem_home: Path) -> None:
    assert Provider.from_settings(load_settings({"NMEM_HOME": str(nmem_home)})) is None
    for extra, message in (({"NMEM_LLM_PROVIDER": "gemini"}, "unknown provider"),
                           ({"NMEM_LLM_PROVIDER": "openai"}, "llm.model must be set"),
                           ({"NMEM_LLM_PROVIDER": "openai", "NMEM_LLM_MODEL": "m", "NMEM_LLM_BASE_URL": "ftp://x"},
                            "http")):
        with pytest.raises(ConfigError, match=message):
            Provider.from_settings(load_settings({"NMEM_HOME": str(nmem_home), **extra}))
    env_key = Provider.from_settings(load_settings({"NMEM_HOME": str(nmem_home), "NMEM_LLM_PROVIDER": "anthropic",
                                                    "NMEM_LLM_MODEL": "m"}), env={"ANTHROPIC_API_KEY": "k-env"})
    assert env_key is not None and env_key.api_key == "k-env"


def test_status_names_the_provider_never_its_key(nmem_home: Path, service: Service, llm: FakeLLM) -> None:
    result = invoke("status", "--format", "json", env=env_for("openai", llm))
    assert result.exit_code == 0
    assert json.loads(result.stdout)["llm"] == "openai:m-1" and KEY not in result.stdout


def test_recall_reason_answers_from_the_recalled_memories_through_the_llm(nmem_home: Path, service: Service,
                                                                          llm: FakeLLM) -> None:
    service.remember(ORIGINAL, namespace="decisions", project="demo")
    service.remember("Deploys go out on Tuesdays.", namespace="context", project="demo")
    result = invoke("recall", "--reason", "why PostgreSQL for billing", "--project", "*", "--format", "json",
                    env=env_for("openai", llm))
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["answer"] == MERGED and data["llm"] == "openai:m-1"
    assert [r["summary"] for r in data["results"]] == [ORIGINAL[:len(data["results"][0]["summary"])]]
    prompt = llm.requests[-1][2]["messages"][1]["content"]
    assert "why PostgreSQL for billing" in prompt and ORIGINAL in prompt and "Tuesdays" not in prompt
    assert f"[{data['results'][0]['number']}]" in prompt
    text = invoke("recall", "--reason", "why PostgreSQL", "--project", "*", env=env_for("anthropic", llm))
    assert text.exit_code == 0 and MERGED in text.stdout and "anthropic:m-1 answered from 1 memories" in text.stderr


def test_recall_reason_is_off_without_an_llm_and_fails_clearly_when_it_fails(nmem_home: Path, service: Service,
                                                                             llm: FakeLLM) -> None:
    service.remember(ORIGINAL, namespace="decisions", project="demo")
    off = invoke("recall", "--reason", "why PostgreSQL", "--project", "*")
    assert off.exit_code == 3 and "recall --reason needs an LLM: set llm.provider" in off.stderr
    assert off.stdout == ""
    refused = invoke("recall", "--reason", "why PostgreSQL", "--project", "*", env=env_for("openai", llm, key="no"))
    assert refused.exit_code == 6 and "Incorrect API key provided" in refused.stderr
    both = invoke("recall", "PostgreSQL", "--reason", "why", env=env_for("openai", llm))
    assert both.exit_code == 2 and "not both" in both.stderr
    plain = invoke("recall", "PostgreSQL", "--project", "*", "--format", "json")
    assert plain.exit_code == 0 and json.loads(plain.stdout)["count"] == 1  # recall itself needs no LLM
