import { App, Stack } from 'aws-cdk-lib';
import { Annotations as AssertAnnotations, Match, Template } from 'aws-cdk-lib/assertions';
import { KubernetesVersion } from 'aws-cdk-lib/aws-eks-v2';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as cdk8s from 'cdk8s';
import { InferenceCluster, InferenceClusterAddons, NodeCapacity } from '../../src/aws';
import { AcceleratedInstanceType } from '../../src/catalog';

// The DRA drivers of issue 23: the NVIDIA DRA driver (ComputeDomains) that p6e-gb200 needs, and the EFA
// and Neuron DRA drivers as options. Most tests inspect the construct tree; one synthesizes the charts.

const GB200 = AcceleratedInstanceType.P6E_GB200_36XLARGE;
const BLOCK = NodeCapacity.capacityBlock('cr-0123456789abcdef0');

function newCluster(addons: InferenceClusterAddons = {}, kubernetesVersion?: KubernetesVersion): InferenceCluster {
  const stack = new Stack(new App(), 'Test');
  // A user layer lifts the kubectl skew check, so that old versions reach the DRA checks.
  const kubectlLayer = kubernetesVersion
    ? lambda.LayerVersion.fromLayerVersionArn(stack, 'Kubectl', 'arn:aws:lambda:us-east-2:111111111111:layer:kubectl:1')
    : undefined;
  return new InferenceCluster(stack, 'Inference', { addons, kubernetesVersion, kubectlLayer });
}

/** A chart with one ComputeDomain, as a GB200 pool emits it. */
function computeDomainChart(): cdk8s.Chart {
  const chart = new cdk8s.Chart(new cdk8s.App(), 'serving');
  new cdk8s.ApiObject(chart, 'Domain', {
    apiVersion: 'resource.nvidia.com/v1beta1',
    kind: 'ComputeDomain',
    metadata: { name: 'llama-decode' },
    spec: { numNodes: 0, channel: { resourceClaimTemplate: { name: 'llama-decode-imex-channel' } } },
  });
  return chart;
}

function helmValues(template: Template, release: string): any {
  const found = Object.values(template.findResources('Custom::AWSCDK-EKS-HelmChart'))
    .filter((r: any) => r.Properties.Release === release);
  expect(found).toHaveLength(1);
  const p = (found[0] as any).Properties;
  return { ...p, Values: p.Values ? JSON.parse(p.Values) : undefined };
}

describe('NVIDIA DRA driver', () => {
  test('comes with the first p6e-gb200 node group, ComputeDomains only, with GPU Feature Discovery', () => {
    // GIVEN
    const c = newCluster({ efaDraDriver: {} });
    expect(c.node.tryFindChild('NvidiaDraDriver')).toBeUndefined();
    // WHEN
    c.addAcceleratedNodeGroup('Gb200', { instanceType: GB200, capacity: BLOCK });
    c.addAcceleratedNodeGroup('Gb200b', { instanceType: GB200, capacity: BLOCK });
    // THEN one driver, GPUs left to the device plugin
    const template = Template.fromStack(Stack.of(c));
    const dra = helmValues(template, 'dra-driver-nvidia-gpu');
    expect(dra.Repository).toBe('oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu');
    expect(dra.Version).toBe('0.4.0');
    expect(dra.Wait).toBe(true);
    expect(dra.Values.resources).toEqual({ gpus: { enabled: false }, computeDomains: { enabled: true } });
    // AND GFD labels the cliques, its NFD worker tolerating the accelerator taint
    const gfd = helmValues(template, 'nvidia-gpu-feature-discovery');
    expect(gfd.Chart).toBe('nvidia-device-plugin');
    expect(gfd.Values.devicePlugin.enabled).toBe(false);
    expect(gfd.Values.gfd.enabled).toBe(true);
    expect(gfd.Values.nfd.worker.tolerations).toEqual([{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }]);
    // AND the EFA DRA driver (opted in) tolerates both accelerator taints
    const efa = helmValues(template, 'aws-dranet');
    expect(efa.Repository).toBe('https://aws.github.io/eks-charts');
    expect(efa.Version).toBe('1.0.0');
    expect(efa.Values.tolerations.map((t: any) => t.key)).toEqual(['nvidia.com/gpu', 'aws.amazon.com/neuron']);
  });

  test('is not installed for other GPU types, and can be forced on', () => {
    // GIVEN / WHEN
    const c = newCluster();
    c.addAcceleratedNodeGroup('Gpu', { instanceType: AcceleratedInstanceType.P5EN_48XLARGE });
    // THEN
    expect(c.node.tryFindChild('NvidiaDraDriver')).toBeUndefined();
    expect(c.node.tryFindChild('EfaDraDriver')).toBeUndefined();
    expect(newCluster({ nvidiaDraDriver: { enabled: true } }).node.tryFindChild('NvidiaDraDriver')).toBeDefined();
  });

  test('switched off with a p6e-gb200 group: a warning, and workloads with a ComputeDomain are refused', () => {
    // GIVEN
    const c = newCluster({ nvidiaDraDriver: { enabled: false } });
    // WHEN
    c.addAcceleratedNodeGroup('Gb200', { instanceType: GB200, capacity: BLOCK });
    // THEN
    expect(c.node.tryFindChild('NvidiaDraDriver')).toBeUndefined();
    AssertAnnotations.fromStack(Stack.of(c)).hasWarning('*',
      Match.stringLikeRegexp('p6e-gb200.36xlarge needs the NVIDIA DRA driver.*disagg:nvidiaDraDriverOff'));
    expect(() => c.addWorkload(computeDomainChart()))
      .toThrow(/'addons\.nvidiaDraDriver\.enabled' is false, but the chart has ComputeDomain 'llama-decode'.*Remove `nvidiaDraDriver: \{ enabled: false \}`/);
  });

  test('a ComputeDomain on a cluster without p6e-gb200 nodes fails at synthesis, naming the prop and the fix', () => {
    // GIVEN
    const c = newCluster();
    // WHEN
    c.addWorkload(computeDomainChart());
    // THEN
    const errors = c.node.validate();
    expect(errors.join('\n')).toMatch(/ComputeDomain 'llama-decode'.*'addons\.nvidiaDraDriver' is unset and the cluster has no p6e-gb200 node group.*addAcceleratedNodeGroup/);
    // WHEN the group comes after the workload
    c.addAcceleratedNodeGroup('Gb200', { instanceType: GB200, capacity: BLOCK });
    // THEN the error is gone and the workload waits for the driver
    expect(c.node.validate().filter((e) => e.includes('ComputeDomain'))).toEqual([]);
    const manifest = c.cluster.node.findAll().find((x) => x.node.id === 'Workload-serving')!;
    expect(manifest.node.dependencies.map((d) => d.node.id)).toContain('NvidiaDraDriver');
  });
});

describe('EFA and Neuron DRA drivers', () => {
  test('are off by default', () => {
    const c = newCluster();
    expect(c.node.tryFindChild('EfaDraDriver')).toBeUndefined();
    expect(c.node.tryFindChild('NeuronDraDriver')).toBeUndefined();
  });

  test.each([
    ['efaDraDriver', { efaDraDriver: { enabled: true } }],
    ['neuronDraDriver', { neuronDraDriver: {}, neuronDevicePlugin: { enabled: false } }],
  ])('%s needs Kubernetes 1.34: the error names kubernetesVersion and the fix', (prop, addons) => {
    expect(() => newCluster(addons as InferenceClusterAddons, KubernetesVersion.V1_33))
      .toThrow(new RegExp(`'addons\\.${prop}' needs Kubernetes 1\\.34 or later.*'kubernetesVersion' is 1\\.33; use kubernetesVersion: eks\\.KubernetesVersion\\.V1_34 or later`));
  });

  test('the Neuron DRA driver replaces the Neuron device plugin, which must be switched off', () => {
    // THEN both on is an error naming the other prop
    expect(() => newCluster({ neuronDraDriver: {} }))
      .toThrow(/'addons\.neuronDraDriver' is on while 'addons\.neuronDevicePlugin' is on.*`neuronDevicePlugin: \{ enabled: false \}`/);
    // WHEN the device plugin is off
    const c = newCluster({ neuronDraDriver: {}, neuronDevicePlugin: { enabled: false } });
    c.addAcceleratedNodeGroup('Trn', { instanceType: AcceleratedInstanceType.TRN2_48XLARGE });
    // THEN one Neuron chart, the DRA one
    expect(c.node.tryFindChild('NeuronDraDriver')).toBeDefined();
    expect(c.node.tryFindChild('NeuronDevicePlugin')).toBeUndefined();
    // AND pods that request aws.amazon.com/neuron are refused
    const chart = new cdk8s.Chart(new cdk8s.App(), 'trn');
    new cdk8s.ApiObject(chart, 'D', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'trn' },
      spec: { template: { spec: { containers: [{ name: 'vllm', resources: { limits: { 'aws.amazon.com/neuron': 16 } } }] } } },
    });
    expect(() => c.addWorkload(chart))
      .toThrow(/'addons\.neuronDevicePlugin\.enabled' is false, but the chart has Deployment\/trn, whose pods request 16 aws\.amazon\.com\/neuron/);
  });
});
