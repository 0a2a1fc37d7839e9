import { createHash } from 'crypto';
import { ApiObject, Chart } from 'cdk8s';
import { Construct } from 'constructs';
import { ModelArchitecture, Precision } from '../catalog';
import { GatewayExposure } from './gateway-exposure';
import { InferencePoolOptions } from './inference-pool-options';
import { KvTransfer } from './kv-transfer';
import { ModelCache } from './model-cache';
import { ModelSource } from './model-source';
import { gatewayObjects } from './private/gateway-objects';
import { APP_INSTANCE, APP_PART_OF, PORTS, componentLabels } from './private/labels';
import { PoolPlan, planPool } from './private/pool-plan';
import { routerConfig } from './private/router-config';
import { WorkerContext, servingSelector, workerPodTemplate } from './private/worker-pod';
import { RouterPolicy } from './router-policy';

/**
 * Props of {@link DisaggregatedInference}.
 */
export interface DisaggregatedInferenceProps {
  /** The model architecture (a catalog preset or `ModelArchitecture.custom(...)`): sizes and validates the pools. */
  readonly model: ModelArchitecture;
  /**
   * Where the weights come from.
   * @default - ModelSource.huggingFace(model.huggingFaceId), without a token
   */
  readonly modelSource?: ModelSource;
  /**
   * The container image of the workers (vLLM with NIXL and libfabric) and, unless `routerImage` is
   * set, of the router (`disagg-engine router`): the project's engine image.
   */
  readonly image: string;
  /**
   * Image of the router pods (the slim engine image without vLLM).
   * @default - `image`
   */
  readonly routerImage?: string;
  /**
   * Image pull policy of every container.
   * @default - Kubernetes' default (IfNotPresent for tagged images)
   */
  readonly imagePullPolicy?: string;
  /** The prefill pool: computes prompts' KV cache and hands it to decode. */
  readonly prefill: InferencePoolOptions;
  /** The decode pool: receives KV cache and generates tokens. */
  readonly decode: InferencePoolOptions;
  /**
   * Longest sequence (prompt plus output) served, tokens (vLLM `--max-model-len`).
   * @default - the model's maximum context
   */
  readonly maxContext?: number;
  /**
   * Precision of the weights. FP8 on a BF16 checkpoint is quantized by vLLM at load time
   * (`--quantization fp8`); other precisions need a checkpoint stored in them (`prequantizedCheckpoint`).
   * @default - the model's native checkpoint precision
   */
  readonly weightPrecision?: Precision;
  /**
   * The checkpoint at `modelSource` is already stored at `weightPrecision` (e.g. an FP8 or AWQ
   * repository): vLLM reads the scheme from its config, so no `--quantization` flag is passed.
   * @default false
   */
  readonly prequantizedCheckpoint?: boolean;
  /**
   * Precision of the KV cache (vLLM `--kv-cache-dtype`); prefill and decode must agree, since NIXL
   * copies blocks as they are.
   * @default Precision.BF16
   */
  readonly kvCachePrecision?: Precision;
  /**
   * Paged KV block size, tokens (vLLM `--block-size`); also the block size of the router's prefix index.
   * @default 16
   */
  readonly kvBlockSize?: number;
  /**
   * Name of the served model in the OpenAI API (vLLM `--served-model-name`).
   * @default - the model's Hugging Face id
   */
  readonly servedModelName?: string;
  /**
   * How the router picks endpoints.
   * @default RouterPolicy.KV_AWARE
   */
  readonly routerPolicy?: RouterPolicy;
  /**
   * Uncached prompt tokens from which the router sends a request through the prefill pool; shorter
   * (or mostly cached) prompts are prefilled on the decode pod itself.
   * @default 512
   */
  readonly disaggregationThresholdTokens?: number;
  /**
   * Router replicas.
   * @default 2
   */
  readonly routerReplicas?: number;
  /**
   * How KV cache moves from prefill to decode.
   * @default KvTransfer.AUTO
   */
  readonly kvTransfer?: KvTransfer;
  /**
   * How clients reach the router from outside the cluster.
   * @default GatewayExposure.none()
   */
  readonly gateway?: GatewayExposure;
  /**
   * Where workers cache model files.
   * @default ModelCache.nodeLocal()
   */
  readonly modelCache?: ModelCache;
  /**
   * Base name of every object (DNS label; pools add '-prefill', '-decode', '-router').
   * @default - the model name with dots replaced by dashes
   */
  readonly name?: string;
  /**
   * Namespace of every object.
   * @default - the chart's namespace
   */
  readonly namespace?: string;
  /**
   * Availability Zone to pin every worker to (EFA traffic stays within one zone).
   * @default - no zone pin; workers prefer the zone of the deployment's other pods
   */
  readonly zone?: string;
  /**
   * Annotations of the workers' ServiceAccount (e.g. `eks.amazonaws.com/role-arn` for IRSA access to an
   * S3 model source).
   * @default - none
   */
  readonly serviceAccountAnnotations?: { [key: string]: string };
  /**
   * Run worker containers as UID/GID 1000 with `runAsNonRoot`. vLLM images run as root and hostPath
   * model caches are created root-owned, so enable it only with an image whose user owns its home and
   * with `ModelCache.podLocal()` (emptyDir honours `fsGroup`). The router always runs non-root.
   * @default false
   */
  readonly runWorkersAsNonRoot?: boolean;
  /**
   * Sustained download rate of the model checkpoint into the cache, GB/s; sizes the startup probe
   * (checkpoint bytes / rate + `startupOverheadSeconds`).
   * @default 0.5
   */
  readonly modelLoadBandwidthGBps?: number;
  /**
   * Seconds a worker needs after the download: loading into GPU memory, profiling, CUDA graph capture,
   * NIXL registration.
   * @default 600
   */
  readonly startupOverheadSeconds?: number;
}

/**
 * Disaggregated prefill/decode serving of one model with vLLM: a prefill pool and a decode pool that move
 * KV cache over NIXL (libfabric on EFA), behind the project's KV-aware router.
 *
 * Emits a ServiceAccount; per pool a Deployment (a LeaderWorkerSet when a replica spans nodes), a headless
 * Service for endpoint discovery and a PodDisruptionBudget; the router's ConfigMap, Deployment, Service and
 * PodDisruptionBudget; and the Gateway API objects `gateway` asks for. Pools are sized and checked with
 * src/sizing when constructed: every error names the prop, the value and a fix.
 *
 * Warnings (environmental, not fatal) are in `warnings` and in the construct metadata under
 * `disagg:warning`; cdk8s has no Annotations facility.
 */
export class DisaggregatedInference extends Construct {
  /** Base name of the objects. */
  public readonly name: string;
  /** The prefill pool's headless Service name. */
  public readonly prefillServiceName: string;
  /** The decode pool's headless Service name. */
  public readonly decodeServiceName: string;
  /** The router's Service name (port 80, or `routerPort`). */
  public readonly routerServiceName: string;
  /** The router's JSON configuration, as written into its ConfigMap. */
  public readonly routerConfig: string;
  /** The NIXL backend in use: 'LIBFABRIC' or 'UCX'. */
  public readonly nixlBackend: string;
  /** Whether the prefill pool is a LeaderWorkerSet (a replica spans nodes). */
  public readonly prefillIsMultiNode: boolean;
  /** Whether the decode pool is a LeaderWorkerSet. */
  public readonly decodeIsMultiNode: boolean;
  /** Tensor-parallel size of the prefill pool (resolved). */
  public readonly prefillTensorParallel: number;
  /** Tensor-parallel size of the decode pool (resolved). */
  public readonly decodeTensorParallel: number;
  /** Warnings with stable ids, e.g. 'disagg:tcpKvTransfer: ...'. */
  public readonly warnings: string[] = [];

  constructor(scope: Construct, id: string, props: DisaggregatedInferenceProps) {
    super(scope, id);
    const where = `DisaggregatedInference '${this.node.path}'`;
    const model = props.model;
    const name = props.name ?? model.name.replace(/\./g, '-');
    if (!/^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$/.test(name)) {
      throw new Error(`${where}: 'name' ('${name}') must be a DNS label of at most 40 characters (lower case, digits, '-', starting with a letter); pass 'name'`);
    }
    this.name = name;
    const namespace = props.namespace ?? Chart.of(this).namespace;
    const source = props.modelSource ?? ModelSource.huggingFace(model.huggingFaceId);
    const weightPrecision = props.weightPrecision ?? model.nativePrecision;
    const kvCachePrecision = props.kvCachePrecision ?? Precision.BF16;
    if (!kvCachePrecision.supportedForKvCache) {
      const usable = Precision.all().filter(p => p.supportedForKvCache).map(p => p.name).join(', ');
      throw new Error(`${where}: 'kvCachePrecision' (${kvCachePrecision.name}) cannot hold a vLLM KV cache; use ${usable}`);
    }
    const prequantized = props.prequantizedCheckpoint ?? false;
    if (!prequantized && weightPrecision !== model.nativePrecision && weightPrecision !== Precision.FP8
      && weightPrecision.bytesPerElement < model.nativePrecision.bytesPerElement) {
      throw new Error(`${where}: 'weightPrecision' (${weightPrecision.name}) needs a checkpoint stored in ${weightPrecision.name}: vLLM quantizes ` +
        `a ${model.nativePrecision.name} checkpoint at load time only to fp8. Point 'modelSource' at a ${weightPrecision.name} checkpoint and set ` +
        "'prequantizedCheckpoint: true', or use Precision.FP8");
    }
    const maxContext = props.maxContext ?? model.maxContext;
    const kvBlockSize = props.kvBlockSize ?? 16;
    if (![1, 8, 16, 32, 64, 128].includes(kvBlockSize)) {
      throw new Error(`${where}: 'kvBlockSize' (${kvBlockSize}) must be one of vLLM's block sizes 8, 16, 32, 64 or 128; use 16`);
    }
    const threshold = props.disaggregationThresholdTokens ?? 512;
    if (!(Number.isInteger(threshold) && threshold >= 0)) {
      throw new Error(`${where}: 'disaggregationThresholdTokens' (${threshold}) must be an integer >= 0; 0 sends every request through prefill`);
    }
    const routerReplicas = props.routerReplicas ?? 2;
    if (!(Number.isInteger(routerReplicas) && routerReplicas >= 1)) {
      throw new Error(`${where}: 'routerReplicas' (${routerReplicas}) must be a positive integer; use 2 for availability`);
    }
    const bandwidth = props.modelLoadBandwidthGBps ?? 0.5;
    const overhead = props.startupOverheadSeconds ?? 600;
    if (!(Number.isFinite(bandwidth) && bandwidth > 0)) {
      throw new Error(`${where}: 'modelLoadBandwidthGBps' (${bandwidth}) must be a positive number of GB/s; 0.5 suits a Hugging Face download`);
    }
    if (!(Number.isFinite(overhead) && overhead >= 0)) {
      throw new Error(`${where}: 'startupOverheadSeconds' (${overhead}) must be a number >= 0`);
    }

    const inputs = { where, model, maxContext, weightPrecision, kvCachePrecision, kvBlockSize };
    const prefill = planPool('prefill', props.prefill, inputs);
    const decode = planPool('decode', props.decode, inputs);
    this.prefillIsMultiNode = prefill.multiNode;
    this.decodeIsMultiNode = decode.multiNode;
    this.prefillTensorParallel = prefill.parallelism.tensorParallel;
    this.decodeTensorParallel = decode.parallelism.tensorParallel;

    // KV transfer: NIXL over libfabric needs EFA on both sides.
    const transfer = props.kvTransfer ?? KvTransfer.AUTO;
    const efaBoth = props.prefill.instanceType.supportsEfa && props.decode.instanceType.supportsEfa
      && prefill.efaInterfacesPerPod > 0 && decode.efaInterfacesPerPod > 0;
    if (transfer === KvTransfer.NIXL_LIBFABRIC && !efaBoth) {
      const lacking = [prefill, decode].filter(p => p.efaInterfacesPerPod === 0).map(p => `${p.role} (${p.options.instanceType.name})`).join(' and ');
      throw new Error(`${where}: 'kvTransfer' (nixl-libfabric) needs EFA on both pools, but ${lacking} has none; ` +
        'use an EFA instance type or KvTransfer.NIXL_UCX');
    }
    this.nixlBackend = transfer.nixlBackend ?? (efaBoth ? 'LIBFABRIC' : 'UCX');
    if (this.nixlBackend === 'UCX') {
      this.warn('disagg:tcpKvTransfer', 'KV cache moves over NIXL/UCX on TCP: without EFA a long prompt\'s KV transfer can take longer than ' +
        'prefilling it on the decode pod; prefer EFA instance types for both pools');
    }
    if (props.prefill.instanceType.isNeuron || props.decode.instanceType.isNeuron) {
      this.warn('disagg:neuronNixl', 'vLLM\'s NixlConnector targets CUDA devices; check that your Neuron vLLM image supports disaggregated serving');
    }
    const modelCache = props.modelCache ?? ModelCache.nodeLocal();
    if (props.runWorkersAsNonRoot && modelCache.kind === 'host-path') {
      this.warn('disagg:nonRootHostPath', 'non-root workers cannot write a hostPath model cache that the kubelet creates root-owned; use ModelCache.podLocal() or pre-create the directory');
    }

    const checkpointBytes = model.parametersTotal * model.nativePrecision.bytesPerElement;
    const startupSeconds = Math.ceil(checkpointBytes / (bandwidth * 1e9) + overhead);
    const servedModelName = props.servedModelName ?? model.huggingFaceId;
    const meta = (objectName: string, labels: Record<string, string>, extra?: Record<string, unknown>) => strip({
      name: objectName, namespace, labels: { ...labels, [APP_PART_OF]: 'disagg' }, ...extra,
    });

    // ServiceAccount shared by workers and router; neither talks to the Kubernetes API.
    new ApiObject(this, 'ServiceAccount', {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: meta(name, componentLabels(name, 'serving'), props.serviceAccountAnnotations ? { annotations: props.serviceAccountAnnotations } : undefined),
      automountServiceAccountToken: false,
    } as any);

    const ctx: WorkerContext = {
      instance: name,
      model,
      source,
      servedModelName,
      image: props.image,
      imagePullPolicy: props.imagePullPolicy,
      serviceAccountName: name,
      maxContext,
      weightPrecision,
      kvCachePrecision,
      prequantizedCheckpoint: prequantized,
      kvBlockSize,
      nixlBackend: this.nixlBackend,
      modelCache,
      runAsNonRoot: props.runWorkersAsNonRoot ?? false,
      startupSeconds,
      zone: props.zone,
    };
    const dns = (svc: string) => (namespace ? `${svc}.${namespace}.svc.cluster.local` : svc);
    this.prefillServiceName = `${name}-prefill`;
    this.decodeServiceName = `${name}-decode`;
    this.routerServiceName = `${name}-router`;
    for (const pool of [prefill, decode]) {
      this.addPool(pool, ctx, meta, checkpointBytes / 2 ** 30);
    }

    // Router: configuration, Deployment, Service, PodDisruptionBudget.
    const config = routerConfig({
      model,
      servedModelName,
      weightPrecision,
      kvBlockSize,
      policy: props.routerPolicy ?? RouterPolicy.KV_AWARE,
      disaggregationThresholdTokens: threshold,
      prefill,
      decode,
      prefillHost: dns(this.prefillServiceName),
      decodeHost: dns(this.decodeServiceName),
      kvTransfer: `nixl-${this.nixlBackend.toLowerCase()}`,
    });
    this.routerConfig = JSON.stringify(config, undefined, 2);
    const routerLabels = componentLabels(name, 'router');
    const configName = `${name}-router-config`;
    new ApiObject(this, 'RouterConfig', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: meta(configName, routerLabels),
      data: { 'config.json': this.routerConfig },
    } as any);
    const routerContainer = strip({
      name: 'router',
      image: props.routerImage ?? props.image,
      imagePullPolicy: props.imagePullPolicy,
      command: ['disagg-engine'],
      args: ['router', '--config', '/etc/disagg/config.json'],
      ports: [{ name: 'http', containerPort: PORTS.router, protocol: 'TCP' }],
      resources: { requests: { cpu: '2', memory: '4Gi' }, limits: { memory: '4Gi' } },
      readinessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 5, failureThreshold: 3 },
      livenessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 15, failureThreshold: 4, timeoutSeconds: 5 },
      volumeMounts: [{ name: 'config', mountPath: '/etc/disagg', readOnly: true }],
      securityContext: {
        runAsNonRoot: true,
        // 65532: the conventional 'nonroot' UID of distroless-style slim images.
        runAsUser: 65532,
        runAsGroup: 65532,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      },
    });
    new ApiObject(this, 'Router', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta(`${name}-router`, routerLabels),
      spec: {
        replicas: routerReplicas,
        selector: { matchLabels: routerLabels },
        template: {
          metadata: {
            labels: routerLabels,
            // Roll the router when its configuration changes.
            annotations: { 'disagg.dev/config-sha256': createHash('sha256').update(this.routerConfig).digest('hex') },
          },
          spec: {
            serviceAccountName: name,
            automountServiceAccountToken: false,
            securityContext: { seccompProfile: { type: 'RuntimeDefault' } },
            affinity: {
              podAntiAffinity: {
                preferredDuringSchedulingIgnoredDuringExecution: [{
                  weight: 100,
                  podAffinityTerm: { labelSelector: { matchLabels: routerLabels }, topologyKey: 'kubernetes.io/hostname' },
                }],
              },
            },
            containers: [routerContainer],
            volumes: [{ name: 'config', configMap: { name: configName } }],
          },
        },
      },
    } as any);
    new ApiObject(this, 'RouterService', {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta(this.routerServiceName, routerLabels),
      spec: {
        type: 'ClusterIP',
        selector: routerLabels,
        ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }],
      },
    } as any);
    new ApiObject(this, 'RouterBudget', {
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: meta(`${name}-router`, routerLabels),
      spec: routerReplicas > 1
        ? { minAvailable: 1, selector: { matchLabels: routerLabels } }
        : { maxUnavailable: 1, selector: { matchLabels: routerLabels } },
    } as any);

    const exposure = props.gateway ?? GatewayExposure.none();
    for (const object of gatewayObjects({
      exposure,
      name,
      namespace,
      routerService: this.routerServiceName,
      decodeSelector: servingSelector(componentLabels(name, 'decode'), decode),
      labels: componentLabels(name, 'gateway'),
    })) {
      const { id: objectId, ...body } = object;
      const metadata = (body.metadata ?? {}) as Record<string, unknown>;
      new ApiObject(this, objectId as string, { ...body, metadata: strip({ ...metadata, namespace: metadata.namespace ?? namespace }) } as any);
    }
  }

  private addPool(pool: PoolPlan, ctx: WorkerContext, meta: MetadataFn, checkpointGib: number): void {
    const role = pool.role;
    const objectName = role === 'prefill' ? this.prefillServiceName : this.decodeServiceName;
    const labels = componentLabels(this.name, role);
    const id = role === 'prefill' ? 'Prefill' : 'Decode';
    if (!pool.multiNode) {
      new ApiObject(this, id, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: meta(objectName, labels),
        spec: {
          replicas: pool.replicas,
          selector: { matchLabels: labels },
          // No spare accelerators to surge into: replace one pod at a time.
          strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
          template: stripDeep(workerPodTemplate(ctx, pool, 'server', labels, checkpointGib)),
        },
      } as any);
    } else {
      // LeaderWorkerSet: one group of podsPerReplica pods per replica; the leader serves HTTP.
      new ApiObject(this, id, {
        apiVersion: 'leaderworkerset.x-k8s.io/v1',
        kind: 'LeaderWorkerSet',
        metadata: meta(objectName, labels),
        spec: {
          replicas: pool.replicas,
          startupPolicy: 'LeaderCreated',
          rolloutStrategy: { type: 'RollingUpdate', rollingUpdateConfiguration: { maxSurge: 0, maxUnavailable: 1 } },
          leaderWorkerTemplate: {
            size: pool.layout.podsPerReplica,
            restartPolicy: 'RecreateGroupOnPodRestart',
            leaderTemplate: stripDeep(workerPodTemplate(ctx, pool, 'leader', labels, checkpointGib)),
            workerTemplate: stripDeep(workerPodTemplate(ctx, pool, 'worker', labels, checkpointGib)),
          },
        },
      } as any);
    }
    // Headless: DNS returns every ready pod's IP, which the router resolves for endpoints and KV events.
    new ApiObject(this, `${id}Service`, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta(objectName, labels),
      spec: {
        clusterIP: 'None',
        selector: servingSelector(labels, pool),
        ports: [
          { name: 'http', port: PORTS.http, targetPort: 'http', protocol: 'TCP' },
          { name: 'kv-events', port: PORTS.kvEvents, targetPort: 'kv-events', protocol: 'TCP' },
        ],
      },
    } as any);
    new ApiObject(this, `${id}Budget`, {
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: meta(objectName, labels),
      // One replica at a time: voluntary evictions never take a whole pool down at once.
      spec: { maxUnavailable: 1, selector: { matchLabels: { [APP_INSTANCE]: this.name, ...labels } } },
    } as any);
  }

  private warn(id: string, message: string): void {
    const text = `${id}: ${message}`;
    this.warnings.push(text);
    this.node.addMetadata('disagg:warning', text);
  }
}

/** Builds object metadata: name, namespace, labels and extras (internal). */
type MetadataFn = (name: string, labels: Record<string, string>, extra?: Record<string, unknown>) => any;

/** Drops undefined values (cdk8s keeps explicit undefined keys out anyway; this keeps snapshots tidy). */
function strip<T extends Record<string, unknown>>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

function stripDeep(o: any): any {
  if (Array.isArray(o)) return o.map(stripDeep);
  if (o !== null && typeof o === 'object') {
    return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined).map(([k, v]) => [k, stripDeep(v)]));
  }
  return o;
}
