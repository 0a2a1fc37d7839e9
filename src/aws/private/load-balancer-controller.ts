import { Aws, Stack } from 'aws-cdk-lib';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { acknowledgeWildcardResources } from './compliance';
import { podIdentityAssociation, podIdentityRole } from './pod-identity';

/** Namespace and service account of the controller (the chart creates the account). */
export const LBC_NAMESPACE = 'kube-system';
export const LBC_SERVICE_ACCOUNT = 'aws-load-balancer-controller';

/** Tag the controller puts on everything it creates; mutations are limited to resources with it. */
const CLUSTER_TAG = 'elbv2.k8s.aws/cluster';

/**
 * An ARN as cdk-nag names it, whose Region and account are `<AWS::Region>` and `<AWS::AccountId>` in an
 * environment-agnostic stack and the values in another.
 */
function nagArn(service: string, region: boolean, resource: string): RegExp {
  const part = '(?:<AWS::\\w+>|[^:<>]+)';
  return new RegExp(`^arn:<AWS::Partition>:${service}:${region ? part : ''}:${part}:${resource}$`);
}

/** Why each wildcard resource of the policy below stays (cdk-nag AwsSolutions-IAM5). */
const WILDCARD_REASONS: Array<[RegExp, string]> = [
  [/^\*$/, 'Describe/Get calls of the controller (EC2, Elastic Load Balancing, ACM) have no resource-level permissions in IAM: '
    + '"*" is the only resource they accept.'],
  [nagArn('iam', false, 'role/aws-service-role/elasticloadbalancing\\.amazonaws\\.com/\\*'),
    'iam:CreateServiceLinkedRole, conditioned on iam:AWSServiceName elasticloadbalancing.amazonaws.com: the role name is AWS\'s.'],
  [nagArn('ec2', true, '(security-group|vpc)/\\*'),
    'The controller creates security groups for its load balancers and opens node groups to them: their ids are not known '
    + 'in advance; this account and Region only, and deletes or tag changes only on groups with the controller\'s tag.'],
  [nagArn('elasticloadbalancing', true, '(loadbalancer|targetgroup)/[*/a-z]+'),
    'The load balancers and target groups the controller creates have names not known in advance: ARNs of this account and '
    + 'Region only; creating them requires the controller\'s elbv2.k8s.aws/cluster tag, and changing or deleting them requires '
    + 'it on the resource (listeners and target registration are scoped by ARN, as in the controller\'s published policy).'],
  [nagArn('elasticloadbalancing', true, '(listener|listener-rule)/[*/a-z]+'),
    'Listeners and rules of the load balancers the controller creates have names not known in advance: ARNs of this account '
    + 'and Region only, as in the controller\'s published policy.'],
];

export interface LoadBalancerControllerProps {
  readonly cluster: eks.Cluster;
  readonly chartVersion: string;
}

/**
 * AWS Load Balancer Controller: Helm chart, IAM role assumed through EKS Pod Identity, and a policy
 * scoped to what the controller needs for Services of type LoadBalancer (NLB) and Ingresses (ALB).
 * Written after the controller's published iam_policy.json, narrowed where the controller tags
 * what it creates (`elbv2.k8s.aws/cluster`).
 * @see https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/installation/
 */
export class LoadBalancerController extends Construct {
  public readonly role: iam.Role;
  public readonly chart: eks.HelmChart;

  constructor(scope: Construct, id: string, props: LoadBalancerControllerProps) {
    super(scope, id);
    const { cluster } = props;
    const partition = Aws.PARTITION;
    const region = Stack.of(this).region;
    const account = Stack.of(this).account;

    this.role = podIdentityRole(this, 'AWS Load Balancer Controller (EKS Pod Identity)');

    const sg = `arn:${partition}:ec2:${region}:${account}:security-group/*`;
    const elb = (resource: string) => `arn:${partition}:elasticloadbalancing:${region}:${account}:${resource}`;
    const taggedByController = { Null: { [`aws:ResourceTag/${CLUSTER_TAG}`]: 'false' } };
    const createdWithTag = { Null: { [`aws:RequestTag/${CLUSTER_TAG}`]: 'false' } };

    const statements = [
      new iam.PolicyStatement({
        sid: 'CreateElbServiceLinkedRole',
        actions: ['iam:CreateServiceLinkedRole'],
        resources: [`arn:${partition}:iam::${account}:role/aws-service-role/elasticloadbalancing.amazonaws.com/*`],
        conditions: { StringEquals: { 'iam:AWSServiceName': 'elasticloadbalancing.amazonaws.com' } },
      }),
      new iam.PolicyStatement({
        // Describe/Get calls have no resource-level permissions in IAM: '*' is the only resource they accept.
        sid: 'ReadOnlyDiscovery',
        actions: [
          'ec2:DescribeAccountAttributes', 'ec2:DescribeAddresses', 'ec2:DescribeAvailabilityZones',
          'ec2:DescribeInternetGateways', 'ec2:DescribeVpcs', 'ec2:DescribeVpcPeeringConnections',
          'ec2:DescribeSubnets', 'ec2:DescribeSecurityGroups', 'ec2:DescribeInstances',
          'ec2:DescribeNetworkInterfaces', 'ec2:DescribeTags', 'ec2:DescribeRouteTables',
          'ec2:GetSecurityGroupsForVpc', 'ec2:DescribeIpamPools', 'ec2:GetCoipPoolUsage', 'ec2:DescribeCoipPools',
          'elasticloadbalancing:DescribeLoadBalancers', 'elasticloadbalancing:DescribeLoadBalancerAttributes',
          'elasticloadbalancing:DescribeListeners', 'elasticloadbalancing:DescribeListenerCertificates',
          'elasticloadbalancing:DescribeListenerAttributes', 'elasticloadbalancing:DescribeSSLPolicies',
          'elasticloadbalancing:DescribeRules', 'elasticloadbalancing:DescribeTargetGroups',
          'elasticloadbalancing:DescribeTargetGroupAttributes', 'elasticloadbalancing:DescribeTargetHealth',
          'elasticloadbalancing:DescribeTags', 'elasticloadbalancing:DescribeTrustStores',
          'elasticloadbalancing:DescribeCapacityReservation',
          'acm:ListCertificates', 'acm:DescribeCertificate',
        ],
        resources: ['*'],
      }),
      new iam.PolicyStatement({
        sid: 'CreateSecurityGroups',
        actions: ['ec2:CreateSecurityGroup'],
        resources: [sg, `arn:${partition}:ec2:${region}:${account}:vpc/*`],
      }),
      new iam.PolicyStatement({
        sid: 'TagSecurityGroupsOnCreate',
        actions: ['ec2:CreateTags'],
        resources: [sg],
        conditions: { StringEquals: { 'ec2:CreateAction': 'CreateSecurityGroup' }, ...createdWithTag },
      }),
      new iam.PolicyStatement({
        // The controller opens node/cluster security groups to its load balancers' groups; those
        // node groups are not tagged by it, so this stays at "any security group of this account and region".
        sid: 'ManageSecurityGroupRules',
        actions: ['ec2:AuthorizeSecurityGroupIngress', 'ec2:RevokeSecurityGroupIngress'],
        resources: [sg],
      }),
      new iam.PolicyStatement({
        sid: 'ManageOwnSecurityGroups',
        actions: ['ec2:CreateTags', 'ec2:DeleteTags', 'ec2:DeleteSecurityGroup'],
        resources: [sg],
        conditions: taggedByController,
      }),
      new iam.PolicyStatement({
        sid: 'CreateLoadBalancers',
        actions: ['elasticloadbalancing:CreateLoadBalancer', 'elasticloadbalancing:CreateTargetGroup'],
        resources: [elb('loadbalancer/*'), elb('targetgroup/*/*')],
        conditions: createdWithTag,
      }),
      new iam.PolicyStatement({
        sid: 'TagOnCreate',
        actions: ['elasticloadbalancing:AddTags'],
        resources: [elb('targetgroup/*/*'), elb('loadbalancer/net/*/*'), elb('loadbalancer/app/*/*')],
        conditions: {
          StringEquals: { 'elasticloadbalancing:CreateAction': ['CreateTargetGroup', 'CreateLoadBalancer'] },
          ...createdWithTag,
        },
      }),
      new iam.PolicyStatement({
        sid: 'ManageOwnLoadBalancers',
        actions: [
          'elasticloadbalancing:AddTags', 'elasticloadbalancing:RemoveTags',
          'elasticloadbalancing:ModifyLoadBalancerAttributes', 'elasticloadbalancing:SetIpAddressType',
          'elasticloadbalancing:SetSecurityGroups', 'elasticloadbalancing:SetSubnets',
          'elasticloadbalancing:DeleteLoadBalancer', 'elasticloadbalancing:ModifyTargetGroup',
          'elasticloadbalancing:ModifyTargetGroupAttributes', 'elasticloadbalancing:DeleteTargetGroup',
          'elasticloadbalancing:ModifyListenerAttributes', 'elasticloadbalancing:ModifyCapacityReservation',
        ],
        resources: [elb('targetgroup/*/*'), elb('loadbalancer/net/*/*'), elb('loadbalancer/app/*/*')],
        conditions: taggedByController,
      }),
      new iam.PolicyStatement({
        sid: 'ManageListenersAndRules',
        actions: [
          'elasticloadbalancing:CreateListener', 'elasticloadbalancing:DeleteListener',
          'elasticloadbalancing:CreateRule', 'elasticloadbalancing:DeleteRule',
          'elasticloadbalancing:ModifyListener', 'elasticloadbalancing:ModifyRule',
          'elasticloadbalancing:SetRulePriorities',
          'elasticloadbalancing:AddListenerCertificates', 'elasticloadbalancing:RemoveListenerCertificates',
          'elasticloadbalancing:AddTags', 'elasticloadbalancing:RemoveTags',
        ],
        resources: [
          elb('loadbalancer/net/*/*'), elb('loadbalancer/app/*/*'),
          elb('listener/net/*/*/*'), elb('listener/app/*/*/*'),
          elb('listener-rule/net/*/*/*'), elb('listener-rule/app/*/*/*'),
        ],
      }),
      new iam.PolicyStatement({
        sid: 'RegisterTargets',
        actions: ['elasticloadbalancing:RegisterTargets', 'elasticloadbalancing:DeregisterTargets'],
        resources: [elb('targetgroup/*/*')],
      }),
    ];
    const policy = new iam.Policy(this, 'Policy', { statements });
    policy.attachToRole(this.role);
    acknowledgeWildcardResources(policy, (resource) => WILDCARD_REASONS.find(([pattern]) => pattern.test(resource))?.[1]);

    const association = podIdentityAssociation(this, cluster, LBC_NAMESPACE, LBC_SERVICE_ACCOUNT, this.role);

    this.chart = new eks.HelmChart(this, 'Chart', {
      cluster,
      chart: 'aws-load-balancer-controller',
      repository: 'https://aws.github.io/eks-charts',
      version: props.chartVersion,
      release: 'aws-load-balancer-controller',
      namespace: LBC_NAMESPACE,
      // Wait: the controller's webhook must answer before Services with NLB annotations are created.
      wait: true,
      values: {
        clusterName: cluster.clusterName,
        region,
        vpcId: cluster.vpc.vpcId,
        serviceAccount: { create: true, name: LBC_SERVICE_ACCOUNT },
        replicaCount: 2,
      },
    });
    this.chart.node.addDependency(association);
    this.chart.node.addDependency(policy);
  }
}
