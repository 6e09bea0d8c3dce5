"""The optional LLM provider: OpenAI-compatible chat completions or Anthropic messages, over HTTP.

The client is httpx2, the httpx line the MCP SDK already depends on (so no new download).

Used only by consolidation to write summaries (never by a hook: nothing on the hook path imports
this module). Every failure (unreachable, a refused key, a non-JSON or empty answer) is an
`LLMError`, exit code 6, with the provider's own message when it sent one; the caller changes
nothing when a summary fails.
"""

from __future__ import annotations

import os
from typing import Any

import httpx2 as httpx

from nmem.config import Settings
from nmem.errors import ConfigError, LLMError

PROVIDERS = ("none", "openai", "anthropic")
DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
ANTHROPIC_VERSION = "2023-06-01"
MAX_TOKENS = 400


class Provider:
    """One configured provider; `complete` sends a system and a user message, returns the text."""

    def __init__(self, kind: str, base_url: str, model: str, api_key: str, timeout: float) -> None:
        self.kind, self.base_url, self.model, self.api_key, self.timeout = kind, base_url.rstrip("/"), model, \
            api_key, timeout

    @classmethod
    def from_settings(cls, settings: Settings, env: dict[str, str] | None = None) -> Provider | None:
        kind = str(settings["llm.provider"]).strip().lower()
        if kind not in PROVIDERS:
            raise ConfigError(f"llm.provider: unknown provider {kind!r}; use one of {', '.join(PROVIDERS)}")
        if kind == "none":
            return None
        model = str(settings["llm.model"]).strip()
        if not model:
            raise ConfigError(f"llm.model must be set when llm.provider is {kind}")
        source = os.environ if env is None else env
        key = str(settings["llm.api_key"]) or source.get(KEY_ENV[kind], "")
        url = str(settings["llm.base_url"]).strip() or DEFAULT_URLS[kind]
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"llm.base_url must be an http(s) URL, got {url!r}")
        return cls(kind, url, model, key, float(settings["llm.timeout"]))

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.model}"

    def complete(self, system: str, prompt: str) -> str:
        if self.kind == "anthropic":
            url = f"{self.base_url}/v1/messages"
            headers = {"anthropic-version": ANTHROPIC_VERSION, "content-type": "application/json"}
            if self.api_key:
                headers["x-api-key"] = self.api_key
            body: dict[str, Any] = {"model": self.model, "max_tokens": MAX_TOKENS, "system": system,
                                    "messages": [{"role": "user", "content": prompt}]}
        else:
            url = f"{self.base_url}/chat/completions"
            headers = {"content-type": "application/json"}
            if self.api_key:
                headers["authorization"] = f"Bearer {self.api_key}"
            body = {"model": self.model, "max_tokens": MAX_TOKENS, "temperature": 0,
                    "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}]}
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise LLMError(f"LLM provider {self.kind} at {self.base_url} failed: {exc}") from exc
        if response.status_code != 200:
            raise LLMError(f"LLM provider {self.kind} answered HTTP {response.status_code}: "
                           f"{_error_message(response)}")
        try:
            data = response.json()
            text = _anthropic_text(data) if self.kind == "anthropic" else _openai_text(data)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"LLM provider {self.kind} sent an answer nmem cannot read: {exc}") from exc
        if not text.strip():
            raise LLMError(f"LLM provider {self.kind} sent an empty answer")
        return text.strip()


def _openai_text(data: Any) -> str:
    return str(data["choices"][0]["message"]["content"] or "")


def _anthropic_text(data: Any) -> str:
    return "".join(str(b.get("text", "")) for b in data["content"] if b.get("type") == "text")


def _error_message(response: httpx.Response) -> str:
    """The provider's own error message (both APIs put it at error.message), else the body's start."""
    try:
        data = response.json()
        message = data["error"]["message"] if isinstance(data.get("error"), dict) else data.get("error")
        if message:
            return str(message)[:300]
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return response.text[:300] or response.reason_phrase
