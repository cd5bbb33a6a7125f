// chatfold for the Vercel AI SDK, as an ES module (the same objects as ai.js).
import ai from './ai.js'

export const { compactionMiddleware, compactionPrepareStep } = ai
export default ai
