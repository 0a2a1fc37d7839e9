import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as cdk8s from 'cdk8s';
import { FIXTURE_AZS } from './util';
import { InferenceCluster, KarpenterNodePool, KarpenterNodePoolOptions, NodeCapacity, NodeLabels } from '../../src/aws';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src/catalog';
import { DisaggregatedInference } from '../../src/k8s';
import { RULES, walkDeploy } from '../deploy/walk';
import { reportSkipped, validateManifests } from '../k8s/util';

// KarpenterNodePool: a NodePool and an EC2NodeClass (karpenter.sh/v1, karpenter.k8s.aws/v1) with the
// labels and taint of the managed node groups, checked against Karpenter v1.14.1's CRD schemas.

/** A VPC and an imported cluster with an imported kubectl provider (manifests need one). */
function fixture(knownAzs: boolean) {
  const stack = knownAzs
    ? new Stack(new App(), 'Test', { env: { account: '111111111111', region: 'us-east-2' } })
    : new Stack(new App(), 'Test');
  const vpc = knownAzs ? new ec2.Vpc(stack, 'Vpc', { availabilityZones: FIXTURE_AZS }) : new ec2.Vpc(stack, 'Vpc', { maxAzs: 2 });
  const kubectlProvider = eks.KubectlProvider.fromKubectlProviderAttributes(stack, 'Kubectl', {
    serviceToken: 'arn:aws:lambda:us-east-2:111111111111:function:kubectl',
  });
  const cluster = eks.Cluster.fromClusterAttributes(stack, 'Cluster', {
    clusterName: 'test', vpc, clusterSecurityGroupId: 'sg-0cluster0000000000', kubectlProvider,
  });
  return { stack, vpc, cluster };
}

function synthPool(options: Partial<KarpenterNodePoolOptions> = {}, knownAzs = false) {
  const fx = fixture(knownAzs);
  const efaSecurityGroup = new ec2.SecurityGroup(fx.stack, 'Efa', { vpc: fx.vpc });
  const nodeRole = iam.Role.fromRoleName(fx.stack, 'NodeRole', 'KarpenterNodeRole-test');
  const pool = new KarpenterNodePool(fx.stack, 'Pool', {
    cluster: fx.cluster,
    instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
    nodeRole,
    efaSecurityGroup,
    ...options,
  });
  const resource = Object.values(Template.fromStack(fx.stack).findResources('Custom::AWSCDK-EKS-KubernetesResource'))[0] as any;
  const manifest = JSON.parse(JSON.stringify(resource.Properties.Manifest));
  return { pool, fx, manifest };
}

/** The manifest's two objects, with CloudFormation tokens (subnet and group ids) replaced by literals. */
function objects(manifest: any): { nodeClass: any; nodePool: any } {
  const text = typeof manifest === 'string' ? manifest : JSON.stringify(manifest);
  // Fn::Join pieces become a plain string; enough for the schema check and the assertions below.
  const flat = JSON.parse(text.includes('Fn::Join') ? flatten(JSON.parse(text)) : text);
  return { nodeClass: flat.find((o: any) => o.kind === 'EC2NodeClass'), nodePool: flat.find((o: any) => o.kind === 'NodePool') };
}

function flatten(v: any): string {
  if (v && typeof v === 'object' && Array.isArray(v['Fn::Join'])) {
    // A token's placeholder follows the list it is in: subnet ids, then security group ids.
    let text = '';
    for (const p of v['Fn::Join'][1]) {
      const inSubnets = text.lastIndexOf('subnetSelectorTerms') > text.lastIndexOf('securityGroupSelectorTerms');
      text += typeof p === 'string' ? p : (inSubnets ? 'subnet-0token0000000000' : 'sg-0token0000000000');
    }
    return text;
  }
  return JSON.stringify(v);
}

describe('KarpenterNodePool', () => {
  test('an EFA NodePool: labels, taint, interfaces, IMDSv2, RAID0 and a schema-valid manifest', () => {
    // GIVEN / WHEN
    const { pool, manifest } = synthPool();
    const { nodeClass, nodePool } = objects(manifest);
    // THEN the managed node groups' labels and taint
    expect(nodePool.spec.template.metadata.labels).toMatchObject({
      [NodeLabels.INSTANCE_TYPE]: 'p5en.48xlarge', [NodeLabels.POOL_ROLE]: 'inference', 'nvidia.com/gpu.present': 'true', 'vpc.amazonaws.com/efa.present': 'true',
    });
    expect(nodePool.spec.template.spec.taints).toEqual([{ key: 'nvidia.com/gpu', value: 'true', effect: 'NoSchedule' }]);
    expect(nodePool.spec.template.spec.requirements).toEqual([
      { key: 'node.kubernetes.io/instance-type', operator: 'In', values: ['p5en.48xlarge'] },
      { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
    ]);
    expect(nodePool.spec.template.spec.nodeClassRef).toEqual({ group: 'karpenter.k8s.aws', kind: 'EC2NodeClass', name: pool.nodePoolName });
    expect(nodePool.spec.disruption).toEqual({ consolidationPolicy: 'WhenEmpty', consolidateAfter: '10m' });
    expect(nodePool.spec.replicas).toBeUndefined();
    // AND the EC2NodeClass: ENA primary plus one efa-only per card, the node role, the AL2023 alias
    const ifaces = nodeClass.spec.networkInterfaces;
    expect(ifaces[0]).toEqual({ networkCardIndex: 0, deviceIndex: 0, interfaceType: 'interface' });
    expect(ifaces.slice(1).every((i: any) => i.interfaceType === 'efa-only')).toBe(true);
    expect(ifaces).toHaveLength(AcceleratedInstanceType.P5EN_48XLARGE.networkInterfaceLayout().length);
    expect(nodeClass.spec.role).toBe('KarpenterNodeRole-test');
    // a pinned AMI release: 'latest' would replace every GPU node whenever AWS publishes an AMI
    expect(nodeClass.spec.amiSelectorTerms).toEqual([{ alias: 'al2023@v20260903' }]);
    expect(nodeClass.spec.metadataOptions.httpTokens).toBe('required');
    expect(nodeClass.spec.instanceStorePolicy).toBe('RAID0');
    expect(nodeClass.spec.subnetSelectorTerms).toHaveLength(1);
    expect(nodeClass.spec.securityGroupSelectorTerms).toHaveLength(2);
    // AND both objects satisfy Karpenter's CRD schemas
    const result = validateManifests([nodeClass, nodePool]);
    reportSkipped(result);
    expect(result.errors).toEqual([]);
  });

  test('a Capacity Block: a static NodePool of reserved capacity selected by id, in its zone', () => {
    // GIVEN / WHEN
    const { manifest } = synthPool({
      instanceType: AcceleratedInstanceType.P6E_GB200_36XLARGE,
      capacity: NodeCapacity.capacityBlock('cr-0123456789abcdef0', { availabilityZone: 'us-east-2b' }),
      replicas: 18,
    }, true);
    const { nodeClass, nodePool } = objects(manifest);
    // THEN
    expect(nodePool.spec.replicas).toBe(18);
    expect(nodePool.spec.limits).toEqual({ nodes: 18 });
    expect(nodePool.spec.disruption).toBeUndefined();
    expect(nodePool.spec.template.spec.requirements).toContainEqual({ key: 'karpenter.sh/capacity-type', operator: 'In', values: ['reserved'] });
    expect(nodePool.spec.template.spec.requirements).toContainEqual({ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['us-east-2b'] });
    expect(nodeClass.spec.capacityReservationSelectorTerms).toEqual([{ id: 'cr-0123456789abcdef0' }]);
    const result = validateManifests([nodeClass, nodePool]);
    reportSkipped(result);
    expect(result.errors).toEqual([]);
  });

  test('synth-time errors name the prop, the value and the fix', () => {
    expect(() => synthPool({ instanceType: AcceleratedInstanceType.P6E_GB200_36XLARGE }))
      .toThrow(/'capacity' \(on-demand\) is not available for p6e-gb200.36xlarge.*NodeCapacity.capacityBlock/);
    expect(() => synthPool({ replicas: 4, maxNodes: 2 })).toThrow(/'maxNodes' \(2\) is below 'replicas' \(4\)/);
    expect(() => synthPool({ replicas: -1 })).toThrow(/'replicas' \(-1\) must be a whole number >= 0/);
    expect(() => synthPool({ amiVersion: 'newest' })).toThrow(/'amiVersion' \(newest\) must be 'latest' or an EKS AMI release/);
    expect(() => synthPool({ efaSecurityGroup: undefined })).toThrow(/'efaSecurityGroup' is required for p5en.48xlarge, an EFA type/);
  });
});

describe('InferenceCluster.addKarpenterNodePool', () => {
  test('passes the EFA group and installs the NVIDIA DRA driver for p6e-gb200; a dynamic GB200 pool warns', () => {
    // GIVEN
    const stack = new Stack(new App(), 'Test');
    const cluster = new InferenceCluster(stack, 'Inference');
    const nodeRole = iam.Role.fromRoleName(stack, 'NodeRole', 'KarpenterNodeRole-test');
    // WHEN
    const pool = cluster.addKarpenterNodePool('Gb200', {
      instanceType: AcceleratedInstanceType.P6E_GB200_36XLARGE, nodeRole, capacity: NodeCapacity.capacityBlock('cr-0123456789abcdef0'),
    });
    // THEN
    expect(cluster.karpenterNodePools).toEqual([pool]);
    expect(cluster.node.tryFindChild('NvidiaDraDriver')).toBeDefined();
    expect(pool.node.metadata.map((m) => String(m.data)).join('\n')).toMatch(/static capacity \('replicas'\).*disagg:karpenterDynamicDra/);
  });
});

describe('EFA workers on a Karpenter pool', () => {
  /** A p5en Karpenter pool and a DisaggregatedInference on it; the cluster's synth-time findings. */
  function onKarpenter(efaHugePages?: boolean): { findings: string[]; chart: cdk8s.Chart; template: () => any } {
    const app = new App();
    const stack = new Stack(app, 'Test');
    const cluster = new InferenceCluster(stack, 'Inference');
    const p5en = AcceleratedInstanceType.P5EN_48XLARGE;
    cluster.addKarpenterNodePool('Pool', {
      instanceType: p5en, poolRole: 'pd', maxNodes: 2, nodeRole: iam.Role.fromRoleName(stack, 'NodeRole', 'KarpenterNodeRole-test'),
    });
    const chart = new cdk8s.Chart(new cdk8s.App(), 'llama', { namespace: 'inference' });
    const pool = { instanceType: p5en, tensorParallel: 4, nodePoolRole: 'pd', replicas: 1 };
    new DisaggregatedInference(chart, 'Llama', {
      model: ModelArchitecture.LLAMA_3_3_70B,
      image: 'public.ecr.aws/example/vllm:0.19.1',
      routerImage: 'public.ecr.aws/example/disagg-engine-slim:0.1.0',
      weightPrecision: Precision.FP8,
      kvCachePrecision: Precision.FP8,
      maxContext: 8192,
      efaHugePages,
      prefill: pool,
      decode: pool,
    });
    cluster.addWorkload(chart);
    return { findings: cluster.node.validate(), chart, template: () => app.synth().getStackByName(stack.stackName).template };
  }

  test('pods that request hugepages are an error: Karpenter would never launch a node for them', () => {
    // WHEN
    const { findings } = onKarpenter();
    // THEN both pools are named, with the fix
    expect(findings).toEqual([
      expect.stringMatching(/Deployment\/llama-3-3-70b-prefill requests hugepages and can only run on Karpenter NodePools \(Pool: p5en.48xlarge\).*Set 'efaHugePages: false'/),
      expect.stringMatching(/Deployment\/llama-3-3-70b-decode requests hugepages/),
    ]);
  });

  test('with efaHugePages off the pods ask for none, tell libfabric so, and the walk finds a node for them', () => {
    // WHEN
    const { findings, chart, template } = onKarpenter(false);
    // THEN
    expect(findings).toEqual([]);
    for (const d of chart.toJson().filter((o: any) => o.kind === 'Deployment' && /prefill|decode/.test(o.metadata.name))) {
      const vllm = d.spec.template.spec.containers[0];
      expect(Object.keys(vllm.resources.requests).filter((k) => k.startsWith('hugepages'))).toEqual([]);
      expect(vllm.resources.requests['vpc.amazonaws.com/efa']).toBeGreaterThan(0);
      expect(vllm.env).toContainEqual({ name: 'FI_EFA_USE_HUGE_PAGE', value: '0' });
    }
    expect(walkDeploy(template(), { userSecrets: ['inference/hf-token'] }).filter((f) => f.rule === RULES.scaleFromZero && f.blocker)).toEqual([]);
  });
});
