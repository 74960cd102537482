// A harness in TypeScript on the official MCP TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// interop/package.json), written from README.md, docs/harness-guide.md and docs/test-vectors/ alone.
// Node 22 runs it as it is (type stripping); nothing is compiled.
//
// It checks the test vectors with an independent RFC 8785 library (npm `canonicalize`), then serves
// --release OLD --migration-target NEW with rimthan-mcp over the given transport (stdio, or stateless
// Streamable HTTP on a free port) and completes a run: the SDK's `callTool` checks every result against
// the tool's outputSchema; a refused call is read as docs/harness-guide.md "Reading a refusal with the
// TypeScript SDK" says and checked against the served refusal contract with Ajv; an output whose
// attestation does not match its bytes is blocked with its failure code; a failing validator report
// gives validation_failed, repaired by preparing again; the run migrates to NEW at its first question.
//
//   node harness.mts --server PATH/rimthan-mcp --transport stdio|http --release DIR --migration-target DIR \
//                   --trust DIR --state-dir DIR --project DIR --vectors docs/test-vectors/host-protocol.json
//
// Prints one line per step and a last line `ok: ...`; exits 1 on the first problem.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import canonicalize from 'canonicalize';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

type Json = any;
const fail = (message: string): never => { console.error(`ts-harness: ${message}`); process.exit(1); };
const check = (ok: unknown, message: string): void => { if (!ok) fail(message); };

// --- What a host computes (docs/test-vectors/README.md), on the `canonicalize` library ---
const canon = (v: Json): string => canonicalize(v) as string;
const sha256Hex = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
const utf8 = (text: string): Buffer => Buffer.from(text, 'utf8');
const valueDigest = (v: Json): string => `sha256:${sha256Hex(utf8(canon(v)))}`;
const tokenDigest = (token: string): string => `sha256:${sha256Hex(Buffer.from(token, 'ascii'))}`;
const confirmation = (value: Json, at: number) => ({ value_digest: valueDigest(value), confirmed_at: at, confirmed_by: 'the user (ts harness)' });
const confirmAll = (state: Json, at: number) => ({ state, confirmations: Object.fromEntries(Object.entries(state).map(([k, v]) => [k, confirmation(v, at)])) });
const byKindThenAsset = (a: Json, b: Json) => (a.kind === b.kind ? (a.asset < b.asset ? -1 : 1) : a.kind < b.kind ? -1 : 1);
const manifestText = (host: Json, delivered: Json[]) =>
  `${canon({ harness: host.harness, adapter: host.adapter, capabilities: host.capabilities, delivered: [...delivered].sort(byKindThenAsset), symlink_free: true })}\n`;
const artifact = (out: Json, bytes: Buffer, write: string) => ({
  artifact_id: out.id, path: out.path, media_type: out.media_type, content: bytes.toString('utf8'),
  attestation: { path: out.path, sha256: sha256Hex(bytes), size: bytes.length, symlink_free: true, write },
});
const receiptDigests = (receipts: Json) => Object.fromEntries(Object.entries(receipts).map(([id, r]: [string, Json]) => [id, r.sha256]));
const report = (v: Json, receipts: Json, host: Json, outcome: string, findings: Json[]) => ({
  validator_id: v.validator_id, version: v.version, outcome, instruction_digest: v.instruction_digest,
  input_artifacts: receiptDigests(receipts), findings, validated_by: { harness: host.harness, adapter_version: host.adapter.version },
});

function checkVectors(V: Json): number {
  let count = 0;
  const same = (got: Json, want: Json, what: string) => { count += 1; check(canon(got) === canon(want), `vector ${what}: got ${canon(got).slice(0, 200)}`); };
  for (const c of V.value_digests) { same(canon(c.value), c.canonical_json, c.name); same(valueDigest(c.value), c.value_digest, c.name); }
  const cs = V.confirmed_state;
  same(valueDigest(cs.projection.state), cs.state_digest, 'state_digest');
  const wm = V.workspace_manifest, host = V.fixed.host;
  const delivered = wm.expected_deliveries.map(({ asset, kind, path, sha256 }: Json) => ({ asset, kind, path, sha256 }));
  same(artifact({ id: wm.artifact.artifact_id, path: wm.artifact.path, media_type: wm.artifact.media_type }, utf8(manifestText(host, delivered)), 'created'), wm.artifact, 'workspace manifest');
  for (const a of V.output_attestations.artifacts) same(artifact({ id: a.artifact_id, path: a.path, media_type: a.media_type }, utf8(a.content), a.attestation.write), a, a.artifact_id);
  const rb = V.report_bindings;
  rb.validators.forEach((v: Json, i: number) => {
    same(valueDigest(receiptDigests(rb.artifact_receipts)), v.input_digest, `input_digest ${v.validator_id}`);
    same(report(v, rb.artifact_receipts, host, 'pass', []), rb.reports[i], `report ${v.validator_id}`);
  });
  V.checkpoint_log.tokens.forEach((t: string, i: number) => same(tokenDigest(t), V.checkpoint_log.token_digests[i], `token ${i} digest`));
  const refusal = new Ajv2020({ strict: false }).compile(V.refusals.contract);
  for (const e of V.refusals.examples) same(refusal(e.structuredContent), true, `refusal ${e.tool}`);
  return count;
}

// --- The server, over either transport ---
async function connect(o: Json, serving: string[]): Promise<{ client: Client; close: () => Promise<void> }> {
  const env = { ...process.env, RIMTHAN_TRUST: o.trust, RIMTHAN_STATE_DIR: o['state-dir'] } as Record<string, string>;
  const client = new Client({ name: 'rimthan-ts-sdk-harness', version: '1.0.0' });
  if (o.transport === 'stdio') {
    await client.connect(new StdioClientTransport({ command: o.server, args: ['serve', ...serving], env, stderr: 'ignore' }));
    return { client, close: () => client.close() };
  }
  const proc = spawn(o.server, ['serve', '--transport', 'http', '--port', '0', ...serving], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const url = await new Promise<string>((resolve) => {
    createInterface({ input: proc.stderr! }).on('line', (line) => { const m = /listening on (http:\S+)/.exec(line); if (m) resolve(m[1]); });
    proc.on('exit', (code) => fail(`rimthan-mcp exited (${code}) before listening`));
  });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  check(transport.sessionId === undefined, 'the stateless server gave a session id');
  return { client, close: async () => { await client.close(); proc.removeAllListeners('exit'); proc.kill('SIGTERM'); } };
}

const HOST = {
  harness: 'claude-code', adapter: { id: 'claude-code', version: '1.0.0' },
  capabilities: ['skills', 'subagents', 'workspace.write'], validator_capabilities: ['subagent.isolated-context'],
  repository_policy: { writable_paths: ['.claude/*', '.rimthan/*', 'research/*'], protected_paths: ['.git/*'] },
};
const now = () => Math.floor(Date.now() / 1000);

async function main(): Promise<void> {
  const names = ['server', 'transport', 'release', 'migration-target', 'trust', 'state-dir', 'project', 'vectors'];
  const { values: o } = parseArgs({ options: Object.fromEntries(names.map((k) => [k, { type: 'string' as const }])) });
  for (const k of names) check(o[k], `--${k} is required`);
  check(['stdio', 'http'].includes(o.transport!), '--transport is stdio or http');
  console.log(`vectors: ${checkVectors(JSON.parse(readFileSync(o.vectors!, 'utf8')))} values agree (canonicalize)`);
  const { client, close } = await connect(o, ['--release', o.release!, '--migration-target', o['migration-target']!]);
  const tools = (await client.listTools()).tools;
  check(tools.length === 4 && tools.every((t) => t.outputSchema), 'four tools, each with an outputSchema');
  const readText = async (uri: string) => ((await client.readResource({ uri })).contents[0] as Json).text as string;
  const resources: Json[] = [];
  for (let cursor: string | undefined, page = 0; page === 0 || cursor; page++) {  // every page (nextCursor)
    check(page < 1000, 'resources/list goes on past 1000 pages');
    const listed = await client.listResources(cursor ? { cursor } : undefined);
    resources.push(...listed.resources);
    cursor = listed.nextCursor;
  }
  const refusalUri = resources.map((r) => r.uri).find((u) => u.startsWith('rimthan://contracts/refusal/'));
  check(refusalUri, 'the server serves no refusal contract');
  const isRefusal = new Ajv2020({ strict: false }).compile(JSON.parse(await readText(refusalUri!)));

  // A call the server answers: callTool checks structuredContent against the outputSchema; the text is the same JSON.
  let parent: string | null = null;
  const call = async (tool: string, args: Json): Promise<Json> => {
    const result: Json = await client.callTool({ name: tool, arguments: args });
    const s = result.structuredContent;
    check(!result.isError, `${tool} refused: ${JSON.stringify(s).slice(0, 400)}`);
    check(result.content[0].text === canon(s), `${tool}: the text content is not the canonical JSON of structuredContent`);
    if (s.checkpoint_digest !== parent) { check(tokenDigest(s.checkpoint) === s.checkpoint_digest, 'checkpoint_digest'); parent = s.checkpoint_digest; }
    console.log(`${tool} -> ${s.status} (sequence ${s.sequence})`);
    return s;
  };
  // A call the server refuses (isError). The SDK's callTool checks structuredContent against the tool's
  // outputSchema even on an isError result and throws -32602, so a harness reads refusals through request().
  const refused = async (tool: string, args: Json, code: string): Promise<void> => {
    const thrown = await client.callTool({ name: tool, arguments: args }).then(() => null, (e: Json) => e);
    check(thrown?.code === -32602, `callTool on a refusal: expected the SDK's -32602, got ${thrown?.code ?? 'a result'}`);
    const result: Json = await client.request({ method: 'tools/call', params: { name: tool, arguments: args } }, CallToolResultSchema);
    const s = result.structuredContent;
    check(result.isError === true && isRefusal(s), `${tool}: not a refusal by the contract: ${JSON.stringify(result).slice(0, 400)}`);
    check(result.content[0].text === canon(s), `${tool}: the refusal's text is not the canonical JSON of structuredContent`);
    check(s.error.code === code && s.error.next.trim(), `${tool}: refused ${s.error.code}, expected ${code}`);
    console.log(`${tool} refused -> ${s.error.code} (next: ${s.error.next.slice(0, 60)}...)`);
  };
  const project = o.project!;
  const writeBack = (rel: string, bytes: Buffer) => {
    const file = join(project, ...rel.split('/')); const write = existsSync(file) ? 'replaced' : 'created';
    mkdirSync(dirname(file), { recursive: true }); writeFileSync(file, bytes);
    return { bytes: readFileSync(file), write };
  };
  const examples = (digest: string) => `rimthan://releases/${digest.slice('sha256:'.length)}/examples/`;
  // The step's outputs, written and read back: setup-workspace's manifest of the delivered host assets, else
  // the release's worked example of each output (a model's work stands in).
  const outputsOf = async (step: Json, manifestDigest: string): Promise<Json[]> => {
    const written = async (out: Json, text: string) => { const back = writeBack(out.path, utf8(text)); return artifact(out, back.bytes, back.write); };
    if (step.id !== 'setup-workspace') {
      const texts = await Promise.all(step.outputs.map((out: Json) => readText(examples(manifestDigest) + basename(out.path))));
      return Promise.all(step.outputs.map((out: Json, i: number) => written(out, texts[i])));
    }
    const deliver = (a: Json) => ({ asset: a.id, kind: a.kind, path: a.install_path, sha256: sha256Hex(writeBack(a.install_path, utf8(a.text)).bytes) });
    return [await written(step.outputs[0], manifestText(HOST, step.host_assets.map(deliver)))];
  };

  const [start] = resources.filter((r: Json) => r._meta?.['rimthan/new-runs'] === true);
  check(start, 'resources/list marks no release new runs start on');
  const startExamples = start.uri.replace(/^rimthan:\/\/manifests\/([0-9a-f]{64})\/manifest\.json$/, 'rimthan://releases/$1/examples/');
  let cs: Json = confirmAll(JSON.parse(await readText(`${startExamples}confirmed-state.json`)), now());
  await refused('rimthan.start_workflow', { workflow: 'no-such-workflow', confirmed_state: cs, host: HOST }, 'workflow_not_found');
  let s = await call('rimthan.start_workflow', { workflow: 'research-decision', confirmed_state: cs, host: HOST });
  let migrated = false, blockedOnce = false, failedOnce = false;
  while (s.status !== 'completed') {
    if (s.status === 'input_required' && !migrated) {
      const offer = s.migration; const at = s.checkpoint;
      check(offer && offer.confirmed === false, 'no migration offered at the first question');
      const request = (state: Json, confirm: boolean) => ({ checkpoint: at, confirmed_state: cs, migration: { target_release: offer.to.release, confirmed_state: state, confirm } });
      const preview = await call('rimthan.continue_workflow', request(cs, false));
      await refused('rimthan.continue_workflow', request(cs, true), 'confirmed_state_invalid');
      const asked = JSON.parse(await readText(`${examples(offer.to.manifest_digest)}confirmed-state.json`));
      const fresh = preview.migration.target_needs.confirmed_state.filter((f: Json) => !f.present && Object.hasOwn(asked, f.field));
      const target = confirmAll({ ...cs.state, ...Object.fromEntries(fresh.map((f: Json) => [f.field, asked[f.field]])) }, now());
      s = await call('rimthan.continue_workflow', request(target, true));
      check(s.release.manifest_digest === offer.to.manifest_digest && s.migration?.confirmed === true, 'the run did not migrate');
      cs = target; migrated = true; continue;
    }
    if (s.status === 'input_required') {
      const { field, choices } = s.question; const value = choices[0];
      const next = { state: { ...cs.state, [field]: value }, confirmations: { ...cs.confirmations, [field]: confirmation(value, now()) } };
      s = await call('rimthan.continue_workflow', { checkpoint: s.checkpoint, confirmed_state: cs, next_confirmed_state: next });
      cs = next; continue;
    }
    const step = s.step;
    if (!step.gated) { s = await call('rimthan.continue_workflow', { checkpoint: s.checkpoint, confirmed_state: cs }); continue; }
    const artifacts = await outputsOf(step, s.release.manifest_digest);
    const prepare = (sent: Json[]) => call('rimthan.prepare_step_validation', { checkpoint: s.checkpoint, confirmed_state: cs, host: HOST, artifacts: sent, inputs: step.inputs });
    if (!blockedOnce && step.id !== 'setup-workspace') { // an attestation that is not the bytes' digest
      const bad = artifacts.map((a, i) => (i ? a : { ...a, attestation: { ...a.attestation, sha256: sha256Hex(utf8('other bytes')) } }));
      const answer = await prepare(bad);
      check(answer.status === 'deterministic_validation_failed' && answer.failures.length > 0, `a false attestation: ${answer.status}`);
      console.log(`  refused output -> ${answer.failures.map((f: Json) => f.code).join(', ')}`);
      blockedOnce = true;
    }
    const prepared = await prepare(artifacts);
    check(prepared.status === 'ready_for_semantic_validation', `prepare: ${JSON.stringify(prepared.failures).slice(0, 400)}`);
    const bundle = prepared.validation_bundle;
    const reports = (outcome: string, findings: Json[]) => bundle.validators.filter((v: Json) => v.report_required).map((v: Json) => report(v, bundle.artifacts, HOST, outcome, findings));
    if (!failedOnce && bundle.validators.some((v: Json) => v.report_required)) { // a subagent finds a problem
      const finding = { severity: 'error', message: 'the recommendation cites no source', artifact_id: artifacts[0].artifact_id };
      const answer = await call('rimthan.submit_step_validation', { checkpoint: s.checkpoint, confirmed_state: cs, validation_bundle: bundle, reports: reports('fail', [finding]) });
      check(answer.status === 'validation_failed' && answer.findings.length > 0, `a failing report: ${answer.status}`);
      failedOnce = true; s = answer; continue; // repair: prepare the step again from the failed checkpoint
    }
    s = await call('rimthan.submit_step_validation', { checkpoint: s.checkpoint, confirmed_state: cs, validation_bundle: bundle, reports: reports('pass', []) });
    check(s.status !== 'validation_failed', `validation failed: ${JSON.stringify(s.findings).slice(0, 400)}`);
  }
  await close();
  check(migrated && blockedOnce && failedOnce, 'the run skipped a migration, a refused output or a failed validation');
  console.log(`ok: ${o.transport}: completed ${s.release.id} at sequence ${s.sequence}, migrated, one output refused, one validation failed`);
}

await main();
