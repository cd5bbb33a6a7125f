// Pinned messages and the budget recipe through the JavaScript API: the
// core decides, this side converts (the recipe's case table is the one the
// Rust and Python tests run).
'use strict'

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const fs = require('node:fs')

const { Compactor, BudgetUnreachable, InvalidConfig } = require('..')

const CASES = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'fixtures', 'recipe_cases.json'), 'utf8'))

function agentLoop(calls = 30) {
  const history = [
    { role: 'system', content: 'You are an SRE agent.' },
    { role: 'user', content: 'Task: find why checkout p99 went from 180 ms to 840 ms.' },
    { role: 'user', content: 'Start with the database hosts, please.' },
  ]
  for (let i = 0; i < calls; i++) {
    history.push({ role: 'assistant', content: null, tool_calls: [{ id: `c${i}`, type: 'function', function: { name: 'query', arguments: JSON.stringify({ host: `db-${i}` }) } }] })
    history.push({ role: 'tool', tool_call_id: `c${i}`, content: `db-${i}: p99 ${800 + i} ms, 12 slow queries` })
  }
  return history
}

const afterSummary = (result) => result.messages.slice(result.report.fates.filter((f) => f === 'hoisted').length + 1)

for (const pin of ['first-user,last-user', ['first-user', 'last-user'], [1, 2], (m) => m.role === 'user']) {
  test(`pins stand after the summary (${typeof pin === 'function' ? 'a function' : JSON.stringify(pin)})`, async () => {
    const history = agentLoop()
    const compactor = new Compactor(400, { tokenizer: 'heuristic', pin })
    for (const result of [compactor.compact(history), await compactor.compactAsync(history, async () => 'the hosts were queried')]) {
      assert.ok(result.summarized && !result.overBudget)
      assert.deepEqual(afterSummary(result).slice(0, 2), history.slice(1, 3))
      assert.deepEqual(result.report.fates.slice(1, 3), ['pinned', 'pinned'])
    }
    assert.deepEqual(history, agentLoop())
  })
}

test('pins that pass the budget and pins that are none are errors', () => {
  const history = agentLoop()
  history[1].content = 'task '.repeat(500)
  assert.throws(() => new Compactor(200, { tokenizer: 'heuristic', pin: 'first-user' }).compact(history), (e) => e instanceof BudgetUnreachable && /pinned/.test(e.message))
  assert.throws(() => new Compactor(200, { pin: 'the-task' }), InvalidConfig)
  assert.throws(() => new Compactor(200, { pin: [true] }), InvalidConfig)
  assert.throws(() => new Compactor(200, { tokenizer: 'heuristic', pin: 99 }).compact(agentLoop()), InvalidConfig)
})

for (const c of CASES) {
  test(`the recipe decides as the shared table says: ${c.name}`, () => {
    const settings = { tokenizer: 'heuristic' }
    if (c.summary) Object.assign(settings, { summaryRole: c.summary.role, summaryPrefix: c.summary.prefix })
    const recipe = { keep: c.keep, triggers: c.triggers }
    if (c.window !== undefined) recipe.window = c.window
    if (c.max_summary_tokens !== undefined) recipe.maxSummaryTokens = c.max_summary_tokens
    let aim
    try {
      aim = new Compactor(1, settings).aim(c.messages, recipe, c.measured)
    } catch (error) {
      assert.ok(error instanceof InvalidConfig, String(error))
      assert.deepEqual(c.expect, { error: 'InvalidConfig' })
      return
    }
    const first = { limit: aim.limit, budget: aim.budget, keep_recent: aim.keepRecent }
    const next = c.next.map((m) => aim.next(m))
    assert.deepEqual({ first, next }, c.expect)
    assert.equal(aim.compactor().budget, aim.budget)
    assert.equal(aim.compactor().foldTo, aim.budget)
  })
}

test('a memory keeps its pinned task across folds', async () => {
  const { RollingMemory } = require('..')
  const memory = new RollingMemory(120, { tokenizer: 'heuristic', pin: 'first-user' })
  const task = { role: 'user', content: 'Task: audit the IAM roles of account 4471-2209-8812.' }
  await memory.add(task)
  for (let i = 0; i < 40; i++) await memory.add({ role: 'assistant', content: `Checked role number ${i}: fine.` })
  assert.ok(memory.summary.length > 0)
  assert.deepEqual(memory.buffer[0], task)
  assert.throws(() => new RollingMemory(120, { pin: 'the-task' }), InvalidConfig)
})
