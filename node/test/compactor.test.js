// The rules of DESIGN.md through the JavaScript API, on generated
// histories; lossless round trips; summarizers that throw or reject.
'use strict'

const test = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')

const chatfold = require('..')
const { Compactor, ChatfoldError, InvalidConfig, InvalidInput, InvalidMessage, SummarizerError } = chatfold

/** A seeded generator (mulberry32), so a failure can be replayed. */
function random(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = seed
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const WORDS = ['order', 'ship', 'refund', 'Tokyo', '東京', 'naïve', 'ORD-7731', 'café', 'the', 'a', 'invoice', '🚚', 'status']

/** A history: system prompts, user and assistant turns, parallel tool calls, orphan results, custom roles, content arrays, null content. */
function history(rand, n) {
  const pick = (xs) => xs[Math.floor(rand() * xs.length)]
  const text = (k) => Array.from({ length: 1 + Math.floor(rand() * k) }, () => pick(WORDS)).join(' ')
  const out = [{ role: 'system', content: 'You are a support agent. ' + text(20) }]
  let call = 0
  for (let i = 0; i < n; i++) {
    const r = rand()
    if (r < 0.35) out.push({ role: 'user', content: text(40) })
    else if (r < 0.45) out.push({ role: 'user', content: [{ type: 'text', text: text(30) }, { type: 'image_url', image_url: { url: 'https://x.test/a.png' } }] })
    else if (r < 0.7) out.push({ role: 'assistant', content: text(60), extra: { kept: i } })
    else if (r < 0.85) {
      const ids = Array.from({ length: 1 + Math.floor(rand() * 3) }, () => `call_${call++}`)
      out.push({ role: 'assistant', content: null, tool_calls: ids.map((id) => ({ id, type: 'function', function: { name: 'lookup', arguments: JSON.stringify({ order: text(2) }) } })) })
      for (const id of ids) out.push({ role: 'tool', tool_call_id: id, content: text(80) })
    } else if (r < 0.9) out.push({ role: 'tool', tool_call_id: `orphan_${i}`, content: text(10) })
    else if (r < 0.95) out.push({ role: 'system', content: 'Note: ' + text(10) })
    else out.push({ role: 'critic', content: text(20) })
  }
  return out
}

const isSummary = (m) => typeof m.content === 'string' && m.content.startsWith('Summary of earlier conversation:')

test('the rules hold on generated histories', () => {
  for (let seed = 1; seed <= 150; seed++) {
    const rand = random(seed)
    const input = history(rand, 5 + Math.floor(rand() * 80))
    const snapshot = structuredClone(input)
    const budget = 150 + Math.floor(rand() * 2000)
    const compactor = new Compactor(budget, { tokenizer: rand() < 0.5 ? 'heuristic' : 'o200k_base' })
    let calls = 0
    const result = compactor.compact(input, (request) => {
      calls++
      assert.ok(request.messages.length > 0, `seed ${seed}: a fold of nothing`)
      assert.ok(request.allowance > 0)
      return 'The user asked about orders.'
    })
    assert.deepEqual(input, snapshot, `seed ${seed}: the input changed`)
    const out = result.messages
    const total = compactor.count(input)
    if (total <= budget) {
      // Rule 1: under budget, unchanged (the caller's own objects), no call.
      assert.equal(result.summarized, false)
      assert.equal(calls, 0)
      assert.equal(out.length, input.length)
      out.forEach((m, i) => assert.equal(m, input[i]))
      continue
    }
    // Rule 2: every system message is kept, in order.
    const systems = (ms) => ms.filter((m) => m.role === 'system' && !isSummary(m)).map((m) => m.content)
    assert.deepEqual(systems(out), systems(input), `seed ${seed}: a system message was folded`)
    // Rule 3 and 5: the kept part is a verbatim suffix, the latest message in it.
    const summaryAt = out.findIndex(isSummary)
    if (result.summarized) {
      assert.equal(out.filter(isSummary).length, 1, `seed ${seed}: not one summary`)
      const kept = out.slice(summaryAt + 1)
      assert.deepEqual(kept, input.slice(input.length - kept.length), `seed ${seed}: the kept part is not a suffix`)
      assert.ok(kept.length >= 1)
      // Rule 6: within the budget unless it says it cannot be.
      if (!result.overBudget) assert.ok(result.tokensAfter <= budget, `seed ${seed}: ${result.tokensAfter} > ${budget}`)
      // Rule 3: calls and their results stay together.
      const called = new Set(kept.flatMap((m) => (m.tool_calls || []).map((c) => c.id)))
      for (const m of kept) {
        if (m.role === 'tool' && !m.tool_call_id.startsWith('orphan_')) assert.ok(called.has(m.tool_call_id), `seed ${seed}: ${m.tool_call_id} without its call`)
      }
      assert.equal(result.report.fates.length, input.length)
    }
  }
})

test('compactAsync gives what compact gives, with an async summarizer', async () => {
  for (let seed = 1; seed <= 20; seed++) {
    const input = history(random(seed), 80)
    const compactor = new Compactor(400, { tokenizer: 'heuristic' })
    const summarize = (request) => `${request.messages.length} messages folded.`
    const sync = compactor.compact(input, summarize)
    const later = await compactor.compactAsync(input, async (request) => {
      await new Promise((resolve) => setTimeout(resolve, 1))
      return summarize(request)
    })
    assert.deepEqual(later.messages, sync.messages)
    assert.equal(later.tokensAfter, sync.tokensAfter)
  }
})

test('a summarizer that throws or rejects changes nothing and is thrown as itself', async () => {
  const input = history(random(7), 90)
  const snapshot = structuredClone(input)
  const compactor = new Compactor(300, { tokenizer: 'heuristic' })
  const failure = new Error('the model is down')
  assert.throws(() => compactor.compact(input, () => { throw failure }), (e) => e === failure)
  await assert.rejects(compactor.compactAsync(input, async () => { throw failure }), (e) => e === failure)
  await assert.rejects(compactor.compactAsync(input, () => Promise.reject(failure)), (e) => e === failure)
  assert.throws(() => compactor.compact(input, () => '  '), SummarizerError)
  assert.throws(() => compactor.compact(input, () => 42), TypeError)
  assert.throws(() => compactor.compact(input, async () => 'late'), /compactAsync/)
  assert.deepEqual(input, snapshot)
  // The compactor still works after each failure.
  assert.ok(compactor.compact(input, () => 'fine').summarized)
})

test('the built-in summarizer by default, the summary with its ledger', async () => {
  const input = [{ role: 'system', content: 'Be brief.' }]
  for (let i = 0; i < 60; i++) {
    input.push({ role: 'user', content: `Where is order ORD-${4000 + i}? It ships to Rotterdam.` })
    input.push({ role: 'assistant', content: `Order ORD-${4000 + i} is on its way.` })
  }
  const compactor = new Compactor(500)
  for (const result of [compactor.compact(input), await compactor.compactAsync(input, 'extractive')]) {
    assert.ok(result.summarized)
    const summary = result.messages[1].content
    assert.match(summary, /Exact identifiers/)
    assert.ok(result.report.ledger.length > 0)
    assert.ok(result.report.ledger.every((entry) => summary.includes(entry)))
  }
})

test('OpenAI, Anthropic and Responses shapes round-trip losslessly', () => {
  const compactor = new Compactor(100000)
  const openai = [
    { role: 'system', content: 'x', name: 'boss', custom: { a: [1, 2] } },
    { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }], refusal: null },
    { role: 'tool', tool_call_id: 'c1', content: '{"ok":true}' },
    { role: 'developer', content: 'note' },
  ]
  const anthropic = {
    model: 'claude-x', max_tokens: 100, system: [{ type: 'text', text: 'sys', cache_control: { type: 'ephemeral' } }],
    messages: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: [{ type: 'text', text: 'calling' }, { type: 'tool_use', id: 't1', name: 'f', input: { a: 1 } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'done' }] },
    ],
  }
  const responses = {
    model: 'gpt-x', instructions: 'sys',
    input: [
      { role: 'user', content: 'hi' },
      { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: 'done' },
      { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'opaque' },
    ],
  }
  for (const input of [openai, anthropic, responses]) {
    const result = compactor.compact(input)
    assert.equal(result.summarized, false)
    assert.deepEqual(result.messages, input)
  }
  // Compacted, the kept messages are the originals, byte for byte.
  const long = [...openai]
  for (let i = 0; i < 80; i++) long.push({ role: 'user', content: `message ${i} `.repeat(20), meta: { i } })
  long.push(...openai.slice(1))
  const small = new Compactor(600, { tokenizer: 'heuristic' })
  const folded = small.compact(long)
  const kept = folded.messages.slice(folded.messages.findIndex(isSummary) + 1)
  assert.deepEqual(kept, long.slice(long.length - kept.length))
  const body = { ...anthropic, messages: [...Array.from({ length: 60 }, (_, i) => [{ role: 'user', content: `u${i} `.repeat(30) }, { role: 'assistant', content: `a${i} `.repeat(30) }]).flat(), ...anthropic.messages] }
  const out = small.compact(body).messages
  assert.equal(out.model, 'claude-x')
  assert.equal(out.max_tokens, 100)
  assert.deepEqual(out.messages.slice(-3), anthropic.messages)
  assert.ok(Array.isArray(out.system) || typeof out.system === 'string')
})

test('bad input and settings are errors of chatfold\'s classes, never a crash', () => {
  const compactor = new Compactor(100)
  assert.throws(() => compactor.compact([{ role: 'user', content: 'a' }, { role: 7, content: 'b' }]), (e) => {
    return e instanceof InvalidMessage && e instanceof ChatfoldError && e.index === 1 && e.field === 'role'
  })
  assert.throws(() => compactor.compact(null), InvalidInput)
  assert.throws(() => compactor.compact('text'), InvalidInput)
  assert.throws(() => compactor.compact([{ role: 'assistant', tool_calls: 'no' }]), InvalidMessage)
  assert.throws(() => new Compactor(100, { keepRecent: 500 }), InvalidConfig)
  assert.throws(() => new Compactor(-1), InvalidConfig)
  assert.throws(() => new Compactor(100, { tokenizer: 'no-such-encoding' }), InvalidConfig)
  assert.throws(() => new Compactor(100, { keepRecnt: 5 }), InvalidConfig)
  assert.throws(() => new Compactor(100, { format: 'xml' }), InvalidConfig)
  assert.throws(() => compactor.compact([], 5), TypeError)
  assert.deepEqual(compactor.compact([]).messages, [])
})

test('one huge message, text without spaces, unicode: kept and counted', () => {
  const huge = 'x'.repeat(200000)
  const compactor = new Compactor(1000, { tokenizer: 'o200k_base' })
  const input = [{ role: 'system', content: 's' }, { role: 'user', content: '東京'.repeat(500) }, { role: 'user', content: huge }]
  const result = compactor.compact(input)
  assert.equal(result.overBudget, true)
  assert.equal(result.messages.at(-1).content, huge)
  assert.equal(chatfold.countTokens([{ role: 'user', content: 'hello' }]), compactor.count([{ role: 'user', content: 'hello' }]))
})

test('an HTTP summarizer runs in Rust against an OpenAI-compatible server', async () => {
  const seen = []
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      seen.push(JSON.parse(body))
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'Orders were discussed.' }, finish_reason: 'stop' }] }))
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const url = `http://127.0.0.1:${server.address().port}/v1`
    const input = history(random(3), 80)
    const result = await new Compactor(300, { tokenizer: 'heuristic' }).compactAsync(input, new chatfold.OpenAISummarizer(url, 'fake', { apiKey: 'sk-test' }))
    assert.ok(result.summarized)
    assert.match(result.messages.find(isSummary).content, /Orders were discussed\./)
    assert.equal(seen.length, 1)
    assert.equal(seen[0].model, 'fake')
  } finally {
    server.close()
  }
})

test('the request carries the prompt chatfold\'s HTTP summarizers send', () => {
  let prompt
  new Compactor(200, { tokenizer: 'heuristic' }).compact(history(random(5), 60), (request) => {
    prompt = request.prompt()
    return 'ok'
  })
  assert.match(prompt.system, /running summary/)
  assert.match(prompt.user, /<conversation>/)
})

test('a tokenizer function counts, in compact and compactAsync alike', async () => {
  const calls = { n: 0 }
  const tokenizer = (text) => {
    calls.n++
    return Math.ceil([...text].length / 3)
  }
  const compactor = new Compactor(400, { tokenizer })
  const input = history(random(11), 90)
  const sync = compactor.compact(input, (request) => `${request.messages.length} folded.`)
  const counted = calls.n
  assert.ok(counted > 0 && sync.summarized)
  assert.ok(!sync.overBudget && compactor.count(sync.messages) <= 400)
  calls.n = 0
  const later = await compactor.compactAsync(input, async (request) => `${request.messages.length} folded.`)
  assert.deepEqual(later.messages, sync.messages)
  // One run, stepped across the await: no message is counted twice over.
  assert.equal(calls.n, counted)
  let asked = 0
  const down = new Error('the tokenizer is down mid-way')
  let left = 3
  const failing = new Compactor(400, { tokenizer: (t) => { if (--left < 0) throw down; return t.length } })
  await assert.rejects(failing.compactAsync(input, async () => { asked++; return 'never' }), (e) => e === down)
  assert.equal(asked, 0)
  // Its errors are thrown as themselves; a bad count is a TypeError.
  const failure = new Error('the tokenizer is down')
  assert.throws(() => new Compactor(400, { tokenizer: () => { throw failure } }).compact(input), (e) => e === failure)
  assert.throws(() => new Compactor(400, { tokenizer: () => -1 }).compact(input), TypeError)
  const throwing = new Error('the summarizer is down')
  await assert.rejects(compactor.compactAsync(input, async () => { throw throwing }), (e) => e === throwing)
})

test('a tokenizer function with reuse and chunks: each summary answers its own request', async () => {
  const settings = { tokenizer: (t) => Math.ceil(t.length / 4), reuse: true, maxFoldInputTokens: 200 }
  const input = Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `${i % 2 ? 'a' : 'q'}${i} ` + 'words '.repeat(15) }))
  const summarize = (request) => `covers ${request.messages.at(-1).content.split(' ')[0]}`
  const compactor = new Compactor(300, settings)
  const results = [compactor.compact(input, summarize)]
  // Run again on the same compactor: its kept summaries are reused, and the
  // async run re-plans per answer; either way the summary is the last chunk's.
  results.push(await compactor.compactAsync(input, async (request) => summarize(request)))
  results.push(await new Compactor(300, settings).compactAsync(input, async (request) => summarize(request)))
  for (const result of results) {
    assert.ok(result.summarized)
    const folded = input.filter((_, i) => result.report.fates[i] === 'folded').at(-1).content.split(' ')[0]
    assert.match(result.messages[0].content, new RegExp(`covers ${folded}\\b`))
  }
})

test('an AI SDK summary in another role is still the one running summary', () => {
  const compactor = new Compactor(300, { format: 'ai-sdk', tokenizer: 'heuristic', summaryRole: 'user' })
  let history = []
  for (let round = 0; round < 4; round++) {
    for (let i = 0; i < 20; i++) history.push({ role: i % 2 ? 'assistant' : 'user', content: `r${round} t${i} ` + 'words '.repeat(10) })
    history = compactor.compact(history).messages
  }
  assert.equal(history.filter((m) => typeof m.content === 'string' && m.content.startsWith('Summary of earlier')).length, 1)
})

test('between folds the output grows at its end, and the result says how much it kept', () => {
  const turns = (n) => Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i} about order ORD-${1000 + i} and its shipping` }))
  const compactor = new Compactor(400, { tokenizer: 'heuristic' })
  assert.equal(compactor.foldTo, 200)
  const first = compactor.compact(turns(60), (r) => `${r.messages.length} earlier messages`)
  assert.ok(first.summarized)
  assert.equal(first.report.prefix, 'rewritten')
  const held = [...first.messages, { role: 'user', content: 'and where is it now?' }]
  const second = compactor.compact(held)
  assert.equal(second.report.prefix, 'unchanged')
  assert.deepEqual(second.messages, held)
  assert.ok(second.prefixTokens > 0 && second.prefixTokens < second.tokensAfter)
  // Folding to the budget rewrites the prefix more often than the default
  // (with the built-in summarizer, which fills its allowance).
  const rewrites = (c) => {
    let held = turns(40)
    let count = 0
    for (let i = 0; i < 30; i++) {
      const result = c.compact(held)
      count += result.report.prefix === 'rewritten' ? 1 : 0
      held = [...result.messages, { role: 'user', content: `question ${i} about ORD-${i}` }]
    }
    return count
  }
  const stepped = rewrites(compactor)
  const atBudget = rewrites(new Compactor(400, { tokenizer: 'heuristic', foldTo: 400 }))
  assert.ok(stepped >= 1 && stepped < atBudget, `${stepped} against ${atBudget}`)
})
