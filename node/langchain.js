// chatfold for LangChain.js agents: `summarizationMiddleware` for
// `createAgent`, taking the options of langchain's own
// (`summarizationMiddleware` in langchain 1.x) and writing its state
// update, on chatfold's core: the trigger counts the system prompt and the
// tools and is never exceeded (by the middleware's own `tokenCounter`), the
// whole folded span is summarized (in chunks of `trimTokensToSummarize`),
// tool calls stay with their results, a result without its call is not
// sent, the task and the turn's question stand verbatim after the summary,
// and a summarizer that fails never becomes the summary.
'use strict'

const { createMiddleware, countTokensApproximately } = require('langchain')
const { AIMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage } = require('@langchain/core/messages')
const { Command, REMOVE_ALL_MESSAGES } = require('@langchain/langgraph')
const { randomUUID } = require('node:crypto')

const { Compactor, InvalidConfig, SummarizerError } = require('./index.js')

const DEFAULT_SUMMARY_PREFIX = 'Here is a summary of the conversation to date:'
const DEFAULT_MESSAGES_TO_KEEP = 20
const DEFAULT_TRIM_TOKEN_LIMIT = 4000


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

  /**
   * langchain's trigger and keep as the core's budget recipe takes them: a
   * clause's token or fraction part is a limit the result must end under; a
   * clause of a message count alone, a count that folds to `keep`.
   */
  function recipe() {
    const triggers = []
    for (const c of conditions) {
      if ('tokens' in c) triggers.push(['tokens', c.tokens])
      if ('fraction' in c) triggers.push(['fraction', c.fraction])
      if (Object.keys(c).length === 1 && 'messages' in c) triggers.push(['messages', c.messages])
    }
    const [kind] = Object.keys(keep)
    const out = { keep: [kind, keep[kind]], triggers, window: profileLimit(model) }
    if (maxSummaryTokens !== undefined) out.maxSummaryTokens = maxSummaryTokens
    return out
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

  /**
   * The compaction of `messages`, aimed by the core's budget recipe under
   * the trigger as `count` (the caller's measure, system prompt and tools
   * included) finds it; the task and the turn's question pinned after the
   * summary. The messages the model is sent, or nothing when none folded.
   */
  async function fold(messages, count) {
    const stand = messages.map(standIn)
    const settings = { tokenizer, summaryRole: 'user', summaryPrefix: prefix, ledger, pin: ['first-user', 'last-user'] }
    if (trimTokensToSummarize) settings.maxFoldInputTokens = trimTokensToSummarize
    if (maxSummaryTokens !== undefined) settings.maxSummaryTokens = maxSummaryTokens
    const aim = new Compactor(1, settings).aim(stand, recipe(), [await count(messages), await count([])])
    const note = {}
    let out
    for (;;) {
      delete note.error
      const result = await aim.compactor().compactAsync(stand, summarizer(note))
      if (!result.summarized) return out
      const fates = result.report.fates
      const hoisted = fates.filter((f) => f === 'hoisted').length
      const summary = new HumanMessage({
        content: result.messages[hoisted].content,
        id: randomUUID(),
        additional_kwargs: note.error ? { lc_source: 'summarization', chatfold: { summary: 'extractive', error: note.error } } : { lc_source: 'summarization' },
      })
      const by = (fate) => messages.filter((_, i) => fates[i] === fate)
      out = [...by('hoisted'), summary, ...by('pinned'), ...by('kept')]
      if (aim.next(await count(out)) === null) return out
    }
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
      const folded = await fold(messages, count)
      if (!folded) return handler({ ...request, messages })
      const answer = await handler({ ...request, messages: folded })
      return new Command({ update: { messages: [new RemoveMessage({ id: REMOVE_ALL_MESSAGES }), ...folded, answer] } })
    },
  })
}

module.exports = { summarizationMiddleware }
