import { App, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as cdk8s from 'cdk8s';
import { InferenceCluster, InferenceClusterAddons, NodeLabels } from '../../src/aws';
import { AcceleratedInstanceType } from '../../src/catalog';

// These tests inspect the construct tree and run the cluster's validations without synthesizing
// the stack (a full EKS synthesis is slow): `node.validate()` returns what synthesis would report.

function newCluster(addons: InferenceClusterAddons = {}): InferenceCluster {
  return new InferenceCluster(new Stack(new App(), 'Test'), 'Inference', { addons });
}

function newChart(id = 'serving'): cdk8s.Chart {
  return new cdk8s.Chart(new cdk8s.App(), id);
}

interface PodOptions {
  readonly gpus?: number;
  readonly efa?: number;
  readonly instanceType?: string;
  readonly poolRole?: string;
}

function podSpec(o: PodOptions): any {
  const resources: Record<string, number> = {};
  if (o.gpus) resources['nvidia.com/gpu'] = o.gpus;
  if (o.efa) resources['vpc.amazonaws.com/efa'] = o.efa;
  const nodeSelector: Record<string, string> = {};
  if (o.instanceType) nodeSelector['node.kubernetes.io/instance-type'] = o.instanceType;
  if (o.poolRole) nodeSelector[NodeLabels.POOL_ROLE] = o.poolRole;
  return {
    nodeSelector,
    containers: [{ name: 'vllm', image: 'vllm', resources: { requests: resources, limits: resources } }],
  };
}

function deployment(chart: cdk8s.Chart, name: string, replicas: number, o: PodOptions): void {
  new cdk8s.ApiObject(chart, name, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: podSpec(o) } },
  });
}

function leaderWorkerSet(chart: cdk8s.Chart, name: string, replicas: number, size: number, o: PodOptions): void {
  const template = { spec: podSpec(o) };
  new cdk8s.ApiObject(chart, name, {
    apiVersion: 'leaderworkerset.x-k8s.io/v1',
    kind: 'LeaderWorkerSet',
    metadata: { name },
    spec: { replicas, leaderWorkerTemplate: { size, leaderTemplate: template, workerTemplate: template } },
  });
}

const P5EN = { instanceType: 'p5en.48xlarge', poolRole: 'llama' };

describe('addWorkload: add-ons the chart needs', () => {
  test('a LeaderWorkerSet with LWS off', () => {
    // GIVEN
    const c = newCluster({ leaderWorkerSet: { enabled: false } });
    const chart = newChart();
    leaderWorkerSet(chart, 'deepseek', 1, 2, { gpus: 8, ...P5EN });
    // WHEN / THEN
    expect(() => c.addWorkload(chart)).toThrow(
      /addWorkload\('serving'\): 'addons\.leaderWorkerSet\.enabled' is false, but the chart has LeaderWorkerSet 'deepseek'.*Remove `leaderWorkerSet: \{ enabled: false \}`/);
  });

  test('a Gateway and an HTTPRoute with the Gateway API CRDs off', () => {
    // GIVEN
    const c = newCluster({ gatewayApiCrds: { enabled: false } });
    const chart = newChart();
    new cdk8s.ApiObject(chart, 'gw', { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'Gateway', metadata: { name: 'llm' }, spec: { gatewayClassName: 'istio' } });
    new cdk8s.ApiObject(chart, 'route', { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'HTTPRoute', metadata: { name: 'llm' } });
    // WHEN / THEN
    expect(() => c.addWorkload(chart)).toThrow(/'addons\.gatewayApiCrds\.enabled' is false, but the chart has Gateway 'llm'.*GatewayExposure\.none\(\)/);
  });

  test('an Istio Gateway with Istio off', () => {
    // GIVEN
    const c = newCluster({ istio: { enabled: false } });
    const chart = newChart();
    new cdk8s.ApiObject(chart, 'gw', { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'Gateway', metadata: { name: 'llm' }, spec: { gatewayClassName: 'istio' } });
    // WHEN / THEN
    expect(() => c.addWorkload(chart)).toThrow(/'addons\.istio\.enabled' is false, but the chart has Gateway 'llm' of gatewayClassName 'istio'/);
  });

  test('an InferencePool with the Inference Extension CRDs off', () => {
    // GIVEN
    const c = newCluster({ inferenceExtensionCrds: { enabled: false } });
    const chart = newChart();
    new cdk8s.ApiObject(chart, 'pool', { apiVersion: 'inference.networking.k8s.io/v1', kind: 'InferencePool', metadata: { name: 'llama' } });
    // WHEN / THEN
    expect(() => c.addWorkload(chart)).toThrow(/'addons\.inferenceExtensionCrds\.enabled' is false, but the chart has InferencePool 'llama'/);
  });

  test('pods that request EFA with the EFA device plugin off', () => {
    // GIVEN
    const c = newCluster({ efaDevicePlugin: { enabled: false } });
    c.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, poolRole: 'llama' });
    const chart = newChart();
    deployment(chart, 'prefill', 1, { gpus: 4, efa: 8, ...P5EN });
    // WHEN / THEN
    expect(() => c.addWorkload(chart)).toThrow(
      /'addons\.efaDevicePlugin\.enabled' is false, but the chart has Deployment\/prefill, whose pods request 8 vpc\.amazonaws\.com\/efa; .*stay Pending/);
  });

  test('pods that request GPUs with the NVIDIA device plugin off', () => {
    // GIVEN
    const c = newCluster({ nvidiaDevicePlugin: { enabled: false } });
    const chart = newChart();
    deployment(chart, 'decode', 1, { gpus: 4, ...P5EN });
    // WHEN / THEN
    expect(() => c.addWorkload(chart)).toThrow(/'addons\.nvidiaDevicePlugin\.enabled' is false.*4 nvidia\.com\/gpu/);
  });
});

describe('addWorkload: node groups and capacity (checked at synthesis)', () => {
  test('a pool that fits its node group passes, and so do CPU pods without library labels', () => {
    // GIVEN
    const c = newCluster();
    c.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, desiredSize: 2, poolRole: 'llama' });
    const chart = newChart();
    deployment(chart, 'prefill', 2, { gpus: 4, efa: 8, ...P5EN });
    deployment(chart, 'decode', 2, { gpus: 4, efa: 8, ...P5EN });
    deployment(chart, 'router', 2, {});
    // WHEN
    c.addWorkload(chart);
    // THEN
    expect(c.node.validate()).toEqual([]);
  });

  test('no node group of the pool\'s instance type', () => {
    // GIVEN
    const c = newCluster();
    c.addAcceleratedNodeGroup('B200', { instanceType: AcceleratedInstanceType.P6_B200_48XLARGE, poolRole: 'llama' });
    const chart = newChart();
    deployment(chart, 'decode', 1, { gpus: 4, ...P5EN });
    // WHEN
    c.addWorkload(chart);
    // THEN
    const errors = c.node.validate();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/addWorkload\('serving'\): Deployment\/decode selects nodes with disagg\.dev\/pool-role=llama, node\.kubernetes\.io\/instance-type=p5en\.48xlarge, but no node group/);
    expect(errors[0]).toMatch(/B200 \(disagg\.dev\/instance-type=p6-b200\.48xlarge, disagg\.dev\/pool-role=llama\).*addAcceleratedNodeGroup/);
  });

  test('no node group with the pool\'s role', () => {
    // GIVEN
    const c = newCluster();
    c.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, poolRole: 'other' });
    const chart = newChart();
    deployment(chart, 'decode', 1, { gpus: 4, ...P5EN });
    // WHEN
    c.addWorkload(chart);
    // THEN
    expect(c.node.validate()).toEqual([expect.stringMatching(/disagg\.dev\/pool-role=llama, node\.kubernetes\.io\/instance-type=p5en\.48xlarge, but no node group of this cluster has them \(node groups: H200 \(disagg\.dev\/instance-type=p5en\.48xlarge, disagg\.dev\/pool-role=other\); SystemNodes \(disagg\.dev\/pool-role=system\)\)/)]);
  });

  test('a node group added after addWorkload counts', () => {
    // GIVEN
    const c = newCluster();
    const chart = newChart();
    deployment(chart, 'decode', 1, { gpus: 4, ...P5EN });
    c.addWorkload(chart);
    // WHEN
    c.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, poolRole: 'llama' });
    // THEN
    expect(c.node.validate()).toEqual([]);
  });

  test('replicas x GPUs per pod larger than maxSize x GPUs per node', () => {
    // GIVEN one p5en node (8 GPUs) and 3 replicas of TP4 (12 GPUs)
    const c = newCluster();
    c.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, desiredSize: 1, poolRole: 'llama' });
    const chart = newChart();
    deployment(chart, 'decode', 3, { gpus: 4, ...P5EN });
    // WHEN
    c.addWorkload(chart);
    // THEN
    expect(c.node.validate()).toEqual([expect.stringMatching(
      /the pods need 12 nvidia\.com\/gpu \(Deployment\/decode: 3 replicas x 4\), but H200 \(maxSize 1 x 8 nvidia\.com\/gpu\) can hold at most 8; raise 'maxSize' of node group H200 to 2 \(and 'desiredSize' once the capacity is there\)/)]);
  });

  test('prefill and decode on one group add up, LeaderWorkerSet workers included', () => {
    // GIVEN 2 p5en nodes (16 GPUs); an LWS of 1 replica x 2 nodes x 8 GPUs plus a TP4 decode pod (20 GPUs)
    const c = newCluster();
    c.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, desiredSize: 2, poolRole: 'llama' });
    const chart = newChart();
    leaderWorkerSet(chart, 'prefill', 1, 2, { gpus: 8, ...P5EN });
    deployment(chart, 'decode', 1, { gpus: 4, ...P5EN });
    // WHEN
    c.addWorkload(chart);
    // THEN
    expect(c.node.validate()).toEqual([expect.stringMatching(
      /need 20 nvidia\.com\/gpu \(LeaderWorkerSet\/prefill \(leader\): 1 replicas x 8, LeaderWorkerSet\/prefill \(workers\): 1 replicas x 1 workers x 8, Deployment\/decode: 1 replicas x 4\).*at most 16.*to 3/)]);
  });

  test('a pod larger than one node', () => {
    // GIVEN
    const c = newCluster();
    c.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, desiredSize: 4, poolRole: 'llama' });
    const chart = newChart();
    deployment(chart, 'decode', 1, { gpus: 16, ...P5EN });
    // WHEN
    c.addWorkload(chart);
    // THEN
    expect(c.node.validate()).toEqual([expect.stringMatching(
      /each pod of Deployment\/decode requests 16 nvidia\.com\/gpu, but the node groups it can run on \(H200: p5en\.48xlarge\) offer at most 8 per node/)]);
  });

  test('GPU pods selecting a Trainium group by role', () => {
    // GIVEN
    const c = newCluster();
    c.addAcceleratedNodeGroup('Trn2', { instanceType: AcceleratedInstanceType.TRN2_48XLARGE, poolRole: 'llama' });
    const chart = newChart();
    deployment(chart, 'decode', 1, { gpus: 4, poolRole: 'llama' });
    // WHEN
    c.addWorkload(chart);
    // THEN
    expect(c.node.validate()).toEqual([expect.stringMatching(/requests 4 nvidia\.com\/gpu, but .*Trn2: trn2\.48xlarge\) offer at most 0 per node/)]);
  });
});

describe('addWorkload: autoscaled pools (issue 24)', () => {
  function scaledObject(chart: cdk8s.Chart, target: { kind: string; name: string }, max: number): void {
    new cdk8s.ApiObject(chart, `${target.name}-scaler`, {
      apiVersion: 'keda.sh/v1alpha1',
      kind: 'ScaledObject',
      metadata: { name: target.name },
      spec: {
        scaleTargetRef: { apiVersion: target.kind === 'Deployment' ? 'apps/v1' : 'leaderworkerset.x-k8s.io/v1', ...target },
        minReplicaCount: 1,
        maxReplicaCount: max,
        triggers: [{ type: 'metrics-api', metadata: { url: 'http://r/scaling', valueLocation: 'pools.decode.pressure', targetValue: '0.8' } }],
      },
    });
  }

  /** A chart with one decode Deployment (1 replica, 4 GPUs on p5en) that a ScaledObject scales to `max`. */
  function scaledDecodeChart(id?: string, max = 2): cdk8s.Chart {
    const chart = newChart(id);
    deployment(chart, 'decode', 1, { gpus: 4, ...P5EN });
    scaledObject(chart, { kind: 'Deployment', name: 'decode' }, max);
    return chart;
  }

  test('a ScaledObject with KEDA off', () => {
    // GIVEN
    const c = newCluster({ keda: { enabled: false } });
    const chart = scaledDecodeChart();
    // THEN
    expect(() => c.addWorkload(chart)).toThrow(/'addons.keda.enabled' is false, but the chart has ScaledObject 'decode'.*Autoscaler.HPA/);
  });

  test('autoscaled pools on managed node groups with the Cluster Autoscaler off: a warning names it', () => {
    // GIVEN a managed node group, the Cluster Autoscaler switched off, and an autoscaled decode pool
    const c = newCluster({ clusterAutoscaler: { enabled: false } });
    c.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, maxSize: 2, poolRole: 'llama' });
    const chart = scaledDecodeChart();
    // WHEN
    c.addWorkload(chart);
    // THEN
    const warnings = c.node.metadata.filter(m => m.type === 'aws:cdk:warning' && String(m.data).includes('disagg:nodeAutoscaling'));
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0].data)).toMatch(
      /ScaledObject 'decode' scale pools.*'addons\.clusterAutoscaler\.enabled' is false.*max-graceful-termination-sec.*remove `clusterAutoscaler: \{ enabled: false \}`/);
    expect(c.clusterAutoscalerChart).toBeUndefined();
    // AND none by default: the cluster installs its Cluster Autoscaler
    const d = newCluster();
    d.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, maxSize: 2, poolRole: 'llama' });
    const chart3 = scaledDecodeChart('serving3');
    d.addWorkload(chart3);
    expect(d.node.metadata.filter(m => String(m.data).includes('disagg:nodeAutoscaling'))).toEqual([]);
    expect(d.clusterAutoscalerChart).toBeDefined();
    // AND none with a Karpenter pool, which follows pending pods itself
    const k = newCluster();
    k.addKarpenterNodePool('H200', {
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      poolRole: 'llama',
      maxNodes: 2,
      nodeRole: iam.Role.fromRoleName(Stack.of(k), 'NodeRole', 'KarpenterNodeRole-test'),
    });
    const chart2 = scaledDecodeChart('serving2');
    k.addWorkload(chart2);
    expect(k.node.metadata.filter(m => String(m.data).includes('disagg:nodeAutoscaling'))).toEqual([]);
    expect(k.clusterAutoscalerChart).toBeUndefined();
  });

  test('KEDA is installed by default, pinned, in its own namespace, before the workloads', () => {
    const c = newCluster();
    const keda = c.node.findAll().find(n => n.node.id === 'Keda') as any;
    expect(keda).toBeDefined();
    const chart = scaledDecodeChart(undefined, 1);
    c.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, poolRole: 'llama' });
    const manifest = c.addWorkload(chart);
    expect(manifest.node.dependencies).toContain(keda);
    expect(newCluster({ keda: { enabled: false } }).node.findAll().some(n => n.node.id === 'Keda')).toBe(false);
  });

  test('capacity is checked at the autoscaler\'s maximum, for Deployments and LeaderWorkerSet groups', () => {
    // GIVEN 2 p5en nodes (16 GPUs): decode TP4 up to 3 replicas (12) and a 2-node prefill group up to 2 groups (32)
    const c = newCluster();
    c.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, desiredSize: 2, poolRole: 'llama' });
    const chart = scaledDecodeChart(undefined, 3);
    leaderWorkerSet(chart, 'prefill', 1, 2, { gpus: 8, ...P5EN });
    scaledObject(chart, { kind: 'LeaderWorkerSet', name: 'prefill' }, 2);
    // WHEN
    c.addWorkload(chart);
    // THEN
    expect(c.node.validate()).toEqual([expect.stringMatching(
      /need 44 nvidia\.com\/gpu \(Deployment\/decode: up to 3 replicas \(autoscaling\) x 4, LeaderWorkerSet\/prefill \(leader\): up to 2 replicas \(autoscaling\) x 8, LeaderWorkerSet\/prefill \(workers\): up to 2 replicas \(autoscaling\) x 1 workers x 8\).*at most 16.*to 6/)]);
  });
});
