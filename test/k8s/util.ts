import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import Ajv, { ValidateFunction } from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import { Chart, Size, Testing } from 'cdk8s';
import { parseAllDocuments } from 'yaml';
import {
  AcceleratedInstanceType, Accelerator, CpuArchitecture, DisaggregatedInference, EksAmiType, DisaggregatedInferenceProps, ExpertParallelPoolOptions,
  ExpertParallelPoolProps, GatewayExposure, KvStoreEndpoint, KvTier, ModelArchitecture, ModelSource, Monitoring, Precision, TieredKvCache,
} from '../../src';

/** Groups whose objects are custom resources (validated against the shared CRDs). */
const CRD_GROUPS = ['leaderworkerset.x-k8s.io', 'keda.sh', 'inference.networking.k8s.io', 'gateway.networking.k8s.io', 'resource.nvidia.com', 'karpenter.sh', 'karpenter.k8s.aws'];
/**
 * Custom resources validated by an npm package of kubernetes-models instead (validate-core.mjs): the shared
 * CRD folder has no prometheus-operator CRD, `@kubernetes-models/prometheus-operator` models it.
 */
export const PACKAGE_VALIDATED_GROUPS = ['monitoring.coreos.com'];

/** The shared CRD folder: ../shared/schemas/crds relative to the project root. */
export const CRD_DIR = path.resolve(__dirname, '..', '..', '..', 'shared', 'schemas', 'crds');

/** The engine image used by every fixture. */
export const IMAGE = 'registry.example.com/disagg/engine:0.1.0';

/**
 * The default P/D configuration: Llama-3.3-70B with FP8 weights and KV cache on p5en.48xlarge, prefill
 * 2 x TP4 and decode 2 x TP4 (one node each: TP4 leaves ~100 GiB of KV cache per H200, and two replicas
 * per pool keep the pool up while one restarts), behind a new Istio Gateway.
 */
export function defaultProps(overrides?: Partial<DisaggregatedInferenceProps>): DisaggregatedInferenceProps {
  return {
    model: ModelArchitecture.LLAMA_3_3_70B,
    modelSource: ModelSource.huggingFace('meta-llama/Llama-3.3-70B-Instruct', { tokenSecret: { name: 'hf-token' } }),
    image: IMAGE,
    weightPrecision: Precision.FP8,
    kvCachePrecision: Precision.FP8,
    maxContext: 32768,
    prefill: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 },
    decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 },
    gateway: GatewayExposure.gateway(),
    ...overrides,
  };
}

/**
 * defaultProps named 'llama' with monitoring (by default prometheus-operator objects labelled for
 * kube-prometheus-stack, with a price for the cost dashboard), an SLO met by 99% of requests, and the
 * decode pool autoscaled from 2 to 4 replicas; `extra` overrides.
 */
export function monitoredProps(
  monitoring = Monitoring.prometheusOperator({ instancePricePerHour: 63.3, labels: { release: 'kube-prometheus-stack' } }),
  extra: Partial<DisaggregatedInferenceProps> = {},
): DisaggregatedInferenceProps {
  const type = AcceleratedInstanceType.P5EN_48XLARGE;
  return defaultProps({
    name: 'llama',
    monitoring,
    slo: { ttftSeconds: 2, tpotSeconds: 0.05, targetShare: 0.99 },
    prefill: { instanceType: type, replicas: 2, tensorParallel: 4 },
    decode: { instanceType: type, tensorParallel: 4, autoscaling: { minReplicas: 2, maxReplicas: 4 } },
    ...extra,
  });
}

/** Synthesizes one DisaggregatedInference in a fresh chart; returns the construct and the manifests. */
export function synthInference(props: DisaggregatedInferenceProps, namespace = 'inference'): { inference: DisaggregatedInference; manifests: any[]; chart: Chart } {
  const chart = new Chart(Testing.app(), 'test', { namespace });
  const inference = new DisaggregatedInference(chart, 'Llama', props);
  return { inference, manifests: Testing.synth(chart), chart };
}

/** The manifest of one kind (and name suffix), or throws. */
export function find(manifests: any[], kind: string, nameSuffix?: string): any {
  const found = manifests.find(m => m.kind === kind && (nameSuffix === undefined || m.metadata.name.endsWith(nameSuffix)));
  if (!found) {
    throw new Error(`no ${kind}${nameSuffix ? ` named *${nameSuffix}` : ''} among ${manifests.map(m => `${m.kind}/${m.metadata.name}`).join(', ')}`);
  }
  return found;
}

/** The first container of a workload's pod template (Deployment, or an LWS template). */
export function container(workload: any, template: 'template' | 'leaderTemplate' | 'workerTemplate' = 'template'): any {
  const t = template === 'template' ? workload.spec.template : workload.spec.leaderWorkerTemplate[template];
  return t.spec.containers[0];
}

/** The value following `flag` in an argument list. */
export function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
}

/** An env var's entry by name. */
export function env(c: any, name: string): any {
  return (c.env ?? []).find((e: any) => e.name === name);
}

/** Result of {@link validateManifests}. */
export interface ValidationResult {
  /** Messages of invalid objects. */
  readonly errors: string[];
  /** Objects whose schema was unavailable (why), e.g. the CRD folder is absent. */
  readonly skipped: string[];
}

/**
 * Validates every manifest: core objects with `kubernetes-models` and prometheus-operator's with
 * `@kubernetes-models/prometheus-operator` (PACKAGE_VALIDATED_GROUPS; in a child node process: the packages
 * are ESM only), the other custom resources with ajv against `spec.versions[].schema.openAPIV3Schema` of the
 * shared CRDs. CEL rules (`x-kubernetes-validations`) are not evaluated.
 */
export function validateManifests(manifests: any[]): ValidationResult {
  const errors: string[] = [];
  const skipped: string[] = [];
  const custom = manifests.filter(m => CRD_GROUPS.includes(groupOf(m.apiVersion)));
  // Core objects, and the groups an npm package validates (never the shared CRD folder).
  const core = manifests.filter(m => !custom.includes(m));
  if (core.length > 0) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-k8s-'));
    const file = path.join(dir, 'manifests.json');
    fs.writeFileSync(file, JSON.stringify(core));
    try {
      const out = execFileSync(process.execPath, [path.join(__dirname, 'validate-core.mjs'), file], { cwd: path.resolve(__dirname, '..', '..'), encoding: 'utf8' });
      for (const p of JSON.parse(out) as any[]) {
        errors.push(`${p.kind}/${p.name}: ${p.error}`);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  for (const m of custom) {
    const validator = crdValidator(m.apiVersion, m.kind);
    if (typeof validator === 'string') {
      skipped.push(`${m.kind}/${m.metadata?.name}: ${validator}`);
      continue;
    }
    if (!validator(m)) {
      errors.push(`${m.kind}/${m.metadata?.name}: ${JSON.stringify(validator.errors)}`);
    }
  }
  return { errors, skipped };
}

/** Reports skipped validations on the console, so a run without ../shared says so clearly. */
export function reportSkipped(result: ValidationResult): void {
  if (result.skipped.length > 0) {
    // eslint-disable-next-line no-console
    console.warn(`SKIPPED schema validation of ${result.skipped.length} custom resource(s):\n${result.skipped.join('\n')}`);
  }
}

const validators = new Map<string, ValidateFunction | string>();

function crdValidator(apiVersion: string, kind: string): ValidateFunction | string {
  const key = `${apiVersion}/${kind}`;
  if (!validators.has(key)) {
    validators.set(key, loadCrdValidator(apiVersion, kind));
  }
  return validators.get(key)!;
}

function loadCrdValidator(apiVersion: string, kind: string): ValidateFunction | string {
  if (!fs.existsSync(CRD_DIR)) {
    return `CRD folder ${CRD_DIR} is absent (a fresh clone has no ../shared; CI has it)`;
  }
  const [group, version] = apiVersion.split('/');
  for (const file of fs.readdirSync(CRD_DIR).filter(f => f.endsWith('.yaml'))) {
    for (const doc of parseAllDocuments(fs.readFileSync(path.join(CRD_DIR, file), 'utf8'))) {
      const crd = doc.toJSON();
      if (crd?.kind !== 'CustomResourceDefinition' || crd.spec.group !== group || crd.spec.names.kind !== kind) continue;
      const v = crd.spec.versions.find((x: any) => x.name === version);
      if (!v) return `${file} has no version ${version} of ${kind}`;
      const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
      return ajv.compile(v.schema.openAPIV3Schema);
    }
  }
  return `no CRD for ${kind} (${group}) in ${CRD_DIR}`;
}

function groupOf(apiVersion: string): string {
  return apiVersion.includes('/') ? apiVersion.split('/')[0] : '';
}

/** A custom 8 x L40S instance type without EFA, for the TCP fallback paths. */
export function noEfaInstanceType(): AcceleratedInstanceType {
  return AcceleratedInstanceType.of({
    name: 'test-noefa.48xlarge',
    accelerator: Accelerator.L40S,
    acceleratorCount: 8,
    vcpus: 192,
    memoryGib: 1536,
    localNvmeCount: 4,
    localNvmeGbEach: 1900,
    networkBandwidthGbps: 100,
    networkCards: 1,
    maxEfaInterfaces: 0,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
  });
}

/** Synthesizes whatever `build` adds to a fresh chart; returns the manifests. */
export function synthChart<T>(build: (chart: Chart) => T, namespace = 'inference'): { manifests: any[]; chart: Chart; result: T } {
  const chart = new Chart(Testing.app(), 'test', { namespace });
  const result = build(chart);
  return { manifests: Testing.synth(chart), chart, result };
}

/** DeepSeek-V3 (FP8 checkpoint) wide expert parallelism on two p5en.48xlarge per group: EP16. */
export function wideEpProps(overrides?: Partial<ExpertParallelPoolProps>): ExpertParallelPoolProps {
  return {
    model: ModelArchitecture.DEEPSEEK_V3,
    image: IMAGE,
    instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
    nodesPerGroup: 2,
    maxContext: 32768,
    kvCachePrecision: Precision.FP8,
    ...overrides,
  };
}

/**
 * DeepSeek-V3 P/D props (defaultProps): a TP8 p5en prefill pool and an expert-parallel decode side of
 * two p5en per group; `decodeExpertParallel` fields and other props override.
 */
export function deepseekEpPdProps(ep?: Partial<ExpertParallelPoolOptions>,
  overrides?: Partial<DisaggregatedInferenceProps>): DisaggregatedInferenceProps {
  return defaultProps({
    model: ModelArchitecture.DEEPSEEK_V3,
    modelSource: undefined,
    weightPrecision: Precision.FP8,
    prefill: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, tensorParallel: 8 },
    decode: undefined,
    decodeExpertParallel: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, nodesPerGroup: 2, ...ep },
    ...overrides,
  });
}

/** Result of {@link tieredPdChart}. */
export interface TieredPd {
  readonly manifests: any[];
  readonly chart: Chart;
  readonly result: { inference: DisaggregatedInference; cache: TieredKvCache };
}

/**
 * Llama-3.3-70B P/D (defaultProps) with a TieredKvCache on the decode pool: host memory, local NVMe and
 * the engine's kvstore (64 GiB memory, 4 TiB disk).
 */
export function tieredPdChart(hostGib = 500): TieredPd {
  return synthChart(c => {
    const inference = new DisaggregatedInference(c, 'Llama', defaultProps());
    const cache = new TieredKvCache(c, 'Cache', {
      tiers: [
        KvTier.hostMemory(Size.gibibytes(hostGib)),
        KvTier.localNvme(Size.gibibytes(2000)),
        KvTier.remote(KvStoreEndpoint.engineKvStore({ image: 'registry.example.com/disagg/engine-slim:0.1.0', memory: Size.gibibytes(64), disk: Size.tebibytes(4) })),
      ],
    }).attachTo(inference.decode);
    return { inference, cache };
  });
}

/** The engine configuration's JSON Schema (engine/schema). */
export const ENGINE_SCHEMA = path.resolve(__dirname, '..', '..', 'engine', 'schema', 'engine-config.schema.json');

/**
 * A validator of the router's configuration file against the engine schema, as written: the schema
 * accepts a router file (it has `router`; the router reads router, policy, pools and endpoints) as
 * well as a cost-model file (model and hardware).
 */
export function routerConfigValidator(): ValidateFunction {
  const schema = JSON.parse(fs.readFileSync(ENGINE_SCHEMA, 'utf8'));
  return new Ajv2020({ strict: false, allErrors: true }).compile(schema);
}
