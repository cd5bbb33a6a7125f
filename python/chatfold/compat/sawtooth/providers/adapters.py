"""sawtooth-memory's ``providers.adapters``: the :class:`ProviderAdapter`
protocol and its OpenAI, Anthropic and Gemini implementations.

An adapter is a pure payload builder and parser (no I/O): it knows its
provider's endpoint, authentication headers and JSON-mode request body,
and reads an answer back into ``(parsed_dict, total_tokens)``. The
endpoints, headers and bodies are sawtooth-memory 0.3.0's.

chatfold's own compressors do not post these payloads: they summarize
through chatfold's HTTP summarizers (Rust), which send chatfold's prompt
and read back plain text (see :mod:`..compressor`). The adapters are here
for code that talks to a provider itself, as a switched program may.

What differs from sawtooth-memory, and why: an answer that is not a JSON
object (or whose ``choices`` / ``content`` / ``candidates`` /
``usage`` have the wrong type) raises
:class:`~..exceptions.MalformedOutputError` instead of an
``AttributeError``; a ``null`` message content (a refusal, a tool call)
reads as an empty answer instead of raising ``TypeError``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Protocol, Tuple, runtime_checkable

from ..compression_utils import parse_compression_json
from ..exceptions import MalformedOutputError

__all__ = ["ProviderAdapter", "OpenAIAdapter", "AnthropicAdapter", "GeminiAdapter"]


@runtime_checkable
class ProviderAdapter(Protocol):
    """What every provider adapter offers: pure payload construction and
    answer parsing, no I/O."""

    @property
    def endpoint(self) -> str:
        """The URL the request is posted to."""
        ...

    def build_headers(self, api_key: str) -> Dict[str, str]:
        """The HTTP headers, authentication included."""
        ...

    def build_payload(self, model: str, system_prompt: str, content: str) -> Dict[str, Any]:
        """The JSON request body, asking for JSON (structured) output."""
        ...

    def parse_response(self, response_data: Dict[str, Any]) -> Tuple[Dict[str, Any], int]:
        """The answer's parsed JSON object and the tokens the call used."""
        ...


def _join(base_url: str, path: str) -> str:
    """``base_url`` (without its trailing slashes) followed by ``path``."""
    return base_url.rstrip("/") + path


def _field(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    """``data[key]`` when present (``kind()`` when absent or ``null``);
    :class:`MalformedOutputError` when it is not a ``kind``."""
    value = data.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise MalformedOutputError(f"{where}: '{key}' is a {type(value).__name__}, not a {kind.__name__}")
    return value


def _answer(response_data: Any, where: str) -> Mapping[str, Any]:
    """``response_data`` when it is a JSON object; :class:`MalformedOutputError` otherwise."""
    if not isinstance(response_data, Mapping):
        raise MalformedOutputError(f"{where}: the answer is a {type(response_data).__name__}, not a JSON object")
    return response_data


def _tokens(usage: Mapping[str, Any], key: str, where: str) -> int:
    """The integer count ``usage[key]`` (0 when absent)."""
    value = usage.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedOutputError(f"{where}: usage '{key}' is not an integer: {value!r}")
    return value


class _AtBaseUrl:
    """An adapter posting to ``base_url`` + ``PATH``, or to its provider's
    ``DEFAULT_ENDPOINT`` without a base URL."""

    DEFAULT_ENDPOINT = ""
    PATH = ""

    def __init__(self, base_url: Optional[str] = None) -> None:
        self.base_url = base_url

    @property
    def endpoint(self) -> str:
        """``base_url`` + ``PATH``, or the provider's own endpoint."""
        return _join(self.base_url, self.PATH) if self.base_url else self.DEFAULT_ENDPOINT


class OpenAIAdapter(_AtBaseUrl):
    """The OpenAI Chat Completions API (``POST /v1/chat/completions``), and
    OpenAI-compatible gateways (Helicone, LiteLLM, Azure) through
    ``base_url``. JSON output is asked for with
    ``"response_format": {"type": "json_object"}``."""

    DEFAULT_ENDPOINT = "https://api.openai.com/v1/chat/completions"
    PATH = "/v1/chat/completions"

    def build_headers(self, api_key: str) -> Dict[str, str]:
        """JSON content and ``Authorization: Bearer <key>``."""
        return {"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"}

    def build_payload(self, model: str, system_prompt: str, content: str) -> Dict[str, Any]:
        """A system and a user message, in JSON mode."""
        return {
            "model": model,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": system_prompt},
                {"role": "user", "content": content},
            ],
        }

    def parse_response(self, response_data: Dict[str, Any]) -> Tuple[Dict[str, Any], int]:
        """The first choice's content parsed as JSON, and ``usage.total_tokens``
        (0 when absent). No choice reads as an empty answer."""
        where = "OpenAI answer"
        data = _answer(response_data, where)
        choices: List[Any] = _field(data, "choices", list, where)
        text = ""
        if choices:
            first = _answer(choices[0], where)
            message = _field(first, "message", dict, where)
            text = message.get("content") or ""
        usage = _field(data, "usage", dict, where)
        return parse_compression_json(text), _tokens(usage, "total_tokens", where)


# The tool Anthropic is made to call: its input is the compression result,
# so the answer has the result's schema rather than free prose.
ANTHROPIC_TOOL_NAME = "store_compression_result"
_ANTHROPIC_TOOL: Dict[str, Any] = {
    "name": ANTHROPIC_TOOL_NAME,
    "description": (
        "Stores the result of memory compression. Call this tool with the narrative summary and extracted entities."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "narrative_summary": {
                "type": "string",
                "description": "Dense chronological narrative of what the agent decided, discovered, and accomplished.",
            },
            "extracted_entities": {
                "type": "object",
                "description": (
                    "Flat key-value mapping of exact deterministic values "
                    "(UUIDs, IDs, paths, connection strings, numeric results)."
                ),
                "additionalProperties": {"type": "string"},
            },
        },
        "required": ["narrative_summary", "extracted_entities"],
    },
}


class AnthropicAdapter(_AtBaseUrl):
    """The Anthropic Messages API (``POST /v1/messages``). Structured output
    comes from a forced tool call: the request offers one tool,
    ``store_compression_result``, and ``tool_choice`` makes the model call
    it, so its input is the result."""

    DEFAULT_ENDPOINT = "https://api.anthropic.com/v1/messages"
    PATH = "/v1/messages"
    ANTHROPIC_VERSION = "2023-06-01"
    MAX_TOKENS = 2048

    def build_headers(self, api_key: str) -> Dict[str, str]:
        """JSON content, ``x-api-key`` and ``anthropic-version``."""
        return {
            "Content-Type": "application/json",
            "x-api-key": api_key,
            "anthropic-version": self.ANTHROPIC_VERSION,
        }

    def build_payload(self, model: str, system_prompt: str, content: str) -> Dict[str, Any]:
        """A top-level system prompt, one user message, and the forced tool."""
        return {
            "model": model,
            "max_tokens": self.MAX_TOKENS,
            "system": system_prompt,
            "messages": [{"role": "user", "content": content}],
            "tools": [_ANTHROPIC_TOOL],
            "tool_choice": {"type": "tool", "name": ANTHROPIC_TOOL_NAME},
        }

    def parse_response(self, response_data: Dict[str, Any]) -> Tuple[Dict[str, Any], int]:
        """The first ``tool_use`` block's input (parsed when a proxy sent it
        as a JSON string), else the first ``text`` block parsed as JSON; and
        ``input_tokens + output_tokens``. No usable block reads as ``{}``."""
        where = "Anthropic answer"
        data = _answer(response_data, where)
        blocks = [_answer(block, where) for block in _field(data, "content", list, where)]
        result: Dict[str, Any] = {}
        for block in blocks:
            if block.get("type") == "tool_use":
                tool_input = block.get("input")
                if isinstance(tool_input, str):
                    result = parse_compression_json(tool_input)
                elif isinstance(tool_input, Mapping):
                    result = dict(tool_input)
                elif tool_input is not None:
                    raise MalformedOutputError(f"{where}: the tool input is a {type(tool_input).__name__}")
                break
        if not result:
            for block in blocks:
                if block.get("type") == "text":
                    result = parse_compression_json(block.get("text") or "")
                    break
        usage = _field(data, "usage", dict, where)
        return result, _tokens(usage, "input_tokens", where) + _tokens(usage, "output_tokens", where)


class GeminiAdapter:
    """The Google Gemini ``generateContent`` API
    (``POST {base}/v1beta/models/{model}:generateContent``): the model is in
    the URL, not the body. JSON output is asked for with
    ``"generationConfig": {"responseMimeType": "application/json"}``.

    As in sawtooth, :meth:`build_payload` also sets the adapter's model, so
    :attr:`endpoint` names the model last built for.
    """

    DEFAULT_BASE = "https://generativelanguage.googleapis.com"
    PATH = "/v1beta/models/{model}:generateContent"

    def __init__(self, model: str = "", base_url: Optional[str] = None) -> None:
        self.model = model
        self.base_url = base_url

    @property
    def endpoint(self) -> str:
        """``{base_url or Google's}/v1beta/models/{model}:generateContent``."""
        return _join(self.base_url or self.DEFAULT_BASE, self.PATH.format(model=self.model))

    def build_headers(self, api_key: str) -> Dict[str, str]:
        """JSON content and ``x-goog-api-key``."""
        return {"Content-Type": "application/json", "x-goog-api-key": api_key}

    def build_payload(self, model: str, system_prompt: str, content: str) -> Dict[str, Any]:
        """A system instruction and one user turn, with a JSON response type."""
        self.model = model
        return {
            "system_instruction": {"parts": [{"text": system_prompt}]},
            "contents": [{"role": "user", "parts": [{"text": content}]}],
            "generationConfig": {"responseMimeType": "application/json"},
        }

    def parse_response(self, response_data: Dict[str, Any]) -> Tuple[Dict[str, Any], int]:
        """The first candidate's first part parsed as JSON, and
        ``usageMetadata.totalTokenCount`` (0 when absent). No candidate
        reads as an empty answer."""
        where = "Gemini answer"
        data = _answer(response_data, where)
        candidates = _field(data, "candidates", list, where)
        text = ""
        if candidates:
            content = _field(_answer(candidates[0], where), "content", dict, where)
            parts = _field(content, "parts", list, where)
            if parts:
                text = _answer(parts[0], where).get("text") or ""
        usage = _field(data, "usageMetadata", dict, where)
        return parse_compression_json(text), _tokens(usage, "totalTokenCount", where)
