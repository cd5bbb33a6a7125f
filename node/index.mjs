// chatfold for JavaScript, as an ES module (the same objects as index.js).
import chatfold from './index.js'

export const {
  Compactor,
  SummaryRequest,
  OpenAISummarizer,
  AnthropicSummarizer,
  countTokens,
  version,
  ChatfoldError,
  InvalidConfig,
  InvalidMessage,
  InvalidInput,
  InvalidState,
  SummarizerError,
  BudgetUnreachable,
} = chatfold
export default chatfold
