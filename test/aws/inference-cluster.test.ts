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
  test('managed node groups only, Kubernetes 1.35, private endpoint, KMS secrets, control plane logs', () => {
    // THEN
    template.hasResourceProperties('AWS::EKS::Cluster', {
      Version: '1.35',
      ResourcesVpcConfig: Match.objectLike({ EndpointPrivateAccess: true, EndpointPublicAccess: false }),
      EncryptionConfig: [Match.objectLike({ Resources: ['secrets'] })],
      Logging: Match.objectLike({ ClusterLogging: { EnabledTypes: Match.arrayWith([{ Type: 'api' }, { Type: 'audit' }]) } }),
    });
    template.hasResourceProperties('AWS::KMS::Key', { EnableKeyRotation: true });
    // AND the support policy is a decision in the template; the control plane's logs do not stay forever
    template.hasResourceProperties('AWS::EKS::Cluster', { UpgradePolicy: { SupportType: 'EXTENDED' } });
    const [clusterId, cluster] = Object.entries<any>(template.findResources('AWS::EKS::Cluster'))[0];
    const [logsId] = Object.entries<any>(template.findResources('AWS::Logs::LogGroup', {
      Properties: { LogGroupName: `/aws/eks/${cluster.Properties.Name}/cluster`, RetentionInDays: 365, KmsKeyId: Match.anyValue() },
      DeletionPolicy: 'Delete',
    }))[0];
    expect(cluster.DependsOn).toContain(logsId);
    expect(clusterId).toBeDefined();
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

  test('CoreDNS and kube-proxy are EKS add-ons that take over the copies EKS installs; CoreDNS waits for the system nodes', () => {
    // THEN
    const addons = template.findResources('AWS::EKS::Addon');
    const byName = (name: string) => Object.entries<any>(addons).find(([, r]) => r.Properties.AddonName === name)!;
    for (const name of ['coredns', 'kube-proxy']) {
      const [, addon] = byName(name);
      expect(addon.Properties.ResolveConflicts).toBe('OVERWRITE');
      expect(addon.Properties.AddonVersion).toBeUndefined();
      expect(addon.DependsOn.some((d: string) => /SystemNodes/.test(d))).toBe(true);
    }
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

  test('KEDA is installed by default: pinned chart, own namespace, non-root, waited for', () => {
    // THEN
    const keda = helm('keda');
    expect(keda).toMatchObject({ Repository: 'https://kedacore.github.io/charts', Version: '2.20.2', Namespace: 'keda', Release: 'keda', Wait: true });
    expect(JSON.parse(keda.Values).podSecurityContext).toEqual({
      operator: { runAsNonRoot: true }, metricServer: { runAsNonRoot: true }, webhooks: { runAsNonRoot: true },
    });
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

describe('ordering: workloads wait for the CRDs they use', () => {
  function logicalIds(type: string, filter: (p: any) => boolean): string[] {
    return Object.entries(template.findResources(type)).filter(([, r]: [string, any]) => filter(r.Properties)).map(([id]) => id);
  }
  function workload(): any {
    const found = Object.values(template.findResources('Custom::AWSCDK-EKS-KubernetesResource'))
      .filter((r: any) => JSON.stringify(r.Properties.Manifest).includes('llama-3-3-70b-decode'));
    expect(found).toHaveLength(1);
    return found[0];
  }

  test('the workload manifest depends on the LWS, Gateway API CRD and Inference Extension CRD installers', () => {
    // GIVEN the installers' logical ids
    const lws = logicalIds('Custom::AWSCDK-EKS-HelmChart', (p) => p.Chart === 'lws');
    const gatewayCrds = logicalIds('Custom::AWSCDK-EKS-HelmChart', (p) => p.Chart === 'gateway-crds-helm');
    const established = logicalIds('Custom::AWSCDK-EKS-KubernetesObjectValue', (p) => p.ObjectType === 'job');
    expect([lws.length, gatewayCrds.length, established.length]).toEqual([1, 1, 1]);
    // THEN
    expect(workload().DependsOn).toEqual(expect.arrayContaining([...lws, ...gatewayCrds, ...established]));
  });

  test('CRD installers finish only once their CRDs are established', () => {
    // THEN Helm waits (its --wait checks CRDs for Established)
    template.hasResourceProperties('Custom::AWSCDK-EKS-HelmChart', { Chart: 'lws', Wait: true });
    template.hasResourceProperties('Custom::AWSCDK-EKS-HelmChart', { Chart: 'gateway-crds-helm', Wait: true });
    // THEN the Inference Extension Job applies, then waits for condition=established
    const job = Object.values(template.findResources('Custom::AWSCDK-EKS-KubernetesResource'))
      .map((r: any) => JSON.parse(JSON.stringify(r.Properties.Manifest)))
      .find((m: any) => typeof m === 'string' && m.includes('disagg-inference-extension-crds-v1-6-0'));
    expect(job).toBeDefined();
    expect(job).toContain('"initContainers":[{"name":"apply"');
    expect(job).toContain('"args":["wait","--for","condition=established","--timeout=300s","-f","https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/v1.6.0/manifests.yaml"]');
    // THEN the waiter polls the Job until it has succeeded, after the Job is applied
    const [waiterId] = logicalIds('Custom::AWSCDK-EKS-KubernetesObjectValue', (p) => p.ObjectType === 'job');
    const waiter = template.toJSON().Resources[waiterId];
    expect(waiter.Properties).toMatchObject({
      ObjectName: 'disagg-inference-extension-crds-v1-6-0', ObjectNamespace: 'kube-system', JsonPath: '.status.succeeded', TimeoutSeconds: 600,
    });
    const jobManifestIds = logicalIds('Custom::AWSCDK-EKS-KubernetesResource', (p) => JSON.stringify(p.Manifest).includes('disagg-inference-extension-crds-v1-6-0'));
    expect(waiter.DependsOn).toEqual(expect.arrayContaining(jobManifestIds));
  });
});

describe('node health', () => {
  test('the EKS node monitoring agent add-on is installed', () => {
    // THEN
    template.hasResourceProperties('AWS::EKS::Addon', {
      AddonName: 'eks-node-monitoring-agent',
      ConfigurationValues: JSON.stringify({ dcgmAgent: { tolerations: [{ operator: 'Exists' }] } }),
    });
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
