// The memories through the JavaScript API: the rolling memory's adds and
// the tiered memory's worker on the event loop.
'use strict'

const test = require('node:test')
const assert = require('node:assert/strict')

const { RollingMemory, TieredMemory, countTokens, InvalidConfig, InvalidMessage, InvalidState } = require('..')

const turn = (i) => ({ role: i % 2 ? 'assistant' : 'user', content: `Turn ${i}: order ORD-${1000 + i} ` + 'details '.repeat(12) })

test('a rolling memory keeps its buffer within maxTokens and rolls its summary', async () => {
  const requests = []
  const memory = new RollingMemory(400, {
    tokenizer: 'heuristic',
    summarize: async (request) => {
      requests.push(request)
      return `Summary through ${request.messages.length} more messages.`
    },
  })
  for (let i = 0; i < 60; i++) {
    await memory.add(turn(i))
    assert.ok(countTokens(memory.buffer, 'heuristic') <= 400 + 40)
  }
  assert.ok(requests.length > 1)
  assert.ok(requests.at(-1).previousSummary, 'a later fold extends the running summary')
  const messages = memory.messages()
  assert.equal(messages[0].role, 'system')
  assert.match(messages[0].content, /ORD-/) // the ledger
  assert.deepEqual(messages.at(-1), turn(59))
})

test('a rolling memory whose summarizer fails keeps the message and its summary as they were; add rejects with the error', async () => {
  let fail = false
  const failure = new Error('the summary model is down')
  const memory = new RollingMemory(300, {
    tokenizer: 'heuristic',
    summarize: (request) => {
      if (fail) throw failure
      return 'ok'
    },
  })
  for (let i = 0; i < 20; i++) await memory.add(turn(i))
  fail = true
  let before = memory.toState()
  let rejected = 0
  for (let i = 20; i < 40; i++) {
    try {
      await memory.add(turn(i))
    } catch (error) {
      assert.equal(error, failure)
      // Nothing folded, nothing lost: the summary as it was, the message added.
      assert.deepEqual(memory.toState(), { ...before, buffer: [...before.buffer, turn(i)] })
      rejected++
      break
    }
    before = memory.toState()
  }
  assert.equal(rejected, 1)
  fail = false
  await memory.add(turn(99))
  assert.deepEqual(memory.buffer.at(-1), turn(99))
})

test('state round-trips, and bad state or messages are clear errors', async () => {
  const memory = new RollingMemory(300, { tokenizer: 'heuristic' })
  for (let i = 0; i < 30; i++) await memory.add(turn(i))
  const state = memory.toState()
  assert.equal(state.version, 2)
  const again = new RollingMemory(300, { tokenizer: 'heuristic', state: JSON.parse(JSON.stringify(state)) })
  assert.deepEqual(again.messages(), memory.messages())
  assert.throws(() => new RollingMemory(300, { state: { version: 9, summary: '', buffer: [] } }), InvalidState)
  await assert.rejects(memory.add({ role: 3 }), InvalidMessage)
  assert.throws(() => new RollingMemory(0), InvalidConfig)
  assert.throws(() => new RollingMemory(10, { maxTokens: 3 }), InvalidConfig)
})

test('a tiered memory never waits: adds go on while a fold waits on its summarizer', async () => {
  let release
  const gate = new Promise((resolve) => (release = resolve))
  let asked = 0
  const memory = new TieredMemory(300, 600, {
    tokenizer: 'heuristic',
    system: [{ role: 'system', content: 'Be brief.' }],
    summarize: async (request) => {
      asked++
      await gate
      return `Summary of ${request.messages.length} messages.`
    },
  })
  for (let i = 0; i < 80; i++) {
    memory.add(turn(i))
    await new Promise((resolve) => setImmediate(resolve))
    // The prompt stays within the hard limit even while nothing can fold.
    assert.ok(countTokens(memory.messages(), 'heuristic') <= 600)
  }
  assert.ok(asked >= 1, 'the worker asked for a summary')
  assert.ok(memory.stats().foldInFlight)
  release()
  await memory.idle()
  const stats = memory.stats()
  assert.equal(stats.foldsPending, 0)
  assert.ok(stats.foldsDone >= 1)
  const messages = memory.messages()
  assert.deepEqual(messages[0], { role: 'system', content: 'Be brief.' })
  assert.match(memory.summary, /Summary of/)
  assert.deepEqual(messages.at(-1), turn(79))
})

test('a tiered memory counts failed folds and loses nothing', async () => {
  const memory = new TieredMemory(200, 400, {
    tokenizer: 'heuristic',
    summarize: async () => {
      throw new Error('down')
    },
  })
  for (let i = 0; i < 30; i++) memory.add(turn(i))
  await memory.idle()
  const stats = memory.stats()
  assert.ok(stats.foldsFailed >= 1)
  assert.match(stats.lastError, /down/)
  assert.equal(stats.messagesDropped, 0)
  assert.equal(memory.buffer.length, 30)
  await assert.rejects(memory.foldNow(), /down/)
  const state = memory.toState()
  const again = new TieredMemory(200, 400, { tokenizer: 'heuristic', state })
  assert.deepEqual(again.buffer, memory.buffer)
})
