// The AI SDK's messages through chatfold's core: `ModelMessage` lists (and
// the `LanguageModelV3Prompt` a middleware sees, the same shape with content
// arrays) stand in for the core as OpenAI messages, and come back as the
// caller's own objects: the kept and hoisted ones untouched, the folded
// ones replaced by one system message, the summary. Nothing here plans:
// the core decides what is kept, by the fates it reports.
'use strict'

/** A tool result's output as text. */
function outputText(output) {
  if (!output || typeof output !== 'object') return String(output ?? '')
  switch (output.type) {
    case 'text':
    case 'error-text':
      return String(output.value)
    case 'json':
    case 'error-json':
      return JSON.stringify(output.value)
    case 'execution-denied':
      return `execution denied${output.reason ? `: ${output.reason}` : ''}`
    case 'content':
      return (output.value || []).map(partText).join('\n')
    default:
      return JSON.stringify(output)
  }
}

/** A content part as text (files and images as a short mark). */
function partText(part) {
  if (typeof part === 'string') return part
  switch (part && part.type) {
    case 'text':
    case 'reasoning':
      return part.text
    case 'tool-result':
      return outputText(part.output)
    case 'tool-call':
      return `${part.toolName}(${JSON.stringify(part.input ?? {})})`
    case 'file':
    case 'image':
    case 'image-data':
    case 'file-data':
    case 'media':
      return `[${part.type}${part.mediaType ? ` ${part.mediaType}` : ''}${part.filename ? ` ${part.filename}` : ''}]`
    default:
      return ''
  }
}

function text(content) {
  return typeof content === 'string' ? content : (content || []).map(partText).filter(Boolean).join('\n')
}

/** The OpenAI stand-ins for one AI SDK message (none for a tool message of approvals only). */
function standIns(message) {
  const { role, content } = message
  switch (role) {
    case 'assistant': {
      const parts = typeof content === 'string' ? [] : content || []
      const calls = parts.filter((p) => p.type === 'tool-call' && !p.providerExecuted)
      const said = typeof content === 'string' ? content : parts.filter((p) => !calls.includes(p)).map(partText).filter(Boolean).join('\n')
      const m = { role: 'assistant', content: said || null }
      if (calls.length) {
        m.tool_calls = calls.map((c) => ({
          id: c.toolCallId,
          type: 'function',
          function: { name: c.toolName, arguments: JSON.stringify(c.input ?? {}) },
        }))
      }
      return [m]
    }
    case 'tool':
      return (content || [])
        .filter((p) => p.type === 'tool-result')
        .map((p) => ({ role: 'tool', tool_call_id: p.toolCallId, content: outputText(p.output) }))
    default:
      return [{ role: String(role), content: text(content) }]
  }
}

/** The calls an AI SDK message makes, and the results it answers. */
function callsOf(message) {
  const parts = Array.isArray(message.content) ? message.content : []
  if (message.role === 'assistant') return parts.filter((p) => p.type === 'tool-call' && !p.providerExecuted).map((p) => p.toolCallId)
  return []
}

/**
 * `messages` less every tool result whose call no earlier assistant message
 * made (a provider rejects such a result); a tool message left with nothing
 * is dropped. The caller's objects where nothing is taken out.
 */
function withoutOrphans(messages) {
  const issued = new Set()
  const out = []
  let changed = false
  for (const m of messages) {
    callsOf(m).forEach((id) => issued.add(id))
    if (m.role !== 'tool' || !Array.isArray(m.content)) {
      out.push(m)
      continue
    }
    const content = m.content.filter((p) => p.type !== 'tool-result' || issued.has(p.toolCallId))
    if (content.length === m.content.length) out.push(m)
    else {
      changed = true
      if (content.length) out.push({ ...m, content })
    }
  }
  return changed ? out : messages
}

/**
 * The stand-ins for `messages`, and the index of each one's original; with
 * `pinned` (the originals' indices a caller's pin names), the stand-ins'
 * indices to pin.
 */
function toCore(messages, pinned = []) {
  const stand = []
  const owner = []
  messages.forEach((m, i) => {
    for (const s of standIns(m)) {
      stand.push(s)
      owner.push(i)
    }
  })
  const wanted = new Set(pinned)
  return { stand, owner, pinned: owner.flatMap((i, j) => (wanted.has(i) ? [j] : [])) }
}

const RANK = { kept: 4, pinned: 3, hoisted: 2, previousSummary: 1, folded: 1, other: 1 }

/**
 * The AI SDK messages of a compaction of their stand-ins (the hoisted
 * originals, the summary as a system message, the pinned originals, the
 * kept originals), and the report with a fate for each original (a message
 * with no stand-in goes with the one before it).
 */
function fromCore(messages, owner, result) {
  const fate = new Array(messages.length).fill(null)
  result.report.fates.forEach((f, j) => {
    const i = owner[j]
    if (fate[i] === null || RANK[f] > RANK[fate[i]]) fate[i] = f
  })
  for (let i = 0; i < fate.length; i++) if (fate[i] === null) fate[i] = i > 0 ? fate[i - 1] : 'kept'
  const report = { ...result.report, fates: fate }
  if (!result.summarized) return { messages: [...messages], report }
  const hoisted = result.report.fates.filter((f) => f === 'hoisted').length
  const written = result.messages[hoisted]
  const summary = { role: written.role, content: written.content }
  const pick = (f) => messages.filter((_, i) => fate[i] === f)
  return { messages: withoutOrphans([...pick('hoisted'), summary, ...pick('pinned'), ...pick('kept')]), report }
}

module.exports = { toCore, fromCore, withoutOrphans, standIns }
