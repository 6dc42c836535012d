#!/usr/bin/env node
// Drives a chunkstore daemon started with --dev through bee-js 12's tag and pin calls: createTag,
// retrieveTag, getAllTags, updateTag, deleteTag; uploadData and uploadFile with a tag and with pin;
// pin, getPin, getAllPins, unpin; and the error answers bee-js turns into BeeResponseError.
//
//   node tests/js/pins.mjs --url http://127.0.0.1:PORT
//
// On success prints one JSON line of results and exits 0; on the first failure prints
// {"ok": false, "step", "error"} as one JSON line and exits 1. tests/api/test_bee_js_pins.py checks
// the results against the daemon's store.

import { randomBytes } from 'node:crypto'
import { parseArgs } from 'node:util'

const { values: args } = parseArgs({ options: { url: { type: 'string' } } })
if (!args.url) {
  console.error('missing --url')
  process.exit(2)
}

const { Bee, BeeResponseError } = await import('@ethersphere/bee-js')

const results = { ok: false }
let step = 'setup'

function check(cond, message) {
  if (!cond) throw new Error(`check failed: ${message}`)
}

function hex(x) {
  if (typeof x === 'string') return x.toLowerCase()
  return x.toHex()
}

function plainTag(t) {
  return { uid: t.uid, split: t.split, seen: t.seen, stored: t.stored, sent: t.sent, synced: t.synced,
           address: t.address, startedAt: t.startedAt }
}

async function failure(fn) {
  try {
    await fn()
  } catch (e) {
    if (e instanceof BeeResponseError || e?.status !== undefined) {
      return { status: e.status, responseBody: e.responseBody }
    }
    throw e
  }
  throw new Error('expected the call to fail')
}

async function main() {
  const bee = new Bee(args.url)

  step = 'createPostageBatch'
  const chain = await bee.getChainState()
  const amount = BigInt(chain.currentPrice) * 17280n + 1n
  const batchId = await bee.createPostageBatch(amount.toString(), 20, { label: 'bee-js pins', waitForUsable: true })

  // Tags: created, read, listed, used by an upload, updated, deleted.
  step = 'createTag'
  const tag = await bee.createTag()
  results.created = plainTag(tag)
  step = 'uploadData(tag)'
  const data = new Uint8Array(randomBytes(50_000))
  const uploaded = await bee.uploadData(batchId, data, { tag: tag.uid })
  results.taggedReference = uploaded.reference.toHex()
  results.dataHex = Buffer.from(data).toString('hex')
  results.uploadTagUid = uploaded.tagUid
  step = 'retrieveTag'
  results.afterUpload = plainTag(await bee.retrieveTag(tag.uid))
  step = 'uploadData(same data, new tag)'
  const again = await bee.uploadData(batchId, data)
  results.repeatTagUid = again.tagUid
  results.repeat = plainTag(await bee.retrieveTag(again.tagUid))
  step = 'getAllTags'
  results.allTags = (await bee.getAllTags()).map(t => t.uid)
  results.pagedTags = (await bee.getAllTags({ offset: 1, limit: 1 })).map(t => t.uid)
  step = 'updateTag'
  await bee.updateTag(tag.uid, '00'.repeat(31) + '01')
  results.updated = plainTag(await bee.retrieveTag(tag.uid))
  step = 'deleteTag'
  await bee.deleteTag(tag.uid)
  results.deletedTag = await failure(() => bee.retrieveTag(tag.uid))

  // Pins: on upload, by reference, listed, read, removed.
  step = 'uploadFile(pin)'
  const file = await bee.uploadFile(batchId, 'pinned content, as a file', 'pinned.txt', { pin: true, contentType: 'text/plain' })
  results.pinnedFile = file.reference.toHex()
  step = 'pin'
  await bee.pin(uploaded.reference)
  await bee.pin(uploaded.reference) // again: 200, nothing new
  step = 'getAllPins'
  results.pins = (await bee.getAllPins()).map(hex).sort()
  step = 'getPin'
  results.getPin = hex((await bee.getPin(file.reference)).reference)
  step = 'unpin'
  await bee.unpin(uploaded.reference)
  results.pinsAfterUnpin = (await bee.getAllPins()).map(hex)
  check(results.pinsAfterUnpin.length === 1, 'one pin left')
  step = 'errors'
  results.errors = {
    getPin: await failure(() => bee.getPin(uploaded.reference)),
    unpin: await failure(() => bee.unpin(uploaded.reference)),
    pinMissing: await failure(() => bee.pin('ab'.repeat(32))),
    unknownTag: await failure(() => bee.uploadData(batchId, data, { tag: 999999 })),
  }
  results.ok = true
  console.log(JSON.stringify(results))
}

try {
  await main()
} catch (e) {
  const error = { name: e?.name, message: String(e?.message ?? e) }
  if (e?.status !== undefined) {
    error.status = e.status
    error.responseBody = e.responseBody
  }
  if (e?.issues) error.issues = e.issues
  console.log(JSON.stringify({ ok: false, step, error, stack: e?.stack }))
  process.exit(1)
}
