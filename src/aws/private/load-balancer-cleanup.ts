import { CustomResource, Duration, Stack } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as cr from 'aws-cdk-lib/custom-resources';
import { Construct } from 'constructs';
import {
  acknowledgeControlTower, acknowledgeKubectlProvider, acknowledgeManagedPolicies, acknowledgeWildcardResources, encryptedLogGroup,
  flattenCfnReference,
} from './compliance';

/** The tag the AWS Load Balancer Controller puts on every load balancer, target group and security group it creates. */
export const LBC_CLUSTER_TAG = 'elbv2.k8s.aws/cluster';

/**
 * The handler (Node.js, AWS SDK v3 from the runtime). On Delete it waits for the load balancers the
 * controller made for this cluster to go (deleting a Gateway or a Service of type LoadBalancer lets the
 * controller remove its NLB, asynchronously), deletes what is left after `GRACE_MS` with its target groups,
 * then the controller's security groups once their network interfaces are released. It never fails the
 * stack's deletion: what it cannot remove it logs, and the VPC's deletion names it.
 */
export const CLEANUP_HANDLER_SOURCE = `
const E = require('@aws-sdk/client-elastic-load-balancing-v2');
const C = require('@aws-sdk/client-ec2');
const elb = new E.ElasticLoadBalancingV2Client({}), ec2 = new C.EC2Client({});
const TAG = '${LBC_CLUSTER_TAG}', GRACE_MS = 300000, END_MS = 780000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function tagged(arns, cluster) {
  const out = [];
  for (let i = 0; i < arns.length; i += 20) {
    const r = await elb.send(new E.DescribeTagsCommand({ ResourceArns: arns.slice(i, i + 20) }));
    for (const d of r.TagDescriptions || []) if ((d.Tags || []).some((t) => t.Key === TAG && t.Value === cluster)) out.push(d.ResourceArn);
  }
  return out;
}
async function loadBalancers(vpc, cluster) {
  const arns = [];
  for await (const p of E.paginateDescribeLoadBalancers({ client: elb }, {})) for (const lb of p.LoadBalancers || []) if (lb.VpcId === vpc) arns.push(lb.LoadBalancerArn);
  return tagged(arns, cluster);
}
async function targetGroups(vpc, cluster) {
  const arns = [];
  for await (const p of E.paginateDescribeTargetGroups({ client: elb }, {})) for (const tg of p.TargetGroups || []) if (tg.VpcId === vpc) arns.push(tg.TargetGroupArn);
  return tagged(arns, cluster);
}
exports.handler = async (event) => {
  const { ClusterName: cluster, VpcId: vpc } = event.ResourceProperties;
  const id = event.PhysicalResourceId || 'lbc-cleanup-' + cluster;
  if (event.RequestType !== 'Delete') return { PhysicalResourceId: id };
  const start = Date.now();
  try {
    let left = await loadBalancers(vpc, cluster);
    while (left.length > 0 && Date.now() - start < GRACE_MS) { await sleep(10000); left = await loadBalancers(vpc, cluster); }
    for (const arn of left) { console.log('deleting load balancer left by the controller', arn); await elb.send(new E.DeleteLoadBalancerCommand({ LoadBalancerArn: arn })); }
    for (const arn of await targetGroups(vpc, cluster)) {
      try { await elb.send(new E.DeleteTargetGroupCommand({ TargetGroupArn: arn })); } catch (e) { console.log('target group', arn, e.name); }
    }
    const groups = (await ec2.send(new C.DescribeSecurityGroupsCommand({ Filters: [{ Name: 'vpc-id', Values: [vpc] }, { Name: 'tag:' + TAG, Values: [cluster] }] }))).SecurityGroups || [];
    let pending = groups.map((g) => g.GroupId);
    while (pending.length > 0 && Date.now() - start < END_MS) {
      const still = [];
      for (const g of pending) {
        try { await ec2.send(new C.DeleteSecurityGroupCommand({ GroupId: g })); } catch (e) { if (e.name !== 'InvalidGroup.NotFound') still.push(g); }
      }
      pending = still;
      if (pending.length > 0) await sleep(15000);
    }
    if (pending.length > 0) console.log('security groups still in use (the VPC deletion will name them):', pending.join(' '));
  } catch (e) {
    console.log('cleanup stopped:', e.name, e.message);
  }
  return { PhysicalResourceId: id };
};
`;

/** Props of {@link LoadBalancerCleanup} (internal). */
export interface LoadBalancerCleanupProps {
  readonly clusterName: string;
  readonly vpc: ec2.IVpc;
}

/**
 * Removes, when the stack is destroyed or rolled back, what the AWS Load Balancer Controller created
 * for the cluster and would otherwise leave behind (internal).
 *
 * Deleting a Gateway lets Istio delete its Service in the background, and the controller removes the
 * NLB only after that; CloudFormation meanwhile moves on to the controller's chart and the cluster. An
 * NLB left behind keeps network interfaces and security groups in the subnets, and the VPC's deletion
 * fails (DependencyViolation) after the cluster is gone. This resource sits between the two: workloads
 * and the gateway chart depend on it (deleted before it), it depends on the controller's chart (deleted
 * after it), and its deletion waits for, then removes, what carries the controller's cluster tag.
 */
export class LoadBalancerCleanup extends Construct {
  /** The custom resource: what must be deleted before it depends on it. */
  public readonly resource: CustomResource;

  constructor(scope: Construct, id: string, props: LoadBalancerCleanupProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const handler = new lambda.Function(this, 'Handler', {
      runtime: lambda.determineLatestNodeRuntime(this),
      handler: 'index.handler',
      code: lambda.Code.fromInline(CLEANUP_HANDLER_SOURCE),
      // The framework's own Lambda waits for this one: both under Lambda's 15-minute bound.
      timeout: Duration.minutes(14),
      description: 'disagg: removes the AWS Load Balancer Controller\'s load balancers and security groups of a deleted cluster',
      logGroup: encryptedLogGroup(this, 'HandlerLogs'),
      reservedConcurrentExecutions: 1,
    });
    const cluster = { [`aws:ResourceTag/${LBC_CLUSTER_TAG}`]: props.clusterName };
    handler.addToRolePolicy(new iam.PolicyStatement({
      actions: ['elasticloadbalancing:DescribeLoadBalancers', 'elasticloadbalancing:DescribeTargetGroups', 'elasticloadbalancing:DescribeTags',
        'ec2:DescribeSecurityGroups'],
      resources: ['*'],
    }));
    handler.addToRolePolicy(new iam.PolicyStatement({
      actions: ['elasticloadbalancing:DeleteLoadBalancer', 'elasticloadbalancing:DeleteTargetGroup'],
      resources: [
        stack.formatArn({ service: 'elasticloadbalancing', resource: 'loadbalancer', resourceName: '*' }),
        stack.formatArn({ service: 'elasticloadbalancing', resource: 'targetgroup', resourceName: '*' }),
      ],
      conditions: { StringEquals: cluster },
    }));
    handler.addToRolePolicy(new iam.PolicyStatement({
      actions: ['ec2:DeleteSecurityGroup'],
      resources: [stack.formatArn({ service: 'ec2', resource: 'security-group', resourceName: '*' })],
      conditions: { StringEquals: cluster },
    }));
    const provider = new cr.Provider(this, 'Provider', { onEventHandler: handler, logGroup: encryptedLogGroup(this, 'ProviderLogs') });
    this.resource = new CustomResource(this, 'Resource', {
      serviceToken: provider.serviceToken,
      resourceType: 'Custom::LoadBalancerCleanup',
      properties: { ClusterName: props.clusterName, VpcId: props.vpc.vpcId },
    });

    acknowledgeKubectlProvider(provider);
    if (handler.role) {
      acknowledgeManagedPolicies(handler.role, {
        'service-role/AWSLambdaBasicExecutionRole': 'The cleanup Lambda writes its logs with the basic execution role (logs only).',
      });
    }
    const handlerVersions = `${flattenCfnReference(stack.resolve(handler.functionArn))}:*`;
    for (const policy of this.node.findAll().filter((c): c is iam.Policy => c instanceof iam.Policy)) {
      acknowledgeWildcardResources(policy, (resource) => {
        if (resource === handlerVersions) return 'The custom-resource framework (aws-cdk-lib) may invoke any version of the cleanup handler it fronts.';
        if (resource === '*') return 'The Describe calls of Elastic Load Balancing and EC2 take no resource ARN.';
        if (/:(loadbalancer|targetgroup|security-group)\/\*$/.test(resource)) {
          return `The deletes are limited by condition to resources tagged ${LBC_CLUSTER_TAG} with this cluster's name, which the controller names at random.`;
        }
        return undefined;
      });
    }
    for (const fn of [handler, ...provider.node.findAll().filter((c): c is lambda.Function => c instanceof lambda.Function)]) {
      acknowledgeControlTower(fn, 'lambda_inside_vpc_check',
        'A Lambda that runs while the stack is deleted stays out of the VPC: a VPC Lambda\'s network interfaces are released minutes '
        + 'after the function is deleted and would themselves hold the subnets it is there to free.');
    }
  }
}
