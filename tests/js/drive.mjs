#!/usr/bin/env node
// Drives a chunkstore daemon with the real @ethersphere/bee-js client.
//
//   node tests/js/drive.mjs --url http://127.0.0.1:PORT --key <64 hex> --batch <64 hex> --depth <n>
//                           [--client @ethersphere/bee-js | bee-js-12.1.0] [--no-rchash]
//
// The batch must already be registered (POST /batches) with owner = the key's address and
// bucketDepth 16 (bee-js's Stamper always uses 16 bucket bits). Every stamp is made and signed
// by bee-js's own Stamper with that key, so the daemon validates stamps it did not make.
//
// On success prints one JSON line of results and exits 0; on the first failure prints
// {"ok": false, "step", "error", ...} as one JSON line and exits 1.

import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    key: { type: 'string' },
    batch: { type: 'string' },
    depth: { type: 'string' },
    client: { type: 'string', default: '@ethersphere/bee-js' },
    'no-rchash': { type: 'boolean', default: false },
  },
})
for (const k of ['url', 'key', 'batch', 'depth']) {
  if (!args[k]) {
    console.error(`missing --${k}`)
    process.exit(2)
  }
}

// The package's own package.json is not in its "exports", so read it from node_modules next to this script.
const clientPackage = JSON.parse(readFileSync(new URL(`./node_modules/${args.client}/package.json`, import.meta.url)))
const { Bee, Stamper, MerkleTree, Identifier, Topic, FeedIndex, Bytes, Utils, BeeResponseError } = await import(args.client)

const results = { ok: false, client: { name: clientPackage.name, version: clientPackage.version } }
let step = 'setup'

function hex(x) {
  if (typeof x === 'string') return x.toLowerCase().replace(/^0x/, '')
  if (x instanceof Uint8Array) return Buffer.from(x).toString('hex')
  if (x && typeof x.toHex === 'function') return x.toHex()
  throw new Error(`not hex-able: ${x}`)
}

function check(cond, message) {
  if (!cond) throw new Error(`check failed: ${message}`)
}

function sameBytes(a, b) {
  return Buffer.from(a).equals(Buffer.from(b))
}

// A bee-js typed value (Reference, EthAddress, BZZ, Bytes ...) as plain JSON.
// (Bytes has its own toJSON, which parses the bytes as UTF-8 JSON, so JSON.stringify cannot be used directly.)
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

// What the daemon answered when a bee-js call failed: the parts a test wants to see.
function describeError(e) {
  const out = { name: e?.name, message: String(e?.message ?? e) }
  if (e instanceof BeeResponseError || e?.status !== undefined) {
    out.status = e.status
    out.statusText = e.statusText
    out.responseBody = e.responseBody
    out.url = e.url
    out.method = e.method
  }
  if (e?.issues) out.issues = e.issues // zod validation errors (bee-js >= 12.3)
  return out
}

// A bee-js chunk-like object for Stamper.stamp, which only needs `hash()` -> the 32-byte address.
function stampable(address) {
  const bytes = address instanceof Uint8Array ? address : address.toUint8Array()
  return { hash: () => bytes }
}

async function main() {
  const bee = new Bee(args.url, { signer: args.key })
  const signerAddress = bee.signer.publicKey().address().toHex()
  const batchId = hex(args.batch)
  const depth = Number(args.depth)
  results.signer = signerAddress

  step = 'checkConnection'
  await bee.checkConnection()
  results.isConnected = await bee.isConnected()
  check(results.isConnected === true, 'isConnected')
  results.isGateway = await bee.isGateway()

  step = 'getHealth'
  results.health = await bee.getHealth()
  step = 'isSupportedApiVersion'
  results.isSupportedApiVersion = await bee.isSupportedApiVersion()
  results.isSupportedExactVersion = await bee.isSupportedExactVersion()
  results.versions = await bee.getVersions()

  step = 'getReadiness'
  results.readiness = await bee.getReadiness()

  step = 'getStatus'
  results.statusBefore = plain(await bee.getStatus())

  step = 'getReserveState'
  results.reserveState = plain(await bee.getReserveState())

  step = 'getRedistributionState'
  results.redistributionState = plain(await bee.getRedistributionState())

  // /chainstate is optional for this daemon: record what happened rather than fail here;
  // the Python test decides (it requires success when the daemon serves the route).
  step = 'getChainState'
  try {
    results.chainState = { ok: true, value: plain(await bee.getChainState()) }
  } catch (e) {
    results.chainState = { ok: false, error: describeError(e) }
  }

  step = 'getGlobalPostageBatches'
  const batches = await bee.getGlobalPostageBatches()
  results.batches = plain(batches)
  const mine = batches.find(b => b.batchID.toHex() === batchId)
  check(mine, `batch ${batchId} listed by getGlobalPostageBatches`)
  check(mine.owner.toHex() === signerAddress, 'batch owner is the bee-js signer')
  if (typeof bee.getGlobalPostageBatch === 'function') {
    step = 'getGlobalPostageBatch'
    results.batch = plain(await bee.getGlobalPostageBatch(batchId))
  }

  const stamper = Stamper.fromBlank(args.key, batchId, depth)
  const uploaded = [] // {kind, address, data, stamp}

  async function uploadStamped(kind, address, body, upload) {
    const envelope = stamper.stamp(stampable(address))
    const marshaled = Utils.convertEnvelopeToMarshaledStamp(envelope)
    check(marshaled.length === 113, 'marshaled stamp is 113 bytes')
    const result = await upload(envelope)
    check(result.reference.toHex() === hex(address), `${kind}: reference ${result.reference.toHex()} == ${hex(address)}`)
    uploaded.push({ kind, address: hex(address), data: body, stamp: marshaled.toHex() })
    return result
  }

  // 1. Content-addressed chunks made by bee.makeContentAddressedChunk, several payload sizes.
  step = 'uploadChunk(CAC)'
  for (const size of [1, 100, 4095, 4096]) {
    const chunk = bee.makeContentAddressedChunk(new Uint8Array(randomBytes(size)))
    await uploadStamped(`cac-${size}`, chunk.address, chunk.data, env => bee.uploadChunk(env, chunk))
  }

  // 2. A 17-chunk data tree from bee-js's MerkleTree (16 leaves + root), stamped as bee-js's own
  //    client-side stamping test does, then uploaded concurrently (as an app pushing a file would).
  step = 'uploadChunk(MerkleTree)'
  const treeData = new Uint8Array(randomBytes(16 * 4096))
  const treeChunks = []
  const tree = new MerkleTree(async chunk => {
    treeChunks.push(chunk)
  })
  await tree.append(treeData)
  const root = await tree.finalize()
  await Promise.all(
    treeChunks.map(chunk => {
      const data = chunk.build()
      return uploadStamped('tree', chunk.hash(), data, env => bee.uploadChunk(env, data))
    }),
  )
  results.treeRoot = hex(root.hash())
  results.treeChunks = treeChunks.length

  // Upload options bee-js turns into headers (swarm-deferred-upload, swarm-pin) must not get in the way.
  step = 'uploadChunk(options)'
  const optChunk = bee.makeContentAddressedChunk(new Uint8Array(randomBytes(80)))
  await uploadStamped('cac-options', optChunk.address, optChunk.data, env =>
    bee.uploadChunk(env, optChunk, { deferred: true, pin: false }),
  )

  // The same chunk again: once with a fresh stamp (a new slot), once with the very same stamp.
  step = 'uploadChunk(again)'
  const again = bee.makeContentAddressedChunk(new Uint8Array(randomBytes(64)))
  await uploadStamped('cac-again', again.address, again.data, env => bee.uploadChunk(env, again))
  const fresh = stamper.stamp(stampable(again.address))
  results.reuploadFreshStamp = (await bee.uploadChunk(fresh, again)).reference.toHex()
  results.reuploadSameStamp = (await bee.uploadChunk(fresh, again)).reference.toHex()
  check(results.reuploadFreshStamp === again.address.toHex(), 're-upload with a fresh stamp')
  check(results.reuploadSameStamp === again.address.toHex(), 're-upload with the same stamp')

  // 3. SOCs through the SOC writer: POST /soc/{owner}/{id}?sig=..., stamped for the SOC address;
  //    read back through the SOC reader (GET /chunks/{SOC address}, owner and signature checked by bee-js).
  step = 'makeSOCWriter.upload'
  const writer = bee.makeSOCWriter(args.key)
  check(writer.owner.toHex() === signerAddress, 'SOC writer owner is the signer')
  results.soc = []
  for (const size of [300, 4096]) {
    step = `makeSOCWriter.upload(${size})`
    const socId = new Identifier(new Uint8Array(randomBytes(32)))
    const socPayload = new Uint8Array(randomBytes(size))
    const socAddress = bee.calculateSingleOwnerChunkAddress(socId, writer.owner)
    await uploadStamped(`soc-writer-${size}`, socAddress, null, env => writer.upload(env, socId, socPayload))

    step = `makeSOCReader.download(${size})`
    const socBack = await bee.makeSOCReader(signerAddress).download(socId)
    check(sameBytes(socBack.payload.toUint8Array(), socPayload), 'SOC payload read back')
    check(socBack.owner.toHex() === signerAddress, 'SOC owner read back')
    check(socBack.address.toHex() === socAddress.toHex(), 'SOC address read back')
    uploaded[uploaded.length - 1].data = socBack.data
    results.soc.push({ address: socAddress.toHex(), identifier: socId.toHex(), owner: writer.owner.toHex(), size })
  }

  // 4. SOCs sent to POST /chunks as id|sig|span|payload (uploadChunk with a SingleOwnerChunk): one short
  //    enough to be read as a CAC too (the stamp decides), one of the largest size (4201 bytes).
  const socsViaChunks = []
  for (const size of [500, 4096]) {
    step = `uploadChunk(SOC ${size})`
    const inner = bee.makeContentAddressedChunk(new Uint8Array(randomBytes(size)))
    const soc = inner.toSingleOwnerChunk(new Identifier(new Uint8Array(randomBytes(32))), args.key)
    await uploadStamped(`soc-chunks-${size}`, soc.address, soc.data, env => bee.uploadChunk(env, soc))
    socsViaChunks.push(soc)
  }

  // 4b. A feed update at an explicit index (no /feeds lookup): the feed writer uploads a SOC through
  //     POST /soc, the feed reader fetches it with GET /chunks. Stamped for the feed update's SOC address.
  step = 'makeFeedWriter.uploadPayload'
  const topic = Topic.fromString(`chunkstore bee-js ${hex(new Uint8Array(randomBytes(8)))}`)
  const feedIndex = FeedIndex.fromBigInt(0n)
  const feedId = new Identifier(Bytes.keccak256(Buffer.concat([topic.toUint8Array(), feedIndex.toUint8Array()])))
  const feedAddress = bee.calculateSingleOwnerChunkAddress(feedId, writer.owner)
  const feedPayload = new Uint8Array(randomBytes(200))
  const feedWriter = bee.makeFeedWriter(topic, args.key)
  await uploadStamped('feed-update', feedAddress, null, env => feedWriter.uploadPayload(env, feedPayload, { index: 0 }))
  step = 'makeFeedReader.downloadPayload'
  const feedBack = await bee.makeFeedReader(topic, signerAddress).downloadPayload({ index: 0 })
  check(sameBytes(feedBack.payload.toUint8Array(), feedPayload), 'feed payload read back')
  uploaded[uploaded.length - 1].data = await bee.downloadChunk(feedAddress)
  results.feed = { topic: topic.toHex(), address: feedAddress.toHex(), nextIndex: feedBack.feedIndexNext.toHex() }

  // 5. Everything back, byte for byte.
  step = 'downloadChunk'
  for (const u of uploaded) {
    const got = await bee.downloadChunk(u.address)
    check(got instanceof Uint8Array, `${u.kind}: downloadChunk returns a Uint8Array`)
    check(sameBytes(got, u.data), `${u.kind} ${u.address}: downloaded bytes equal uploaded (${got.length} vs ${u.data.length})`)
  }
  // Retrieval options become swarm-* request headers; a store answers regardless.
  const withOptions = await bee.downloadChunk(uploaded[0].address, { timeoutMs: 5000, redundancyStrategy: 1, fallback: true })
  check(sameBytes(withOptions, uploaded[0].data), 'downloadChunk with retrieval options')
  for (const soc of socsViaChunks) {
    const back = bee.unmarshalSingleOwnerChunk(await bee.downloadChunk(soc.address), soc.address)
    check(back.owner.toHex() === signerAddress, 'SOC via /chunks: owner recovered by bee-js')
  }
  results.uploaded = uploaded.map(u => ({ kind: u.kind, address: u.address, size: u.data.length, stamp: u.stamp }))

  // 6. Errors come back as BeeResponseError carrying the daemon's status and JSON body.
  step = 'errors'
  results.errors = {}
  const missing = hex(new Uint8Array(randomBytes(32)))
  try {
    await bee.downloadChunk(missing)
    throw new Error('downloadChunk of a missing chunk succeeded')
  } catch (e) {
    check(e instanceof BeeResponseError, `missing chunk: BeeResponseError, got ${e}`)
    results.errors.missingChunk = describeError(e)
  }
  // A stamp signed by another key (a valid signature, but not by the batch owner).
  const stranger = Stamper.fromBlank(new Uint8Array(randomBytes(32)), batchId, depth)
  const badChunk = bee.makeContentAddressedChunk(new Uint8Array(randomBytes(64)))
  try {
    await bee.uploadChunk(stranger.stamp(stampable(badChunk.address)), badChunk)
    throw new Error('upload with a stranger-signed stamp succeeded')
  } catch (e) {
    check(e instanceof BeeResponseError, `stranger stamp: BeeResponseError, got ${e}`)
    results.errors.strangerStamp = describeError(e)
  }
  // A stamp of an unknown batch.
  const unknown = Stamper.fromBlank(args.key, new Uint8Array(randomBytes(32)), depth)
  try {
    await bee.uploadChunk(unknown.stamp(stampable(badChunk.address)), badChunk)
    throw new Error('upload with an unknown batch succeeded')
  } catch (e) {
    check(e instanceof BeeResponseError, `unknown batch: BeeResponseError, got ${e}`)
    results.errors.unknownBatch = describeError(e)
  }

  // A plain batch ID (swarm-postage-batch-id) asks the node to stamp; this batch belongs to the bee-js key, not the node.
  try {
    await bee.uploadChunk(batchId, badChunk)
    throw new Error('upload with a batch ID only succeeded')
  } catch (e) {
    check(e instanceof BeeResponseError, `batch ID only: BeeResponseError, got ${e}`)
    results.errors.batchIdOnly = describeError(e)
  }

  step = 'getStatus(after)'
  results.statusAfter = plain(await bee.getStatus())
  results.reserveStateAfter = plain(await bee.getReserveState())

  if (!args['no-rchash']) {
    step = 'rchash'
    const anchor = results.statusAfter.overlay
    results.rchashSeconds = await bee.rchash(0, anchor, anchor)
    check(typeof results.rchashSeconds === 'number', 'rchash returns a number')
  }

  results.ok = true
}

try {
  await main()
  process.stdout.write(JSON.stringify(results) + '\n')
} catch (e) {
  process.stdout.write(JSON.stringify({ ...plain(results), ok: false, step, error: describeError(e), stack: e?.stack }) + '\n')
  process.exitCode = 1
}
