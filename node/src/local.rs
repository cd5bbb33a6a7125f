//! Compaction counted by a JavaScript tokenizer: the tokenizer can be
//! called on the JavaScript thread only, so the compaction is a
//! [`Stepped::local`] operation that `index.js` polls there, the tokenizer
//! called while it polls and the summarizer awaited between polls.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use chatfold::Ready;
use chatfold::summarize::{Bridge, Polled, Stepped};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::{Input, NamedSummarizer, NativeCompactor, OrJs, request_json, summarizer_named};

/// A JavaScript tokenizer `(text) => number`, called on the JavaScript
/// thread while a poll gives it the environment. Its first exception is
/// kept (counting goes on with 0) and thrown when the compaction ends.
struct JsCounter {
    tokenizer: FunctionRef<String, u32>,
    env: Rc<Cell<Option<Env>>>,
    failed: Rc<RefCell<Option<napi::Error>>>,
}

impl chatfold::TokenCounter for JsCounter {
    fn count(&self, text: &str) -> usize {
        if self.failed.borrow().is_some() {
            return 0;
        }
        let Some(env) = self.env.get() else {
            *self.failed.borrow_mut() =
                Some(napi::Error::from_reason("a tokenizer was called outside a poll"));
            return 0;
        };
        match self
            .tokenizer
            .borrow_back(&env)
            .and_then(|f| f.call(text.to_owned()))
        {
            Ok(n) => n as usize,
            Err(e) => {
                *self.failed.borrow_mut() = Some(e);
                0
            }
        }
    }
}

#[napi]
impl NativeCompactor {
    /// Tokens of `messages` counted by a JavaScript tokenizer.
    #[napi]
    pub fn count_with(
        &self,
        env: Env,
        messages: String,
        tokenizer: Function<String, u32>,
    ) -> napi::Result<u32> {
        use chatfold::TokenCounter;
        let input = Input::read(&messages, self.format).js()?;
        let counter = JsCounter {
            tokenizer: tokenizer.create_ref()?,
            env: Rc::new(Cell::new(Some(env))),
            failed: Default::default(),
        };
        let n = counter.count_messages(&input.history.messages);
        match counter.failed.take() {
            Some(e) => Err(e),
            None => Ok(n as u32),
        }
    }

    /// A compaction counted by a JavaScript tokenizer, stepped by
    /// `index.js` on the JavaScript thread (the tokenizer is called while
    /// it polls); its summarizer is answered like [`begin`](Self::begin)'s.
    #[napi]
    pub fn begin_with(
        &self,
        messages: String,
        tokenizer: Function<String, u32>,
        named: Option<NamedSummarizer>,
        pinned: Option<Vec<u32>>,
    ) -> napi::Result<NativeLocalStep> {
        let named = named.map(summarizer_named).transpose()?;
        let env = Rc::new(Cell::new(None));
        let failed = Rc::new(RefCell::new(None));
        let counter = JsCounter {
            tokenizer: tokenizer.create_ref()?,
            env: env.clone(),
            failed: failed.clone(),
        };
        let compactor = self.inner.clone();
        let format = self.format;
        let step = Stepped::local(Box::pin(async move {
            let input = Input::read(&messages, format)?;
            let compactor = input.compactor(&compactor, pinned.as_deref()).counter(counter);
            let messages = &input.history.messages;
            let compaction = match named {
                // The named summarizer runs here, as the sync compaction asks.
                Some(named) => compactor.compact_async(messages, &Ready(named)).await?,
                None => compactor.compact_async(messages, &Bridge).await?,
            };
            Ok(input.result(&compaction))
        }));
        Ok(NativeLocalStep { step, env, failed })
    }
}

/// A compaction counted by a JavaScript tokenizer, stepped on the
/// JavaScript thread; its outcome is JSON text.
#[napi]
pub struct NativeLocalStep {
    step: Stepped<String, dyn std::future::Future<Output = chatfold::Result<String>>>,
    /// The JavaScript environment while a poll runs (the tokenizer's).
    env: Rc<Cell<Option<Env>>>,
    /// The tokenizer's first exception.
    failed: Rc<RefCell<Option<napi::Error>>>,
}

#[napi]
impl NativeLocalStep {
    /// Runs the compaction until it finishes (`null`) or its summarizer is
    /// asked (the request); the tokenizer is called meanwhile.
    #[napi]
    pub fn poll(&self, env: Env) -> Option<String> {
        self.env.set(Some(env));
        let polled = self.step.poll();
        self.env.set(None);
        if self.failed.borrow().is_some() {
            // The tokenizer threw: nothing more is asked; `result` throws it.
            self.step.cancel();
            return None;
        }
        match polled {
            Polled::Asked(request) => Some(request_json(&request)),
            _ => None,
        }
    }

    /// Whether the compaction has finished, or its tokenizer threw (its
    /// `result` is ready).
    #[napi]
    pub fn done(&self) -> bool {
        self.step.is_done() || self.failed.borrow().is_some()
    }

    /// The summarizer's answer to the last request.
    #[napi]
    pub fn answer(&self, text: String) {
        self.step.answer(Ok(text));
    }

    /// Abandons the compaction.
    #[napi]
    pub fn cancel(&self) {
        self.step.cancel();
    }

    /// The compaction's result, or its error thrown (the tokenizer's first).
    #[napi]
    pub fn result(&self) -> napi::Result<String> {
        if let Some(e) = self.failed.borrow_mut().take() {
            return Err(e);
        }
        match self.step.take_outcome() {
            Some(outcome) => outcome.js(),
            None => Err(napi::Error::from_reason("the compaction has not finished")),
        }
    }
}
