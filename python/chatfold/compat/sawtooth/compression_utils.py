"""sawtooth-memory's ``compression_utils``: the input pruning, the
compression prompt and the parsing of a model's JSON answer.

These are pure functions (no I/O). The provider adapters
(:mod:`.providers`) parse their answers with :func:`parse_compression_json`
and :func:`normalize_compression_result`; the compressors
(:mod:`.compressor`) prune their input with :func:`prune_compression_input`.

What differs from sawtooth-memory 0.3.0, and why:

* :func:`parse_compression_json` only accepts a JSON *object*: sawtooth
  returns whatever ``json.loads`` gives (a list, a number), which its callers
  then fail on with an ``AttributeError``; here any other JSON value falls
  through to the next layer, ending with the raw text as the narrative.
* :func:`normalize_compression_result` turns a narrative that is not a
  string into one (``None`` into ``""``) instead of passing it on, and logs
  a warning when it drops an ``extracted_entities`` that is not an object.
* :data:`COMPRESSION_SYSTEM_PROMPT` asks for the same JSON schema in
  chatfold's words. chatfold's own compressors do not send it: they
  summarize through chatfold's HTTP summarizers, which use chatfold's prompt
  (see :mod:`.compressor`); it is here for code that builds a provider
  payload itself with an adapter's ``build_payload``.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Dict, Mapping, Optional, Union

__all__ = [
    "COMPRESSION_SYSTEM_PROMPT",
    "normalize_compression_result",
    "parse_compression_json",
    "prune_compression_input",
    "strip_markdown_fences",
]

logger = logging.getLogger(__name__)

# Noise a compressor should not pay tokens for (sawtooth's three patterns).
# A run of 80+ base64 characters (long enough not to hit ordinary words).
_BASE64 = re.compile(r"[A-Za-z0-9+/]{80,}={0,2}")
# A Python traceback, up to the next blank line or the end of the text.
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):.*?(?=\n\n|\Z)", re.DOTALL)
# Sixteen or more whitespace-separated hex byte pairs (a binary dump).
_HEX_DUMP = re.compile(r"(?:[0-9a-fA-F]{2}\s){16,}")

# A markdown code fence, with or without the ``json`` tag.
_FENCE = re.compile(r"```(?:json)?\s*", re.IGNORECASE)
# The outermost ``{...}`` of a text (greedy: first brace to last brace).
_OUTER_OBJECT = re.compile(r"\{.*\}", re.DOTALL)

COMPRESSION_SYSTEM_PROMPT = """\
You compress the memory of an AI agent.

You are given the agent's conversation logs. Produce two things:
1. A NARRATIVE: a dense, chronological account of what the agent decided, \
found out and achieved, and why. Be specific; keep cause and effect.
2. The EXACT VALUES the agent may need again verbatim, as a flat key-value \
object: UUIDs, database IDs, file paths, connection strings, URLs and API \
endpoints, precise numeric results.

Rules:
- Leave out errors that were later resolved.
- Leave out bulky JSON payloads and base64 data.
- Name the keys of extracted_entities in snake_case.
- If a PROTECTED VALUES block is given, each value in it MUST appear verbatim \
in extracted_entities under the key it is given.
- Answer with valid JSON only: no preamble, no markdown fences, nothing else.

The answer's schema:
{
  "narrative_summary": "<the narrative, one string>",
  "extracted_entities": {
    "<key>": "<exact value>"
  }
}
"""


def prune_compression_input(raw: str) -> str:
    """``raw`` without the noise that costs a compressor tokens and carries
    no meaning: base64 runs become ``[BASE64_REMOVED]``, Python tracebacks
    ``[STACKTRACE_REMOVED]``, hex dumps ``[HEX_REMOVED]``.

    Raises ``TypeError`` when ``raw`` is not a string.
    """
    if not isinstance(raw, str):
        raise TypeError(f"the text to prune must be a string, got {type(raw).__name__}")
    text = _BASE64.sub("[BASE64_REMOVED]", raw)
    text = _TRACEBACK.sub("[STACKTRACE_REMOVED]", text)
    return _HEX_DUMP.sub("[HEX_REMOVED]", text)


def strip_markdown_fences(text: str) -> str:
    """``text`` without markdown code fences (```` ```json ```` and
    ```` ``` ````), which some models add even in JSON mode, and without
    surrounding whitespace."""
    return _FENCE.sub("", text).strip()


def _json_object(text: str) -> Optional[Dict[str, Any]]:
    """``text`` parsed as a JSON object, or ``None`` when it is not one."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def parse_compression_json(raw: str) -> Dict[str, Any]:
    """A model's compression answer as a dict, tolerating the usual quirks:

    1. the text without markdown fences, parsed as a JSON object;
    2. else the outermost ``{...}`` in it (a preamble or an epilogue around
       the JSON);
    3. else ``{"narrative_summary": raw, "extracted_entities": {}}``: the
       answer is kept as prose rather than lost.

    ``None`` counts as an empty answer. Raises ``TypeError`` for anything
    else that is not a string.
    """
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise TypeError(f"a compression answer must be a string, got {type(raw).__name__}")
    cleaned = strip_markdown_fences(raw)
    parsed = _json_object(cleaned)
    if parsed is None:
        match = _OUTER_OBJECT.search(cleaned)
        if match:
            parsed = _json_object(match.group())
    if parsed is None:
        return {"narrative_summary": raw, "extracted_entities": {}}
    return parsed


def normalize_compression_result(
    parsed: Mapping[str, Any],
    *,
    raw_fallback: Optional[str] = None,
) -> Dict[str, Union[str, Dict[str, str]]]:
    """``parsed`` in the canonical shape
    ``{"narrative_summary": str, "extracted_entities": {str: str}}``.

    An empty narrative is replaced by ``raw_fallback`` when given; entity
    keys and values are made strings (``42`` becomes ``"42"``); an
    ``extracted_entities`` that is not an object is dropped (with a warning).
    Raises ``TypeError`` when ``parsed`` is not a mapping.
    """
    if not isinstance(parsed, Mapping):
        raise TypeError(f"a parsed compression result must be a mapping, got {type(parsed).__name__}")
    narrative = parsed.get("narrative_summary")
    if narrative is None:
        narrative = ""
    elif not isinstance(narrative, str):
        narrative = json.dumps(narrative, ensure_ascii=False)
    if not narrative and raw_fallback is not None:
        narrative = raw_fallback

    entities = parsed.get("extracted_entities")
    if entities is None:
        entities = {}
    elif not isinstance(entities, Mapping):
        logger.warning(
            "compression result: extracted_entities is a %s, not an object; dropped", type(entities).__name__
        )
        entities = {}
    return {
        "narrative_summary": narrative,
        "extracted_entities": {str(k): str(v) for k, v in entities.items()},
    }
