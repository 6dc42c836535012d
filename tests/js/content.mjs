#!/usr/bin/env node
// Drives a chunkstore daemon started with --dev through bee-js 12's content calls: node identity,
// buying and reading the node's own postage batches, /bytes and /bzz uploads and downloads (plain,
// encrypted, single files, folders), MantarayNode built here and read back there and the other way.
//
//   node tests/js/content.mjs --url http://127.0.0.1:PORT --dir <empty scratch dir>
//
// On success prints one JSON line of results and exits 0; on the first failure prints
// {"ok": false, "step", "error", ...} as one JSON line and exits 1. The Python test
// (tests/api/test_bee_js_content.py) checks the results again with this project's own code.

import { randomBytes } from 'node:crypto'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    dir: { type: 'string' },
    client: { type: 'string', default: '@ethersphere/bee-js' },
  },
})
for (const k of ['url', 'dir']) {
  if (!args[k]) {
    console.error(`missing --${k}`)
    process.exit(2)
  }
}

const { Bee, MantarayNode, NULL_ADDRESS, BeeResponseError, Size, Duration } = await import(args.client)

const results = { ok: false }
let step = 'setup'

function check(cond, message) {
  if (!cond) throw new Error(`check failed: ${message}`)
}

function hex(x) {
  if (typeof x === 'string') return x.toLowerCase().replace(/^0x/, '')
  if (x instanceof Uint8Array) return Buffer.from(x).toString('hex')
  if (x && typeof x.toHex === 'function') return x.toHex()
  throw new Error(`not hex-able: ${x}`)
}

function sameBytes(a, b) {
  return Buffer.from(a).equals(Buffer.from(b))
}

function describeError(e) {
  const out = { name: e?.name, message: String(e?.message ?? e) }
  if (e instanceof BeeResponseError || e?.status !== undefined) {
    out.status = e.status
    out.responseBody = e.responseBody
  }
  if (e?.issues) out.issues = e.issues
  return out
}

function plainStamp(b) {
  return {
    batchID: hex(b.batchID),
    utilization: b.utilization,
    usable: b.usable,
    label: b.label,
    depth: b.depth,
    bucketDepth: b.bucketDepth,
    immutableFlag: b.immutableFlag,
    amount: String(b.amount ?? ''),
    blockNumber: b.blockNumber,
  }
}

async function main() {
  const bee = new Bee(args.url)

  // 1. Node identity and the chain-facing reads, parsed by bee-js's own schemas.
  step = 'getNodeAddresses'
  const addresses = await bee.getNodeAddresses()
  results.addresses = {
    overlay: hex(addresses.overlay),
    ethereum: hex(addresses.ethereum),
    publicKey: addresses.publicKey.toCompressedHex(),
    underlay: addresses.underlay,
  }
  step = 'getNodeInfo'
  results.nodeInfo = await bee.getNodeInfo()
  step = 'getTopology'
  const topology = await bee.getTopology()
  results.topology = { baseAddr: topology.baseAddr, depth: topology.depth, bins: Object.keys(topology.bins).length }
  step = 'getWalletBalance'
  const wallet = await bee.getWalletBalance()
  results.wallet = { bzz: wallet.bzzBalance.toPLURString(), walletAddress: hex(wallet.walletAddress) }
  step = 'getStake'
  results.stake = (await bee.getStake()).toPLURString()
  results.withdrawable = (await bee.getWithdrawableStake()).toPLURString()

  // 2. Buying a batch in dev mode: bee-js checks the price, posts, then waits until the batch is usable.
  step = 'createPostageBatch'
  const chain = await bee.getChainState()
  const amount = BigInt(chain.currentPrice) * 17280n + 1n
  const batchId = await bee.createPostageBatch(amount.toString(), 20, { label: 'bee-js content', waitForUsable: true })
  results.batchId = hex(batchId)
  results.amount = amount.toString()

  step = 'getAllPostageBatch'
  const all = await bee.getAllPostageBatch()
  results.stamps = all.map(plainStamp)
  step = 'getPostageBatch'
  results.stamp = plainStamp(await bee.getPostageBatch(batchId))
  step = 'getPostageBatchBuckets'
  const buckets = await bee.getPostageBatchBuckets(batchId)
  results.buckets = { depth: buckets.depth, bucketDepth: buckets.bucketDepth, upperBound: buckets.bucketUpperBound,
                      count: buckets.buckets.length }

  // 3. /bytes: plain (the server's default redundancy) and encrypted, read back and probed.
  step = 'uploadData'
  const data = new Uint8Array(randomBytes(600_000))
  const uploaded = await bee.uploadData(batchId, data)
  results.dataHex = Buffer.from(data.subarray(0, 64)).toString('hex')
  results.dataSize = data.length
  writeFileSync(join(args.dir, 'data.bin'), data)
  results.dataReference = uploaded.reference.toHex()
  step = 'downloadData'
  check(sameBytes((await bee.downloadData(uploaded.reference)).toUint8Array(), data), 'downloadData equals uploadData')
  step = 'probeData'
  results.probe = (await bee.probeData(uploaded.reference)).contentLength
  step = 'uploadData(level 0)'
  const plain = await bee.uploadData(batchId, data, { redundancyLevel: 0 })
  results.plainReference = plain.reference.toHex()

  step = 'uploadData(encrypt)'
  const secret = new Uint8Array(randomBytes(100_000))
  const encrypted = await bee.uploadData(batchId, secret, { encrypt: true })
  results.encryptedReference = encrypted.reference.toHex()
  step = 'downloadData(encrypted)'
  check(sameBytes((await bee.downloadData(encrypted.reference)).toUint8Array(), secret), 'encrypted data back')

  // 4. A single file keeps its name and content type.
  step = 'uploadFile'
  const text = new TextEncoder().encode('hello from bee-js, as a file')
  const file = await bee.uploadFile(batchId, text, 'greeting.txt', { contentType: 'text/plain; charset=utf-8' })
  results.fileReference = file.reference.toHex()
  step = 'downloadFile'
  const fileBack = await bee.downloadFile(file.reference)
  check(sameBytes(fileBack.data.toUint8Array(), text), 'file data back')
  results.fileBack = { name: fileBack.name, contentType: fileBack.contentType }

  // 5. A folder (a tar on the wire), then one file of it by path.
  step = 'uploadFilesFromDirectory'
  const folder = join(args.dir, 'site')
  mkdirSync(join(folder, 'sub'), { recursive: true })
  writeFileSync(join(folder, 'index.html'), '<h1>site</h1>')
  writeFileSync(join(folder, 'sub', 'a.txt'), 'file a in sub')
  writeFileSync(join(folder, 'b.bin'), randomBytes(9000))
  const site = await bee.uploadFilesFromDirectory(batchId, folder, { indexDocument: 'index.html' })
  results.siteReference = site.reference.toHex()
  step = 'downloadFile(sub/a.txt)'
  const a = await bee.downloadFile(site.reference, 'sub/a.txt')
  check(new TextDecoder().decode(a.data.toUint8Array()) === 'file a in sub', 'sub/a.txt back')
  results.subFile = { name: a.name, contentType: a.contentType }
  step = 'downloadFile(index)'
  const index = await bee.downloadFile(site.reference)
  check(new TextDecoder().decode(index.data.toUint8Array()) === '<h1>site</h1>', 'index document served at /')

  // 6. The daemon's folder manifest read by bee-js's MantarayNode.
  step = 'MantarayNode.unmarshal(daemon manifest)'
  const siteNode = await MantarayNode.unmarshal(bee, site.reference)
  await siteNode.loadRecursively(bee)
  results.siteMap = siteNode.collectAndMap()
  results.siteMetadata = {}
  for (const node of siteNode.collect()) {
    results.siteMetadata[node.fullPathString] = node.metadata
  }
  results.siteDocs = siteNode.getDocsMetadata()

  // 7. A manifest bee-js builds and saves through /bytes resolves in the daemon's /bzz.
  step = 'MantarayNode.saveRecursively'
  const node = new MantarayNode()
  const forks = {}
  for (const [path, body, type] of [['docs/readme.md', '# readme', 'text/markdown'], ['img/logo.svg', '<svg/>', 'image/svg+xml'], ['docs/deep/x.json', '{"x":1}', 'application/json']]) {
    const ref = (await bee.uploadData(batchId, new TextEncoder().encode(body))).reference
    node.addFork(path, ref, { 'Content-Type': type, Filename: path.split('/').pop() })
    forks[path] = { reference: ref.toHex(), body, type }
  }
  node.addFork('/', NULL_ADDRESS, { 'website-index-document': 'docs/readme.md' })
  const saved = await node.saveRecursively(bee, batchId)
  results.mantarayReference = saved.reference.toHex()
  results.mantarayForks = forks
  step = 'downloadFile(bee-js manifest)'
  for (const [path, f] of Object.entries(forks)) {
    const got = await bee.downloadFile(saved.reference, path)
    check(new TextDecoder().decode(got.data.toUint8Array()) === f.body, `${path} through the bee-js manifest`)
    check(got.contentType === f.type, `${path} content type ${got.contentType}`)
  }
  step = 'MantarayNode round trip'
  const back = await MantarayNode.unmarshal(bee, saved.reference)
  await back.loadRecursively(bee)
  results.mantarayMap = back.collectAndMap()

  // 8. streamDirectory: chunks one by one through POST /chunks with the batch id, the manifest client-side.
  step = 'streamDirectory'
  const streamed = await bee.streamDirectory(batchId, folder)
  results.streamedReference = streamed.reference.toHex()
  const streamedA = await bee.downloadFile(streamed.reference, 'sub/a.txt')
  check(new TextDecoder().decode(streamedA.data.toUint8Array()) === 'file a in sub', 'streamed sub/a.txt back')

  // 9. Dev-mode batch changes, and the batch's use shows in /stamps.
  step = 'topUpBatch'
  await bee.topUpBatch(batchId, '1000')
  step = 'diluteBatch'
  await bee.diluteBatch(batchId, 21)
  results.stampAfter = plainStamp(await bee.getPostageBatch(batchId))

  // 10. Errors as BeeResponseError with the daemon's status.
  step = 'errors'
  results.errors = {}
  try {
    await bee.downloadData('00'.repeat(32))
    throw new Error('downloadData of a missing reference succeeded')
  } catch (e) {
    check(e instanceof BeeResponseError, `missing data: BeeResponseError, got ${e}`)
    results.errors.missingData = describeError(e)
  }
  try {
    await bee.downloadFile(site.reference, 'no/such/file.txt')
    throw new Error('downloadFile of a missing path succeeded')
  } catch (e) {
    results.errors.missingPath = describeError(e)
  }
  try {
    await bee.uploadData('11'.repeat(32), new Uint8Array(10))
    throw new Error('upload with an unknown batch succeeded')
  } catch (e) {
    results.errors.unknownBatch = describeError(e)
  }
  results.ok = true
}

try {
  await main()
  process.stdout.write(JSON.stringify(results) + '\n')
} catch (e) {
  process.stdout.write(JSON.stringify({ ...results, ok: false, step, error: describeError(e), stack: e?.stack }) + '\n')
  process.exitCode = 1
}
