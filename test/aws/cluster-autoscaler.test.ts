import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { CfnGuardValidator } from '@cdklabs/cdk-validator-cfnguard';
import { App, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as cxapi from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';
import * as cdk8s from 'cdk8s';
import { AddonVersions, InferenceCluster, InferenceClusterProps } from '../../src/aws';
import { AcceleratedInstanceType } from '../../src/catalog';

// The Cluster Autoscaler add-on (issue 24: node groups scale with the pools). One full synthesis of a
// cluster with an autoscaled workload, under cdk-nag's AwsSolutions rules and the AWS Control Tower
// proactive controls as the compliance test runs them; the other tests inspect the construct tree or
// synthesize small variations.

const TEMPLATE_TAG = 'k8s.io/cluster-autoscaler/node-template/resources/';

/** A chart with one Deployment of `gpus` H200s whose pods have `grace` seconds, scaled by a ScaledObject. */
function autoscaledChart(id: string, grace: number, gpus = 4): cdk8s.Chart {
  const chart = new cdk8s.Chart(new cdk8s.App(), id);
  const resources = { 'nvidia.com/gpu': gpus, 'vpc.amazonaws.com/efa': 4 };
  new cdk8s.ApiObject(chart, 'decode', {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'decode' },
    spec: {
      selector: { matchLabels: { app: 'decode' } },
      template: {
        metadata: { labels: { app: 'decode' } },
        spec: {
          nodeSelector: { 'node.kubernetes.io/instance-type': 'p5en.48xlarge', 'disagg.dev/pool-role': 'llama' },
          terminationGracePeriodSeconds: grace,
          containers: [{ name: 'vllm', image: 'vllm', resources: { requests: resources, limits: resources } }],
        },
      },
    },
  });
  new cdk8s.ApiObject(chart, 'decode-scaler', {
    apiVersion: 'keda.sh/v1alpha1',
    kind: 'ScaledObject',
    metadata: { name: 'decode' },
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'decode' },
      minReplicaCount: 1,
      maxReplicaCount: 4,
      triggers: [{ type: 'metrics-api', metadata: { url: 'http://r/scaling', valueLocation: 'pools.decode.pressure', targetValue: '0.8' } }],
    },
  });
  return chart;
}

function newCluster(props: InferenceClusterProps = {}): { stack: Stack; cluster: InferenceCluster } {
  const stack = new Stack(new App(), 'Test');
  return { stack, cluster: new InferenceCluster(stack, 'Inference', props) };
}

/** An H200 group of up to 2 nodes, empty at first (the default), for pool role 'llama'. */
function addH200(cluster: InferenceCluster): void {
  cluster.addAcceleratedNodeGroup('H200', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, maxSize: 2, poolRole: 'llama' });
}

/**
 * The Helm values of a chart resource as an object: CloudFormation references inside the JSON string
 * (`Fn::Join` parts) become `@<logical id>` or `@<pseudo parameter>`.
 */
function values(props: any): any {
  const v = props.Values;
  if (typeof v === 'string') return JSON.parse(v);
  const parts: any[] = v['Fn::Join'][1];
  return JSON.parse(parts.map((p) => typeof p === 'string' ? p : `@${p.Ref ?? p['Fn::GetAtt']?.join('.')}`).join(''));
}

/** The Cluster Autoscaler chart's version and values, resolved without synthesizing the stack. */
function helmProps(c: InferenceCluster): { version: string; values: any } {
  const chart = c.clusterAutoscalerChart!;
  const props = Stack.of(c).resolve((chart.node.findChild('Resource').node.defaultChild as any)._cfnProperties);
  return { version: props.Version, values: values(props) };
}

function caChart(template: Template): any {
  const found = Object.values(template.findResources('Custom::AWSCDK-EKS-HelmChart'))
    .filter((r: any) => r.Properties.Chart === 'cluster-autoscaler');
  expect(found).toHaveLength(1);
  return (found[0] as any).Properties;
}

function logicalIdOf(template: Template, type: string): string {
  const ids = Object.keys(template.findResources(type));
  expect(ids).toHaveLength(1);
  return ids[0];
}

describe('a cluster with an autoscaled workload on managed node groups', () => {
  let stack: Stack;
  let template: Template;
  let reports: Record<string, any>;

  beforeAll(() => {
    // GIVEN an H200 group, a Trainium group and a workload whose pods have a 1,234 s grace period
    const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-ca-'));
    try {
      const app = new App({ outdir, context: { [cxapi.FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT]: false } });
      stack = new Stack(app, 'Example');
      const cluster = new InferenceCluster(stack, 'Inference');
      addH200(cluster);
      cluster.addAcceleratedNodeGroup('Trainium2', { instanceType: AcceleratedInstanceType.TRN2_48XLARGE, poolRole: 'neuron' });
      cluster.addWorkload(autoscaledChart('serving', 1234));
      // WHEN it is synthesized with both rule packs
      Validations.of(app).addPlugins(new AwsSolutionsChecks(app), new CfnGuardValidator({ maxBuffer: 64 * 1024 * 1024 }));
      app.synth();
      const report = JSON.parse(fs.readFileSync(path.join(outdir, cxapi.VALIDATION_REPORT_FILE), 'utf8'));
      reports = Object.fromEntries(report.pluginReports.map((p: any) => [p.pluginName, p]));
      template = Template.fromStack(stack);
    } finally {
      fs.rmSync(outdir, { recursive: true, force: true });
    }
  }, 600_000);

  test('the template passes cdk-nag AwsSolutions and the Control Tower controls, every acknowledgement reasoned on the cluster', () => {
    // THEN
    for (const plugin of ['AwsSolutions', 'cdk-validator-cfnguard']) {
      const findings = reports[plugin].violations.flatMap((v: any) => v.violatingConstructs.map((c: any) => `${v.ruleName} at ${c.constructPath}`));
      expect(findings).toEqual([]);
      for (const a of reports[plugin].suppressedViolations) {
        expect(a.reason.length).toBeGreaterThan(20);
        expect(a.acknowledgedAt).toMatch(/^Example\/Inference\/./);
      }
    }
    // AND the autoscaler's wildcard resources are acknowledged for stated reasons, not missed
    const caAcks = reports.AwsSolutions.suppressedViolations.filter((a: any) => /ClusterAutoscaler/.test(a.acknowledgedAt));
    expect(caAcks.map((a: any) => a.ruleName)).toEqual(expect.arrayContaining([
      'AwsSolutions-IAM5[Resource::*]',
      expect.stringMatching(/^AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:autoscaling:.*autoScalingGroupName\/\*\]$/),
      expect.stringMatching(/^AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:eks:.*:nodegroup\/<.+>\/\*\/\*\]$/),
    ]));
  });

  test('the official chart, pinned for Kubernetes 1.35, in kube-system on the system nodes, non-root with resources', () => {
    // THEN
    const chart = caChart(template);
    expect(chart).toMatchObject({
      Repository: 'https://kubernetes.github.io/autoscaler',
      Version: AddonVersions.CLUSTER_AUTOSCALER_CHART,
      Namespace: 'kube-system',
      Release: 'cluster-autoscaler',
    });
    expect(AddonVersions.CLUSTER_AUTOSCALER_CHART).toBe('9.59.0');
    const v = values(chart);
    const clusterId = logicalIdOf(template, 'AWS::EKS::Cluster');
    expect(v).toMatchObject({
      cloudProvider: 'aws',
      awsRegion: '@AWS::Region',
      autoDiscovery: { clusterName: `@${clusterId}` },
      image: { repository: 'registry.k8s.io/autoscaling/cluster-autoscaler', tag: 'v1.35.2' },
      rbac: { serviceAccount: { create: true, name: 'cluster-autoscaler' } },
      nodeSelector: { 'disagg.dev/pool-role': 'system' },
      resources: { requests: { cpu: '100m', memory: '600Mi' }, limits: { memory: '600Mi' } },
      securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      containerSecurityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
    });
    // AND its tags name the cluster for auto-discovery (the chart's default tag list)
    expect(v.autoDiscovery.tags).toBeUndefined();
  });

  test('the flags: least-waste, balanced groups, no eviction for packing, and the workers\' grace period', () => {
    // THEN
    const args = values(caChart(template)).extraArgs;
    expect(args).toMatchObject({
      'expander': 'least-waste',
      'balance-similar-node-groups': true,
      'skip-nodes-with-local-storage': true,
      'max-graceful-termination-sec': 1234,
    });
    // kube-system pods (its own) keep their node: the default stays
    expect(args['skip-nodes-with-system-pods']).toBeUndefined();
  });

  test('the role comes through EKS Pod Identity for the chart\'s service account', () => {
    // THEN
    template.hasResourceProperties('AWS::EKS::PodIdentityAssociation', { Namespace: 'kube-system', ServiceAccount: 'cluster-autoscaler' });
    const association = Object.values(template.findResources('AWS::EKS::PodIdentityAssociation'))
      .find((r: any) => r.Properties.ServiceAccount === 'cluster-autoscaler') as any;
    const roleId = association.Properties.RoleArn['Fn::GetAtt'][0];
    const role = template.toJSON().Resources[roleId];
    expect(role.Properties.AssumeRolePolicyDocument.Statement).toEqual(expect.arrayContaining([
      expect.objectContaining({ Action: 'sts:AssumeRole', Principal: { Service: 'pods.eks.amazonaws.com' } }),
      expect.objectContaining({ Action: 'sts:TagSession', Principal: { Service: 'pods.eks.amazonaws.com' } }),
    ]));
    // AND the chart is installed after the association and the policy
    const chartEntry = Object.values(template.toJSON().Resources as Record<string, any>)
      .find((r) => r.Type === 'Custom::AWSCDK-EKS-HelmChart' && r.Properties.Chart === 'cluster-autoscaler');
    const policyId = Object.entries(template.findResources('AWS::IAM::Policy'))
      .find(([, r]: [string, any]) => JSON.stringify(r.Properties.Roles).includes(roleId))![0];
    const associationId = Object.entries(template.findResources('AWS::EKS::PodIdentityAssociation'))
      .find(([, r]: [string, any]) => r.Properties.ServiceAccount === 'cluster-autoscaler')![0];
    expect(chartEntry.DependsOn).toEqual(expect.arrayContaining([policyId, associationId]));
  });

  test('least privilege: reads, DescribeNodegroup on this cluster, and scaling only groups tagged with this cluster', () => {
    // GIVEN the autoscaler's policy
    const clusterId = logicalIdOf(template, 'AWS::EKS::Cluster');
    const policies = Object.values(template.findResources('AWS::IAM::Policy'))
      .filter((r: any) => JSON.stringify(r.Properties.PolicyDocument).includes('autoscaling:SetDesiredCapacity'));
    expect(policies).toHaveLength(1);
    const statements: any[] = (policies[0] as any).Properties.PolicyDocument.Statement;
    const bySid = Object.fromEntries(statements.map((s) => [s.Sid, s]));
    // THEN the scaling calls need the cluster's eks:cluster-name tag on an Auto Scaling group of this account and Region
    expect(bySid.ScaleThisClustersNodeGroups).toMatchObject({
      Effect: 'Allow',
      Action: ['autoscaling:SetDesiredCapacity', 'autoscaling:TerminateInstanceInAutoScalingGroup'],
      Condition: { StringEquals: { 'aws:ResourceTag/eks:cluster-name': { Ref: clusterId } } },
    });
    expect(JSON.stringify(bySid.ScaleThisClustersNodeGroups.Resource)).toContain(':autoScalingGroup:*:autoScalingGroupName/*');
    // AND DescribeNodegroup only on this cluster's node groups
    expect(bySid.DescribeManagedNodeGroups.Action).toBe('eks:DescribeNodegroup');
    expect(JSON.stringify(bySid.DescribeManagedNodeGroups.Resource)).toContain(`":nodegroup/",{"Ref":"${clusterId}"},"/*/*"`);
    // AND every call allowed on "*" is a read
    for (const s of statements.filter((x) => x.Resource === '*')) {
      for (const action of [s.Action].flat()) {
        expect(action).toMatch(/^(autoscaling|ec2):(Describe|Get)/);
      }
    }
    expect(statements.map((s) => s.Sid).sort()).toEqual(['DescribeManagedNodeGroups', 'DescribeNodeGroups', 'ScaleThisClustersNodeGroups']);
  });

  test('node groups carry what a node offers, for a scale-up from zero nodes', () => {
    // THEN the H200 group: 8 GPUs, 16 EFA interfaces, and Cluster Autoscaler's GPU label
    const groups = Object.values(template.findResources('AWS::EKS::Nodegroup')) as any[];
    const h200 = groups.find((g) => g.Properties.Labels?.['disagg.dev/pool-role'] === 'llama');
    expect(h200.Properties.Tags).toEqual({
      [`${TEMPLATE_TAG}nvidia.com/gpu`]: '8',
      [`${TEMPLATE_TAG}vpc.amazonaws.com/efa`]: '16',
      // 5128 pages of 2 MiB that the EFA driver allocates at boot: EFA pods request a share.
      [`${TEMPLATE_TAG}hugepages-2Mi`]: '10256Mi',
    });
    expect(h200.Properties.Labels['k8s.amazonaws.com/accelerator']).toBe('nvidia-h200');
    // AND the Trainium group: 16 Neuron devices with 128 NeuronCores and 16 EFA interfaces, no GPU label
    const trn2 = groups.find((g) => g.Properties.Labels?.['disagg.dev/pool-role'] === 'neuron');
    expect(trn2.Properties.Tags).toEqual({
      [`${TEMPLATE_TAG}aws.amazon.com/neuron`]: '16',
      [`${TEMPLATE_TAG}aws.amazon.com/neuroncore`]: '128',
      [`${TEMPLATE_TAG}vpc.amazonaws.com/efa`]: '16',
      [`${TEMPLATE_TAG}hugepages-2Mi`]: '10256Mi',
    });
    expect(trn2.Properties.Labels['k8s.amazonaws.com/accelerator']).toBeUndefined();
    // AND the labels and taints CA reads through DescribeNodegroup are the group's own
    expect(h200.Properties.Taints).toEqual([{ Key: 'nvidia.com/gpu', Value: 'true', Effect: 'NO_SCHEDULE' }]);
    expect(h200.Properties.ScalingConfig).toEqual({ MinSize: 0, MaxSize: 2, DesiredSize: 0 });
  });
});

describe('when the Cluster Autoscaler is installed', () => {
  const installed = (c: InferenceCluster) => c.clusterAutoscalerChart !== undefined;

  test('by default: with the first autoscaled workload on a managed group, in either order', () => {
    // GIVEN a group and a workload without autoscaling: nothing
    const a = newCluster().cluster;
    addH200(a);
    expect(installed(a)).toBe(false);
    // WHEN an autoscaled workload comes
    a.addWorkload(autoscaledChart('serving', 900));
    // THEN
    expect(installed(a)).toBe(true);
    // AND the other order: the workload first, the group after it
    const b = newCluster().cluster;
    b.addWorkload(autoscaledChart('serving', 900));
    expect(installed(b)).toBe(false);
    addH200(b);
    expect(installed(b)).toBe(true);
  });

  test('not by default on a cluster with Karpenter NodePools; always with enabled: true; never with enabled: false', () => {
    // GIVEN a Karpenter pool, a managed group and an autoscaled workload
    const k = newCluster().cluster;
    k.addKarpenterNodePool('Pool', {
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      poolRole: 'other',
      maxNodes: 2,
      nodeRole: iam.Role.fromRoleName(Stack.of(k), 'NodeRole', 'KarpenterNodeRole-test'),
    });
    addH200(k);
    k.addWorkload(autoscaledChart('serving', 900));
    // THEN Karpenter scales the nodes
    expect(installed(k)).toBe(false);
    // AND enabled: true installs it on a bare cluster, enabled: false never
    expect(installed(newCluster({ addons: { clusterAutoscaler: { enabled: true } } }).cluster)).toBe(true);
    const off = newCluster({ addons: { clusterAutoscaler: { enabled: false } } }).cluster;
    addH200(off);
    off.addWorkload(autoscaledChart('serving', 900));
    expect(installed(off)).toBe(false);
  });

  test('the grace flag follows the longest grace of every workload, added before or after, and is never below 600 s', () => {
    // GIVEN a workload of 300 s (below Cluster Autoscaler's default)
    const { cluster } = newCluster();
    addH200(cluster);
    cluster.addWorkload(autoscaledChart('short', 300));
    const flag = () => helmProps(cluster).values.extraArgs['max-graceful-termination-sec'];
    // THEN its default stays
    expect(flag()).toBe(600);
    // AND a workload added later with a longer grace raises it
    cluster.addWorkload(autoscaledChart('long', 2500));
    expect(flag()).toBe(2500);
  });

  test('a node group taint without a value is a warning: the autoscaler would not see it at zero nodes', () => {
    // GIVEN
    const { cluster } = newCluster();
    cluster.addAcceleratedNodeGroup('H200', {
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      taints: [{ key: 'dedicated', effect: eks.TaintEffect.NO_SCHEDULE }, { key: 'team', value: 'llm', effect: eks.TaintEffect.NO_SCHEDULE }],
    });
    // THEN the valueless one is named, the other is not
    const warnings = cluster.node.metadata.filter(m => m.type === 'aws:cdk:warning').map(m => String(m.data))
      .filter(w => w.includes('disagg:taintWithoutValue'));
    expect(warnings).toEqual([expect.stringMatching(/node group 'H200' has taints without a value \(dedicated\): the Cluster Autoscaler ignores them.*give each taint a value/)]);
  });

  test('a pod identity agent switched off is a warning', () => {
    // GIVEN
    const { cluster } = newCluster({ addons: { podIdentityAgent: { enabled: false }, clusterAutoscaler: { enabled: true } } });
    // THEN
    const warnings = cluster.node.metadata.filter(m => m.type === 'aws:cdk:warning').map(m => String(m.data));
    expect(warnings).toEqual(expect.arrayContaining([expect.stringMatching(/Cluster Autoscaler gets its IAM role through EKS Pod Identity, but addons\.podIdentityAgent is off.*disagg:clusterAutoscalerWithoutPodIdentity/)]));
  });
});

describe('versions: the autoscaler\'s minor is the cluster\'s', () => {
  function chartOf(c: InferenceCluster): { version: string; image: string } {
    const { version, values: v } = helmProps(c);
    return { version, image: v.image.tag };
  }
  const layer = (stack: Stack) => lambda.LayerVersion.fromLayerVersionArn(stack, 'Layer', 'arn:aws:lambda:us-east-1:111111111111:layer:kubectl:1');

  test('each supported minor has its pin', () => {
    // THEN
    const on = (v: eks.KubernetesVersion) => chartOf(newCluster({ kubernetesVersion: v, addons: { clusterAutoscaler: { enabled: true } } }).cluster);
    expect(on(eks.KubernetesVersion.V1_34)).toEqual({ version: '9.53.0', image: 'v1.34.5' });
    expect(on(eks.KubernetesVersion.V1_35)).toEqual({ version: '9.59.0', image: 'v1.35.2' });
    expect(on(eks.KubernetesVersion.of('1.36'))).toEqual({ version: '9.59.0', image: 'v1.36.1' });
  });

  test('a version without a pin is an error that names the field and the fix; version and imageTag fix it', () => {
    // GIVEN Kubernetes 1.37 with its own kubectl layer
    const make = (clusterAutoscaler: any) => {
      const stack = new Stack(new App(), 'Test');
      return new InferenceCluster(stack, 'Inference', {
        kubernetesVersion: eks.KubernetesVersion.of('1.37'), kubectlLayer: layer(stack), addons: { clusterAutoscaler },
      });
    };
    // THEN
    expect(() => make({ enabled: true })).toThrow(
      /'kubernetesVersion' \(1\.37\) has no pinned Cluster Autoscaler \(pins: 1\.32, 1\.33, 1\.34, 1\.35, 1\.36\).*'addons\.clusterAutoscaler' to \{ version: .*imageTag: 'v1\.<minor>\.<patch>' \}.*\{ enabled: false \}/);
    // AND by default the error comes when the autoscaler is needed, not before
    const lazy = make(undefined);
    addH200(lazy);
    expect(() => lazy.addWorkload(autoscaledChart('serving', 900))).toThrow(/'kubernetesVersion' \(1\.37\) has no pinned Cluster Autoscaler/);
    // AND a chart and an image of the right minor are taken
    expect(chartOf(make({ enabled: true, version: '9.60.0', imageTag: 'v1.37.0' }))).toEqual({ version: '9.60.0', image: 'v1.37.0' });
  });

  test('an image of another minor, or not a release tag, is an error', () => {
    // THEN
    expect(() => newCluster({ addons: { clusterAutoscaler: { enabled: true, imageTag: 'v1.34.5' } } })).toThrow(
      /'addons\.clusterAutoscaler\.imageTag' \(v1\.34\.5\) is Cluster Autoscaler 1\.34, but the cluster runs Kubernetes 1\.35.*use a v1\.35\.x tag \(e\.g\. 'v1\.35\.2'\)/);
    expect(() => newCluster({ addons: { clusterAutoscaler: { enabled: true, imageTag: 'latest' } } })).toThrow(
      /'addons\.clusterAutoscaler\.imageTag' \(latest\) is not a Cluster Autoscaler release tag; write it like 'v1\.35\.2'/);
    // AND a newer patch of the right minor is fine
    expect(chartOf(newCluster({ addons: { clusterAutoscaler: { enabled: true, imageTag: 'v1.35.3' } } }).cluster).image).toBe('v1.35.3');
  });
});
