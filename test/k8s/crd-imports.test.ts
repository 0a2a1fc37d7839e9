// The custom resources' cdk8s bindings in src/imports are generated from the minimal CRDs in
// projenrc/crds (projenrc/crd-imports.ts, `npx projen imports`): the checked-in modules are what the
// CRDs generate, and each minimal CRD keeps only fields of the pinned upstream CRD, typed as upstream.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { parseAllDocuments } from 'yaml';
import { CRD_DIR as UPSTREAM_CRD_DIR } from './util';

const ROOT = path.resolve(__dirname, '..', '..');
const GENERATOR = path.join('projenrc', 'crd-imports.ts');
const MINIMAL_CRD_DIR = path.join(ROOT, 'projenrc', 'crds');
const IMPORTS = path.join(ROOT, 'src', 'imports');

function generator(...args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', GENERATOR, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, TS_NODE_PROJECT: path.join('projenrc', 'tsconfig.json') },
    timeout: 120_000,
  });
  return { status: r.status, stderr: r.stderr };
}

/** Every CustomResourceDefinition in the YAML files of a folder. */
function crds(dir: string): any[] {
  return fs.readdirSync(dir).filter(f => f.endsWith('.yaml')).flatMap(f =>
    parseAllDocuments(fs.readFileSync(path.join(dir, f), 'utf8')).map(d => d.toJSON()).filter(c => c?.kind === 'CustomResourceDefinition'));
}

/**
 * Where a minimal schema differs from upstream: a field upstream lacks, another type, format or
 * int-or-string, another set of enum values, another optionality, or a required field left out.
 */
function subsetProblems(mine: any, theirs: any, at: string): string[] {
  if (theirs === undefined) {
    return [`${at}: not in the upstream schema`];
  }
  const problems: string[] = [];
  for (const key of ['type', 'format', 'x-kubernetes-int-or-string']) {
    if (mine[key] !== undefined && mine[key] !== theirs[key]) {
      problems.push(`${at}: ${key} ${mine[key]}, upstream ${theirs[key]}`);
    }
  }
  if (mine.anyOf !== undefined && JSON.stringify(mine.anyOf) !== JSON.stringify(theirs.anyOf)) {
    problems.push(`${at}: anyOf ${JSON.stringify(mine.anyOf)}, upstream ${JSON.stringify(theirs.anyOf)}`);
  }
  const values = (schema: any) => JSON.stringify([...schema.enum ?? []].sort());
  if (values(mine) !== values(theirs)) {
    problems.push(`${at}: enum ${JSON.stringify(mine.enum)}, upstream ${JSON.stringify(theirs.enum)}`);
  }
  if (mine.properties !== undefined) {
    const required = new Set<string>(mine.required ?? []);
    const upstreamRequired = new Set<string>(theirs.required ?? []);
    for (const r of upstreamRequired) {
      if (!(r in mine.properties)) problems.push(`${at}.${r}: required upstream but left out`);
    }
    for (const [name, schema] of Object.entries(mine.properties)) {
      if (required.has(name) !== upstreamRequired.has(name)) {
        problems.push(`${at}.${name}: ${required.has(name) ? 'required' : 'optional'}, upstream ${upstreamRequired.has(name) ? 'required' : 'optional'}`);
      }
      problems.push(...subsetProblems(schema, theirs.properties?.[name], `${at}.${name}`));
    }
  }
  if (mine.items !== undefined) {
    problems.push(...subsetProblems(mine.items, theirs.items, `${at}[]`));
  }
  if (typeof mine.additionalProperties === 'object') {
    problems.push(...subsetProblems(mine.additionalProperties, theirs.additionalProperties, `${at}{}`));
  }
  return problems;
}

describe('CRD bindings (src/imports)', () => {
  test('src/imports is what projenrc/crds generates', () => {
    // GIVEN the checked-in modules WHEN the generator compares them with `cdk8s import`'s output
    const { status, stderr } = generator('--check');
    // THEN they are the same (else run `npx projen imports`)
    expect(stderr).toBe('');
    expect(status).toBe(0);
  });

  test('--check fails, naming the fix, when a module was edited or has no CRD', () => {
    // GIVEN a copy of src/imports with one module edited by hand and one module too many
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crd-imports-'));
    try {
      for (const f of fs.readdirSync(IMPORTS)) fs.copyFileSync(path.join(IMPORTS, f), path.join(dir, f));
      const lws = path.join(dir, 'leaderworkerset.x-k8s.io.ts');
      fs.writeFileSync(lws, fs.readFileSync(lws, 'utf8').replace('readonly replicas?: number;', 'readonly replicas?: string;'));
      fs.writeFileSync(path.join(dir, 'stale.ts'), '');
      // WHEN checked THEN it fails and says how to regenerate
      const { status, stderr } = generator('--check', '--dir', dir);
      expect(status).toBe(1);
      expect(stderr).toMatch(/leaderworkerset\.x-k8s\.io\.ts is out of date.*npx projen imports/);
      expect(stderr).toMatch(/stale\.ts is out of date/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('each minimal CRD is a subset of the pinned upstream CRD, typed as upstream', () => {
    if (!fs.existsSync(UPSTREAM_CRD_DIR)) {
      // eslint-disable-next-line no-console
      console.warn(`SKIPPED the minimal CRDs' check: ${UPSTREAM_CRD_DIR} is absent (a fresh clone has no ../shared; CI has it)`);
      return;
    }
    // GIVEN the minimal CRDs and the upstream ones
    const upstream = crds(UPSTREAM_CRD_DIR);
    const minimal = crds(MINIMAL_CRD_DIR);
    expect(minimal.map(c => c.spec.names.kind).sort()).toEqual(['Gateway', 'HTTPRoute', 'InferencePool', 'LeaderWorkerSet', 'ScaledObject']);
    // WHEN each version's schema is compared with upstream's
    const problems = minimal.flatMap(crd => {
      const theirs = upstream.find(u => u.spec.group === crd.spec.group && u.spec.names.kind === crd.spec.names.kind);
      if (theirs === undefined) return [`${crd.spec.names.kind}: no upstream CRD`];
      const names = crd.spec.names.plural === theirs.spec.names.plural && crd.spec.scope === theirs.spec.scope ? [] : [`${crd.spec.names.kind}: names or scope`];
      return [...names, ...crd.spec.versions.flatMap((version: any) => subsetProblems(version.schema.openAPIV3Schema,
        theirs.spec.versions.find((v: any) => v.name === version.name)?.schema.openAPIV3Schema, `${crd.spec.names.kind}/${version.name}`))];
    });
    // THEN every field is upstream's, with its type, enum values and optionality
    expect(problems).toEqual([]);
  });

  test('the subset check finds a field upstream lacks, a changed enum and a changed optionality', () => {
    // GIVEN a schema and a copy that drifted from it
    const upstream = {
      type: 'object',
      required: ['a'],
      properties: { a: { type: 'string', enum: ['X', 'Y'] }, b: { type: 'integer' } },
    };
    const drifted = {
      type: 'object',
      properties: { a: { type: 'string', enum: ['X'] }, c: { type: 'string' } },
    };
    // WHEN compared THEN each difference is named
    expect(subsetProblems(drifted, upstream, 'T')).toEqual([
      'T.a: optional, upstream required',
      'T.a: enum ["X"], upstream ["X","Y"]',
      'T.c: not in the upstream schema',
    ]);
  });
});
