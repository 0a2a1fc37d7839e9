// The custom resources' cdk8s bindings in src/imports are generated from the minimal CRDs in
// projenrc/crds (projenrc/crd-imports.ts, `npx projen imports`): the checked-in modules are what the
// CRDs generate, and each minimal CRD keeps only fields of the pinned upstream CRD, typed as upstream.
// prometheus-operator's group (monitoring.coreos.com) has no upstream CRD in ../shared/schemas: its
// objects are validated with the npm package @kubernetes-models/prometheus-operator (validate-core.mjs),
// so its minimal CRD is checked against that package's models instead.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { parseAllDocuments } from 'yaml';
import { PACKAGE_VALIDATED_GROUPS, CRD_DIR as UPSTREAM_CRD_DIR } from './util';

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
    // GIVEN the minimal CRDs (but those of groups an npm package models: see below) and the upstream ones
    const upstream = crds(UPSTREAM_CRD_DIR);
    const minimal = crds(MINIMAL_CRD_DIR).filter(c => !PACKAGE_VALIDATED_GROUPS.includes(c.spec.group));
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

  test('the monitoring.coreos.com minimal CRD keeps only fields of @kubernetes-models/prometheus-operator\'s models, typed as there', () => {
    // GIVEN the minimal prometheus-operator CRDs and the npm package's type declarations
    const minimal = crds(MINIMAL_CRD_DIR).filter(c => c.spec.group === 'monitoring.coreos.com');
    expect(minimal.map(c => c.spec.names.kind).sort()).toEqual(['PodMonitor', 'PrometheusRule', 'ServiceMonitor']);
    const models = packageModels();
    // WHEN each spec is compared with the package's model of its kind (from spec down: the root is TypeMeta)
    const problems = minimal.flatMap(crd => {
      const root = crd.spec.versions.find((v: any) => v.name === 'v1').schema.openAPIV3Schema;
      return modelProblems(models, { type: 'object', required: root.required, properties: { spec: root.properties.spec } }, `I${crd.spec.names.kind}`,
        crd.spec.names.kind);
    });
    // THEN every field is the package's, with its type and optionality
    expect(problems).toEqual([]);
  });

  test('the model check finds a field the package lacks, another type and another optionality', () => {
    // GIVEN a PodMonitor spec that drifted from the package's model
    const drifted = {
      type: 'object',
      required: ['podMetricsEndpoints'],
      properties: {
        selector: { type: 'object', properties: { matchLabels: { type: 'object', additionalProperties: { type: 'integer' } } } },
        podMetricsEndpoints: { type: 'array', items: { type: 'object', properties: { port: { type: 'string' }, portz: { type: 'string' } } } },
      },
    };
    // WHEN compared THEN each difference is named
    expect(modelProblems(packageModels(), drifted, 'IPodMonitorSpec', 'T')).toEqual([
      'T.selector: optional, the package: required',
      'T.selector.matchLabels{}: integer, the package: string',
      'T.podMetricsEndpoints: required, the package: optional',
      'T.podMetricsEndpoints[].portz: not in the package\'s model',
    ]);
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

/** Interfaces and type aliases of @kubernetes-models/prometheus-operator's v1 models, by every name they go by. */
interface PackageModels {
  readonly interfaces: Map<string, { fields: Map<string, { type: string; optional: boolean }>; extends: string[] }>;
  readonly aliases: Map<string, string>;
}

function packageModels(): PackageModels {
  const pkg = path.dirname(require.resolve('@kubernetes-models/prometheus-operator/package.json', { paths: [ROOT] }));
  const machinery = path.dirname(require.resolve('@kubernetes-models/apimachinery/package.json', { paths: [pkg] }));
  const v1 = path.join(pkg, 'monitoring.coreos.com', 'v1');
  const files = [
    ...fs.readdirSync(v1).filter(f => f.endsWith('.d.ts')).map(f => path.join(v1, f)),
    ...['apis/meta/v1/LabelSelector.d.ts', 'apis/meta/v1/LabelSelectorRequirement.d.ts', 'util/intstr/IntOrString.d.ts'].map(f => path.join(machinery, f)),
  ];
  const interfaces: PackageModels['interfaces'] = new Map();
  const aliases = new Map<string, string>();
  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8');
    const names = new Map<string, string[]>();
    for (const m of text.matchAll(/export type \{ (I\w+) as (I\w+)/g)) names.set(m[1], [m[1], m[2]]);
    for (const m of text.matchAll(/^export interface (I\w+)(?: extends ([^{]+))? \{\n([\s\S]*?)\n\}/gm)) {
      const fields = new Map([...m[3].matchAll(/^ {4}"([^"]+)"(\?)?: ([\s\S]*?);$/gm)].map(f => [f[1], { type: f[3], optional: f[2] === '?' }]));
      const model = { fields, extends: (m[2] ?? '').split(',').map(e => e.trim()).filter(e => e.startsWith('I')) };
      for (const name of names.get(m[1]) ?? [m[1]]) interfaces.set(name, model);
    }
    for (const m of text.matchAll(/^export type (I\w+) = ([^;]+);$/gm)) {
      for (const name of names.get(m[1]) ?? [m[1]]) aliases.set(name, m[2]);
    }
  }
  return { interfaces, aliases };
}

/** A declared type as a schema kind: 'string', 'integer', 'boolean', 'int-or-string', 'array', 'map' or an interface name. */
function kindOf(models: PackageModels, type: string): { kind: string; of?: string } {
  const t = type.trim();
  if (t.startsWith('Array<')) return { kind: 'array', of: t.slice(6, -1) };
  if (t.startsWith('{')) return { kind: 'map', of: /\]: ([^;]+)/.exec(t)![1] };
  if (models.aliases.has(t)) return kindOf(models, models.aliases.get(t)!);
  if (models.interfaces.has(t)) return { kind: t };
  if (t === 'string | number') return { kind: 'int-or-string' };
  if (t === 'string' || /^"[^"]*"( \| "[^"]*")*$/.test(t)) return { kind: 'string' };
  return { kind: t === 'number' ? 'integer' : t };
}

/** An interface's fields with those of the interfaces it extends. */
function fieldsOf(models: PackageModels, name: string): Map<string, { type: string; optional: boolean }> {
  const model = models.interfaces.get(name)!;
  return new Map([...model.extends.flatMap(e => (models.interfaces.has(e) ? [...fieldsOf(models, e)] : [])), ...model.fields]);
}

/** Where a minimal schema differs from the package's declared type: a field it lacks, another type or another optionality. */
function modelProblems(models: PackageModels, mine: any, type: string, at: string): string[] {
  const theirs = kindOf(models, type);
  const expected = mine['x-kubernetes-int-or-string'] ? 'int-or-string'
    : mine.type === 'array' ? 'array'
      : mine.type === 'object' && mine.properties === undefined ? 'map'
        : mine.type === 'object' ? 'interface' : mine.type;
  const got = models.interfaces.has(theirs.kind) ? 'interface' : theirs.kind;
  if (expected !== got) return [`${at}: ${expected}, the package: ${got}`];
  if (expected === 'array') return modelProblems(models, mine.items, theirs.of!, `${at}[]`);
  if (expected === 'map') return mine.additionalProperties ? modelProblems(models, mine.additionalProperties, theirs.of!, `${at}{}`) : [];
  if (expected !== 'interface') return [];
  const fields = fieldsOf(models, theirs.kind);
  const required = new Set<string>(mine.required ?? []);
  const problems = [...fields].filter(([name, f]) => !f.optional && !(name in mine.properties) && !['apiVersion', 'kind'].includes(name))
    .map(([name]) => `${at}.${name}: required by the package but left out`);
  for (const [name, schema] of Object.entries<any>(mine.properties)) {
    const field = fields.get(name);
    if (field === undefined) {
      problems.push(`${at}.${name}: not in the package's model`);
      continue;
    }
    if (required.has(name) === field.optional) {
      problems.push(`${at}.${name}: ${required.has(name) ? 'required' : 'optional'}, the package: ${field.optional ? 'optional' : 'required'}`);
    }
    problems.push(...modelProblems(models, schema, field.type, `${at}.${name}`));
  }
  return problems;
}
