// The TypeScript snippets of the README's "AWS constructs" section, kept compiling and synthesizing.
// Keep each block below identical to its README snippet (imports aside: the README imports from
// 'disagg', this file from the sources). One full cluster synthesis (snippet 1); snippet 2 uses an
// imported cluster, which synthesizes in milliseconds.
import { App, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as cdk8s from 'cdk8s';
import { AcceleratedInstanceType, AcceleratedNodeGroup, InferenceCluster, NodeCapacity } from '../../src';
import { walkDeploy } from '../deploy/walk';

describe('README snippet 1: the smallest complete example, plus a Gateway workload', () => {
  let stack: Stack;
  let template: Template;

  beforeAll(() => {
    // --- README snippet 1 -------------------------------------------------------------------
    const app = new App();
    // Environment-agnostic: `cdk synth` needs no AWS credentials and looks nothing up.
    stack = new Stack(app, 'Inference');

    const inference = new InferenceCluster(stack, 'Cluster', {
      adminRoleArns: ['arn:aws:iam::111122223333:role/PlatformAdmin'],
    });
    // Created empty, so nothing scarce launches with the stack; the stack output H200ScaleUp scales it to 2.
    inference.addAcceleratedNodeGroup('H200', {
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      maxSize: 2,
      poolRole: 'decode',
    });

    // A Gateway of your own: Istio deploys it and copies spec.infrastructure.annotations onto its
    // Service, so it gets an internal NLB like the rest of the cluster.
    const chart = new cdk8s.Chart(new cdk8s.App(), 'serving', { namespace: 'serving' });
    const gateway = new cdk8s.ApiObject(chart, 'gateway', {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'Gateway',
      metadata: { name: 'inference' },
    });
    // The spec goes in as a JSON patch, which every jsii language has (ApiObject takes `spec` only through
    // a TypeScript index signature), and its camelCase Kubernetes field is quoted so that translations
    // into Python, Java, C# and Go keep it as it is.
    gateway.addJsonPatch(cdk8s.JsonPatch.add('/spec', {
      // eslint-disable-next-line @stylistic/quote-props
      'gatewayClassName': 'istio',
      infrastructure: { annotations: inference.gatewayInfrastructureAnnotations },
      listeners: [{ name: 'http', protocol: 'HTTP', port: 80 }],
    }));
    inference.addWorkload(chart);
    app.synth();
    // --- end of snippet 1 -------------------------------------------------------------------

    template = Template.fromStack(stack);
  });

  test('synthesizes a private cluster with a system group and the p5en group, and no library warnings', () => {
    // THEN
    template.hasResourceProperties('AWS::EKS::Cluster', {
      ResourcesVpcConfig: Match.objectLike({ EndpointPublicAccess: false, EndpointPrivateAccess: true }),
    });
    template.resourceCountIs('AWS::EKS::Nodegroup', 2);
    template.hasResourceProperties('AWS::EKS::Nodegroup', {
      AmiType: 'AL2023_x86_64_NVIDIA',
      Labels: Match.objectLike({ 'disagg.dev/pool-role': 'decode', 'disagg.dev/instance-type': 'p5en.48xlarge' }),
    });
    template.hasResourceProperties('AWS::EKS::AccessEntry', { PrincipalArn: 'arn:aws:iam::111122223333:role/PlatformAdmin' });
    Annotations.fromStack(stack).hasNoWarning('*', Match.stringLikeRegexp('disagg:'));
  });

  test('the deploy walk finds no blocker: the serving namespace is created first, nothing accelerated launches', () => {
    // WHEN the template is walked in CloudFormation's order (test/deploy/walk.ts)
    const findings = walkDeploy(template.toJSON());
    // THEN
    expect(findings.filter((f) => f.blocker)).toEqual([]);
    expect(Object.keys(template.findResources('Custom::AWSCDK-EKS-KubernetesResource')).some((id) => /Namespaceserving/.test(id))).toBe(true);
  });

  test('the Gateway reaches the cluster with the NLB annotations under spec.infrastructure', () => {
    // THEN
    const manifests = Object.values(template.findResources('Custom::AWSCDK-EKS-KubernetesResource'))
      .map((r: any) => r.Properties.Manifest)
      .filter((m: any) => typeof m === 'string' && m.includes('"kind":"Gateway"'));
    expect(manifests).toHaveLength(1);
    const gateway = JSON.parse(manifests[0]).find((o: any) => o.kind === 'Gateway');
    expect(gateway.spec.infrastructure.annotations).toEqual({
      'service.beta.kubernetes.io/aws-load-balancer-type': 'external',
      'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip',
      'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internal',
    });
  });
});

describe('README snippet 2: a Capacity Block in a known zone', () => {
  let stack: Stack;
  let template: Template;

  beforeAll(() => {
    // --- README snippet 2 -------------------------------------------------------------------
    const app = new App();
    stack = new Stack(app, 'Reserved');

    // An existing VPC and cluster, imported by attributes: the zones are known without a lookup.
    const vpc = ec2.Vpc.fromVpcAttributes(stack, 'Vpc', {
      vpcId: 'vpc-0123456789abcdef0',
      availabilityZones: ['us-east-2a', 'us-east-2b'],
      privateSubnetIds: ['subnet-0aaaaaaaaaaaaaaa1', 'subnet-0bbbbbbbbbbbbbbb2'],
    });
    const cluster = eks.Cluster.fromClusterAttributes(stack, 'Cluster', {
      clusterName: 'inference',
      vpc,
      clusterSecurityGroupId: 'sg-0123456789abcdef0',
    });

    new AcceleratedNodeGroup(stack, 'Prefill', {
      cluster,
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      // The nodes go into the private subnet of us-east-2b, with no cluster placement group.
      capacity: NodeCapacity.capacityBlock('cr-0123456789abcdef0', { availabilityZone: 'us-east-2b' }),
      // Created empty (EKS asks for 0 until the block is active); scale to 2 once it is.
      maxSize: 2,
      poolRole: 'prefill',
    });
    // --- end of snippet 2 -------------------------------------------------------------------

    template = Template.fromStack(stack);
  });

  test('targets the block from the launch template and the node group, in the block\'s zone', () => {
    // THEN
    const lt: any = Object.values(template.findResources('AWS::EC2::LaunchTemplate'))[0];
    expect(lt.Properties.LaunchTemplateData.InstanceMarketOptions).toEqual({ MarketType: 'capacity-block' });
    expect(lt.Properties.LaunchTemplateData.CapacityReservationSpecification)
      .toEqual({ CapacityReservationTarget: { CapacityReservationId: 'cr-0123456789abcdef0' } });
    template.hasResourceProperties('AWS::EKS::Nodegroup', {
      CapacityType: 'CAPACITY_BLOCK',
      Subnets: ['subnet-0bbbbbbbbbbbbbbb2'],
    });
    template.resourceCountIs('AWS::EC2::PlacementGroup', 0);
    Annotations.fromStack(stack).hasNoWarning('*', Match.stringLikeRegexp('disagg:'));
  });
});
