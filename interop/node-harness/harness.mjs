// A harness in another language, written from docs/harness-guide.md and docs/test-vectors/ alone:
// Node's standard library only. It checks itself against the test vectors, checks that tools/list
// describes every field, then completes a run of research-decision through rimthan-mcp over stdio
// (newline-delimited JSON-RPC, protocol 2025-11-25), computing every digest, attestation and report
// binding itself. The release's examples stand in for a model's outputs and every validator passes.
// With --release OLD --migration-target NEW (instead of --releases-dir) it starts the run on OLD,
// migrates it to NEW at the first question (preview, a refused premature confirm checked against the
// refusal contract, the target's new fields confirmed, confirm) and completes it there.
// With --releases-dir DIR --migrate-to-newest --publish NEW it serves DIR with --migrate-to-newest, starts
// the run on DIR's newest release, and at the first question stands in for the operator: copies NEW into
// DIR and sends the server SIGHUP (a refresh), waits for notifications/resources/list_changed (polling
// resources/list, bounded, only if the server declares no resources.listChanged or says nothing), reads
// there that new runs start on NEW, asks for the run again (the same question, now with the migration
// offer) and migrates to NEW as above.
// Which release a run starts on is read from resources/list (`_meta` `rimthan/new-runs`) before start.
//
//   node harness.mjs --server PATH/rimthan-mcp (--releases-dir DIR [--migrate-to-newest --publish DIR]
//                    | --release DIR --migration-target DIR) \
//                    --trust DIR --state-dir DIR --project DIR --log FILE [--vectors docs/test-vectors/host-protocol.json]
//
// Prints one line per step and a last line `ok: ...`; exits 1 on the first problem.
import { spawn } from 'node:child_process';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { appendFileSync, cpSync, existsSync, lstatSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

const fail = (message) => { console.error(`harness: ${message}`); process.exit(1); };
const check = (ok, message) => { if (!ok) fail(message); };

// --- What a host computes (docs/test-vectors/README.md) ---
export function canonicalJson(v) {
  if (v === null || typeof v === 'boolean') return JSON.stringify(v);
  if (typeof v === 'number') { check(Number.isFinite(v), 'a non-finite number has no canonical form'); return JSON.stringify(v); }
  if (typeof v === 'string') { check(v.isWellFormed(), 'a lone surrogate has no canonical form'); return JSON.stringify(v); }
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(v).sort(); // UTF-16 code unit order
  return `{${keys.map((k) => `${canonicalJson(k)}:${canonicalJson(v[k])}`).join(',')}}`;
}
const sha256Hex = (bytes) => createHash('sha256').update(bytes).digest('hex');
const utf8 = (text) => Buffer.from(text, 'utf8');
const valueDigest = (v) => `sha256:${sha256Hex(utf8(canonicalJson(v)))}`;
const tokenDigest = (token) => `sha256:${sha256Hex(Buffer.from(token, 'ascii'))}`;
const confirmation = (value, at) => ({ value_digest: valueDigest(value), confirmed_at: at, confirmed_by: 'the user (node harness)' });
const confirmAll = (state, at) => ({ state, confirmations: Object.fromEntries(Object.entries(state).map(([k, v]) => [k, confirmation(v, at)])) });
const byKindThenAsset = (a, b) => (a.kind === b.kind ? (a.asset < b.asset ? -1 : 1) : a.kind < b.kind ? -1 : 1);
const manifestText = (host, delivered) =>
  `${canonicalJson({ harness: host.harness, adapter: host.adapter, capabilities: host.capabilities, delivered: [...delivered].sort(byKindThenAsset), symlink_free: true })}\n`;
const artifact = (output, bytes, write) => ({
  artifact_id: output.id, path: output.path, media_type: output.media_type, content: bytes.toString('utf8'),
  attestation: { path: output.path, sha256: sha256Hex(bytes), size: bytes.length, symlink_free: true, write },
});
const receiptDigests = (receipts) => Object.fromEntries(Object.entries(receipts).map(([id, r]) => [id, r.sha256]));
const report = (v, receipts, host, verdict) => ({
  validator_id: v.validator_id, version: v.version, outcome: verdict.outcome, instruction_digest: v.instruction_digest,
  input_artifacts: receiptDigests(receipts), findings: verdict.findings,
  validated_by: { harness: host.harness, adapter_version: host.adapter.version },
});
function parseToken(token) {
  const [first, last] = [token.indexOf('.'), token.lastIndexOf('.')];
  return {
    header: JSON.parse(Buffer.from(token.slice(0, first), 'base64url').toString('utf8')),
    claims: JSON.parse(token.slice(first + 1, last)), signingInput: token.slice(0, last), signature: token.slice(last + 1),
  };
}
function tokenVerifies(token, keys) {
  const t = parseToken(token);
  const key = keys.find((k) => k.id === t.header.kid);
  if (!key || t.header.alg !== 'HS256' || t.header.b64 !== false) return false;
  const mac = createHmac('sha256', Buffer.from(key.key, 'base64')).update(Buffer.from(t.signingInput, 'ascii')).digest();
  const sig = Buffer.from(t.signature, 'base64url');
  return sig.length === mac.length && timingSafeEqual(sig, mac);
}

function checkVectors(V) {
  let count = 0;
  const same = (got, want, what) => { count += 1; check(canonicalJson(got) === canonicalJson(want), `vector ${what}: got ${canonicalJson(got).slice(0, 200)}`); };
  for (const c of V.value_digests) { same(canonicalJson(c.value), c.canonical_json, c.name); same(valueDigest(c.value), c.value_digest, c.name); }
  const cs = V.confirmed_state;
  same(valueDigest(cs.projection.state), cs.state_digest, 'state_digest');
  for (const [k, v] of Object.entries(cs.projection.state)) same(valueDigest(v), cs.projection.confirmations[k].value_digest, `field ${k}`);
  const wm = V.workspace_manifest, host = V.fixed.host;
  const delivered = wm.expected_deliveries.map(({ asset, kind, path, sha256 }) => ({ asset, kind, path, sha256 }));
  const bytes = utf8(manifestText(host, delivered));
  same(artifact({ id: wm.artifact.artifact_id, path: wm.artifact.path, media_type: wm.artifact.media_type }, bytes, 'created'), wm.artifact, 'workspace manifest');
  for (const a of V.output_attestations.artifacts) same(artifact({ id: a.artifact_id, path: a.path, media_type: a.media_type }, utf8(a.content), a.attestation.write), a, a.artifact_id);
  const rb = V.report_bindings;
  rb.validators.forEach((v, i) => {
    same(valueDigest(receiptDigests(rb.artifact_receipts)), v.input_digest, `input_digest ${v.validator_id}`);
    same(report(v, rb.artifact_receipts, host, { outcome: 'pass', findings: [] }), rb.reports[i], `report ${v.validator_id}`);
  });
  const log = V.checkpoint_log;
  log.tokens.forEach((t, i) => {
    same(tokenVerifies(t, V.fixed.checkpoint_keys.keys), true, `token ${i} signature`);
    same(tokenDigest(t), log.token_digests[i], `token ${i} digest`);
    same(parseToken(t).claims, log.claims[i], `token ${i} claims`);
    same(parseToken(t).claims.parent, i ? log.token_digests[i - 1] : null, `token ${i} parent`);
  });
  same(log.tokens.map((t) => `${t}\n`).join(''), log.log_text, 'log_text');
  for (const e of V.refusals.examples) same(conforms(e.structuredContent, V.refusals.contract), true, `refusal ${e.tool}`);
  return count;
}

// The subset of JSON Schema the refusal contract uses: type, enum, properties, required, additionalProperties.
export function conforms(value, schema) {
  if (schema.enum && !schema.enum.includes(value)) return false;
  if (schema.type === 'string') return typeof value === 'string';
  if (schema.type !== 'object') return true;
  if (!value || typeof value !== 'object' || Array.isArray(value)) return false;
  if ((schema.required ?? []).some((k) => !Object.hasOwn(value, k))) return false;
  return Object.entries(value).every(([k, v]) =>
    Object.hasOwn(schema.properties ?? {}, k) ? conforms(v, schema.properties[k]) : schema.additionalProperties !== false);
}

function undescribed(tools) {
  const missing = [];
  const walk = (node, where) => {
    if (Array.isArray(node)) return node.forEach((v, i) => walk(v, `${where}/${i}`));
    if (!node || typeof node !== 'object') return;
    for (const [name, s] of Object.entries(node.properties ?? {})) if (!String(s?.description ?? '').trim()) missing.push(`${where}/properties/${name}`);
    for (const [k, v] of Object.entries(node)) walk(v, `${where}/${k}`);
  };
  for (const t of tools) { walk(t.inputSchema, `${t.name} input`); walk(t.outputSchema, `${t.name} output`); }
  return missing;
}

// --- MCP over stdio ---
class Client {
  constructor(command, args, env) {
    this.proc = spawn(command, ['serve', ...args], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'inherit'] });
    this.next = 1; this.waiting = new Map(); this.listeners = new Map(); // notification method -> resolvers
    createInterface({ input: this.proc.stdout }).on('line', (line) => {
      const msg = JSON.parse(line);
      if (msg.id === undefined) { for (const resolve of this.listeners.get(msg.method) ?? []) resolve(msg); this.listeners.delete(msg.method); return; }
      this.waiting.get(msg.id)?.(msg); this.waiting.delete(msg.id);
    });
    this.proc.on('exit', (code) => { if (this.waiting.size) fail(`rimthan-mcp exited (${code}) with calls unanswered`); });
  }
  async request(method, params) {
    const id = this.next++;
    const answer = new Promise((resolve) => this.waiting.set(id, resolve));
    this.proc.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    const msg = await answer;
    check(!msg.error, `${method}: ${JSON.stringify(msg.error)}`);
    return msg.result;
  }
  // The whole resource listing: every page, following nextCursor (docs/harness-guide.md "The listing comes in pages").
  async listResources() {
    const listed = [];
    let cursor;
    for (let page = 0; page < 1000; page++) {
      const result = await this.request('resources/list', cursor ? { cursor } : {});
      listed.push(...result.resources);
      if (!result.nextCursor) return listed;
      cursor = result.nextCursor;
    }
    fail('resources/list goes on past 1000 pages');
  }
  notify(method) { this.proc.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method })}\n`); }
  // The next notification `method` the server sends, or null after `ms` (a bounded wait, never a hang).
  nextNotification(method, ms) {
    const told = new Promise((resolve) => this.listeners.set(method, [...(this.listeners.get(method) ?? []), resolve]));
    // (the timer is unref'd: a wait the notification ended must not hold the process open until it fires)
    return Promise.race([told, sleep(ms, null, { ref: false })]);
  }
  refresh() { this.proc.kill('SIGHUP'); } // what `kill -HUP <pid>` does (docs/server.md "Refresh")
  close() { this.proc.stdin.end(); }
}

// --- The run ---
const HOST = {
  harness: 'claude-code', adapter: { id: 'claude-code', version: '1.0.0' },
  capabilities: ['skills', 'subagents', 'workspace.write'], validator_capabilities: ['subagent.isolated-context'],
  repository_policy: { writable_paths: ['.claude/*', '.rimthan/*', 'research/*'], protected_paths: ['.git/*'] },
};
const now = () => Math.floor(Date.now() / 1000);

async function main() {
  const names = ['server', 'releases-dir', 'release', 'migration-target', 'publish', 'trust', 'state-dir', 'project', 'log', 'vectors'];
  const options = { ...Object.fromEntries(names.map((k) => [k, { type: 'string' }])), 'migrate-to-newest': { type: 'boolean' } };
  const { values: o } = parseArgs({ options });
  for (const k of ['server', 'trust', 'state-dir', 'project', 'log']) check(o[k], `--${k} is required`);
  const explicit = Boolean(o['migration-target']), newest = Boolean(o['migrate-to-newest']);
  const migrating = explicit || newest;
  check(explicit ? o.release && !o['releases-dir'] : o['releases-dir'] && !o.release, 'give --releases-dir, or --release with --migration-target');
  check(newest === Boolean(o.publish) && !(newest && explicit), '--migrate-to-newest goes with --publish and --releases-dir');
  const vectors = o.vectors ? JSON.parse(readFileSync(o.vectors, 'utf8')) : null;
  if (vectors) console.log(`vectors: ${checkVectors(vectors)} values agree`);
  const serving = explicit ? ['--release', o.release, '--migration-target', o['migration-target']] : newest ? ['--migrate-to-newest'] : [];
  const env = { RIMTHAN_TRUST: o.trust, RIMTHAN_STATE_DIR: o['state-dir'], ...(explicit ? {} : { RIMTHAN_RELEASES_DIR: o['releases-dir'] }) };
  const client = new Client(o.server, serving, env);
  const init = await client.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'rimthan-node-harness', version: '1.0.0' } });
  check(init.protocolVersion === '2025-11-25', `negotiated ${init.protocolVersion}`);
  const toldOfChanges = init.capabilities?.resources?.listChanged === true; // docs/server.md "Clients are told"
  client.notify('notifications/initialized');
  const missing = undescribed((await client.request('tools/list', {})).tools);
  check(missing.length === 0, `fields without a description: ${missing.slice(0, 5).join(', ')} (${missing.length})`);

  const project = o.project; writeFileSync(o.log, '');
  const readText = async (uri) => (await client.request('resources/read', { uri })).contents[0].text;
  const safe = (rel) => { let p = project; for (const part of rel.split('/')) { p = join(p, part); check(!(existsSync(p) && lstatSync(p).isSymbolicLink()), `symbolic link at ${p}`); } return p; };
  const writeBack = (rel, bytes) => {
    const file = safe(rel); const write = existsSync(file) ? 'replaced' : 'created';
    mkdirSync(dirname(file), { recursive: true }); writeFileSync(file, bytes);
    return { bytes: readFileSync(file), write };
  };
  let parent = null;
  const call = async (tool, args, { blocked = false } = {}) => {
    const result = await client.request('tools/call', { name: tool, arguments: args });
    const s = result.structuredContent;
    check(!result.isError, `${tool} refused: ${JSON.stringify(s?.error ?? result.content).slice(0, 400)}`);
    check(blocked || s.status !== 'blocked', `${tool} blocked: ${JSON.stringify(s.failures).slice(0, 400)}`);
    if (s.checkpoint_digest !== parent) {
      check(tokenDigest(s.checkpoint) === s.checkpoint_digest, 'checkpoint_digest is not the digest of the checkpoint');
      check(parseToken(s.checkpoint).claims.parent === parent, 'the checkpoint does not follow the previous one');
      appendFileSync(o.log, `${s.checkpoint}\n`); parent = s.checkpoint_digest;
    }
    console.log(`${tool} -> ${s.status} (sequence ${s.sequence})`);
    return s;
  };

  let s;
  const examples = (digest) => `rimthan://releases/${digest.slice('sha256:'.length)}/examples/`;
  // Which held release new runs start on (docs/harness-guide.md): its manifest resource's _meta says so.
  const startsRuns = (listing) => listing.filter((r) => r._meta?.['rimthan/new-runs'] === true).map((r) => ({
    id: r._meta['rimthan/release'], examples: r.uri.replace(/^rimthan:\/\/manifests\/([0-9a-f]{64})\/manifest\.json$/, 'rimthan://releases/$1/examples/'),
  }));
  const resources = (await client.listResources());
  const listed = resources.map((r) => r.uri);
  const refusalUri = listed.find((u) => u.startsWith('rimthan://contracts/refusal/'));
  check(refusalUri, 'the server serves no refusal contract');
  const refusalContract = JSON.parse(await readText(refusalUri));
  if (vectors) check(canonicalJson(refusalContract) === canonicalJson(vectors.refusals.contract), 'the served refusal contract is not the vectors\'');

  // Migration (docs/harness-guide.md "Migration"): preview, show the user, confirm the target's fields, confirm.
  const migrate = async (at) => {
    const offer = at.migration;
    check(offer && offer.confirmed === false, `no migration offered at ${at.step?.id ?? at.question?.field}`);
    check(offer.walked_again[0]?.step === offer.restart_step, `walked_again starts at ${offer.restart_step}`);
    const request = (state, confirm) => ({
      checkpoint: at.checkpoint, confirmed_state: cs, migration: { target_release: offer.to.release, confirmed_state: state, confirm },
    });
    const preview = await call('rimthan.continue_workflow', request(cs, false), { blocked: true });
    const needed = preview.migration.target_needs.confirmed_state.filter((f) => f.required && !f.present).map((f) => f.field).sort();
    const missing = preview.failures.filter((f) => f.code === 'confirmed_field_missing').map((f) => f.details.field).sort();
    check(canonicalJson(needed) === canonicalJson(missing), `preview: fields needed ${needed}, refused as missing ${missing}`);
    const early = await client.request('tools/call', { name: 'rimthan.continue_workflow', arguments: request(cs, true) });
    check(early.isError && conforms(early.structuredContent, refusalContract), `a confirm with fields missing: ${JSON.stringify(early).slice(0, 400)}`);
    check(early.structuredContent.error.code === 'confirmed_state_invalid', `a confirm with fields missing: ${early.structuredContent.error.code}`);
    console.log(`migration refused while ${missing.join(', ')} unconfirmed -> ${early.structuredContent.error.code}`);
    // The user answers each new field (the target's example state stands in) and confirms every field afresh.
    const asked = JSON.parse(await readText(`${examples(offer.to.manifest_digest)}confirmed-state.json`));
    const fresh = preview.migration.target_needs.confirmed_state.filter((f) => !f.present && Object.hasOwn(asked, f.field));
    const target = confirmAll({ ...cs.state, ...Object.fromEntries(fresh.map((f) => [f.field, asked[f.field]])) }, now());
    const ready = await call('rimthan.continue_workflow', request(target, false), { blocked: true });
    const waiting = ready.status === 'blocked' && ready.failures.length > 0 && ready.failures.every((f) => f.code === 'migration_confirmation_required');
    check(waiting, `preview of the whole target state: ${ready.status} ${JSON.stringify(ready.failures).slice(0, 400)}`);
    const moved = await call('rimthan.continue_workflow', request(target, true));
    check(moved.release.manifest_digest === offer.to.manifest_digest && moved.step.id === offer.restart_step, 'the migrated run');
    check(moved.migration?.confirmed === true, 'the migrated result says the migration it performed');
    cs = target;
    return moved;
  };

  // The operator publishes a newer release and refreshes the server (docs/server.md "Refresh"); the
  // server says the listing changed (notifications/resources/list_changed, docs/harness-guide.md
  // "Migration"), the listing then says new runs start on it, and the run's next result carries the
  // migration offer. Without the notification (not declared, or not come in 30 s) it polls, bounded.
  const publishAndRefresh = async (at) => {
    const moved = async () => { const [on] = startsRuns((await client.listResources())); return on && on.id !== at.release.id ? on : null; };
    const told = toldOfChanges ? client.nextNotification('notifications/resources/list_changed', 30_000) : null;
    cpSync(o.publish, join(o['releases-dir'], basename(o.publish)), { recursive: true });
    client.refresh();
    let on = (await told) ? await moved() : null;
    if (on) console.log(`refreshed: told by notifications/resources/list_changed; new runs start on ${on.id}`);
    for (let i = 0; !on; i += 1) {
      check(i < 300, 'the server never said new runs start on the published release'); await sleep(100);
      on = await moved();
      if (on) console.log(`refreshed (polled resources/list): new runs start on ${on.id}`);
    }
    return call('rimthan.continue_workflow', { checkpoint: at.checkpoint, confirmed_state: cs });
  };

  const [start] = startsRuns(resources);
  check(start, 'resources/list marks no release new runs start on');
  let cs = confirmAll(JSON.parse(await readText(`${start.examples}confirmed-state.json`)), now());
  s = await call('rimthan.start_workflow', { workflow: 'research-decision', confirmed_state: cs, host: HOST });
  check(s.release.id === start.id && start.examples === examples(s.release.manifest_digest), `the run started on ${s.release.id}, not ${start.id}`);
  check(!newest || s.migration === null, 'a run on the newest release was offered a migration');
  let migrated = false, published = false;
  while (s.status !== 'completed') {
    const step = s.step;
    if (s.status === 'input_required' && newest && !published) { s = await publishAndRefresh(s); published = true; continue; }
    if (s.status === 'input_required' && migrating && !migrated) { s = await migrate(s); migrated = true; continue; }
    if (s.status === 'input_required') {
      const { field, choices } = s.question; const value = choices[0];
      const next = { state: { ...cs.state, [field]: value }, confirmations: { ...cs.confirmations, [field]: confirmation(value, now()) } };
      s = await call('rimthan.continue_workflow', { checkpoint: s.checkpoint, confirmed_state: cs, next_confirmed_state: next });
      cs = next; continue;
    }
    if (!step.gated) { s = await call('rimthan.continue_workflow', { checkpoint: s.checkpoint, confirmed_state: cs }); continue; }
    let artifacts;
    if (step.id === 'setup-workspace') {
      const delivered = step.host_assets.map((a) => {
        check(sha256Hex(utf8(a.text)) === a.sha256, `host asset ${a.id}: sha256 is not its text's`);
        const { bytes } = writeBack(a.install_path, utf8(a.text));
        return { asset: a.id, kind: a.kind, path: a.install_path, sha256: sha256Hex(bytes) };
      });
      const [out] = step.outputs; const { bytes, write } = writeBack(out.path, utf8(manifestText(HOST, delivered)));
      artifacts = [artifact(out, bytes, write)];
    } else {
      artifacts = [];
      for (const out of step.outputs) {
        const { bytes, write } = writeBack(out.path, utf8(await readText(`${examples(s.release.manifest_digest)}${out.path.split('/').pop()}`)));
        artifacts.push(artifact(out, bytes, write));
      }
    }
    const prepared = await call('rimthan.prepare_step_validation', { checkpoint: s.checkpoint, confirmed_state: cs, host: HOST, artifacts, inputs: step.inputs });
    check(prepared.status === 'ready_for_semantic_validation', `prepare: ${JSON.stringify(prepared.failures).slice(0, 400)}`);
    const bundle = prepared.validation_bundle; const reports = [];
    for (const v of bundle.validators) {
      const def = step.validators.find((d) => d.id === v.validator_id && d.version === v.version);
      check(def && `sha256:${sha256Hex(utf8(def.instruction.text))}` === v.instruction_digest, `instruction of ${v.validator_id}`);
      check(v.input_digest === valueDigest(receiptDigests(bundle.artifacts)), `input_digest of ${v.validator_id}`);
      if (v.report_required) reports.push(report(v, bundle.artifacts, HOST, { outcome: 'pass', findings: [] }));
    }
    s = await call('rimthan.submit_step_validation', { checkpoint: s.checkpoint, confirmed_state: cs, validation_bundle: bundle, reports });
    check(s.status !== 'validation_failed', `validation failed: ${JSON.stringify(s.findings).slice(0, 400)}`);
  }
  client.close();
  console.log(`ok: completed at sequence ${s.sequence}${migrated ? ` on ${s.release.id}, migrated` : ''}; checkpoint log ${o.log}`);
}

await main();
