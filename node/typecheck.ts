// Compiled by `npm test` (tsc --noEmit): the declarations hold together and
// describe the package as the tests use it.
import chatfold, { Compactor, RollingMemory, TieredMemory, InvalidMessage, type Compaction, type SummaryRequest } from './index'
import { compactionMiddleware, compactionPrepareStep } from './ai'
import { summarizationMiddleware } from './langchain'

const compactor = new Compactor(8000, { keepRecent: 3000, tokenizer: 'o200k_base', format: 'ai-sdk', pin: ['first-user', 'last-user'], reuse: true })
const counted = new Compactor(100, { tokenizer: (text: string) => text.length })
const result: Compaction = compactor.compact([{ role: 'user', content: 'hi' }])
const tokens: number = result.tokensAfter + counted.budget
const later: Promise<Compaction> = compactor.compactAsync([], async (request: SummaryRequest) => request.prompt().system + request.transcript)
const memory = new RollingMemory(2000, { summarize: 'extractive', lowWater: 1000 })
const added: Promise<void> = memory.add({ role: 'user', content: 'hi' })
const tiered = new TieredMemory(100, 200, { system: [{ role: 'system', content: 's' }], chunkSize: 4 })
tiered.add({ role: 'user', content: 'hi' })
const failed: number = tiered.stats().foldsFailed
const error = new InvalidMessage('x')
const index: number | undefined = error.index
const middleware = compactionMiddleware({ budget: 8000, summarize: async () => 'summary' })
const step = compactionPrepareStep({ budget: 8000, system: 'sys' })
const agentMiddleware = summarizationMiddleware({ model: { invoke: async () => ({ content: 'x' }) }, trigger: { tokens: 3000 }, keep: { messages: 20 } })
export { tokens, later, added, failed, index, middleware, step, agentMiddleware, chatfold }
