// chatfold for the Vercel AI SDK (ai 6): a language-model middleware that
// compacts the prompt before every call, and a `prepareStep` helper for
// multi-step `generateText` / `streamText` runs. Neither imports the AI SDK:
// they are the plain objects and functions it takes.
'use strict'

const { Compactor, countTokens, InvalidConfig } = require('./index.js')
const { withoutOrphans } = require('./aisdk.js')

/** Tokens of `messages` by `tokenizer` (a name or a function). */
function tokensOf(messages, tokenizer) {
  if (typeof tokenizer === 'function') return new Compactor(0xffffffff, { tokenizer }).count(messages)
  return countTokens(messages, tokenizer)
}

/** Tokens of the tool definitions a call sends, counted as one message of their JSON. */
function toolsTokens(tools, tokenizer) {
  if (!tools || (Array.isArray(tools) ? tools.length === 0 : Object.keys(tools).length === 0)) return 0
  const list = Array.isArray(tools)
    ? tools
    : Object.entries(tools).map(([name, t]) => ({ name, description: t.description, inputSchema: t.inputSchema ?? t.parameters }))
  return tokensOf([{ role: 'system', content: JSON.stringify(list) }], tokenizer)
}

/** The settings of a compaction: the budget, the summarizer, the rest for the compactor. */
function settings(options) {
  if (!options || typeof options !== 'object') throw new InvalidConfig('options with a budget are required')
  const { budget, summarize = 'extractive', ...rest } = options
  if (!Number.isInteger(budget) || budget < 1) throw new InvalidConfig(`budget must be a whole number of tokens, not ${budget}`)
  // Checked now, so a bad setting fails when the middleware is made.
  new Compactor(budget, { ...rest, format: 'ai-sdk' })
  return { budget, summarize, rest, compactors: new Map() }
}

/**
 * Compacts AI SDK `messages` into `room` tokens (what the call's other parts
 * leave). The compactor for each room is made once and keeps its summaries:
 * the AI SDK resends the whole conversation on every call, and a prefix
 * already summarized is not summarized again.
 */
async function fit(messages, room, s) {
  const { budget, summarize, rest, compactors } = s
  const sendable = withoutOrphans(messages)
  const size = Math.max(1, Math.min(budget, room))
  let compactor = compactors.get(size)
  if (!compactor) {
    const keep = rest.keepRecent === undefined ? {} : { keepRecent: Math.min(rest.keepRecent, size) }
    compactor = new Compactor(size, { ...rest, ...keep, format: 'ai-sdk', pin: rest.pin ?? ['first-user', 'last-user'], reuse: true })
    compactors.set(size, compactor)
  }
  const result = await compactor.compactAsync(sendable, summarize)
  return result.summarized || sendable !== messages ? result.messages : messages
}

/**
 * A middleware for `wrapLanguageModel({ model, middleware })`: before every
 * call (`generateText`, `streamText`, each step of a multi-step run) the
 * prompt is compacted to `budget` tokens, the tool definitions counted in:
 * system messages and the newest turns kept, tool calls with their results,
 * the older middle folded into one system message (the summary, with its
 * ledger of exact identifiers), extended by the next call; the task (the
 * first user message) and the turn's question (the newest) stand verbatim
 * after the summary (`pin` changes which). A tool result
 * whose call is not in the prompt is not sent. `summarize` is a function
 * `(request) => string | Promise<string>`, `"extractive"` (the default, no
 * model) or an HTTP summarizer; one that throws or rejects fails the call
 * with its error, and nothing is sent. Other options are the `Compactor`'s
 * (`keepRecent`, `tokenizer`, `maxSummaryTokens`, `ledger`, ...).
 */
function compactionMiddleware(options) {
  const s = settings(options)
  return {
    specificationVersion: 'v3',
    async transformParams({ params }) {
      const room = s.budget - toolsTokens(params.tools, s.rest.tokenizer)
      const prompt = await fit(params.prompt, room, s)
      return prompt === params.prompt ? params : { ...params, prompt }
    },
  }
}

/**
 * A `prepareStep` for multi-step `generateText` / `streamText` runs: each
 * step's `messages` (the AI SDK's `ModelMessage`s) compacted to `budget`
 * tokens, less the `system` prompt and the `tools` when given, as the
 * middleware does. Returns `{ messages }` when it changed them, `{}` when
 * they fit.
 */
function compactionPrepareStep(options) {
  const { system, tools, ...rest } = options || {}
  const s = settings(rest)
  const fixed = (system ? tokensOf([{ role: 'system', content: system }], s.rest.tokenizer) : 0) + toolsTokens(tools, s.rest.tokenizer)
  return async ({ messages }) => {
    const out = await fit(messages, s.budget - fixed, s)
    return out === messages ? {} : { messages: out }
  }
}

module.exports = { compactionMiddleware, compactionPrepareStep }
