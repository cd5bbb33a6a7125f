// The package as an ES module: the same classes as through require().
import test from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'

import chatfold, { Compactor, InvalidConfig, version } from '../index.mjs'

test('the ES module exports the CommonJS objects', () => {
  const required = createRequire(import.meta.url)('../index.js')
  assert.equal(Compactor, required.Compactor)
  assert.equal(chatfold.InvalidConfig, InvalidConfig)
  assert.equal(typeof version, 'string')
  const result = new Compactor(50, { tokenizer: 'heuristic' }).compact(
    Array.from({ length: 30 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i} `.repeat(5) })),
  )
  assert.ok(result.summarized)
})
