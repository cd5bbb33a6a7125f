// Types for chatfold's LangChain.js middleware (langchain.js, langchain.mjs).

type ContextSize = { tokens?: number; messages?: number; fraction?: number }

export interface SummarizationMiddlewareOptions {
  /** The chat model that writes the summary. */
  model: { invoke(messages: unknown[]): Promise<{ content: unknown }> }
  /** When to compact: one clause (AND within it) or a list (OR across them). */
  trigger?: ContextSize | ContextSize[]
  /** How much to keep: `{ messages }`, `{ tokens }` or `{ fraction }` (default `{ messages: 20 }`). */
  keep?: ContextSize
  /** Counts a list of messages (and the tools, as langchain's approximate counter does). */
  tokenCounter?: (messages: unknown[], tools?: unknown[]) => number | Promise<number>
  /** A custom prompt with `{messages}`; by default chatfold's prompt. */
  summaryPrompt?: string
  /** The most one summarizer call reads; a longer span is summarized in chunks (default 4000). */
  trimTokensToSummarize?: number
  /** The summary message's first line (default langchain's). */
  summaryPrefix?: string
  /** `'throw'` (the default) or `'extractive'`: chatfold's extractive summary in place of a failure. */
  onSummarizerError?: 'throw' | 'extractive'
  /** The most tokens of summary text. */
  maxSummaryTokens?: number
  /** Keep the ledger of exact identifiers (default `true`). */
  ledger?: boolean
  /** @deprecated langchain's: use `trigger: { tokens }`. */
  maxTokensBeforeSummary?: number
  /** @deprecated langchain's: use `keep: { messages }`. */
  messagesToKeep?: number
}

/** LangChain's `summarizationMiddleware` for `createAgent`, on chatfold's core. */
export function summarizationMiddleware(options: SummarizationMiddlewareOptions): any

declare const langchain: { summarizationMiddleware: typeof summarizationMiddleware }
export default langchain
