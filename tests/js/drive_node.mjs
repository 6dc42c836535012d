#!/usr/bin/env node
// Drives a chunkstore daemon in --dev mode with bee-js 12 through the node-owned-stamp surface:
// node identity, a bought batch, feeds without explicit indexes, feed manifests, SOC reads, a
// streamed directory, tags, pins and retrievability.
//
//   node tests/js/drive_node.mjs --url http://127.0.0.1:PORT --key <64 hex> --dir <folder to stream>
//
// --key signs feed updates and SOCs (the feed owner); the node stamps every upload with the batch
// this script buys (bee.createPostageBatch). On success prints one JSON line of results and exits 0;
// on the first failure prints {"ok": false, "step", "error", ...} as one JSON line and exits 1.

import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    key: { type: 'string' },
    dir: { type: 'string' },
    amount: { type: 'string', default: '414720001' },
    depth: { type: 'string', default: '20' },
  },
})
for (const k of ['url', 'key', 'dir']) {
  if (!args[k]) {
    console.error(`missing --${k}`)
    process.exit(2)
  }
}

const clientPackage = JSON.parse(readFileSync(new URL('./node_modules/@ethersphere/bee-js/package.json', import.meta.url)))
const { Bee, Identifier, Topic, BeeResponseError } = await import('@ethersphere/bee-js')

const results = { ok: false, client: { name: clientPackage.name, version: clientPackage.version } }
let step = 'setup'

function check(cond, message) {
  if (!cond) throw new Error(`check failed: ${message}`)
}

function text(bytes) {
  return Buffer.from(bytes.toUint8Array ? bytes.toUint8Array() : bytes).toString('utf8')
}

// A bee-js typed value (Reference, EthAddress, BZZ, Bytes ...) as plain JSON.
function plain(value) {
  if (value === null || value === undefined) return value ?? null
  if (typeof value === 'bigint') return value.toString()
  if (typeof value !== 'object') return value
  if (typeof value.toHex === 'function') return value.toHex()
  if (typeof value.toPLURString === 'function') return value.toPLURString()
  if (typeof value.toWeiString === 'function') return value.toWeiString()
  if (value instanceof Uint8Array) return Buffer.from(value).toString('hex')
  if (Array.isArray(value)) return value.map(plain)
  return Object.fromEntries(Object.entries(value).filter(([, v]) => typeof v !== 'function').map(([k, v]) => [k, plain(v)]))
}

// Binary requests (feeds, chunks) keep the error body as bytes: read it as the JSON it is.
function decodeBody(body) {
  if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) {
    const raw = Buffer.from(body instanceof ArrayBuffer ? new Uint8Array(body) : body).toString('utf8')
    try {
      return JSON.parse(raw)
    } catch {
      return raw
    }
  }
  return body
}

function describeError(e) {
  const out = { name: e?.name, message: String(e?.message ?? e) }
  if (e instanceof BeeResponseError || e?.status !== undefined) {
    out.status = e.status
    out.responseBody = decodeBody(e.responseBody)
    out.url = e.url
    out.method = e.method
  }
  if (e?.issues) out.issues = e.issues
  return out
}

async function expectError(what, fn) {
  try {
    await fn()
  } catch (e) {
    check(e instanceof BeeResponseError, `${what}: BeeResponseError, got ${e}`)
    return describeError(e)
  }
  throw new Error(`${what} succeeded`)
}

async function main() {
  const bee = new Bee(args.url)
  const owner = new Bee(args.url, { signer: args.key }).signer.publicKey().address()
  results.owner = owner.toHex()

  step = 'getNodeInfo'
  results.nodeInfo = plain(await bee.getNodeInfo())
  step = 'getTopology'
  results.topology = plain(await bee.getTopology())
  step = 'getNodeAddresses'
  results.addresses = plain(await bee.getNodeAddresses())

  step = 'createPostageBatch'
  const batchId = await bee.createPostageBatch(args.amount, Number(args.depth))
  results.batchId = batchId.toHex()

  // Feed updates with references (v1 payloads), no explicit index: the writer asks GET /feeds for the next.
  // The references are single-file /bzz uploads, so that the feed manifest below resolves to a file.
  step = 'makeFeedWriter.upload'
  const topic = Topic.fromString(`chunkstore feeds ${randomBytes(6).toString('hex')}`)
  results.topic = topic.toHex()
  const writer = bee.makeFeedWriter(topic, args.key)
  const first = await bee.uploadFile(batchId, 'first update', 'first.txt', { contentType: 'text/plain' })
  const second = await bee.uploadFile(batchId, 'second update', 'second.txt', { contentType: 'text/plain' })
  results.feedReferences = [first.reference.toHex(), second.reference.toHex()]
  results.feedUploads = []
  for (const ref of [first.reference, second.reference]) {
    const r = await writer.upload(batchId, ref)
    results.feedUploads.push(r.reference.toHex())
  }
  step = 'makeFeedReader.download'
  const reader = bee.makeFeedReader(topic, owner)
  const latest = await reader.download()
  const secondBytes = await bee.downloadData(second.reference)
  results.feedLatest = {
    payloadIsSecond: Buffer.from(latest.payload.toUint8Array()).equals(Buffer.from(secondBytes.toUint8Array())),
    index: latest.feedIndex.toHex(),
    next: latest.feedIndexNext.toHex(),
  }
  step = 'makeFeedReader.downloadReference'
  results.feedLatestReference = (await reader.downloadReference()).reference.toHex()
  step = 'fetchLatestFeedUpdate'
  const fetched = await bee.fetchLatestFeedUpdate(topic, owner)
  results.fetchLatest = {
    payloadIsSecond: Buffer.from(fetched.payload.toUint8Array()).equals(Buffer.from(secondBytes.toUint8Array())),
    index: fetched.feedIndex.toHex(),
    next: fetched.feedIndexNext.toHex(),
  }

  // Payload updates (v2), no explicit index, on a second topic.
  step = 'makeFeedWriter.uploadPayload'
  const topic2 = Topic.fromString(`chunkstore payload feed ${randomBytes(6).toString('hex')}`)
  const writer2 = bee.makeFeedWriter(topic2, args.key)
  await writer2.uploadPayload(batchId, 'payload one')
  await writer2.uploadPayload(batchId, 'payload two')
  const latest2 = await bee.makeFeedReader(topic2, owner).downloadPayload()
  results.payloadLatest = { payload: text(latest2.payload), index: latest2.feedIndex.toHex(), next: latest2.feedIndexNext.toHex() }

  step = 'createFeedManifest'
  const manifest = await bee.createFeedManifest(batchId, topic, owner)
  results.feedManifest = manifest.toHex()
  step = 'downloadFile(feed manifest)'
  const viaManifest = await bee.downloadFile(manifest)
  results.feedManifestContent = text(viaManifest.data)

  step = 'feed errors'
  results.errors = {}
  results.errors.noUpdates = await expectError('feed without updates', () =>
    bee.fetchLatestFeedUpdate(Topic.fromString('never written'), owner),
  )

  // A SOC written by the SOC writer, read by the SOC reader.
  step = 'makeSOCWriter.upload'
  const socId = new Identifier(new Uint8Array(randomBytes(32)))
  const socPayload = new Uint8Array(randomBytes(500))
  await bee.makeSOCWriter(args.key).upload(batchId, socId, socPayload)
  step = 'makeSOCReader.download'
  const socBack = await bee.makeSOCReader(owner).download(socId)
  check(Buffer.from(socBack.payload.toUint8Array()).equals(Buffer.from(socPayload)), 'SOC payload read back')
  results.soc = { owner: socBack.owner.toHex(), identifier: socId.toHex(), size: socPayload.length }

  step = 'streamDirectory'
  const streamed = await bee.streamDirectory(batchId, args.dir)
  results.streamed = streamed.reference.toHex()
  step = 'downloadFile(streamed)'
  const index = await bee.downloadFile(streamed.reference)
  results.streamedIndex = text(index.data)

  // Tags and pins.
  step = 'createTag'
  const tag = await bee.createTag()
  results.tagCreated = plain(tag)
  step = 'uploadData(tag)'
  const tagged = new Uint8Array(randomBytes(3 * 4096 + 10))
  const taggedUpload = await bee.uploadData(batchId, tagged, { tag: tag.uid, deferred: true })
  results.tagged = { reference: taggedUpload.reference.toHex(), size: tagged.length }
  step = 'retrieveTag'
  results.tagAfter = plain(await bee.retrieveTag(tag.uid))

  step = 'pin'
  await bee.pin(taggedUpload.reference)
  step = 'getAllPins'
  results.pins = plain(await bee.getAllPins())
  step = 'getPin'
  results.pin = plain(await bee.getPin(taggedUpload.reference))
  results.errors.unknownPin = await expectError('getPin of an unknown reference', () =>
    bee.getPin(randomBytes(32).toString('hex')),
  )
  results.errors.unknownTag = await expectError('retrieveTag of an unknown tag', () => bee.retrieveTag(987654321))

  step = 'isReferenceRetrievable'
  results.retrievable = await bee.isReferenceRetrievable(taggedUpload.reference)

  results.ok = true
}

try {
  await main()
  process.stdout.write(JSON.stringify(results) + '\n')
} catch (e) {
  process.stdout.write(JSON.stringify({ ...plain(results), ok: false, step, error: describeError(e), stack: e?.stack }) + '\n')
  process.exitCode = 1
}
