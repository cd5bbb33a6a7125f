"""chatfold inside LiteLLM: :class:`ChatfoldHook` compacts each chat
completion, Anthropic ``/v1/messages`` and Responses request before LiteLLM
routes it, in its proxy and in its SDK.

In the proxy's ``config.yaml`` (``custom_callbacks.py`` beside it)::

    # custom_callbacks.py
    from chatfold.litellm import ChatfoldHook
    chatfold_hook = ChatfoldHook(budget=8000, model_budgets={"gpt-4o-mini*": 4000})

    # config.yaml
    litellm_settings:
      callbacks: custom_callbacks.chatfold_hook

In the SDK: ``litellm.callbacks = [ChatfoldHook(budget=8000)]`` (its
``acompletion``, ``aresponses`` and ``anthropic_messages`` calls, with their
messages passed by keyword).

What it guarantees, as ``chatfold serve`` does:

- a history within its budget goes on unchanged, byte for byte; one over it
  is folded (system messages and the latest turns verbatim, tool calls with
  their results, one summary with its ledger of exact identifiers), within
  the budget; compacting a compacted history changes nothing, so the proxy's
  two hooks (before routing, and per deployment) fold once;
- a failing summarizer never fails the request: the extractive summary
  stands in, and the event is logged (``chatfold.litellm``'s logger);
- summaries are reused across requests (in process, or through Redis across
  the gateway's workers with ``redis=``), per API key;
- the response says what was done, in the headers LiteLLM lets a hook set:
  ``x-chatfold-summarized``, ``x-chatfold-tokens-before``,
  ``x-chatfold-tokens-after``, ``x-chatfold-summary`` (``extractive`` when
  it stood in).
"""

from __future__ import annotations

import fnmatch
import inspect
import logging
from collections import OrderedDict
from typing import Any, Dict, Mapping, Optional, Tuple

import litellm
from litellm.integrations.custom_logger import CustomLogger

from . import Compaction, Compactor
from .errors import InvalidConfig, SummarizerError

__all__ = ["ChatfoldHook"]

log = logging.getLogger("chatfold.litellm")

#: The API shape of each LiteLLM call type the hook compacts.
FORMATS = {
    "acompletion": "openai",
    "completion": "openai",
    "anthropic_messages": "anthropic",
    "aresponses": "responses",
    "responses": "responses",
}

#: Outcomes kept for the response-headers hook, at most.
KEPT_OUTCOMES = 4096


class ChatfoldHook(CustomLogger):
    """A LiteLLM callback that compacts each request before it is routed.

    - ``budget``: the tokens a request's messages may take; per model,
      ``model_budgets`` (``{"pattern*": tokens}``, the first match wins), or
      ``window_share`` of the model's input window from LiteLLM's model map;
      a request whose model none of them names goes on unchanged.
    - ``summarize``: any chatfold summarizer (``"extractive"``, the default;
      an :class:`chatfold.OpenAISummarizer` or :class:`chatfold.AnthropicSummarizer`;
      a callable ``f(request) -> str``, or a coroutine function).
    - ``tokenizer``, ``fold_to``, ``pin``: as :class:`chatfold.Compactor`
      takes them.
    - ``reuse`` (on by default): keep summaries in this process; ``redis``
      (a ``redis://`` URL): in Redis, for every worker.
    """

    def __init__(
        self,
        budget: Optional[int] = None,
        model_budgets: Optional[Mapping[str, int]] = None,
        summarize: Any = "extractive",
        *,
        window_share: Optional[float] = None,
        tokenizer: Any = "o200k_base",
        fold_to: Optional[int] = None,
        pin: Any = None,
        reuse: bool = True,
        redis: Optional[str] = None,
    ) -> None:
        super().__init__()
        if budget is None and not model_budgets and window_share is None:
            raise InvalidConfig("ChatfoldHook needs a budget, model_budgets or window_share")
        if window_share is not None and not 0 < window_share <= 1:
            raise InvalidConfig(f"window_share must be above 0 and at most 1, not {window_share}")
        self.budget = budget
        self.model_budgets = dict(model_budgets or {})
        self.window_share = window_share
        self.summarize = summarize
        self._settings: Dict[str, Any] = dict(tokenizer=tokenizer, pin=pin, reuse=reuse, redis=redis)
        self._fold_to = fold_to
        self._compactors: Dict[Tuple[str, int, str, bool], Compactor] = {}
        self._outcomes: "OrderedDict[str, Dict[str, str]]" = OrderedDict()
        # Checked now, so a bad setting fails when the gateway starts.
        self._compactor("openai", budget or 1, "", fallback=False)

    # -- what a request gets ---------------------------------------------

    def budget_for(self, model: Optional[str]) -> Optional[int]:
        """The budget of a request for ``model``, if one applies."""
        for pattern, tokens in self.model_budgets.items():
            if model is not None and fnmatch.fnmatchcase(model, pattern):
                return int(tokens)
        if self.window_share is not None and model:
            try:
                window = litellm.get_model_info(model).get("max_input_tokens")
            except Exception:  # noqa: BLE001 - a model LiteLLM's map does not know has no window
                window = None
            if window:
                return max(1, int(window * self.window_share))
        return self.budget

    def _compactor(self, kind: str, budget: int, tenant: str, fallback: bool) -> Compactor:
        key = (kind, budget, tenant, fallback)
        compactor = self._compactors.get(key)
        if compactor is None:
            name = "extractive" if fallback or self.summarize in (None, "extractive") else repr(type(self.summarize))
            fold_to = min(self._fold_to, budget) if self._fold_to else None
            compactor = Compactor(budget, format=kind, fold_to=fold_to, namespace=f"litellm {tenant} {name}",
                                  **self._settings)
            self._compactors[key] = compactor
        return compactor

    async def _summary(self, request: Any) -> str:
        """The configured summarizer's answer to ``request``."""
        summarize = self.summarize
        if summarize in (None, "extractive"):
            return request._extractive()
        if hasattr(summarize, "asummarize"):
            answer = await summarize.asummarize(request)
        else:
            answer = summarize(request)
            if inspect.isawaitable(answer):
                answer = await answer
        if not isinstance(answer, str):
            raise TypeError(f"a summarizer must return a str, got {type(answer).__name__}")
        text = answer.strip()
        if not text:
            raise SummarizerError("the summarizer returned an empty summary")
        return text

    async def compact(self, data: Dict[str, Any], call_type: Any, tenant: str = "") -> Optional[Compaction]:
        """Compacts the request in ``data`` (LiteLLM's request dict, changed
        in place) for ``call_type``; the compaction, when it ran."""
        kind = FORMATS.get(str(getattr(call_type, "value", call_type)))
        budget = self.budget_for(data.get("model")) if kind else None
        body = _body(kind, data) if budget else None
        if body is None:
            return None
        try:
            result = await self._compactor(kind, budget, tenant, False).compact_async(body, self._summary)
            fallback = None
        except Exception as error:  # noqa: BLE001 - a failing summarizer never fails the request
            if self.summarize in (None, "extractive"):
                raise
            log.warning("chatfold: the summarizer failed (%s: %s); the extractive summary stands in",
                        type(error).__name__, error)
            result = self._compactor(kind, budget, tenant, True).compact(body)
            fallback = "extractive"
        if result.summarized:
            _write_back(kind, data, result.messages)
        self._remember(data, result, fallback)
        return result

    def _remember(self, data: Mapping[str, Any], result: Compaction, fallback: Optional[str]) -> None:
        call = data.get("litellm_call_id")
        if not call:
            return
        if call in self._outcomes and not result.summarized:
            return  # folded already by the other hook: that one says so
        headers = {
            "x-chatfold-summarized": "true" if result.summarized else "false",
            "x-chatfold-tokens-before": str(result.tokens_before),
            "x-chatfold-tokens-after": str(result.tokens_after),
        }
        if fallback:
            headers["x-chatfold-summary"] = fallback
        self._outcomes[call] = headers
        while len(self._outcomes) > KEPT_OUTCOMES:
            self._outcomes.popitem(last=False)

    # -- LiteLLM's hooks -------------------------------------------------

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> dict:
        """The proxy's hook, before routing: the request compacted."""
        tenant = str(getattr(user_api_key_dict, "token", None) or getattr(user_api_key_dict, "api_key", None) or "")
        await self.compact(data, call_type, tenant)
        return data

    async def async_pre_call_deployment_hook(self, kwargs: Dict[str, Any], call_type: Any) -> Optional[dict]:
        """The SDK's hook (and the proxy's, per deployment): the request compacted."""
        await self.compact(kwargs, call_type)
        return kwargs

    async def async_post_call_response_headers_hook(
        self,
        data: dict,
        user_api_key_dict: Any,
        response: Any,
        request_headers: Optional[Dict[str, str]] = None,
        litellm_call_info: Optional[Dict[str, Any]] = None,
    ) -> Optional[Dict[str, str]]:
        """What the compaction did, as response headers."""
        return self._outcomes.pop(data.get("litellm_call_id"), None)


def _body(kind: str, data: Mapping[str, Any]) -> Any:
    """The request's messages as chatfold reads them in ``kind``'s shape,
    or ``None`` when there is nothing to compact."""
    if kind == "openai":
        messages = data.get("messages")
        return messages if isinstance(messages, list) and messages else None
    if kind == "anthropic":
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages:
            return None
        body: Dict[str, Any] = {"messages": messages}
        if data.get("system"):
            body["system"] = data["system"]
        return body
    items = data.get("input")
    return {"input": items} if isinstance(items, list) and items else None


def _write_back(kind: str, data: Dict[str, Any], compacted: Any) -> None:
    """The compacted messages into LiteLLM's request dict."""
    if kind == "openai":
        data["messages"] = compacted
    elif kind == "anthropic":
        data["messages"] = compacted["messages"]
        if "system" in compacted:
            data["system"] = compacted["system"]
    else:
        data["input"] = compacted["input"]
