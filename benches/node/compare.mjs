// chatfold's npm package against what the AI SDK offers for a long
// conversation (ai 6's pruneMessages), in one run: tokens after, identifiers
// kept, and the time of each, both sides alternated, medians of 7.
//
//   cd node && npm ci --ignore-scripts && node build.js && node ../benches/node/compare.mjs
//
// The conversation: 60 user turns with tool calls and results, about 25 000
// tokens; the budget 3 000 tokens. pruneMessages takes the settings its docs
// suggest for long agent runs (reasoning 'all', tool calls before the last 2
// messages, empty messages removed).
import { createRequire } from 'node:module'

// The AI SDK from the package's own devDependencies.
const require = createRequire(new URL('../../node/package.json', import.meta.url))
const { pruneMessages } = require('ai')
const { Compactor } = require('./index.js')

const BUDGET = 3000
const ids = []
const messages = [{ role: 'system', content: 'You are a support agent.' }]
for (let i = 0; i < 60; i++) {
  const id = `ORD-${7000 + i * 13}-${String.fromCharCode(65 + (i % 26))}${i}`
  ids.push(id)
  messages.push({ role: 'user', content: `Question ${i}: where is order ${id}? ` + 'It was due last week and nothing came. '.repeat(3) })
  messages.push({ role: 'assistant', content: [{ type: 'reasoning', text: 'Look it up. '.repeat(5) }, { type: 'tool-call', toolCallId: `call_${i}`, toolName: 'lookup', input: { order: id } }] })
  messages.push({ role: 'tool', content: [{ type: 'tool-result', toolCallId: `call_${i}`, toolName: 'lookup', output: { type: 'text', value: `Order ${id}: in transit. ` + 'Scanned at the depot. '.repeat(45) } }] })
  messages.push({ role: 'assistant', content: [{ type: 'text', text: `Order ${id} is in transit; it left the depot. ` + 'More detail. '.repeat(6) }] })
}

const compactor = new Compactor(BUDGET, { format: 'ai-sdk' })
const tokens = (ms) => compactor.count(ms)
const kept = (ms) => ids.filter((id) => JSON.stringify(ms).includes(id)).length

const sides = {
  'ai pruneMessages': () => pruneMessages({ messages, reasoning: 'all', toolCalls: 'before-last-2-messages', emptyMessages: 'remove' }),
  'chatfold (extractive)': () => compactor.compact(messages).messages,
}
const times = Object.fromEntries(Object.keys(sides).map((k) => [k, []]))
for (let round = 0; round < 7; round++) {
  for (const [name, run] of Object.entries(sides)) {
    const start = process.hrtime.bigint()
    run()
    times[name].push(Number(process.hrtime.bigint() - start) / 1e6)
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
console.log(`conversation: ${messages.length} messages, ${tokens(messages)} tokens (o200k); budget ${BUDGET}`)
for (const [name, run] of Object.entries(sides)) {
  const out = run()
  console.log(`${name.padEnd(24)} ${String(tokens(out)).padStart(6)} tokens  ${String(kept(out)).padStart(2)} of ${ids.length} order ids  ${median(times[name]).toFixed(2)} ms`)
}
