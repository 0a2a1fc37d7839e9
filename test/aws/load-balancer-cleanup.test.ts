// The cleanup Lambda's handler (src/aws/private/load-balancer-cleanup.ts), run as Lambda runs it, against
// an in-memory account that answers the AWS SDK v3 commands it sends: what it waits for, what it deletes,
// and that it never fails a stack deletion.
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { CLEANUP_HANDLER_SOURCE, LBC_CLUSTER_TAG, LoadBalancerCleanup } from '../../src/aws/private/load-balancer-cleanup';

interface Account {
  loadBalancers: Array<{ arn: string; vpc: string; cluster?: string; goneAfterPolls?: number }>;
  targetGroups: Array<{ arn: string; vpc: string; cluster?: string }>;
  securityGroups: Array<{ id: string; vpc: string; cluster: string; inUseFor?: number }>;
  failListing?: boolean;
}

/** A fake of the two SDK packages the handler requires, over `account`; returns the calls made. */
function sdk(account: Account) {
  const calls: string[] = [];
  let polls = 0;
  const command = (name: string) => class { constructor(public readonly input: any) {} static get id() { return name; } };
  const names = ['DescribeTagsCommand', 'DeleteLoadBalancerCommand', 'DeleteTargetGroupCommand', 'DescribeSecurityGroupsCommand', 'DeleteSecurityGroupCommand'];
  const commands = Object.fromEntries(names.map((n) => [n, command(n)]));
  const tagsOf = (arn: string) => {
    const r = [...account.loadBalancers.map((l) => ({ arn: l.arn, cluster: l.cluster })), ...account.targetGroups].find((x) => x.arn === arn);
    return r?.cluster ? [{ Key: LBC_CLUSTER_TAG, Value: r.cluster }, { Key: 'service.k8s.aws/stack', Value: 'istio-ingress/gw' }] : [];
  };
  const send = async (cmd: any) => {
    const name = cmd.constructor.id;
    calls.push(`${name} ${JSON.stringify(cmd.input)}`);
    switch (name) {
      case 'DescribeTagsCommand':
        if (cmd.input.ResourceArns.length > 20) throw Object.assign(new Error('too many'), { name: 'ValidationError' });
        return { TagDescriptions: cmd.input.ResourceArns.map((a: string) => ({ ResourceArn: a, Tags: tagsOf(a) })) };
      case 'DeleteLoadBalancerCommand':
        account.loadBalancers = account.loadBalancers.filter((l) => l.arn !== cmd.input.LoadBalancerArn);
        return {};
      case 'DeleteTargetGroupCommand':
        account.targetGroups = account.targetGroups.filter((t) => t.arn !== cmd.input.TargetGroupArn);
        return {};
      case 'DescribeSecurityGroupsCommand': {
        const vpc = cmd.input.Filters.find((f: any) => f.Name === 'vpc-id').Values[0];
        const cluster = cmd.input.Filters.find((f: any) => f.Name === `tag:${LBC_CLUSTER_TAG}`).Values[0];
        return { SecurityGroups: account.securityGroups.filter((g) => g.vpc === vpc && g.cluster === cluster).map((g) => ({ GroupId: g.id })) };
      }
      case 'DeleteSecurityGroupCommand': {
        const g = account.securityGroups.find((x) => x.id === cmd.input.GroupId);
        if (!g) throw Object.assign(new Error('gone'), { name: 'InvalidGroup.NotFound' });
        if ((g.inUseFor ?? 0) > 0) {
          g.inUseFor!--;
          throw Object.assign(new Error('has a dependent object'), { name: 'DependencyViolation' });
        }
        account.securityGroups = account.securityGroups.filter((x) => x !== g);
        return {};
      }
      default: throw new Error(`unexpected ${name}`);
    }
  };
  const elb = {
    ...commands,
    ElasticLoadBalancingV2Client: class { send = send; },
    paginateDescribeLoadBalancers: async function* () {
      calls.push('DescribeLoadBalancers');
      if (account.failListing) throw Object.assign(new Error('denied'), { name: 'AccessDenied' });
      polls++;
      account.loadBalancers = account.loadBalancers.filter((l) => l.goneAfterPolls === undefined || polls <= l.goneAfterPolls);
      // Two pages, as the API returns them.
      const all = account.loadBalancers.map((l) => ({ LoadBalancerArn: l.arn, VpcId: l.vpc }));
      yield { LoadBalancers: all.slice(0, 1) };
      yield { LoadBalancers: all.slice(1) };
    },
    paginateDescribeTargetGroups: async function* () {
      yield { TargetGroups: account.targetGroups.map((t) => ({ TargetGroupArn: t.arn, VpcId: t.vpc })) };
    },
  };
  const ec2sdk = { ...commands, EC2Client: class { send = send; } };
  const modules: Record<string, any> = { '@aws-sdk/client-elastic-load-balancing-v2': elb, '@aws-sdk/client-ec2': ec2sdk };
  const exports: any = {};
  const log = jest.spyOn(console, 'log').mockImplementation(() => undefined);
  new Function('require', 'exports', CLEANUP_HANDLER_SOURCE)((m: string) => modules[m], exports);
  return { handler: exports.handler as (e: any) => Promise<any>, calls, log };
}

/** Runs the handler to completion with fake timers (it waits minutes in real time). */
async function run(handler: (e: any) => Promise<any>, event: any): Promise<{ result: any; minutes: number }> {
  const start = Date.now();
  let done = false;
  let result: any;
  const p = handler(event).then((r) => { done = true; result = r; });
  while (!done) await jest.advanceTimersByTimeAsync(5000);
  await p;
  return { result, minutes: (Date.now() - start) / 60000 };
}

const deleteEvent = { RequestType: 'Delete', PhysicalResourceId: 'lbc-cleanup-c1', ResourceProperties: { ClusterName: 'c1', VpcId: 'vpc-1' } };
const lb = (n: string) => `arn:aws:elasticloadbalancing:us-east-2:111122223333:loadbalancer/net/k8s-${n}/0123`;

describe('load balancer cleanup handler', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => { jest.useRealTimers(); jest.restoreAllMocks(); });

  test('create and update touch nothing', async () => {
    const { handler, calls } = sdk({ loadBalancers: [{ arn: lb('a'), vpc: 'vpc-1', cluster: 'c1' }], targetGroups: [], securityGroups: [] });
    const { result } = await run(handler, { ...deleteEvent, RequestType: 'Create', PhysicalResourceId: undefined });
    expect(result).toEqual({ PhysicalResourceId: 'lbc-cleanup-c1' });
    expect(calls).toEqual([]);
  });

  test('waits while the controller removes its NLB, deletes nothing of its own, then frees the security groups as their interfaces go', async () => {
    // GIVEN the gateway's NLB, gone at the third poll, and its security group in use for two more tries
    const account: Account = {
      loadBalancers: [{ arn: lb('gw'), vpc: 'vpc-1', cluster: 'c1', goneAfterPolls: 2 }],
      targetGroups: [],
      securityGroups: [{ id: 'sg-1', vpc: 'vpc-1', cluster: 'c1', inUseFor: 2 }],
    };
    const { handler, calls } = sdk(account);
    // WHEN the stack is deleted
    const { result, minutes } = await run(handler, deleteEvent);
    // THEN it waited for the controller, deleted no load balancer itself, and retried the group until free
    expect(result).toEqual({ PhysicalResourceId: 'lbc-cleanup-c1' });
    expect(calls.filter((c) => c === 'DescribeLoadBalancers').length).toBe(3);
    expect(calls.some((c) => c.startsWith('DeleteLoadBalancerCommand'))).toBe(false);
    expect(calls.filter((c) => c.startsWith('DeleteSecurityGroupCommand')).length).toBe(3);
    expect(account.securityGroups).toEqual([]);
    expect(minutes).toBeLessThan(2);
  });

  test('after the grace period it deletes what the controller left, only this cluster\'s, in this VPC', async () => {
    // GIVEN an NLB the controller never removes (it was uninstalled first), another cluster's, and one in another VPC
    const account: Account = {
      loadBalancers: [
        { arn: lb('stuck'), vpc: 'vpc-1', cluster: 'c1' },
        { arn: lb('other-cluster'), vpc: 'vpc-1', cluster: 'c2' },
        { arn: lb('other-vpc'), vpc: 'vpc-2', cluster: 'c1' },
        { arn: lb('untagged'), vpc: 'vpc-1' },
      ],
      targetGroups: [
        { arn: 'arn:aws:elasticloadbalancing:us-east-2:111122223333:targetgroup/k8s-stuck/1', vpc: 'vpc-1', cluster: 'c1' },
        { arn: 'arn:aws:elasticloadbalancing:us-east-2:111122223333:targetgroup/theirs/2', vpc: 'vpc-1', cluster: 'c2' },
      ],
      securityGroups: [],
    };
    const { handler } = sdk(account);
    // WHEN
    const { minutes } = await run(handler, deleteEvent);
    // THEN after about five minutes the stuck NLB and its target group are gone, nothing else is
    expect(minutes).toBeGreaterThanOrEqual(5);
    expect(minutes).toBeLessThan(14);
    expect(account.loadBalancers.map((l) => l.arn)).toEqual([lb('other-cluster'), lb('other-vpc'), lb('untagged')]);
    expect(account.targetGroups.map((t) => t.arn)).toEqual(['arn:aws:elasticloadbalancing:us-east-2:111122223333:targetgroup/theirs/2']);
  });

  test('tags are asked for 20 ARNs at a time, as DescribeTags allows', async () => {
    const account: Account = {
      loadBalancers: Array.from({ length: 45 }, (_, i) => ({ arn: lb(`n${i}`), vpc: 'vpc-1', cluster: i === 44 ? 'c1' : 'c2', goneAfterPolls: 1 })),
      targetGroups: [],
      securityGroups: [],
    };
    const { handler, calls } = sdk(account);
    await run(handler, deleteEvent);
    expect(calls.filter((c) => c.startsWith('DescribeTagsCommand')).length).toBeGreaterThanOrEqual(3);
  });

  test('a security group still in use at the end is logged, and the deletion still succeeds; so does an API error', async () => {
    const stuck = sdk({ loadBalancers: [], targetGroups: [], securityGroups: [{ id: 'sg-9', vpc: 'vpc-1', cluster: 'c1', inUseFor: 10_000 }] });
    const { result, minutes } = await run(stuck.handler, deleteEvent);
    expect(result).toEqual({ PhysicalResourceId: 'lbc-cleanup-c1' });
    expect(minutes).toBeLessThan(14);
    expect(stuck.log.mock.calls.flat().join(' ')).toMatch(/still in use.*sg-9/);
    const denied = sdk({ loadBalancers: [], targetGroups: [], securityGroups: [], failListing: true });
    expect((await run(denied.handler, deleteEvent)).result).toEqual({ PhysicalResourceId: 'lbc-cleanup-c1' });
    expect(denied.log.mock.calls.flat().join(' ')).toMatch(/cleanup stopped: AccessDenied/);
  });
});

describe('LoadBalancerCleanup', () => {
  test('deletes are limited to the controller\'s tag with the cluster\'s name; the Lambda runs within the framework\'s bound', () => {
    const stack = new Stack(new App());
    const vpc = new ec2.Vpc(stack, 'Vpc');
    new LoadBalancerCleanup(stack, 'Cleanup', { clusterName: 'c1', vpc });
    const template = Template.fromStack(stack);
    const policies = JSON.stringify(template.findResources('AWS::IAM::Policy'));
    expect(policies).toMatch(/"Action":\["elasticloadbalancing:DeleteLoadBalancer","elasticloadbalancing:DeleteTargetGroup"\],"Condition":\{"StringEquals":\{"aws:ResourceTag\/elbv2.k8s.aws\/cluster":"c1"\}\}/);
    expect(policies).toMatch(/"Action":"ec2:DeleteSecurityGroup","Condition":\{"StringEquals":\{"aws:ResourceTag\/elbv2.k8s.aws\/cluster":"c1"\}\}/);
    const fns = Object.values<any>(template.findResources('AWS::Lambda::Function'));
    const handler = fns.find((f) => f.Properties.Code.ZipFile !== undefined);
    expect(handler.Properties.Timeout).toBeLessThanOrEqual(14 * 60);
    // CloudFormation takes inline code up to 4 KiB for ZipFile in some partitions' documentation: keep well under.
    expect(handler.Properties.Code.ZipFile.length).toBeLessThan(4096);
    template.hasResourceProperties('Custom::LoadBalancerCleanup', { ClusterName: 'c1' });
  });
});
