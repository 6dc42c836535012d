#!/usr/bin/env node
// Drives a chunkstore daemon in --dev mode with bee-js 12 through the node-owned-stamp surface:
// node identity, a bought batch, feeds without explicit indexes, feed manifests, SOC reads, a
// streamed directory, tags, pins and retrievability.
//
//   node tests/js/drive_node.mjs --url http://127.0.0.1:PORT --key <64 hex> --dir <folder to stream>
//
// --key signs feed updates and SOCs (the feed owner); the node stamps every upload with the batch
// this script buys (bee.createPostageBatch). On success prints one JSON line of results and exits 0;
// on the first failure prints {"ok": false, "step", "error", ...} as one JSON line and exits 1. Either
// way `calls` in it lists every client call made, with what it returned or threw (the transcript).

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

const results = { ok: false, client: { name: clientPackage.name, version: clientPackage.version }, calls: [] }
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

// Every client call goes through `call`: it names the step a failure is reported at and keeps a
// transcript (results.calls: the call, whether it returned or threw, and what it gave) for the report.
function shown(value) {
  const json = JSON.stringify(plain(value)) ?? 'undefined'
  return json.length > 400 ? `${json.slice(0, 400)}...` : json
}

async function call(label, fn, show = shown) {
  step = label
  try {
    const value = await fn()
    results.calls.push({ call: label, ok: true, returned: show(value) })
    return value
  } catch (e) {
    results.calls.push({ call: label, ok: false, error: describeError(e) })
    throw e
  }
}

async function expectError(label, fn) {
  step = label
  try {
    await fn()
  } catch (e) {
    check(e instanceof BeeResponseError, `${label}: BeeResponseError, got ${e}`)
    const error = describeError(e)
    results.calls.push({ call: label, ok: false, expected: true, error })
    return error
  }
  throw new Error(`${label} succeeded`)
}

const same = (a, b) => Buffer.from(a.toUint8Array()).equals(Buffer.from(b.toUint8Array()))
const update = (u) => `index ${u.feedIndex.toHex()}, next ${u.feedIndexNext.toHex()}, payload ${u.payload.length} bytes`

async function main() {
  const bee = new Bee(args.url)
  const owner = new Bee(args.url, { signer: args.key }).signer.publicKey().address()
  results.owner = owner.toHex()

  results.nodeInfo = plain(await call('bee.getNodeInfo()', () => bee.getNodeInfo()))
  results.topology = plain(await call('bee.getTopology()', () => bee.getTopology()))
  results.addresses = plain(await call('bee.getNodeAddresses()', () => bee.getNodeAddresses()))

  const batchId = await call(`bee.createPostageBatch('${args.amount}', ${args.depth})`, () =>
    bee.createPostageBatch(args.amount, Number(args.depth)),
  )
  results.batchId = batchId.toHex()

  // Feed updates with references (v1 payloads), no explicit index: the writer asks GET /feeds for the next.
  // The references are single-file /bzz uploads, so that the feed manifest below resolves to a file.
  const topic = Topic.fromString(`chunkstore feeds ${randomBytes(6).toString('hex')}`)
  results.topic = topic.toHex()
  const writer = bee.makeFeedWriter(topic, args.key)
  const first = await call("bee.uploadFile(batch, 'first update', 'first.txt')", () =>
    bee.uploadFile(batchId, 'first update', 'first.txt', { contentType: 'text/plain' }),
  )
  const second = await call("bee.uploadFile(batch, 'second update', 'second.txt')", () =>
    bee.uploadFile(batchId, 'second update', 'second.txt', { contentType: 'text/plain' }),
  )
  results.feedReferences = [first.reference.toHex(), second.reference.toHex()]
  results.feedUploads = []
  for (const [name, ref] of [['first', first.reference], ['second', second.reference]]) {
    const r = await call(`makeFeedWriter(topic, key).upload(batch, ${name} reference) [no index]`, () =>
      writer.upload(batchId, ref),
    )
    results.feedUploads.push(r.reference.toHex())
  }
  const reader = bee.makeFeedReader(topic, owner)
  const latest = await call('makeFeedReader(topic, owner).download()', () => reader.download(), update)
  const secondBytes = await bee.downloadData(second.reference)
  results.feedLatest = {
    payloadIsSecond: same(latest.payload, secondBytes),
    index: latest.feedIndex.toHex(),
    next: latest.feedIndexNext.toHex(),
  }
  const latestRef = await call('makeFeedReader(topic, owner).downloadReference()', () => reader.downloadReference())
  results.feedLatestReference = latestRef.reference.toHex()
  const fetched = await call('bee.fetchLatestFeedUpdate(topic, owner)', () => bee.fetchLatestFeedUpdate(topic, owner), update)
  results.fetchLatest = {
    payloadIsSecond: same(fetched.payload, secondBytes),
    index: fetched.feedIndex.toHex(),
    next: fetched.feedIndexNext.toHex(),
  }

  // Payload updates (v2), no explicit index, on a second topic.
  const topic2 = Topic.fromString(`chunkstore payload feed ${randomBytes(6).toString('hex')}`)
  const writer2 = bee.makeFeedWriter(topic2, args.key)
  await call("makeFeedWriter(topic2, key).uploadPayload(batch, 'payload one') [no index]", () =>
    writer2.uploadPayload(batchId, 'payload one'),
  )
  await call("makeFeedWriter(topic2, key).uploadPayload(batch, 'payload two') [no index]", () =>
    writer2.uploadPayload(batchId, 'payload two'),
  )
  const latest2 = await call('makeFeedReader(topic2, owner).downloadPayload()', () =>
    bee.makeFeedReader(topic2, owner).downloadPayload(),
    (u) => `${update(u)}: '${text(u.payload)}'`,
  )
  results.payloadLatest = { payload: text(latest2.payload), index: latest2.feedIndex.toHex(), next: latest2.feedIndexNext.toHex() }

  const manifest = await call('bee.createFeedManifest(batch, topic, owner)', () => bee.createFeedManifest(batchId, topic, owner))
  results.feedManifest = manifest.toHex()
  const viaManifest = await call('bee.downloadFile(feed manifest)', () => bee.downloadFile(manifest), (f) =>
    `'${text(f.data)}' (${f.contentType ?? 'no content type'})`,
  )
  results.feedManifestContent = text(viaManifest.data)

  results.errors = {}
  results.errors.noUpdates = await expectError("bee.fetchLatestFeedUpdate(Topic.fromString('never written'), owner)", () =>
    bee.fetchLatestFeedUpdate(Topic.fromString('never written'), owner),
  )

  // A SOC written by the SOC writer, read by the SOC reader.
  const socId = new Identifier(new Uint8Array(randomBytes(32)))
  const socPayload = new Uint8Array(randomBytes(500))
  await call('makeSOCWriter(key).upload(batch, id, 500 random bytes)', () =>
    bee.makeSOCWriter(args.key).upload(batchId, socId, socPayload),
  )
  const socBack = await call('makeSOCReader(owner).download(id)', () => bee.makeSOCReader(owner).download(socId), (soc) =>
    `owner ${soc.owner.toHex()}, payload ${soc.payload.length} bytes, equal to the written: ${Buffer.from(soc.payload.toUint8Array()).equals(Buffer.from(socPayload))}`,
  )
  check(Buffer.from(socBack.payload.toUint8Array()).equals(Buffer.from(socPayload)), 'SOC payload read back')
  results.soc = { owner: socBack.owner.toHex(), identifier: socId.toHex(), size: socPayload.length }

  // PSS with no peers: the node is the closest to any target, so its own subscribers get the message.
  const pssTopic = Topic.fromString('drive-node pss')
  const received = bee.pssReceive(pssTopic, 20000)
  await new Promise((resolve) => setTimeout(resolve, 300)) // the subscription is open before the send
  await call("bee.pssSend(batch, topic, 'ab', 'hello over pss')", () => bee.pssSend(batchId, pssTopic, 'ab', 'hello over pss'))
  results.pssReceived = await call('bee.pssReceive(topic, 20000)', () => received, (m) => m.toUtf8())
  results.pssReceived = results.pssReceived.toUtf8()

  // GSOC: a signer mined for the node's neighbourhood (proximity 4 keeps the mining short), a subscription
  // on its SOC address, and a message sent as a SOC of that address (bee-js' own end-to-end GSOC flow).
  const gsocId = new Identifier(new Uint8Array(randomBytes(32)))
  const { overlay } = await bee.getNodeAddresses()
  const gsocSigner = await call('bee.gsocMine(overlay, id, 4)', () => bee.gsocMine(overlay, gsocId, 4), () => 'a signer')
  let subscription
  const heard = new Promise((resolve, reject) => {
    subscription = bee.gsocSubscribe(gsocSigner.publicKey().address(), gsocId, {
      onMessage: (message) => resolve(message.toUtf8()),
      onError: reject,
      onClose: () => undefined,
    })
    setTimeout(() => {
      subscription.cancel() // an open socket would keep node running past the failure
      reject(new Error('no GSOC message within 20 s'))
    }, 20000).unref()
  })
  await new Promise((resolve) => setTimeout(resolve, 300)) // the subscription is open before the send
  await call("bee.gsocSend(batch, signer, id, 'hello over gsoc')", () =>
    bee.gsocSend(batchId, gsocSigner, gsocId, 'hello over gsoc'))
  results.gsocReceived = await call('gsocSubscribe(...).onMessage', () => heard)
  subscription.cancel()

  // A stamp the node signs for a chunk the client uploads itself (bee-js' documented envelope flow).
  const enveloped = bee.makeContentAddressedChunk(new Uint8Array(randomBytes(300)))
  const envelope = await call('bee.createEnvelope(batch, chunk.address)', () =>
    bee.createEnvelope(batchId, enveloped.address), plain)
  const envelopedUpload = await call('bee.uploadChunk(envelope, chunk)', () => bee.uploadChunk(envelope, enveloped))
  const envelopedBack = await call('bee.downloadChunk(enveloped address)', () => bee.downloadChunk(enveloped.address),
    (c) => `${c.length} bytes`)
  check(Buffer.from(envelopedBack).equals(Buffer.from(enveloped.data)), 'enveloped chunk read back')
  results.envelope = { ...plain(envelope), address: enveloped.address.toHex(), reference: envelopedUpload.reference.toHex() }

  const streamed = await call(`bee.streamDirectory(batch, '<folder: index.html, css/a.css>')`, () =>
    bee.streamDirectory(batchId, args.dir),
  )
  results.streamed = streamed.reference.toHex()
  const index = await call('bee.downloadFile(streamed reference)', () => bee.downloadFile(streamed.reference), (f) =>
    `'${text(f.data)}'`,
  )
  results.streamedIndex = text(index.data)

  // Tags and pins.
  const tag = await call('bee.createTag()', () => bee.createTag())
  results.tagCreated = plain(tag)
  const tagged = new Uint8Array(randomBytes(3 * 4096 + 10))
  const taggedUpload = await call(`bee.uploadData(batch, ${tagged.length} random bytes, { tag: ${tag.uid}, deferred: true })`, () =>
    bee.uploadData(batchId, tagged, { tag: tag.uid, deferred: true }),
  )
  results.tagged = { reference: taggedUpload.reference.toHex(), size: tagged.length }
  results.tagAfter = plain(await call(`bee.retrieveTag(${tag.uid})`, () => bee.retrieveTag(tag.uid)))

  await call('bee.pin(tagged reference)', () => bee.pin(taggedUpload.reference))
  results.pins = plain(await call('bee.getAllPins()', () => bee.getAllPins()))
  results.pin = plain(await call('bee.getPin(tagged reference)', () => bee.getPin(taggedUpload.reference)))
  results.errors.unknownPin = await expectError('bee.getPin(<random reference>)', () =>
    bee.getPin(randomBytes(32).toString('hex')),
  )
  results.errors.unknownTag = await expectError('bee.retrieveTag(987654321)', () => bee.retrieveTag(987654321))

  // no chain: staking and wallet withdrawals get the reference's no-chain answers, not a bare 404/405
  results.errors.depositStake = await expectError("bee.depositStake('100000000000000000')", () =>
    bee.depositStake('100000000000000000'),
  )
  results.errors.withdrawSurplusStake = await expectError('bee.withdrawSurplusStake()', () => bee.withdrawSurplusStake())
  results.errors.withdrawBZZ = await expectError("bee.withdrawBZZToExternalWallet('1', <address>)", () =>
    bee.withdrawBZZToExternalWallet('1', '0x' + '33'.repeat(20)),
  )
  // a download through an ACT whose history is nowhere fails in the controller, as on Bee (500), never the raw content
  const publisher = new Bee(args.url, { signer: args.key }).signer.publicKey()
  results.errors.actDownload = await expectError('bee.downloadData(tagged reference, { actPublisher, actHistoryAddress })', () =>
    bee.downloadData(taggedUpload.reference, { actPublisher: publisher, actHistoryAddress: randomBytes(32).toString('hex') }),
  )

  results.retrievable = await call('bee.isReferenceRetrievable(tagged reference)', () =>
    bee.isReferenceRetrievable(taggedUpload.reference),
  )

  results.ok = true
}

try {
  await main()
  process.stdout.write(JSON.stringify(results) + '\n')
} catch (e) {
  process.stdout.write(JSON.stringify({ ...plain(results), ok: false, step, error: describeError(e), stack: e?.stack }) + '\n')
  process.exitCode = 1
}
