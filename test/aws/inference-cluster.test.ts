import { App, Validations } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { InferenceStack } from '../../examples/cdk-app/inference-stack';

// One synthesis of the example stack (cluster + p5en + trn2 groups) shared by every assertion:
// a full EKS synthesis is the slow part.
let stack: InferenceStack;
let template: Template;
let nagFailure: unknown;

beforeAll(() => {
  // GIVEN the example app with the AwsSolutions rules as a validation plugin
  const app = new App();
  stack = new InferenceStack(app, 'Example');
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  // WHEN it is synthesized (plugins run during app.synth, which throws on unacknowledged findings)
  try {
    app.synth();
  } catch (e) {
    nagFailure = e;
  }
  template = Template.fromStack(stack);
});

function helm(chart: string): any {
  const found = Object.values(template.findResources('Custom::AWSCDK-EKS-HelmChart'))
    .filter((r: any) => r.Properties.Chart === chart);
  expect(found).toHaveLength(1);
  return found[0].Properties;
}

describe('cluster', () => {
  test('managed node groups only, Kubernetes 1.34, private endpoint, KMS secrets, control plane logs', () => {
    // THEN
    template.hasResourceProperties('AWS::EKS::Cluster', {
      Version: '1.34',
      ResourcesVpcConfig: Match.objectLike({ EndpointPrivateAccess: true, EndpointPublicAccess: false }),
      EncryptionConfig: [Match.objectLike({ Resources: ['secrets'] })],
      Logging: Match.objectLike({ ClusterLogging: { EnabledTypes: Match.arrayWith([{ Type: 'api' }, { Type: 'audit' }]) } }),
    });
    template.hasResourceProperties('AWS::KMS::Key', { EnableKeyRotation: true });
    // system group + p5en + trn2
    template.resourceCountIs('AWS::EKS::Nodegroup', 3);
    template.hasResourceProperties('AWS::EKS::Nodegroup', { InstanceTypes: ['m7i.xlarge'], AmiType: 'AL2023_x86_64_STANDARD' });
  });

  test('the accelerated groups share one EFA security group and each get their AMI type', () => {
    // THEN
    template.hasResourceProperties('AWS::EKS::Nodegroup', { AmiType: 'AL2023_x86_64_NVIDIA', CapacityType: 'ON_DEMAND' });
    template.hasResourceProperties('AWS::EKS::Nodegroup', { AmiType: 'AL2023_x86_64_NEURON' });
    const efaGroups = new Set<string>();
    for (const lt of Object.values(template.findResources('AWS::EC2::LaunchTemplate')) as any[]) {
      for (const ni of lt.Properties.LaunchTemplateData.NetworkInterfaces ?? []) {
        efaGroups.add(JSON.stringify(ni.Groups[0]));
      }
    }
    expect(efaGroups.size).toBe(1);
  });

  test('the new VPC has private subnets tagged for internal load balancers and flow logs', () => {
    // THEN
    template.hasResourceProperties('AWS::EC2::Subnet', {
      Tags: Match.arrayWith([{ Key: 'kubernetes.io/role/internal-elb', Value: '1' }]),
    });
    template.resourceCountIs('AWS::EC2::FlowLog', 1);
  });
});

describe('add-ons', () => {
  test('EKS add-ons are pinned: VPC CNI recent enough for efa-only, Pod Identity agent', () => {
    // THEN
    template.hasResourceProperties('AWS::EKS::Addon', { AddonName: 'vpc-cni', AddonVersion: Match.stringLikeRegexp('^v1\\.(19|[2-9]\\d)\\.') });
    template.hasResourceProperties('AWS::EKS::Addon', { AddonName: 'eks-pod-identity-agent', AddonVersion: Match.anyValue() });
  });

  test('NVIDIA device plugin has MOFED disabled', () => {
    // THEN
    const p = helm('nvidia-device-plugin');
    expect(JSON.parse(p.Values).mofedEnabled).toBe(false);
    expect(p.Version).toBeDefined();
  });

  test('EFA device plugin comes from eks-charts and tolerates accelerator taints', () => {
    // THEN
    const p = helm('aws-efa-k8s-device-plugin');
    expect(p.Repository).toBe('https://aws.github.io/eks-charts');
    expect(JSON.parse(p.Values).tolerations.map((t: any) => t.key)).toEqual(['nvidia.com/gpu', 'aws.amazon.com/neuron']);
  });

  test('Neuron device plugin is installed because a Trainium group exists', () => {
    // THEN
    expect(helm('neuron-helm-chart').Repository).toBe('oci://public.ecr.aws/neuron/neuron-helm-chart');
  });

  test('LeaderWorkerSet, Gateway API CRDs (standard channel) and the Inference Extension CRD job', () => {
    // THEN
    expect(helm('lws').Repository).toBe('oci://registry.k8s.io/lws/charts/lws');
    const crds = JSON.parse(helm('gateway-crds-helm').Values).crds;
    expect(crds).toEqual({ gatewayAPI: { enabled: true, channel: 'standard' }, envoyGateway: { enabled: false } });
    const manifests = Object.values(template.findResources('Custom::AWSCDK-EKS-KubernetesResource'))
      .map((r: any) => JSON.stringify(r.Properties.Manifest));
    expect(manifests.some((m) => m.includes('gateway-api-inference-extension/releases/download/v1.6.0/manifests.yaml'))).toBe(true);
  });

  test('istiod turns on the Inference Extension; the ingress gateway sits behind an internal NLB', () => {
    // THEN
    expect(JSON.parse(helm('istiod').Values).pilot.env.ENABLE_GATEWAY_API_INFERENCE_EXTENSION).toBe('true');
    const annotations = JSON.parse(helm('gateway').Values).service.annotations;
    expect(annotations['service.beta.kubernetes.io/aws-load-balancer-scheme']).toBe('internal');
    expect(annotations['service.beta.kubernetes.io/aws-load-balancer-nlb-target-type']).toBe('ip');
  });

  test('the Load Balancer Controller gets its role through Pod Identity', () => {
    // THEN
    template.hasResourceProperties('AWS::EKS::PodIdentityAssociation', {
      Namespace: 'kube-system', ServiceAccount: 'aws-load-balancer-controller',
    });
    expect(JSON.stringify(helm('aws-load-balancer-controller').Values)).toContain('\\"serviceAccount\\":{\\"create\\":true,\\"name\\":\\"aws-load-balancer-controller\\"}');
  });
});

describe('cdk-nag AwsSolutions', () => {
  test('synthesis passes with every finding acknowledged for a stated reason', () => {
    // THEN
    expect(nagFailure).toBeUndefined();
  });

  test('the library itself adds no warnings to the example', () => {
    // THEN
    Annotations.fromStack(stack).hasNoWarning('*', Match.stringLikeRegexp('disagg:'));
  });
});
