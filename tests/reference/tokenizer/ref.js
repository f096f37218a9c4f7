#!/usr/bin/env node
// The reference side of tokdyn's tokenizer tests and benchmark: Hugging Face's tokenizers library
// (Rust crate 0.22.2) through its Node binding @anush008/tokenizers, and GPT-2's original encoder
// (gpt-3-encoder). The packages are found in TOKDYN_NPM (tests/scripts/tokenizer_refs.sh DEST).
//
//   node ref.js encode TOKENIZER_JSON IN.jsonl OUT.jsonl [--no-special]
//       IN.jsonl: one JSON string per line. OUT.jsonl: one {"ids", "pieces", "decoded"} per line, as
//       `tokdyn tokenize PATH --jsonl IN --json`: pieces = the library's tokens (getTokens()), decoded =
//       decode(ids, skip_special_tokens = false). --no-special: addSpecialTokens = false. Where the
//       tokens are not all the vocabulary strings of the ids (an added token's token is the text it
//       matched: after normalisation, with what lstrip / rstrip took), the line also has "vocab": the
//       vocabulary strings (idToToken); where decoded != the text, "lossy": true.
//       If the library refuses the file, OUT.jsonl holds one line {"error": "..."} and the exit code is 3.
//   node ref.js batch JOBS.json
//       JOBS.json: [{"tokenizer", "input", "output", "no_special"}, ...]: `encode` for each job in one
//       process, in order (a job whose file the library refuses gets its {"error"} line; the others go
//       on; a job that crashes the process has no output file, and the jobs after it are not run).
//   node ref.js throughput TOKENIZER_JSON IN.jsonl [--batch N]
//       Encodes every text once (addSpecialTokens = true) on one thread, each encode awaited in turn,
//       and prints "ref: encoded N texts, B bytes, K tokens in S s: X MB/s (one thread; ...)" (MB = 1e6
//       bytes of UTF-8; loading the file is not timed), with the process's CPU time over that wall time
//       ("cpu/wall R": about 1 when one thread did the work; each call hops to libuv's pool and back).
//       --batch N: encodeBatch calls of N texts instead (the library's own loop, serial with
//       TOKENIZERS_PARALLELISM=false), which spares the per-call cost of the binding.
//   node ref.js gpt3 IN.jsonl OUT.jsonl
//       gpt-3-encoder's ids, one {"ids"} per line.
'use strict';
// One thread: the binding runs each task on libuv's pool and batches on rayon's; both are pinned
// before the native module is loaded.
process.env.RAYON_NUM_THREADS = '1';
process.env.TOKENIZERS_PARALLELISM = 'false';
process.env.UV_THREADPOOL_SIZE = '1';

const fs = require('fs');
const path = require('path');
const {createRequire} = require('module');

function npmRequire(name) {
  const dirs = [];
  if (process.env.TOKDYN_NPM) dirs.push(path.resolve(process.env.TOKDYN_NPM));
  dirs.push(__dirname);
  for (const d of dirs) {
    try {
      return createRequire(path.join(d, 'node_modules', 'noop.js'))(name);
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  const e = new Error(`cannot find ${name}: set TOKDYN_NPM to the folder tests/scripts/tokenizer_refs.sh installed into`);
  e.plain = true;
  throw e;
}

function readTexts(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines.map((l, i) => {
    const s = JSON.parse(l);
    if (typeof s !== 'string') throw new Error(`${file}:${i + 1}: not a JSON string`);
    return s;
  });
}

const CHUNK = 512;  // texts per encodeBatch / decodeBatch call (serial: TOKENIZERS_PARALLELISM=false)

async function encodeFile(Tokenizer, tokFile, inFile, outFile, noSpecial) {
  let t;
  try {
    t = Tokenizer.fromFile(tokFile);
  } catch (e) {
    fs.writeFileSync(outFile, JSON.stringify({error: String(e.message || e)}) + '\n');
    return false;
  }
  // The vocabulary string of an id (idToToken), cached.
  const vocab = new Map();
  const vocabString = id => {
    let v = vocab.get(id);
    if (v === undefined) {
      v = t.idToToken(id);
      vocab.set(id, v);
    }
    return v;
  };
  const texts = readTexts(inFile);
  // Written under a temporary name, renamed when complete: a job that crashes the process (a panic
  // inside the library aborts it) leaves no OUT.jsonl.
  const part = outFile + '.part';
  const fd = fs.openSync(part, 'w');
  try {
    for (let i = 0; i < texts.length; i += CHUNK) {
      const chunk = texts.slice(i, i + CHUNK);
      let encs;
      try {
        encs = await t.encodeBatch(chunk, {addSpecialTokens: !noSpecial});
      } catch (e) {
        // One failing text fails the batch: redo it one text at a time to attribute the error.
        encs = [];
        for (const s of chunk) {
          try {
            encs.push(await t.encode(s, null, {addSpecialTokens: !noSpecial}));
          } catch (e2) {
            encs.push({error: String(e2.message || e2)});
          }
        }
      }
      const ids = encs.map(e => (e.error ? [] : e.getIds()));
      const decoded = await t.decodeBatch(ids, false);
      const lines = encs.map((e, j) => {
        if (e.error) return JSON.stringify({error: e.error});
        // Keys in the order of tokdyn's output, so that equal results are equal lines.
        const o = {decoded: decoded[j], ids: ids[j], pieces: e.getTokens()};
        const v = ids[j].map(id => vocabString(id));
        if (v.some((x, k) => x !== o.pieces[k])) o.vocab = v;
        if (decoded[j] !== chunk[j]) o.lossy = true;
        return JSON.stringify(o);
      });
      fs.writeSync(fd, lines.join('\n') + '\n');
    }
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(part, outFile);
  return true;
}

async function throughput(Tokenizer, tokFile, inFile, batch) {
  const t = Tokenizer.fromFile(tokFile);
  const texts = readTexts(inFile);
  let bytes = 0;
  for (const s of texts) bytes += Buffer.byteLength(s, 'utf8');
  await t.encode('warm up', null, {addSpecialTokens: true});
  let tokens = 0;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  if (batch > 0) {
    for (let i = 0; i < texts.length; i += batch) {
      for (const e of await t.encodeBatch(texts.slice(i, i + batch), {addSpecialTokens: true})) tokens += e.getLength();
    }
  } else {
    for (const s of texts) {
      const e = await t.encode(s, null, {addSpecialTokens: true});
      tokens += e.getLength();
    }
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const cpuSecs = (cpu.user + cpu.system) / 1e6;
  const how = batch > 0 ? `encodeBatch of ${batch}` : 'one encode per text';
  console.log(`ref: encoded ${texts.length} texts, ${bytes} bytes, ${tokens} tokens in ${secs.toFixed(3)} s: ` +
              `${(bytes / 1e6 / secs).toFixed(2)} MB/s (one thread; ${how}; cpu/wall ${(cpuSecs / secs).toFixed(2)})`);
}

function gpt3(inFile, outFile) {
  const {encode} = npmRequire('gpt-3-encoder');
  const out = readTexts(inFile).map(s => JSON.stringify({ids: encode(s)}));
  fs.writeFileSync(outFile, out.length ? out.join('\n') + '\n' : '');
}

async function main() {
  const [mode, ...args] = process.argv.slice(2);
  const usage = 'usage: ref.js encode TOKENIZER_JSON IN.jsonl OUT.jsonl [--no-special] | batch JOBS.json | ' +
                'throughput TOKENIZER_JSON IN.jsonl [--batch N] | gpt3 IN.jsonl OUT.jsonl';
  if (mode === 'encode' && (args.length === 3 || (args.length === 4 && args[3] === '--no-special'))) {
    const {Tokenizer} = npmRequire('@anush008/tokenizers');
    const ok = await encodeFile(Tokenizer, args[0], args[1], args[2], args.length === 4);
    process.exitCode = ok ? 0 : 3;
  } else if (mode === 'batch' && args.length === 1) {
    const {Tokenizer} = npmRequire('@anush008/tokenizers');
    for (const j of JSON.parse(fs.readFileSync(args[0], 'utf8'))) {
      await encodeFile(Tokenizer, j.tokenizer, j.input, j.output, !!j.no_special);
    }
  } else if (mode === 'throughput' && (args.length === 2 || (args.length === 4 && args[2] === '--batch'))) {
    const {Tokenizer} = npmRequire('@anush008/tokenizers');
    await throughput(Tokenizer, args[0], args[1], args.length === 4 ? parseInt(args[3], 10) : 0);
  } else if (mode === 'gpt3' && args.length === 2) {
    gpt3(args[0], args[1]);
  } else {
    console.error(usage);
    process.exitCode = 2;
  }
}

main().catch(e => {
  console.error(`ref.js: ${e && e.plain ? e.message : (e && e.stack) || e}`);
  process.exitCode = 1;
});
