"""chatfold.compat.sawtooth's compressors, provider adapters and
compression utilities.

The compressors are driven through their public API against a local HTTP
server that plays the provider (OpenAI, Anthropic, Gemini's and Ollama's
OpenAI-compatible endpoints): what chatfold's Rust summarizer sends (path,
auth headers, model, the pruned text), what comes back (the narrative,
chatfold's ledger as the entities, protected values), retries on 429, and
the errors. The adapters' payloads are compared with sawtooth-memory's own.
"""

import asyncio
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chatfold.compat.sawtooth.compression_utils import (
    normalize_compression_result,
    parse_compression_json,
    prune_compression_input,
)
from chatfold.compat.sawtooth.compressor import CloudCompressor, OllamaCompressor
from chatfold.compat.sawtooth.config import CloudConfig, OllamaConfig, Provider
from chatfold.compat.sawtooth.exceptions import CompressionError, MalformedOutputError, OllamaConnectionError
from chatfold.compat.sawtooth.providers import AnthropicAdapter, GeminiAdapter, OpenAIAdapter, get_adapter
from chatfold.compat.sawtooth.providers.factory import summarizer_endpoint
from chatfold.compat.sawtooth.sync_compressor import SyncCloudCompressor, SyncOllamaCompressor

TEXT = (
    "USER: connect to conn_994a82 and read /var/lib/pg/sales.csv " + "QUJD" * 30 + "\n\n"
    "ASSISTANT: the Q3 table id is 550e8400-e29b-41d4-a716-446655440000"
)
SUMMARY = "The agent connected to the database and found the Q3 table."


class Provider_:
    """A fake provider: records each request and answers from a script of
    statuses (200 when the script is empty)."""

    def __init__(self):
        self.requests = []
        self.script = []
        self.answer = SUMMARY
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                status = outer.script.pop(0) if outer.script else 200
                if status != 200:
                    self._send(status, {"error": {"message": f"scripted {status}"}})
                elif self.path.endswith("/messages"):
                    self._send(200, {"content": [{"type": "text", "text": outer.answer}],
                                     "usage": {"input_tokens": 5, "output_tokens": 5}})
                else:
                    self._send(200, {"choices": [{"message": {"role": "assistant", "content": outer.answer}}]})

            def do_GET(self):
                outer.requests.append((self.path, {}, None))
                self._send(200 if self.path == "/api/tags" else 404, {"models": []})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def user_content(self, index=-1):
        """The user message of a recorded request."""
        return self.requests[index][2]["messages"][-1]["content"]


@pytest.fixture
def provider():
    p = Provider_()
    yield p
    p.server.shutdown()
    p.server.server_close()


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cloud(provider, kind, key="sk-test"):
    return CloudConfig(provider=kind, model="model-x", api_key=key, base_url=provider.url, timeout_seconds=10)


@pytest.mark.parametrize(
    "kind, path, auth",
    [
        (Provider.OPENAI, "/v1/chat/completions", ("authorization", "Bearer sk-test")),
        (Provider.ANTHROPIC, "/v1/messages", ("x-api-key", "sk-test")),
        (Provider.GEMINI, "/v1beta/openai/chat/completions", ("authorization", "Bearer sk-test")),
    ],
)
def test_the_cloud_compressors_fold_through_the_provider(provider, kind, path, auth):
    protected = {"conn_id": "conn_994a82"}
    for compress in [
        lambda: SyncCloudCompressor(_cloud(provider, kind)).compress(TEXT, protected_entities=protected),
        lambda: asyncio.run(CloudCompressor(_cloud(provider, kind)).compress(TEXT, protected_entities=protected)),
    ]:
        result = compress()
        assert set(result) == {"narrative_summary", "extracted_entities", "total_tokens"}
        assert result["narrative_summary"] == SUMMARY
        entities = result["extracted_entities"]
        # chatfold's ledger: the exact identifiers of the text, verbatim
        assert "550e8400-e29b-41d4-a716-446655440000" in entities.values()
        assert "/var/lib/pg/sales.csv" in entities.values()
        assert entities["conn_id"] == "conn_994a82"  # a protected value, under its key
        assert result["total_tokens"] > 0
        request_path, headers, body = provider.requests[-1]
        assert request_path == path
        assert headers[auth[0]] == auth[1]
        assert body["model"] == "model-x"
        sent = provider.user_content()
        assert "conn_994a82" in sent and "[BASE64_REMOVED]" in sent and "QUJD" * 30 not in sent
    if kind is Provider.ANTHROPIC:
        assert provider.requests[-1][1]["anthropic-version"] == "2023-06-01"


def test_the_ollama_compressors_fold_through_its_openai_endpoint(provider):
    config = OllamaConfig(base_url=provider.url, model="phi4-mini:latest")
    for result in [
        SyncOllamaCompressor(config).compress(TEXT),
        asyncio.run(OllamaCompressor(config).compress(TEXT)),
    ]:
        assert set(result) == {"narrative_summary", "extracted_entities"}
        assert result["narrative_summary"] == SUMMARY
        assert "550e8400-e29b-41d4-a716-446655440000" in result["extracted_entities"].values()
        path, headers, body = provider.requests[-1]
        assert (path, body["model"]) == ("/v1/chat/completions", "phi4-mini:latest")
        assert "authorization" not in headers
    assert SyncOllamaCompressor(config).model == "phi4-mini:latest"
    SyncOllamaCompressor(config).ping()
    asyncio.run(OllamaCompressor(config).ping())
    assert provider.requests[-1][0] == "/api/tags"


def test_a_429_is_retried_and_other_errors_are_not(provider):
    provider.script = [429]
    result = asyncio.run(CloudCompressor(_cloud(provider, Provider.OPENAI)).compress("USER: hi"))
    assert result["narrative_summary"] == SUMMARY
    assert len(provider.requests) == 2
    provider.requests.clear()
    provider.script = [400]
    with pytest.raises(CompressionError, match="HTTP 400") as caught:
        SyncCloudCompressor(_cloud(provider, Provider.OPENAI)).compress("USER: hi")
    assert not isinstance(caught.value, MalformedOutputError)
    assert len(provider.requests) == 1


def test_an_unreachable_backend_is_a_clear_error():
    down = f"http://127.0.0.1:{_closed_port()}"
    ollama = OllamaConfig(base_url=down)
    for call in [
        lambda: SyncOllamaCompressor(ollama).compress("USER: hi"),
        lambda: asyncio.run(OllamaCompressor(ollama).compress("USER: hi")),
        lambda: SyncOllamaCompressor(ollama).ping(),
        lambda: asyncio.run(OllamaCompressor(ollama).ping()),
    ]:
        with pytest.raises(OllamaConnectionError, match="Cannot reach Ollama"):
            call()
    cloud = CloudConfig(provider="openai", model="m", api_key="k", base_url=down, timeout_seconds=5)
    with pytest.raises(CompressionError, match="cannot reach") as caught:
        SyncCloudCompressor(cloud).compress("USER: hi")  # retried with backoff (about 10 s), then given up
    assert "after 5 attempts" in str(caught.value)


def test_an_empty_answer_is_malformed_output(provider):
    provider.answer = ""
    with pytest.raises(MalformedOutputError):
        SyncCloudCompressor(_cloud(provider, Provider.OPENAI)).compress("USER: hi")


def test_ping_and_bad_arguments():
    assert SyncCloudCompressor(CloudConfig(provider="openai", model="m", api_key="k")).provider == "openai"
    SyncCloudCompressor(CloudConfig(provider="openai", model="m", api_key="k")).ping()
    for key in ["", "   "]:
        with pytest.raises(ValueError, match="API key"):
            SyncCloudCompressor(CloudConfig(provider="anthropic", model="m", api_key=key)).ping()
        with pytest.raises(ValueError, match="API key"):
            asyncio.run(CloudCompressor(CloudConfig(provider="gemini", model="m", api_key=key)).ping())
    with pytest.raises(TypeError):
        CloudCompressor(OllamaConfig())
    with pytest.raises(TypeError):
        SyncOllamaCompressor(CloudConfig(provider="openai", model="m", api_key="k"))
    with pytest.raises(TypeError):
        SyncOllamaCompressor(OllamaConfig()).compress(b"bytes")
    with pytest.raises(TypeError):
        SyncOllamaCompressor(OllamaConfig()).compress("x", protected_entities=["not", "a", "mapping"])


def test_the_summarizer_endpoints_follow_sawtooths_base_urls():
    def cloud(kind, base=None):
        return CloudConfig(provider=kind, model="gemini-1.5-flash", api_key="k", base_url=base)

    assert summarizer_endpoint(cloud("openai")) == "https://api.openai.com/v1/chat/completions"
    helicone = "https://oai.helicone.ai/v1/chat/completions"
    assert summarizer_endpoint(cloud("openai", "https://oai.helicone.ai/")) == helicone
    assert summarizer_endpoint(cloud("anthropic")) == "https://api.anthropic.com/v1/messages"
    assert summarizer_endpoint(cloud("anthropic", "https://proxy.io")) == "https://proxy.io/v1/messages"
    assert summarizer_endpoint(cloud("gemini")) == (
        "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"
    )
    assert summarizer_endpoint(OllamaConfig(base_url="http://gpu:11434/")) == "http://gpu:11434/v1/chat/completions"
    with pytest.raises(TypeError):
        summarizer_endpoint({"provider": "openai"})


def test_the_adapters_build_sawtooths_payloads():
    theirs = pytest.importorskip("sawtooth_memory.providers")
    for ours, original in [
        (OpenAIAdapter(), theirs.OpenAIAdapter()),
        (OpenAIAdapter("https://oai.helicone.ai/"), theirs.OpenAIAdapter("https://oai.helicone.ai/")),
        (AnthropicAdapter(), theirs.AnthropicAdapter()),
        (AnthropicAdapter("https://p.io"), theirs.AnthropicAdapter("https://p.io")),
        (GeminiAdapter("gemini-1.5-flash"), theirs.GeminiAdapter("gemini-1.5-flash")),
        (GeminiAdapter("g", "https://p.io/"), theirs.GeminiAdapter("g", "https://p.io/")),
    ]:
        assert ours.endpoint == original.endpoint
        assert ours.build_headers("key") == original.build_headers("key")
        assert ours.build_payload("m", "SYS", "USER") == original.build_payload("m", "SYS", "USER")
        assert ours.endpoint == original.endpoint  # Gemini's follows the model built for
    with pytest.raises(ValueError):
        get_adapter(type("Config", (), {"provider": "mistral", "base_url": None, "model": "m"})())


def test_the_adapters_parse_answers_and_refuse_malformed_ones():
    answer = json.dumps({"narrative_summary": "n", "extracted_entities": {"k": "v"}})
    assert OpenAIAdapter().parse_response(
        {"choices": [{"message": {"content": None}}], "usage": {"total_tokens": 3}}
    ) == ({"narrative_summary": "", "extracted_entities": {}}, 3)
    assert AnthropicAdapter().parse_response(
        {"content": [{"type": "tool_use", "input": answer}], "usage": {"input_tokens": 2, "output_tokens": 1}}
    ) == ({"narrative_summary": "n", "extracted_entities": {"k": "v"}}, 3)
    for adapter, bad in [
        (OpenAIAdapter(), ["not", "an", "object"]),
        (OpenAIAdapter(), {"choices": "nope"}),
        (OpenAIAdapter(), {"choices": [], "usage": {"total_tokens": "many"}}),
        (AnthropicAdapter(), {"content": [{"type": "tool_use", "input": 42}]}),
        (GeminiAdapter("g"), {"candidates": [{"content": {"parts": "x"}}]}),
    ]:
        with pytest.raises(MalformedOutputError):
            adapter.parse_response(bad)


def test_the_compression_utils():
    assert parse_compression_json('["a list"]') == {"narrative_summary": '["a list"]', "extracted_entities": {}}
    assert parse_compression_json(None) == {"narrative_summary": "", "extracted_entities": {}}
    assert parse_compression_json('Sure! {"narrative_summary": "x"} Bye.') == {"narrative_summary": "x"}
    with pytest.raises(TypeError):
        parse_compression_json(42)
    odd = {"narrative_summary": None, "extracted_entities": ["x"]}
    assert normalize_compression_result(odd, raw_fallback="raw") == {"narrative_summary": "raw", "extracted_entities": {}}
    assert normalize_compression_result({"narrative_summary": ["a", "b"]})["narrative_summary"] == '["a", "b"]'
    with pytest.raises(TypeError):
        normalize_compression_result("text")
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: boom'
    hexdump = " ".join(["de", "ad", "be", "ef"] * 5) + " "
    pruned = prune_compression_input(f"keep this\n\n{trace}\n\nand {hexdump}end")
    assert pruned == "keep this\n\n[STACKTRACE_REMOVED]\n\nand [HEX_REMOVED]end"
    with pytest.raises(TypeError):
        prune_compression_input(None)


def test_the_compression_utils_agree_with_sawtooths():
    theirs = pytest.importorskip("sawtooth_memory.compression_utils")
    samples = [
        '{"narrative_summary": "n", "extracted_entities": {"a": 1}}',
        '```json\n{"narrative_summary": "fenced"}\n```',
        'Here: {"narrative_summary": "preamble"} done',
        "not json at all",
        "",
        "x" + "A" * 120 + "y",
    ]
    for raw in samples:
        assert parse_compression_json(raw) == theirs.parse_compression_json(raw)
        assert prune_compression_input(raw) == theirs.prune_compression_input(raw)
        parsed = theirs.parse_compression_json(raw)
        assert normalize_compression_result(parsed, raw_fallback=raw) == theirs.normalize_compression_result(
            parsed, raw_fallback=raw
        )
