// Types for chatfold's AI SDK adapters (ai.js, ai.mjs).
import type { AsyncSummarizerFn, CompactorOptions } from './index'

export interface CompactionOptions extends Omit<CompactorOptions, 'format'> {
  /** The most tokens a call's prompt may take, the tool definitions counted in. */
  budget: number
  /** Writes the summary (default `'extractive'`, no model). */
  summarize?: AsyncSummarizerFn
}

/** A `LanguageModelV3Middleware` (specificationVersion `'v3'`) compacting the prompt before every call. */
export function compactionMiddleware(options: CompactionOptions): {
  specificationVersion: 'v3'
  transformParams(options: { type: 'generate' | 'stream'; params: any; model: any }): PromiseLike<any>
}

/** A `prepareStep` compacting each step's messages. */
export function compactionPrepareStep(
  options: CompactionOptions & { system?: string; tools?: Record<string, unknown> | unknown[] },
): (options: { messages: any[] }) => Promise<{ messages?: any[] }>

declare const ai: {
  compactionMiddleware: typeof compactionMiddleware
  compactionPrepareStep: typeof compactionPrepareStep
}
export default ai
