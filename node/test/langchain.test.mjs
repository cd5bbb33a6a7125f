// chatfold's summarizationMiddleware in LangChain.js agents (createAgent)
// with a scripted chat model and parallel tool calls: every request the
// model receives is checked; langchain's own middleware is the control.
import test from 'node:test'
import assert from 'node:assert/strict'

import { createAgent, countTokensApproximately, summarizationMiddleware as langchains, tool } from 'langchain'
import { BaseChatModel } from '@langchain/core/language_models/chat_models'
import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages'
import { MemorySaver } from '@langchain/langgraph'

import { summarizationMiddleware } from '../langchain.mjs'

const SYSTEM = 'You are a careful support agent for an online shop. '.repeat(12)
const TRIGGER = 2000
const FIRST = 'ORD-7731-QX'

const lookup = tool(async ({ order }) => `Order ${order}: shipped from Rotterdam. ` + 'Tracking line. '.repeat(12), {
  name: 'lookup',
  description: 'Looks an order up by its number.',
  schema: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
})

const isQuestion = (m) => HumanMessage.isInstance(m) && /^(Question|My order)/.test(String(m.content))

class Scripted extends BaseChatModel {
  constructor(calls = 2, rounds = 1) {
    super({})
    this.calls = calls
    this.rounds = rounds
    this.seen = []
    this.asked = new Map()
  }
  _llmType() { return 'scripted' }
  bindTools() { return this }
  async _generate(messages) {
    this.seen.push(messages)
    const n = this.seen.length
    const question = [...messages].reverse().find(isQuestion)
    const key = question ? question.content : this.last
    this.last = key
    const since = this.asked.get(key) ?? 0
    this.asked.set(key, since + 1)
    const message = since < this.rounds
      ? new AIMessage({ content: '', tool_calls: Array.from({ length: this.calls }, (_, k) => ({ id: `call_${n}_${k}`, name: 'lookup', args: { order: `ORD-${n}-${k}` }, type: 'tool_call' })) })
      : new AIMessage('Here is what I found. ' + 'detail '.repeat(30))
    return { generations: [{ text: String(message.content), message }] }
  }
}

class Summarizer extends BaseChatModel {
  constructor(reply = 'The user asked about several orders; all were looked up.', fail = false) {
    super({})
    this.reply = reply
    this.fail = fail
    this.seen = []
  }
  _llmType() { return 'scripted-summarizer' }
  async _generate(messages) {
    this.seen.push(messages)
    if (this.fail) throw new Error('the summary model is down')
    return { generations: [{ text: this.reply, message: new AIMessage(this.reply) }] }
  }
}

const question = (i) => new HumanMessage((i === 0 ? `My order ${FIRST} never came. ` : '') + `Question ${i}: where are my orders? ` + 'Please check carefully. '.repeat(8))

function orphans(messages) {
  const issued = new Set()
  const answered = new Set()
  const problems = []
  for (const m of messages) {
    if (AIMessage.isInstance(m)) for (const c of m.tool_calls ?? []) issued.add(c.id)
    if (ToolMessage.isInstance(m)) {
      if (!issued.has(m.tool_call_id)) problems.push(`result ${m.tool_call_id} without its call`)
      answered.add(m.tool_call_id)
    }
  }
  for (const id of issued) if (!answered.has(id)) problems.push(`call ${id} without its result`)
  return problems
}

const sent = (messages) => countTokensApproximately(messages, [lookup])

function agentWith(middleware, model) {
  return createAgent({ model, tools: [lookup], systemPrompt: SYSTEM, middleware: [middleware], checkpointer: new MemorySaver() })
}

async function converse(agent, turns, thread = 't1') {
  let state
  for (let i = 0; i < turns; i++) state = await agent.invoke({ messages: [question(i)] }, { configurable: { thread_id: thread } })
  return state
}

function check(model, trigger = TRIGGER) {
  assert.ok(model.seen.length > 0)
  for (const messages of model.seen) {
    assert.ok(SystemMessage.isInstance(messages[0]))
    assert.deepEqual(orphans(messages), [])
    assert.ok(sent(messages) < trigger, `a request of ${sent(messages)} tokens at the trigger ${trigger}`)
    assert.ok(messages.filter((m) => HumanMessage.isInstance(m) && m.additional_kwargs?.lc_source === 'summarization').length <= 1)
    assert.ok(messages.some(isQuestion), 'the turn\'s question is there')
    // The task (the first question), verbatim, right after the summary when there is one.
    const s = messages.findIndex((m) => m.additional_kwargs?.lc_source === 'summarization')
    assert.ok(String(messages[s >= 0 ? s + 1 : 1].content).includes(FIRST), 'the task follows the summary')
  }
}

for (const [calls, rounds] of [[1, 1], [3, 2]]) {
  test(`every request is whole and under the trigger (${calls} parallel calls, ${rounds} rounds)`, async () => {
    const model = new Scripted(calls, rounds)
    const summarizer = new Summarizer()
    const state = await converse(agentWith(summarizationMiddleware({ model: summarizer, trigger: { tokens: TRIGGER }, keep: { messages: 6 } }), model), 14)
    check(model)
    assert.ok(summarizer.seen.length > 0)
    const first = state.messages[0]
    assert.ok(HumanMessage.isInstance(first) && first.additional_kwargs.lc_source === 'summarization')
    assert.ok(first.content.startsWith('Here is a summary of the conversation to date:\n\n'))
    assert.equal(state.messages.filter((m) => m.additional_kwargs?.lc_source === 'summarization').length, 1)
  })
}

test('langchain\'s own middleware goes over its trigger (the control)', async () => {
  const model = new Scripted(3, 2)
  await converse(agentWith(langchains({ model: new Summarizer(), trigger: { tokens: TRIGGER }, keep: { messages: 6 } }), model), 14)
  assert.ok(model.seen.some((m) => sent(m) >= TRIGGER))
})

test('a failing summarizer is thrown and changes nothing; langchain\'s own makes its error the summary', async () => {
  const model = new Scripted()
  const agent = agentWith(summarizationMiddleware({ model: new Summarizer('x', true), trigger: { tokens: TRIGGER } }), model)
  const config = { configurable: { thread_id: 'f' } }
  let failed
  let before = []
  for (let i = 0; i < 20 && !failed; i++) {
    try {
      before = (await agent.getState(config)).values.messages ?? []
      await agent.invoke({ messages: [question(i)] }, config)
    } catch (error) {
      failed = error
    }
  }
  assert.ok(failed, 'the summarizer was never called')
  assert.match(String(failed.message) + String(failed.cause?.message), /summary model is down/)
  const after = (await agent.getState(config)).values.messages
  assert.deepEqual(after.slice(0, before.length).map((m) => m.id), before.map((m) => m.id))
  assert.ok(!after.some((m) => m.additional_kwargs?.lc_source === 'summarization'))

  const theirs = new Scripted()
  await converse(agentWith(langchains({ model: new Summarizer('x', true), trigger: { tokens: TRIGGER } }), theirs), 14, 'g')
  assert.ok(theirs.seen.some((ms) => ms.some((m) => String(m.content).includes('Error generating summary'))))
})

test('onSummarizerError: "extractive" puts chatfold\'s summary in its place, said in the state', async () => {
  const model = new Scripted()
  const middleware = summarizationMiddleware({ model: new Summarizer('x', true), trigger: { tokens: TRIGGER }, onSummarizerError: 'extractive' })
  const state = await converse(agentWith(middleware, model), 14)
  check(model)
  const summary = state.messages[0]
  assert.equal(summary.additional_kwargs.chatfold.summary, 'extractive')
  assert.match(summary.additional_kwargs.chatfold.error, /summary model is down/)
  // The task is pinned after the summary; the first turn's calls are folded.
  assert.ok(!summary.content.includes(FIRST) && String(state.messages[1].content).includes(FIRST))
  assert.match(summary.content, /ORD-/)
})

test('an orphaned tool result in the history is not sent', async () => {
  const model = new Scripted()
  const agent = agentWith(summarizationMiddleware({ model: new Summarizer(), trigger: { tokens: TRIGGER } }), model)
  await agent.invoke({ messages: [question(0), new ToolMessage({ content: 'stale', tool_call_id: 'call_gone' }), question(1)] }, { configurable: { thread_id: 'o' } })
  for (const m of model.seen) assert.deepEqual(orphans(m), [])
})

test('a message count in a list of triggers folds to the count, beside a token trigger', async () => {
  const model = new Scripted(1, 1)
  const middleware = summarizationMiddleware({ model: new Summarizer(), trigger: [{ tokens: 500000 }, { messages: 20 }], keep: { messages: 6 } })
  await converse(agentWith(middleware, model), 10)
  assert.ok(model.seen.every((m) => m.length - 1 < 20), 'a request at the message trigger')
  for (const m of model.seen) assert.deepEqual(orphans(m), [])
})

test('a result answering an invalid tool call stays with its call', async () => {
  const model = new Scripted()
  const history = []
  for (let i = 0; i < 12; i++) {
    history.push(question(i))
    history.push(new AIMessage({ content: '', invalid_tool_calls: [{ id: `bad_${i}`, name: 'lookup', args: '{oops', type: 'invalid_tool_call' }] }))
    history.push(new ToolMessage({ content: 'Error: bad arguments ' + 'x'.repeat(300), tool_call_id: `bad_${i}` }))
    history.push(new AIMessage('Sorry, let me retry. ' + 'detail '.repeat(40)))
  }
  await agentWith(summarizationMiddleware({ model: new Summarizer(), trigger: { tokens: TRIGGER } }), model).invoke({ messages: [...history, question(12)] }, { configurable: { thread_id: 'inv' } })
  for (const ms of model.seen) {
    const ids = new Set(ms.filter((m) => AIMessage.isInstance(m)).flatMap((m) => [...(m.tool_calls ?? []), ...(m.invalid_tool_calls ?? [])].map((c) => c.id)))
    for (const m of ms) if (ToolMessage.isInstance(m)) assert.ok(ids.has(m.tool_call_id), `${m.tool_call_id} without its call`)
  }
})
