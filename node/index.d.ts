// Types for chatfold's JavaScript API (index.js, index.mjs).

/** A message or a request body as plain JSON: OpenAI Chat Completions, Anthropic Messages, Responses items, or the AI SDK's `ModelMessage`. */
export type Message = Record<string, unknown>
/** A list of messages, or a request body (`{ messages: [...] }`, `{ input: [...] }`). */
export type Messages = Message[] | Record<string, unknown>

/** A built-in tokenizer (an encoding, a model name, or four characters a token), or a function. */
export type Tokenizer = 'o200k_base' | 'cl100k_base' | 'heuristic' | (string & {}) | ((text: string) => number)

export interface CompactorOptions {
  /** Tokens of recent turns kept verbatim (default: a quarter of the fold target). */
  keepRecent?: number
  /** A history over the budget is folded down to this many tokens, so later turns extend an unchanged prefix, which providers bill at a tenth (default: half the budget). */
  foldTo?: number
  /** How tokens are counted (default `'o200k_base'`). */
  tokenizer?: Tokenizer
  /** Read the input as this format (default: as the body says; `'ai-sdk'`: a list of the AI SDK's `ModelMessage`). */
  format?: 'openai' | 'anthropic' | 'responses' | 'ai-sdk'
  /** An unreachable budget is an error (`BudgetUnreachable`) rather than a flagged result. */
  strict?: boolean
  /** The summary message's role (default `'system'`). */
  summaryRole?: string
  /** The text the summary message starts with. */
  summaryPrefix?: string
  /** A budget is unreachable unless this many tokens of summary fit. */
  minSummaryTokens?: number
  /** The most tokens of summary text. */
  maxSummaryTokens?: number
  /** Keep the ledger of exact identifiers (default `true`). */
  ledger?: boolean
  /** The most one summarizer call reads; a longer span is folded in chunks. */
  maxFoldInputTokens?: number
  /**
   * Messages kept verbatim after the summary wherever they stand, counted
   * against the budget: `'first-user'` (the task), `'last-user'` (the turn's
   * question), an index, or a function `(message, index) => boolean` over a
   * message list; one, or an array of them.
   */
  pin?: Pin | Pin[]
  /** `pin: 'last-user'` (the AI SDK middleware's older option). */
  pinQuestion?: boolean
  /**
   * Keep summaries for the next compaction of the same history (a client that
   * resends its whole transcript): its folded prefix is not summarized again,
   * and a longer one extends the kept summary. Use one summarizer per compactor.
   */
  reuse?: boolean
}

/** A message to keep verbatim after the summary (see `CompactorOptions.pin`). */
export type Pin = 'first-user' | 'last-user' | number | ((message: any, index: number) => boolean)

/** What the summarizer is asked. */
export class SummaryRequest {
  /** The running summary the folded messages add to (`null` on the first fold). */
  readonly previousSummary: string | null
  /** The folded messages, oldest first, as OpenAI-style objects. */
  readonly messages: Message[]
  /** The previous summary and the messages as one text to summarize. */
  readonly transcript: string
  /** Tokens the summary may take; a longer one is cut to fit. */
  readonly allowance: number
  /** Exact identifiers the summary's ledger will list. */
  readonly ledger: string[]
  /** The instructions chatfold's HTTP summarizers send. */
  prompt(): { system: string; user: string }
  /** chatfold's built-in extractive summary of this request (no model). */
  extractive(): Promise<string>
}

/** What happened to each message, and the ledger. */
export interface Report {
  fates: Array<'kept' | 'hoisted' | 'folded' | 'previousSummary' | 'other'>
  cut: number
  reason: string
  alignedFrom: number | null
  folds: number
  allowance: number
  proseAllowance: number
  ledger: string[]
  ledgerDropped: string[]
  cleared: number[]
  reused: number | null
  /** Whether the output starts as the previous request's did: nothing folded, a recorded fold replayed, or a new fold. */
  prefix: 'unchanged' | 'replayed' | 'rewritten'
}

/** A compaction's outcome. */
export interface Compaction {
  /** The compacted messages (a body when a body came in; the caller's own objects where kept). */
  readonly messages: Messages
  readonly summarized: boolean
  readonly tokensBefore: number
  readonly tokensBeforeExact: boolean
  readonly tokensAfter: number
  readonly overBudget: boolean
  readonly summaryTruncated: boolean
  /** Tokens at the start that the previous request sent too (a provider's cache serves them): before a new fold's first change, else all before the latest exchange. */
  readonly prefixTokens: number
  readonly report: Report
}

/** An OpenAI-compatible Chat Completions summarizer that runs in Rust. */
export class OpenAISummarizer {
  constructor(baseUrl: string, model: string, options?: { apiKey?: string })
}
/** An Anthropic Messages summarizer that runs in Rust. */
export class AnthropicSummarizer {
  constructor(baseUrl: string, model: string, options?: { apiKey?: string })
}

export type SyncSummarizer = ((request: SummaryRequest) => string) | 'extractive' | OpenAISummarizer | AnthropicSummarizer
export type AsyncSummarizerFn = ((request: SummaryRequest) => string | Promise<string>) | 'extractive' | OpenAISummarizer | AnthropicSummarizer

/** Keeps a chat history inside a token budget. */
export class Compactor {
  constructor(budget: number, options?: CompactorOptions)
  readonly budget: number
  readonly keepRecent: number
  readonly foldTo: number
  count(messages: Messages): number
  compact(messages: Messages, summarize?: SyncSummarizer): Compaction
  compactAsync(messages: Messages, summarize?: AsyncSummarizerFn): Promise<Compaction>
  /** The budget recipe: a framework's trigger and keep as this compactor's budget and keepRecent. */
  aim(messages: Messages, recipe: Recipe, measured: [total: number, fixed: number]): Aim
}

/** A size as a framework states it. */
export type Measure = ['tokens', number] | ['messages', number] | ['fraction', number]

/** A framework's summarization settings. */
export interface Recipe {
  keep: Measure
  triggers?: Measure[]
  /** The model's window, for fractions. */
  window?: number
  maxSummaryTokens?: number
}

/** What a budget recipe makes of one request. */
export class Aim {
  /** The limit the caller's measure must find the result under (`null`: only a message count triggers). */
  readonly limit: number | null
  readonly budget: number
  readonly keepRecent: number
  /** The compactor of this try. */
  compactor(): Compactor
  /** The next try's budget after a result the caller measured at `measured`; `null` when done. */
  next(measured: number): number | null
}

export interface MemoryOptions {
  /** How tokens are counted (default `'o200k_base'`; a built-in one: the memories work off the JavaScript thread). */
  tokenizer?: Exclude<Tokenizer, (text: string) => number>
  /** Writes the summary (default `'extractive'`, no model). */
  summarize?: AsyncSummarizerFn
  /** The most tokens of summary text. */
  maxSummaryTokens?: number
  /** Keep the ledger of exact identifiers (default `true`). */
  ledger?: boolean
  /** The text the summary message starts with. */
  summaryPrefix?: string
  /** A state to restore (the crate's JSON, rollmem's: `{ version, summary, buffer }`). */
  state?: Record<string, unknown>
  /** Messages every fold leaves at the buffer's front, verbatim: `'first-user'` (the agent's task). */
  pin?: 'first-user' | 'last-user' | Array<'first-user' | 'last-user'>
}

/** A memory per conversation: recent turns verbatim, older ones folded into a running summary. */
export class RollingMemory {
  constructor(maxTokens: number, options?: MemoryOptions & { lowWater?: number })
  /** Adds a message; resolves once it is in and any fold it started is done. */
  add(message: Message): Promise<void>
  /** The summary (as a system message) then the buffer. */
  messages(): Message[]
  readonly summary: string
  readonly buffer: Message[]
  toState(): Record<string, unknown>
  clear(): void
}

export interface TieredStats {
  systemTokens: number
  summaryTokens: number
  bufferTokens: number
  bufferMessages: number
  viewTokens: number
  hiddenMessages: number
  foldsDone: number
  foldsFailed: number
  consecutiveFailures: number
  foldsPending: number
  foldInFlight: boolean
  messagesFolded: number
  messagesDropped: number
  resultsCleared: number
  lastError: string | null
}

/** A memory for agents that must never wait: adds append, a worker on the event loop folds. */
export class TieredMemory {
  constructor(
    softLimit: number,
    hardLimit: number,
    options?: MemoryOptions & {
      system?: Message[]
      /** Where a fold brings the working buffer down to (default: half `softLimit`). */
      lowWater?: number
      chunkSize?: number
      chunkTokens?: number
      fallbackTruncate?: boolean
      maxFailures?: number
    },
  )
  /** Adds a message; never waits. */
  add(message: Message): void
  /** Resolves once the worker has done what it can until the next add. */
  idle(): Promise<void>
  /** Folds what is due now; rejects with the summarizer's error. */
  foldNow(): Promise<void>
  /** The prompt: pinned system messages, the summary, the recent turns, within the hard limit. */
  messages(): Message[]
  readonly summary: string
  readonly buffer: Message[]
  stats(): TieredStats
  toState(): Record<string, unknown>
  clear(): void
}

/** Tokens of `messages` with `tokenizer` (`'o200k_base'` by default). */
export function countTokens(messages: Messages, tokenizer?: Exclude<Tokenizer, (text: string) => number>): number
/** The package's version. */
export const version: string

export class ChatfoldError extends Error {
  readonly kind?: string
}
export class InvalidConfig extends ChatfoldError {}
export class InvalidMessage extends ChatfoldError {
  readonly index?: number
  readonly field?: string
}
export class InvalidInput extends ChatfoldError {}
export class InvalidState extends ChatfoldError {}
export class SummarizerError extends ChatfoldError {}
export class BudgetUnreachable extends ChatfoldError {}

declare const chatfold: {
  Compactor: typeof Compactor
  RollingMemory: typeof RollingMemory
  TieredMemory: typeof TieredMemory
  SummaryRequest: typeof SummaryRequest
  OpenAISummarizer: typeof OpenAISummarizer
  AnthropicSummarizer: typeof AnthropicSummarizer
  countTokens: typeof countTokens
  version: string
  ChatfoldError: typeof ChatfoldError
  InvalidConfig: typeof InvalidConfig
  InvalidMessage: typeof InvalidMessage
  InvalidInput: typeof InvalidInput
  InvalidState: typeof InvalidState
  SummarizerError: typeof SummarizerError
  BudgetUnreachable: typeof BudgetUnreachable
}
export default chatfold
