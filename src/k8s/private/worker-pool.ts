import { ApiObject, Lazy } from 'cdk8s';
import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { AcceleratedInstanceType } from '../../catalog';
import { KvCacheAttachment, IServingPool } from '../serving-pool';
import { addComputeDomain, claimComputeDomain, needsComputeDomain } from './compute-domain';
import { APP_INSTANCE, PORTS } from './labels';
import { addLeaderWorkerSet } from './leader-worker-set';
import { PoolExtras } from './pool-extras';
import { PoolPlan } from './pool-plan';
import { WorkerContext, hostShare, servingSelector, shmGib, workerPodTemplate } from './worker-pod';

/** Builds object metadata: name, namespace, labels and extras (internal). */
export type MetadataFn = (name: string, labels: Record<string, string>, extra?: Partial<k8s.ObjectMeta>) => k8s.ObjectMeta;

/** Inputs of a {@link WorkerPool} (internal). */
export interface WorkerPoolInputs {
  readonly plan: PoolPlan;
  readonly ctx: WorkerContext;
  readonly meta: MetadataFn;
  /** Name of the workload, Service and budget. */
  readonly objectName: string;
  readonly labels: Record<string, string>;
  /** Bytes of the checkpoint, GiB (sizes a pod-local model cache). */
  readonly checkpointGib: number;
  /** An autoscaler owns the replica count: the workload leaves `replicas` out. */
  readonly autoscaled?: boolean;
}

/** Host memory and disk a pod may use (shared by the pool kinds). */
export function podCapacity(
  plan: PoolPlan, ctx: WorkerContext, checkpointGib: number,
): { hostMemoryGib: number; sharedMemoryGib: number; localDiskGib: number } {
  const type = plan.options.instanceType;
  const host = hostShare(type, plan.nodeShare);
  // The instance store (decimal GB), the pod's share less the same 10% reserve as memory, less the model
  // cache: a node-local cache holds one copy per node (each pod pays its share), a pod-local one its size.
  const nvmeGib = (type.localNvmeTotalGb * 1e9) / 2 ** 30;
  const modelCacheGib = ctx.modelCache.kind === 'host-path'
    ? checkpointGib * plan.nodeShare
    : ctx.modelCache.sizeGib ?? checkpointGib * 2;
  return {
    // The most a pod may request: its share of RAM less 5% for the kubelet, the OS and DaemonSets (the
    // default request keeps 10% back; a host KV tier may use the difference).
    hostMemoryGib: Math.max(host.memoryGib, Math.floor(type.memoryGib * plan.nodeShare * 0.95)),
    sharedMemoryGib: shmGib(plan.layout.acceleratorsPerPod, host.memoryGib),
    localDiskGib: Math.max(0, Math.floor(nvmeGib * plan.nodeShare * 0.9 - modelCacheGib)),
  };
}

/**
 * One pool of a DisaggregatedInference (internal): a Deployment, or a LeaderWorkerSet when a replica
 * spans nodes, a headless Service and a PodDisruptionBudget. The pod templates are produced at synthesis,
 * so env, arguments and KV caches added after construction land in them.
 */
export class WorkerPool extends Construct implements IServingPool {
  public readonly poolName: string;
  public readonly role: string;
  public readonly instanceType: AcceleratedInstanceType;
  public readonly acceleratorsPerPod: number;
  public readonly serverProcessesPerPod = 1;
  public readonly kvCacheBytesPerPod: number;
  public readonly hostMemoryGibPerPod: number;
  public readonly sharedMemoryGib: number;
  public readonly localDiskGibPerPod: number;
  public readonly usesNixl = true;
  /** The resolved plan (internal). */
  public readonly plan: PoolPlan;
  private readonly extras: PoolExtras;

  constructor(scope: Construct, id: string, inputs: WorkerPoolInputs) {
    super(scope, id);
    const { plan, ctx, meta, objectName, labels, checkpointGib } = inputs;
    // With an autoscaler the manifest leaves the count out, so that applying it again does not reset it.
    const replicas = inputs.autoscaled ? undefined : plan.replicas;
    this.plan = plan;
    this.poolName = objectName;
    this.role = plan.role;
    this.instanceType = plan.options.instanceType;
    this.acceleratorsPerPod = plan.layout.acceleratorsPerPod;
    this.kvCacheBytesPerPod = plan.plan.kvCacheBytesPerRank * plan.layout.acceleratorsPerPod;
    const capacity = podCapacity(plan, ctx, checkpointGib);
    this.hostMemoryGibPerPod = capacity.hostMemoryGib;
    this.sharedMemoryGib = capacity.sharedMemoryGib;
    this.localDiskGibPerPod = capacity.localDiskGib;
    this.extras = new PoolExtras(`pool '${this.node.path}'`);
    const extras = this.extras;
    const template = (kind: 'server' | 'leader' | 'worker') => workerPodTemplate(ctx, plan, kind, labels, checkpointGib, extras);

    let workload: ApiObject;
    if (!plan.multiNode) {
      workload = new k8s.KubeDeployment(this, 'Workload', {
        metadata: meta(objectName, labels),
        spec: {
          replicas,
          selector: { matchLabels: labels },
          // No spare accelerators to surge into: replace one pod at a time.
          strategy: {
            type: 'RollingUpdate',
            rollingUpdate: { maxSurge: k8s.IntOrString.fromNumber(0), maxUnavailable: k8s.IntOrString.fromNumber(1) },
          },
          // Produced at synthesis: env, arguments and KV caches added after construction land in it.
          template: Lazy.any({ produce: (): k8s.PodTemplateSpec => template('server') }),
        },
      });
    } else {
      // LeaderWorkerSet: one group of podsPerReplica pods per replica; the leader serves HTTP.
      workload = addLeaderWorkerSet(this, 'Workload', {
        metadata: meta(objectName, labels),
        replicas,
        size: plan.layout.podsPerReplica,
        leaderTemplate: () => template('leader'),
        workerTemplate: () => template('worker'),
      });
    }
    if (needsComputeDomain(this.instanceType)) {
      // p6e-gb200: every pod claims the pool's IMEX channel; a group that spans nodes stays in one NVLink clique.
      const claimTemplate = addComputeDomain(this, 'ComputeDomain', meta(objectName, labels));
      claimComputeDomain(workload, plan.multiNode
        ? ['/spec/leaderWorkerTemplate/leaderTemplate', '/spec/leaderWorkerTemplate/workerTemplate']
        : ['/spec/template'], claimTemplate, labels, plan.multiNode);
    }
    // Headless: DNS returns every ready pod's IP, which the router resolves for endpoints and KV events.
    new k8s.KubeService(this, 'Service', {
      metadata: meta(objectName, labels),
      spec: {
        clusterIp: 'None',
        selector: servingSelector(labels, plan),
        ports: [
          { name: 'http', port: PORTS.http, targetPort: k8s.IntOrString.fromString('http'), protocol: 'TCP' },
          { name: 'kv-events', port: PORTS.kvEvents, targetPort: k8s.IntOrString.fromString('kv-events'), protocol: 'TCP' },
        ],
      },
    });
    new k8s.KubePodDisruptionBudget(this, 'Budget', {
      metadata: meta(objectName, labels),
      // One replica at a time: voluntary evictions never take a whole pool down at once.
      spec: { maxUnavailable: k8s.IntOrString.fromNumber(1), selector: { matchLabels: { [APP_INSTANCE]: ctx.instance, ...labels } } },
    });
  }

  public addEnv(name: string, value: string): void {
    this.extras.addEnv(name, value);
  }

  public addArgs(...args: string[]): void {
    this.extras.addArgs(args);
  }

  public attachKvCache(attachment: KvCacheAttachment): void {
    this.extras.attachKvCache(attachment);
  }
}
