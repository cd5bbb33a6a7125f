// The AI SDK (ai 6) through chatfold's middleware and prepareStep helper,
// with its own mock model: every prompt the model receives is checked.
import test from 'node:test'
import assert from 'node:assert/strict'

import { generateText, jsonSchema, stepCountIs, streamText, tool, wrapLanguageModel } from 'ai'
import { MockLanguageModelV3, simulateReadableStream } from 'ai/test'

import { Compactor, countTokens, SummarizerError } from '../index.mjs'
import { compactionMiddleware, compactionPrepareStep } from '../ai.mjs'

const FIRST = ['ORD-7731-QX', 'INC-2024-00917']
const USAGE = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
}

const tools = {
  lookup: tool({
    description: 'Looks an order up by its number.',
    inputSchema: jsonSchema({ type: 'object', properties: { order: { type: 'string' } }, required: ['order'] }),
    execute: async ({ order }) => `Order ${order}: shipped from Rotterdam. ` + 'Tracking line. '.repeat(15),
  }),
}

/** The model's answers: parallel calls for a new question (`rounds` times), then text. */
function script(calls, rounds) {
  let n = 0
  const asked = new Map()
  return (prompt) => {
    n++
    const question = JSON.stringify(prompt.findLast((m) => m.role === 'user').content)
    const since = asked.get(question) ?? 0
    asked.set(question, since + 1)
    if (since < rounds) {
      return Array.from({ length: calls }, (_, k) => ({
        type: 'tool-call', toolCallId: `call_${n}_${k}`, toolName: 'lookup', input: JSON.stringify({ order: `ORD-${n}-${k}` }),
      }))
    }
    return [{ type: 'text', text: 'Here is what I found. ' + 'detail '.repeat(30) }]
  }
}

function mockModel(calls = 2, rounds = 1) {
  const answer = script(calls, rounds)
  const prompts = []
  const model = new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      prompts.push(prompt)
      const content = answer(prompt)
      const finish = content[0].type === 'tool-call' ? 'tool-calls' : 'stop'
      return { content, finishReason: { unified: finish, raw: finish }, usage: USAGE, warnings: [] }
    },
    doStream: async ({ prompt }) => {
      prompts.push(prompt)
      const content = answer(prompt)
      const chunks = [{ type: 'stream-start', warnings: [] }]
      for (const part of content) {
        if (part.type === 'text') chunks.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: part.text }, { type: 'text-end', id: 't' })
        else chunks.push(part)
      }
      const finish = content[0].type === 'tool-call' ? 'tool-calls' : 'stop'
      chunks.push({ type: 'finish', finishReason: { unified: finish, raw: finish }, usage: USAGE })
      return { stream: simulateReadableStream({ chunks }) }
    },
  })
  return { model, prompts }
}

/** A prompt's size as the middleware measures it, measured here from the prompt alone. */
function promptTokens(prompt) {
  const stand = []
  for (const m of prompt) {
    if (m.role === 'tool') for (const p of m.content) stand.push({ role: 'tool', tool_call_id: p.toolCallId, content: p.output.type === 'text' ? p.output.value : JSON.stringify(p.output.value) })
    else if (typeof m.content === 'string') stand.push({ role: m.role, content: m.content })
    else {
      const calls = m.content.filter((p) => p.type === 'tool-call')
      const text = m.content.filter((p) => p.type === 'text').map((p) => p.text).join('\n')
      const x = { role: m.role, content: text || null }
      if (calls.length) x.tool_calls = calls.map((c) => ({ id: c.toolCallId, type: 'function', function: { name: c.toolName, arguments: JSON.stringify(c.input) } }))
      stand.push(x)
    }
  }
  return countTokens(stand)
}

function check(prompts, budget) {
  assert.ok(prompts.length > 0)
  for (const prompt of prompts) {
    const issued = new Set()
    const answered = new Set()
    for (const m of prompt) {
      if (m.role === 'assistant') for (const p of m.content) if (p.type === 'tool-call') issued.add(p.toolCallId)
      if (m.role === 'tool') for (const p of m.content) {
        assert.ok(issued.has(p.toolCallId), `a result without its call: ${p.toolCallId}`)
        answered.add(p.toolCallId)
      }
    }
    assert.deepEqual([...issued].filter((id) => !answered.has(id)), [], 'a call without its result')
    assert.ok(promptTokens(prompt) <= budget, `a prompt of ${promptTokens(prompt)} tokens over ${budget}`)
    assert.ok(prompt.filter((m) => m.role === 'system' && m.content.startsWith('Summary of earlier')).length <= 1)
    assert.equal(prompt[0].role, 'system')
    // The task and the turn's question, verbatim, right after the summary when there is one.
    const text = (m) => (typeof m.content === 'string' ? m.content : m.content.map((p) => p.text ?? '').join(''))
    const users = prompt.filter((m) => m.role === 'user').map(text)
    assert.ok(users[0].startsWith('My order'), 'the task is in the prompt')
    const s = prompt.findIndex((m) => m.role === 'system' && m.content.startsWith('Summary of earlier'))
    if (s >= 0) assert.ok(text(prompt[s + 1]).startsWith('My order'), 'the task follows the summary')
  }
}

function question(i) {
  const first = i === 0 ? `My order ${FIRST[0]} (incident ${FIRST[1]}) never came. ` : ''
  return { role: 'user', content: first + `Question ${i}: where are my orders? ` + 'Please check. '.repeat(8) }
}

async function converse(run, turns) {
  let messages = []
  for (let i = 0; i < turns; i++) {
    messages = [...messages, question(i)]
    const result = await run(messages)
    messages = [...messages, ...(await result.response).messages]
  }
  return messages
}

const BUDGET = 2500

test('generateText through the middleware: every prompt whole, within the budget, one summary', async () => {
  const { model, prompts } = mockModel(3, 2)
  const summaries = []
  const wrapped = wrapLanguageModel({
    model,
    middleware: compactionMiddleware({
      budget: BUDGET,
      summarize: async (request) => {
        summaries.push(request)
        return 'The user asked about several orders; all were looked up.'
      },
    }),
  })
  await converse((messages) => generateText({ model: wrapped, system: 'You help with orders.', messages, tools, stopWhen: stepCountIs(10) }), 14)
  check(prompts, BUDGET - 0)
  assert.ok(summaries.length > 0)
  const last = prompts.at(-1)
  const summary = last.find((m) => m.role === 'system' && m.content.startsWith('Summary of earlier'))
  assert.ok(summary, 'the last prompt has the summary')
  // The ledger lists the ids; the task that gave the first ones is pinned, verbatim.
  assert.match(summary.content, /Exact identifiers \(kept verbatim\):\n[\s\S]*- ORD-/)
  assert.ok(!summary.content.includes(FIRST[0]))
  // The running summary was extended, not summarized as a turn.
  assert.ok(summaries.at(-1).previousSummary)
})

test('streamText through the middleware, each step of a streamed multi-step run', async () => {
  const { model, prompts } = mockModel(2, 3)
  const wrapped = wrapLanguageModel({ model, middleware: compactionMiddleware({ budget: BUDGET }) })
  await converse(async (messages) => {
    const result = streamText({ model: wrapped, system: 'You help with orders.', messages, tools, stopWhen: stepCountIs(10) })
    for await (const _ of result.fullStream) { /* drain */ }
    assert.match(await result.text, /Here is what I found/)
    return result
  }, 10)
  check(prompts, BUDGET)
})

test('without the middleware, the same conversation goes over the budget (the control)', async () => {
  const { model, prompts } = mockModel(3, 2)
  await converse((messages) => generateText({ model, system: 'You help with orders.', messages, tools, stopWhen: stepCountIs(10) }), 14)
  assert.ok(prompts.some((p) => promptTokens(p) > BUDGET))
})

test('a summarizer that throws fails the call with its error, and nothing is sent', async () => {
  const { model, prompts } = mockModel()
  const failure = new Error('the summary model is down')
  const wrapped = wrapLanguageModel({ model, middleware: compactionMiddleware({ budget: 600, summarize: () => { throw failure } }) })
  const history = Array.from({ length: 30 }, (_, i) => [question(i), { role: 'assistant', content: 'Answer ' + 'detail '.repeat(20) }]).flat()
  await assert.rejects(generateText({ model: wrapped, messages: [...history, question(30)] }), (e) => e === failure || e.cause === failure || String(e).includes('summary model is down'))
  assert.equal(prompts.length, 0)
  const empty = wrapLanguageModel({ model, middleware: compactionMiddleware({ budget: 600, summarize: async () => '' }) })
  await assert.rejects(generateText({ model: empty, messages: [...history, question(30)] }), (e) => e instanceof SummarizerError || String(e).includes('empty summary'))
  assert.equal(prompts.length, 0)
})

test('prepareStep compacts each step of a long tool-calling run', async () => {
  const { model, prompts } = mockModel(2, 12)
  const history = Array.from({ length: 20 }, (_, i) => [question(i), { role: 'assistant', content: 'Answer ' + 'detail '.repeat(30) }]).flat()
  const system = 'You help with orders.'
  const result = await generateText({
    model, system, messages: [...history, question(20)], tools, stopWhen: stepCountIs(20),
    prepareStep: compactionPrepareStep({ budget: BUDGET, system, tools }),
  })
  assert.match(result.text, /Here is what I found/)
  check(prompts, BUDGET)
  // The turn's question is in every step's prompt.
  for (const p of prompts) assert.ok(p.some((m) => m.role === 'user' && JSON.stringify(m.content).includes('Question 20')))
})

test('ModelMessage lists round-trip: the kept ones are the caller\'s objects', () => {
  const compactor = new Compactor(700, { format: 'ai-sdk', tokenizer: 'heuristic' })
  const messages = [{ role: 'system', content: 'Be brief.', providerOptions: { x: { y: 1 } } }]
  for (let i = 0; i < 30; i++) {
    messages.push({ role: 'user', content: [{ type: 'text', text: `q${i} `.repeat(20) }, { type: 'file', data: 'aGVsbG8=', mediaType: 'text/plain' }] })
    messages.push({ role: 'assistant', content: [{ type: 'reasoning', text: 'thinking' }, { type: 'tool-call', toolCallId: `c${i}`, toolName: 'lookup', input: { order: `O-${i}` } }] })
    messages.push({ role: 'tool', content: [{ type: 'tool-result', toolCallId: `c${i}`, toolName: 'lookup', output: { type: 'json', value: { ok: i } } }] })
  }
  const result = compactor.compact(messages)
  assert.ok(result.summarized)
  assert.equal(result.messages[0], messages[0])
  const kept = result.messages.slice(2)
  kept.forEach((m, i) => assert.equal(m, messages[messages.length - kept.length + i]))
  assert.equal(result.report.fates.length, messages.length)
  const small = compactor.compact(messages.slice(0, 4))
  assert.equal(small.summarized, false)
  small.messages.forEach((m, i) => assert.equal(m, messages[i]))
})

test('the middleware with a tokenizer function counts the tools with it', async () => {
  const { model, prompts } = mockModel(2, 1)
  const wrapped = wrapLanguageModel({ model, middleware: compactionMiddleware({ budget: BUDGET, tokenizer: (t) => Math.ceil(t.length / 4) }) })
  await converse((messages) => generateText({ model: wrapped, system: 'You help with orders.', messages, tools, stopWhen: stepCountIs(10) }), 8)
  assert.ok(prompts.length > 0)
  const step = compactionPrepareStep({ budget: BUDGET, system: 'x', tools, tokenizer: (t) => t.length })
  assert.equal(typeof step, 'function')
})
