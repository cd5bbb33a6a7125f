// chatfold for LangChain.js, as an ES module (the same objects as langchain.js).
import langchain from './langchain.js'

export const { summarizationMiddleware } = langchain
export default langchain
