// chatfold for JavaScript, as an ES module (the same objects as index.js).
import chatfold from './index.js'

export const {
  Aim,
  Compactor,
  RollingMemory,
  TieredMemory,
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
