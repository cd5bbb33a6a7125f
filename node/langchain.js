// chatfold for LangChain.js agents: `summarizationMiddleware` for
// `createAgent`, taking the options of langchain's own
// (`summarizationMiddleware` in langchain 1.x) and writing its state
// update, on chatfold's core: the trigger counts the system prompt and the
// tools and is never exceeded (by the middleware's own `tokenCounter`), the
// whole folded span is summarized (in chunks of `trimTokensToSummarize`),
// tool calls stay with their results, a result without its call is not
// sent, the turn's question is never folded, and a summarizer that fails
// never becomes the summary.
'use strict'

const { createMiddleware, countTokensApproximately } = require('langchain')
const { AIMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage } = require('@langchain/core/messages')
const { Command, REMOVE_ALL_MESSAGES } = require('@langchain/langgraph')
const { randomUUID } = require('node:crypto')

const { Compactor, InvalidConfig, SummarizerError } = require('./index.js')

const DEFAULT_SUMMARY_PREFIX = 'Here is a summary of the conversation to date:'
const DEFAULT_MESSAGES_TO_KEEP = 20
const DEFAULT_TRIM_TOKEN_LIMIT = 4000
/** The summary's room when only a message count triggers a compaction. */
const MESSAGES_ONLY_SUMMARY_TOKENS = 1000
/** Compactions run again, on a smaller budget, while the caller's counter finds the result at the trigger. */
const TRIES = 3

const isSummary = (m) => HumanMessage.isInstance(m) && m.additional_kwargs?.lc_source === 'summarization'

function text(content) {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map((b) => (typeof b === 'string' ? b : b.type === 'text' ? b.text : `[${b.type}]`)).join('')
}

/** The OpenAI stand-in of a LangChain message. */
function standIn(m) {
  if (SystemMessage.isInstance(m)) return { role: 'system', content: text(m.content) }
  if (AIMessage.isInstance(m)) {
    const out = { role: 'assistant', content: text(m.content) || null }
    // Invalid calls too: a result may answer one, and must stay with it.
    const calls = [
      ...(m.tool_calls ?? []).map((c) => ({ id: c.id, name: c.name, arguments: JSON.stringify(c.args ?? {}) })),
      ...(m.invalid_tool_calls ?? []).map((c) => ({ id: c.id, name: c.name ?? '', arguments: String(c.args ?? '') })),
    ].filter((c) => c.id)
    if (calls.length) out.tool_calls = calls.map(({ id, name, arguments: args }) => ({ id, type: 'function', function: { name, arguments: args } }))
    return out
  }
  if (ToolMessage.isInstance(m)) return { role: 'tool', tool_call_id: m.tool_call_id, content: text(m.content) }
  return { role: 'user', content: text(m.content) }
}

/** `messages` less the tool results whose call no earlier AI message made. */
function withoutOrphans(messages) {
  const issued = new Set()
  return messages.filter((m) => {
    if (AIMessage.isInstance(m)) {
      for (const c of m.tool_calls ?? []) issued.add(c.id)
      for (const c of m.invalid_tool_calls ?? []) issued.add(c.id)
    }
    return !ToolMessage.isInstance(m) || issued.has(m.tool_call_id)
  })
}

/** Where the turn in progress starts: the newest user message that is not a summary. */
function questionIndex(messages) {
  for (let i = messages.length - 1; i >= 0; i--) if (HumanMessage.isInstance(messages[i]) && !isSummary(messages[i])) return i
  return -1
}

/** The trigger as clauses (AND within one, OR across them), as langchain reads it. */
function clauses(trigger) {
  if (trigger === undefined) return []
  const list = Array.isArray(trigger) ? trigger : [trigger]
  for (const c of list) {
    for (const [k, v] of Object.entries(c)) {
      if (!['tokens', 'messages', 'fraction'].includes(k)) throw new InvalidConfig(`unsupported trigger ${JSON.stringify(k)}`)
      if (typeof v !== 'number' || !(v > 0) || (k === 'fraction' && v > 1)) throw new InvalidConfig(`trigger ${k} must be a positive number, not ${v}`)
    }
  }
  return list
}

function profileLimit(model) {
  const n = model?.profile?.maxInputTokens
  return Number.isInteger(n) ? n : undefined
}

/**
 * LangChain's `summarizationMiddleware` on chatfold's core. Options as
 * langchain names them: `model` (the summarizer), `trigger`, `keep`,
 * `tokenCounter`, `summaryPrompt`, `trimTokensToSummarize`, `summaryPrefix`
 * (and the deprecated `maxTokensBeforeSummary`, `messagesToKeep`);
 * chatfold's own: `onSummarizerError` (`'throw'`, the default, or
 * `'extractive'`: chatfold's extractive summary in its place, said in the
 * summary message's `additional_kwargs.chatfold`), `maxSummaryTokens`,
 * `ledger`.
 */
function summarizationMiddleware(options = {}) {
  const {
    model,
    tokenCounter = countTokensApproximately,
    summaryPrompt,
    trimTokensToSummarize = DEFAULT_TRIM_TOKEN_LIMIT,
    summaryPrefix = DEFAULT_SUMMARY_PREFIX,
    onSummarizerError = 'throw',
    maxSummaryTokens,
    ledger = true,
  } = options
  if (!model || typeof model.invoke !== 'function') throw new InvalidConfig('model (a chat model) is required')
  if (!['throw', 'extractive'].includes(onSummarizerError)) throw new InvalidConfig(`onSummarizerError must be "throw" or "extractive", not ${onSummarizerError}`)
  let trigger = options.trigger
  if (trigger === undefined && options.maxTokensBeforeSummary !== undefined) trigger = { tokens: options.maxTokensBeforeSummary }
  const conditions = clauses(trigger)
  const keep = options.keep ?? (options.messagesToKeep !== undefined ? { messages: options.messagesToKeep } : { messages: DEFAULT_MESSAGES_TO_KEEP })
  if (Object.keys(keep).length !== 1) throw new InvalidConfig('keep takes one of tokens, messages or fraction')
  const needsProfile = conditions.some((c) => 'fraction' in c) || 'fraction' in keep
  if (needsProfile && profileLimit(model) === undefined) throw new InvalidConfig('a fraction needs the model profile\'s maxInputTokens')
  const prefix = `${summaryPrefix}\n\n`
  const tokenizer = tokenCounter === countTokensApproximately ? 'heuristic' : 'o200k_base'

  /** The limits the request must end under: the smallest token and message triggers. */
  function limits() {
    const tokens = []
    const messages = []
    for (const c of conditions) {
      if ('tokens' in c) tokens.push(c.tokens)
      if ('fraction' in c) tokens.push(Math.max(1, Math.floor(profileLimit(model) * c.fraction)))
      if (Object.keys(c).length === 1 && 'messages' in c) messages.push(c.messages)
    }
    return { tokens: tokens.length ? Math.min(...tokens) : undefined, messages: messages.length ? Math.min(...messages) : undefined }
  }

  async function triggered(messages, total) {
    return conditions.some((c) =>
      Object.entries(c).every(([k, v]) => (k === 'messages' ? messages.length >= v : total >= (k === 'tokens' ? v : Math.floor(profileLimit(model) * v)))),
    )
  }

  function prompt(request) {
    if (summaryPrompt === undefined) {
      const { system, user } = request.prompt()
      return [new SystemMessage(system), new HumanMessage(user)]
    }
    return [new HumanMessage(summaryPrompt.replace('{messages}', request.transcript))]
  }

  function summarizer(note) {
    return async (request) => {
      try {
        const answer = await model.invoke(prompt(request))
        const said = text(answer.content).trim()
        if (!said) throw new SummarizerError('the summarizer returned an empty summary')
        return said
      } catch (error) {
        if (onSummarizerError !== 'extractive') throw error
        note.error = `${error.name}: ${error.message}`
        return request.extractive()
      }
    }
  }

  async function fold(request, messages, count) {
    const { tokens, messages: messageLimit } = limits()
    const stand = messages.map(standIn)
    const pinned = questionIndex(messages)
    if (pinned >= 0) stand[pinned] = { ...stand[pinned], role: 'developer' }
    const settings = { tokenizer, summaryRole: 'user', summaryPrefix: prefix, ledger, maxFoldInputTokens: trimTokensToSummarize ?? undefined }
    if (maxSummaryTokens !== undefined) settings.maxSummaryTokens = maxSummaryTokens
    // Folding to the budget itself: the framework's trigger and keep already fold in steps.
    const core = (budget, keepRecent) => new Compactor(Math.max(1, budget), { ...settings, foldTo: Math.max(1, budget), keepRecent: Math.max(0, Math.min(keepRecent, Math.max(1, budget))) })
    const counter = core(1 << 30, 0)
    const coreTokens = (from) => (from < stand.length ? counter.count(stand.slice(from)) : 0)
    const whole = coreTokens(0)
    const fixed = await count([])
    const total = await count(messages)
    let keepTokens
    if ('messages' in keep) {
      const n = messageLimit === undefined ? keep.messages : Math.min(keep.messages, Math.max(1, messageLimit - 2))
      keepTokens = coreTokens(Math.max(0, messages.length - n))
    } else keepTokens = 'tokens' in keep ? keep.tokens : Math.floor(profileLimit(model) * keep.fraction)
    let budget
    let limit
    if (tokens === undefined) {
      limit = Infinity
      budget = Math.min(keepTokens + (maxSummaryTokens ?? MESSAGES_ONLY_SUMMARY_TOKENS), whole - 1)
    } else {
      limit = tokens
      const ratio = Math.max(1, (total - fixed) / Math.max(1, whole))
      budget = Math.floor((tokens - fixed - 1) / ratio)
      if (messageLimit !== undefined && messages.length >= messageLimit) {
        // A message count fired too: fold to the count as well.
        budget = Math.min(budget, keepTokens + (maxSummaryTokens ?? MESSAGES_ONLY_SUMMARY_TOKENS), whole - 1)
      }
    }
    if (pinned >= 0) keepTokens = Math.max(keepTokens, Math.min(coreTokens(pinned), budget - Math.floor(budget / 5)))
    const note = {}
    let out
    for (let i = 0; i < TRIES; i++) {
      delete note.error
      const result = await core(budget, keepTokens).compactAsync(stand, summarizer(note))
      if (!result.summarized) return out
      const fates = result.report.fates
      const hoisted = fates.filter((f) => f === 'hoisted').length
      const summary = new HumanMessage({
        content: result.messages[hoisted].content,
        id: randomUUID(),
        additional_kwargs: note.error ? { lc_source: 'summarization', chatfold: { summary: 'extractive', error: note.error } } : { lc_source: 'summarization' },
      })
      const keptAt = (i) => fates[i] === 'kept' || (i === pinned && fates[i] === 'hoisted')
      out = [...messages.filter((_, i) => fates[i] === 'hoisted' && i !== pinned), summary, ...messages.filter((_, i) => keptAt(i))]
      const over = (await count(out)) - limit + 1
      if (over <= 0 || budget <= 1) break
      budget = Math.max(1, budget - over - Math.floor(budget / 20))
    }
    return out
  }

  return createMiddleware({
    name: 'SummarizationMiddleware',
    wrapModelCall: async (request, handler) => {
      const messages = withoutOrphans(request.messages)
      for (const m of messages) if (!m.id) m.id = randomUUID()
      const system = request.systemMessage && text(request.systemMessage.content) ? [request.systemMessage] : []
      const count = async (ms) => tokenCounter([...system, ...ms], request.tools)
      if (!(await triggered(messages, await count(messages)))) {
        return handler(messages.length === request.messages.length ? request : { ...request, messages })
      }
      const folded = await fold(request, messages, count)
      if (!folded) return handler({ ...request, messages })
      const answer = await handler({ ...request, messages: folded })
      return new Command({ update: { messages: [new RemoveMessage({ id: REMOVE_ALL_MESSAGES }), ...folded, answer] } })
    },
  })
}

module.exports = { summarizationMiddleware }
