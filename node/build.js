// Builds the native addon with cargo alone (Rust is all it needs besides
// Node): what `npm install ./node` runs. `npm run build` does the same
// through @napi-rs/cli. `--if-missing`: nothing to do when chatfold.node is
// there already. `--debug`: a debug build (faster to make, for the tests).
'use strict'

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const here = __dirname
const out = path.join(here, 'chatfold.node')
const args = process.argv.slice(2)
if (args.includes('--if-missing') && fs.existsSync(out)) process.exit(0)

const debug = args.includes('--debug')
const target = process.env.CARGO_TARGET_DIR
  ? path.resolve(process.env.CARGO_TARGET_DIR)
  : path.join(here, 'target')
const cargo = ['build', '--manifest-path', path.join(here, 'Cargo.toml'), '--target-dir', target]
if (!debug) cargo.push('--release')
execFileSync(process.env.CARGO || 'cargo', cargo, { stdio: 'inherit' })

const lib = { darwin: 'libchatfold_node.dylib', win32: 'chatfold_node.dll' }[process.platform] || 'libchatfold_node.so'
fs.copyFileSync(path.join(target, debug ? 'debug' : 'release', lib), out)
