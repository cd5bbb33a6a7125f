// chatfold for JavaScript: keep LLM chat histories inside a token budget.
// The compactor is chatfold's Rust core (chatfold.node); this file gives it
// JavaScript's conventions: camelCase, promises, Error subclasses.
'use strict'

const native = require('./chatfold.node')
const aisdk = require('./aisdk.js')

/** Every error chatfold throws of its own. */
class ChatfoldError extends Error {
  constructor(message, info) {
    super(message)
    this.name = new.target.name
    if (info && info.kind) this.kind = info.kind
  }
}
/** A setting that cannot work (a budget of 0, keepRecent over the budget...). */
class InvalidConfig extends ChatfoldError {}
/** A message that cannot be read: `index` is its position, `field` the field at fault. */
class InvalidMessage extends ChatfoldError {
  constructor(message, info = {}) {
    super(message, info)
    this.index = info.index
    this.field = info.field
  }
}
/** Input that is not a history (not a list of messages or a request body). */
class InvalidInput extends ChatfoldError {}
/** A saved state that cannot be restored. */
class InvalidState extends ChatfoldError {}
/** The summarizer failed or returned an empty summary; nothing was changed. */
class SummarizerError extends ChatfoldError {}
/** The budget cannot be reached (with `strict: true`). */
class BudgetUnreachable extends ChatfoldError {}

const KINDS = { ChatfoldError, InvalidConfig, InvalidMessage, InvalidInput, InvalidState, SummarizerError, BudgetUnreachable }

/** A native error as chatfold's class, or as it came when it is not chatfold's. */
function translated(error) {
  const message = error && typeof error.message === 'string' ? error.message : ''
  if (!message.startsWith('chatfold:')) return error
  let info
  try {
    info = JSON.parse(message.slice('chatfold:'.length))
  } catch {
    return error
  }
  const Kind = KINDS[info.kind] || ChatfoldError
  return new Kind(info.message, info)
}

function call(f) {
  try {
    return f()
  } catch (error) {
    throw translated(error)
  }
}

async function awaited(promise) {
  try {
    return await promise
  } catch (error) {
    throw translated(error)
  }
}

/** What the summarizer is asked. */
class SummaryRequest {
  constructor(raw, json) {
    /** The running summary the folded messages add to (`null` on the first fold). */
    this.previousSummary = raw.previousSummary
    /** The folded messages, oldest first, as OpenAI-style objects. */
    this.messages = raw.messages
    /** The previous summary and the messages as one text to summarize. */
    this.transcript = raw.transcript
    /** Tokens the summary may take; a longer one is cut to fit. */
    this.allowance = raw.allowance
    /** Exact identifiers the summary's ledger will list (no need to repeat them). */
    this.ledger = raw.ledger
    Object.defineProperty(this, '_prompt', { value: raw.prompt })
    Object.defineProperty(this, '_json', { value: json ?? JSON.stringify(raw) })
  }

  /** chatfold's built-in extractive summary of this request (no model), computed on the thread pool. */
  extractive() {
    return awaited(native.summarizeNamed({ kind: 'extractive' }, this._json))
  }

  /** The instructions chatfold's HTTP summarizers send, as `{ system, user }`. */
  prompt() {
    return { ...this._prompt }
  }
}

/** An OpenAI-compatible Chat Completions summarizer that runs in Rust. */
class OpenAISummarizer {
  constructor(baseUrl, model, options = {}) {
    this.spec = { kind: 'openai', baseUrl, model, apiKey: options.apiKey }
  }
}

/** An Anthropic Messages summarizer that runs in Rust. */
class AnthropicSummarizer {
  constructor(baseUrl, model, options = {}) {
    this.spec = { kind: 'anthropic', baseUrl, model, apiKey: options.apiKey }
  }
}

/** A summarizer the native side runs by itself, or null for a function. */
function named(summarize) {
  if (summarize === undefined || summarize === null || summarize === 'extractive') return { kind: 'extractive' }
  if (summarize instanceof OpenAISummarizer || summarize instanceof AnthropicSummarizer) return summarize.spec
  if (typeof summarize === 'function') return null
  throw new TypeError('summarize must be a function, "extractive", an OpenAISummarizer or an AnthropicSummarizer')
}

/** Messages as the JSON text the native side reads. */
function json(messages) {
  if (messages === null || typeof messages !== 'object') {
    throw new InvalidInput(`messages must be an array of messages or a request body, not ${messages === null ? 'null' : typeof messages}`)
  }
  return JSON.stringify(messages)
}

/** A compaction's outcome: the caller's own message objects when nothing changed. */
function compaction(text, input) {
  const raw = JSON.parse(text)
  const messages = raw.messages === null ? (Array.isArray(input) ? [...input] : input) : raw.messages
  return Object.freeze({ ...raw, messages })
}

/** An AI SDK message list, checked. */
function list(messages) {
  if (!Array.isArray(messages)) throw new InvalidInput('AI SDK messages must be an array of ModelMessage objects')
  messages.forEach((m, index) => {
    if (m === null || typeof m !== 'object' || typeof m.role !== 'string') {
      throw new InvalidMessage(`message ${index}: role must be a string`, { index, field: 'role' })
    }
  })
  return messages
}

/** The AI SDK messages of a compaction of their stand-ins. */
function fromStandIns(messages, owner, result) {
  const mapped = aisdk.fromCore(messages, owner, result)
  return Object.freeze({ ...result, messages: mapped.messages, report: mapped.report })
}

/**
 * The `pin` option read: the pins the core parses by name (`'first-user'`,
 * `'last-user'`, an index), and the caller's predicates, `(message, index)
 * => boolean`, which this side evaluates into indices.
 */
function pins(pin) {
  const names = []
  const predicates = []
  for (const p of pin === undefined ? [] : Array.isArray(pin) ? pin : [pin]) {
    if (typeof p === 'function') predicates.push(p)
    else if (typeof p === 'string' || (Number.isInteger(p) && p >= 0)) names.push(String(p))
    else throw new InvalidConfig(`a pin is 'first-user', 'last-user', an index or a function, not ${JSON.stringify(p)}`)
  }
  return { names: names.join(','), predicates }
}

function checkedText(text) {
  if (typeof text !== 'string') {
    throw new TypeError(`a summarizer must return a string, not ${text === null ? 'null' : typeof text}`)
  }
  return text
}

/** A tokenizer function's count, checked: a whole number of tokens. */
function countingWith(tokenizer) {
  return (text) => {
    const n = tokenizer(text)
    if (!Number.isInteger(n) || n < 0) throw new TypeError(`a tokenizer must return a whole number of tokens, not ${n}`)
    return n
  }
}

/** Waits a moment: an operation that waits on another (a fold in flight) is polled again after it. */
const moment = () => new Promise((resolve) => setTimeout(resolve, 1))

/**
 * Runs a native operation to its end, answering its summarizer's requests
 * with `summarize` (awaited); polled on libuv's thread pool. Its result's
 * JSON text, or its error thrown (a summarizer's own error as itself).
 */
async function drive(step, summarize, poll = (s) => s.pollAsync()) {
  for (;;) {
    const raw = await poll(step)
    if (raw === null) {
      if (step.done()) return call(() => step.result())
      await moment()
      continue
    }
    let text
    try {
      text = checkedText(await summarize(new SummaryRequest(JSON.parse(raw), raw), raw))
    } catch (error) {
      step.cancel()
      throw error
    }
    step.answer(text)
  }
}

/**
 * Runs a native operation here to its end, answering its summarizer's
 * requests with the plain function `summarize`. Its result's JSON text, or
 * its error thrown (a summarizer's own error as itself).
 */
function stepHere(step, summarize) {
  for (;;) {
    const raw = step.poll()
    if (raw === null) return call(() => step.result())
    let text
    try {
      text = summarize(new SummaryRequest(JSON.parse(raw), raw))
      if (text && typeof text.then === 'function') {
        throw new TypeError('the summarizer returned a promise: use compactAsync for an async summarizer')
      }
      checkedText(text)
    } catch (error) {
      step.cancel()
      throw error
    }
    step.answer(text)
  }
}

/** `summarize` as a function of (request, its JSON): named ones run in Rust, on the thread pool. */
function asFunction(summarize) {
  const spec = named(summarize)
  if (!spec) return summarize
  return (_, raw) => awaited(native.summarizeNamed(spec, raw))
}

const OPTIONS = [
  'keepRecent', 'foldTo', 'tokenizer', 'format', 'strict', 'summaryRole', 'summaryPrefix',
  'minSummaryTokens', 'maxSummaryTokens', 'ledger', 'maxFoldInputTokens', 'pin', 'pinQuestion', 'reuse',
]

/**
 * Keeps a chat history inside `budget` tokens: system messages and the most
 * recent turns (`keepRecent` tokens, a quarter of the fold target by default)
 * verbatim, the older middle folded into one summary message; a history over
 * the budget is folded down to `foldTo` tokens (half the budget by default).
 */
/** The key under which `Aim#compactor` hands a native compactor to the constructor. */
const WRAPPED = Symbol('wrapped native compactor')

class Compactor {
  #native
  #aiSdk
  #predicates
  #tokenizer

  constructor(budget, options = {}) {
    if (options[WRAPPED]) {
      this.#native = options[WRAPPED]
      this.#aiSdk = false
      this.#predicates = []
      return
    }
    if (!Number.isInteger(budget) || budget < 0 || budget > 0xffffffff) {
      throw new InvalidConfig(`budget must be a whole number of tokens, not ${budget}`)
    }
    for (const key of Object.keys(options)) {
      if (!OPTIONS.includes(key)) throw new InvalidConfig(`unknown option ${JSON.stringify(key)}`)
    }
    this.#aiSdk = options.format === 'ai-sdk'
    // `pinQuestion: true`, the AI SDK middleware's older option, is `pin: 'last-user'`.
    const pin = [].concat(options.pin ?? [], options.pinQuestion === true ? ['last-user'] : [])
    const { names, predicates } = pins(pin)
    this.#predicates = predicates
    const settings = { ...options, pin: names }
    delete settings.pinQuestion
    if (typeof options.tokenizer === 'function') {
      this.#tokenizer = countingWith(options.tokenizer)
      settings.tokenizer = 'heuristic'
    }
    if (this.#aiSdk) delete settings.format
    this.#native = call(() => new native.NativeCompactor(budget, settings))
  }

  /** The budget in tokens. */
  get budget() {
    return this.#native.budget
  }

  /** Tokens of recent turns kept verbatim. */
  get keepRecent() {
    return this.#native.keepRecent
  }

  /** Where a history over the budget is folded down to. */
  get foldTo() {
    return this.#native.foldTo
  }

  /**
   * What a framework's summarization settings make of a request of
   * `messages` (the budget recipe, decided in the core): `recipe.keep` and
   * each of `recipe.triggers` as `['tokens', n]`, `['messages', n]` or
   * `['fraction', f]` (of `recipe.window`), `recipe.maxSummaryTokens`;
   * `measured`: `[total, fixed]`, the caller's count of the request and of
   * the request with no messages. The {@link Aim} gives this try's
   * compactor and the next try's budget.
   */
  aim(messages, recipe, measured) {
    const [total, fixed] = measured
    return new Aim(call(() => this.#native.aim(json(messages), JSON.stringify(recipe), total, fixed)))
  }

  /** The indices of `messages` the caller's predicates pin, or null when there are none. */
  #pinned(messages) {
    if (this.#predicates.length === 0) return null
    if (!Array.isArray(messages)) throw new InvalidConfig('a pin function takes a list of messages, not a request body')
    return messages.flatMap((m, i) => (this.#predicates.some((p) => p(m, i) === true) ? [i] : []))
  }

  /** Tokens of `messages` as the budget measures them. */
  count(messages) {
    const text = json(this.#aiSdk ? aisdk.toCore(list(messages)).stand : messages)
    if (this.#tokenizer) return call(() => this.#native.countWith(text, this.#tokenizer))
    return call(() => this.#native.count(text))
  }

  /**
   * Compacts `messages` (a list of messages, or a request body). `summarize`
   * is a function `(request) => string`, `"extractive"` (the default: the
   * built-in summarizer, no model) or an HTTP summarizer. A summarizer's
   * exception is thrown as itself and nothing is changed.
   */
  compact(messages, summarize) {
    if (!this.#aiSdk) return this.#compact(messages, summarize, this.#pinned(messages))
    const { stand, owner, pinned } = aisdk.toCore(list(messages), this.#pinned(messages) ?? [])
    return fromStandIns(messages, owner, this.#compact(stand, summarize, pinned))
  }

  #compact(messages, summarize, pinned) {
    const spec = named(summarize)
    if (this.#tokenizer) {
      // Counted here by the tokenizer; a named summarizer runs in Rust.
      const step = call(() => this.#native.beginWith(json(messages), this.#tokenizer, spec, pinned))
      return compaction(stepHere(step, summarize), messages)
    }
    if (spec) return compaction(call(() => this.#native.compactNamed(json(messages), spec, pinned)), messages)
    return compaction(stepHere(this.#native.begin(json(messages), pinned), summarize), messages)
  }

  /**
   * {@link Compactor#compact} with an async summarizer (a function returning
   * a promise, or a plain one); the history is read and planned on libuv's
   * thread pool, not the JavaScript thread. A summarizer that throws or
   * rejects changes nothing: its error is thrown as itself.
   */
  async compactAsync(messages, summarize) {
    if (!this.#aiSdk) return this.#compactAsync(messages, summarize, this.#pinned(messages))
    const { stand, owner, pinned } = aisdk.toCore(list(messages), this.#pinned(messages) ?? [])
    return fromStandIns(messages, owner, await this.#compactAsync(stand, summarize, pinned))
  }

  async #compactAsync(messages, summarize, pinned) {
    if (this.#tokenizer) {
      // The tokenizer runs on this thread only: the compaction is stepped
      // here, and each request awaits the summarizer in between.
      const step = call(() => this.#native.beginWith(json(messages), this.#tokenizer, null, pinned))
      return compaction(await drive(step, asFunction(summarize), (s) => s.poll()), messages)
    }
    const spec = named(summarize)
    if (spec) return compaction(await awaited(this.#native.compactNamedAsync(json(messages), spec, pinned)), messages)
    return compaction(await drive(this.#native.begin(json(messages), pinned), summarize), messages)
  }
}

/** What a budget recipe makes of one request (see {@link Compactor#aim}). */
class Aim {
  #native

  constructor(native) {
    this.#native = native
  }

  /** The limit the caller's measure must find the result under (`null`: only a message count triggers). */
  get limit() {
    return this.#native.limit ?? null
  }

  /** This try's budget. */
  get budget() {
    return this.#native.budget
  }

  /** This try's `keepRecent`. */
  get keepRecent() {
    return this.#native.keepRecent
  }

  /** The compactor of this try. */
  compactor() {
    return new Compactor(0, { [WRAPPED]: this.#native.compactor() })
  }

  /** The next try's budget after a result the caller measured at `measured` tokens; `null` when done. */
  next(measured) {
    return this.#native.next(measured) ?? null
  }
}

const MEMORY = ['tokenizer', 'summarize', 'lowWater', 'maxSummaryTokens', 'ledger', 'summaryPrefix', 'state', 'pin']
const TIERED = ['tokenizer', 'summarize', 'lowWater', 'maxSummaryTokens', 'ledger', 'summaryPrefix', 'state', 'system', 'pin',
  'chunkSize', 'chunkTokens', 'fallbackTruncate', 'maxFailures']

/** A memory's options for the native side: known keys only, state and system as JSON. */
function memoryOptions(options, known) {
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw new InvalidConfig(`unknown option ${JSON.stringify(key)}`)
  }
  const out = { ...options }
  delete out.summarize
  if (options.pin !== undefined) out.pin = [].concat(options.pin).join(',')
  if (options.state !== undefined) out.state = JSON.stringify(options.state)
  if (options.system !== undefined) out.system = JSON.stringify(options.system)
  return out
}

const parsed = (text) => JSON.parse(text)

const NATIVE = Symbol('native')

/**
 * What both memories read: the prompt, the summary, the buffer, the state.
 * `messages()` is the summary (a system message) then the buffer, and for
 * a tiered memory its pinned system messages first, within its hard limit.
 */
class Memory {
  constructor(inner) {
    Object.defineProperty(this, NATIVE, { value: inner })
  }

  /** The prompt: the summary (as a system message) then the recent turns. */
  messages() {
    return parsed(this[NATIVE].messages())
  }

  /** The running summary. */
  get summary() {
    return this[NATIVE].summary()
  }

  /** The messages kept verbatim. */
  get buffer() {
    return parsed(this[NATIVE].buffer())
  }

  /** The state (the crate's JSON, rollmem's; a tiered memory's with its pinned `system` messages). */
  toState() {
    return parsed(this[NATIVE].state())
  }

  /** Forgets the summary and the buffer (pinned system messages stay); a fold in flight is discarded. */
  clear() {
    this[NATIVE].clear()
  }
}

/**
 * A memory per conversation: recent turns verbatim, older ones folded into
 * a running summary once the buffer passes `maxTokens` (down to
 * `lowWater`). `add` resolves once the message is in (and any fold it
 * started is done); a summarizer that throws or rejects leaves the memory as
 * it was, and `add` rejects with its error. Its state is the crate's JSON
 * (rollmem's), which `toState` gives and the `state` option restores.
 */
class RollingMemory extends Memory {
  #summarize

  constructor(maxTokens, options = {}) {
    if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new InvalidConfig(`maxTokens must be a whole number of tokens, not ${maxTokens}`)
    super(call(() => new native.NativeRollingMemory(maxTokens, memoryOptions(options, MEMORY))))
    this.#summarize = asFunction(options.summarize)
  }

  /** Adds a message; a fold it starts is awaited. */
  async add(message) {
    const step = call(() => this[NATIVE].beginAdd(json(message)))
    await drive(step, this.#summarize)
  }

}

/**
 * A memory for agents that must never wait: `add` only appends; a worker on
 * the event loop folds the oldest turns in the background (in chunks, once
 * the buffer passes `softLimit`, down to `lowWater`: by default half of
 * it, so the prompt's prefix stays between folds), and `messages()` never passes `hardLimit`
 * (the oldest unfolded turns are hidden until a fold catches up). A failed
 * fold changes nothing and is counted in `stats()`; `system` messages are
 * pinned.
 */
class TieredMemory extends Memory {
  #summarize
  #worker
  #running = false
  #again = false
  #waiters = []

  constructor(softLimit, hardLimit, options = {}) {
    for (const [name, n] of [['softLimit', softLimit], ['hardLimit', hardLimit]]) {
      if (!Number.isInteger(n) || n < 1) throw new InvalidConfig(`${name} must be a whole number of tokens, not ${n}`)
    }
    super(call(() => new native.NativeTieredMemory(softLimit, hardLimit, memoryOptions(options, TIERED))))
    this.#summarize = asFunction(options.summarize)
    this.#worker = this[NATIVE].takeWorker()
  }

  /** Adds a message; never waits for a summarizer. */
  add(message) {
    call(() => this[NATIVE].add(json(message)))
    this.#kick()
  }

  #kick() {
    if (this.#running) {
      this.#again = true
      return
    }
    this.#running = true
    setImmediate(() => this.#run())
  }

  async #run() {
    try {
      for (;;) {
        this.#again = false
        const raw = await this.#worker.pollAsync()
        if (raw !== null) {
          try {
            this.#worker.answer(checkedText(await this.#summarize(new SummaryRequest(JSON.parse(raw), raw), raw)))
          } catch (error) {
            this.#worker.fail(String((error && error.message) || error))
          }
          continue
        }
        if (this.#worker.done() || (!this.#worker.woken() && !this.#again)) break
      }
    } finally {
      this.#running = false
      this.#waiters.splice(0).forEach((resolve) => resolve())
    }
  }

  /**
   * Resolves once the worker has done what it can until the next add: the
   * folds due are done (or failed: see `stats()`).
   */
  idle() {
    if (!this.#running) return Promise.resolve()
    return new Promise((resolve) => this.#waiters.push(resolve))
  }

  /** Folds what is due now, awaited (the summarizer's error thrown). */
  async foldNow() {
    await drive(this[NATIVE].beginFoldNow(), this.#summarize)
  }

  /** Tokens per tier, folds done, failed and pending, messages dropped, the last error. */
  stats() {
    return parsed(this[NATIVE].stats())
  }
}

/** Tokens of `messages` with `tokenizer` (`"o200k_base"` by default). */
function countTokens(messages, tokenizer) {
  return call(() => native.countTokens(json(messages), tokenizer))
}

module.exports = {
  Aim,
  Compactor,
  RollingMemory,
  TieredMemory,
  SummaryRequest,
  OpenAISummarizer,
  AnthropicSummarizer,
  countTokens,
  version: native.version(),
  ChatfoldError,
  InvalidConfig,
  InvalidMessage,
  InvalidInput,
  InvalidState,
  SummarizerError,
  BudgetUnreachable,
}
