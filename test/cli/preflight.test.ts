import * as fs from 'fs';
import * as path from 'path';
import { disagg, tmpdir } from './util';
import { AcceleratedInstanceType, PurchaseOption } from '../../src/catalog';

// There is no AWS account here, so the checks that call AWS run against a stand-in: an executable named
// `aws` first on PATH that logs its arguments and prints, per subcommand, a fixture in the shape the AWS
// CLI reference documents for DescribeInstanceTypeOfferings, GetServiceQuota, DescribeCapacityReservations
// and GetCallerIdentity (or an error on stderr with a non-zero exit, as the CLI does).

const RESERVATION = 'cr-0123456789abcdef0';
const IDENTITY = { UserId: 'AIDAEXAMPLEUSERID0001', Account: '123456789012', Arn: 'arn:aws:iam::123456789012:user/deployer' };

function offerings(type: string, zones: string[]) {
  return { InstanceTypeOfferings: zones.map((z) => ({ InstanceType: type, LocationType: 'availability-zone', Location: z })) };
}

function quota(code: string, name: string, value: number, region = 'us-east-1') {
  return {
    Quota: {
      ServiceCode: 'ec2',
      ServiceName: 'Amazon Elastic Compute Cloud (Amazon EC2)',
      QuotaArn: `arn:aws:servicequotas:${region}:123456789012:ec2/${code}`,
      QuotaCode: code,
      QuotaName: name,
      Value: value,
      Unit: 'None',
      Adjustable: true,
      GlobalQuota: false,
      UsageMetric: {
        MetricNamespace: 'AWS/Usage',
        MetricName: 'ResourceCount',
        MetricDimensions: { Class: 'P/OnDemand', Resource: 'vCPU', Service: 'EC2', Type: 'Resource' },
        MetricStatisticRecommendation: 'Maximum',
      },
    },
  };
}

/** A date as the AWS CLI prints it, `days` from now. */
function awsDate(days: number): string {
  return new Date(Date.now() + days * 86_400_000).toISOString().replace(/\.\d{3}Z$/, '+00:00');
}

function reservation(fields: Record<string, unknown>) {
  return {
    CapacityReservations: [{
      CapacityReservationId: RESERVATION,
      OwnerId: '123456789012',
      CapacityReservationArn: `arn:aws:ec2:us-east-1:123456789012:capacity-reservation/${RESERVATION}`,
      AvailabilityZoneId: 'use1-az6',
      InstanceType: 'p5en.48xlarge',
      InstancePlatform: 'Linux/UNIX',
      AvailabilityZone: 'us-east-1d',
      Tenancy: 'default',
      TotalInstanceCount: 2,
      AvailableInstanceCount: 2,
      EbsOptimized: true,
      EphemeralStorage: false,
      State: 'active',
      StartDate: awsDate(-1),
      EndDate: awsDate(6),
      EndDateType: 'limited',
      InstanceMatchCriteria: 'targeted',
      CreateDate: awsDate(-10),
      Tags: [],
      ReservationType: 'capacity-block',
      ...fields,
    }],
  };
}

const P_ON_DEMAND = ['L-417A185B', 'Running On-Demand P instances'] as const;

/**
 * A folder with the `aws` stand-in: `answers` maps '<service>.<operation>' to the JSON it prints, or to
 * { error } for a message on stderr and exit 254 (the CLI's exit code for a failed call).
 */
function fakeAws(answers: Record<string, object | { error: string }>): { dir: string; calls: () => string[] } {
  const dir = tmpdir('preflight-aws');
  for (const [key, answer] of Object.entries(answers)) {
    if ('error' in answer) fs.writeFileSync(path.join(dir, `${key}.err`), `\n${answer.error}\n`);
    else fs.writeFileSync(path.join(dir, `${key}.json`), JSON.stringify(answer, undefined, 4));
  }
  fs.writeFileSync(path.join(dir, 'aws'), [
    '#!/bin/sh',
    `dir='${dir}'`,
    'printf \'%s\\n\' "$*" >> "$dir/calls.log"',
    'key="$1.$2"',
    'if [ -f "$dir/$key.err" ]; then cat "$dir/$key.err" >&2; exit 254; fi',
    'if [ -f "$dir/$key.json" ]; then cat "$dir/$key.json"; exit 0; fi',
    'echo "aws stub: no answer for $1 $2" >&2; exit 255',
    '',
  ].join('\n'), { mode: 0o755 });
  const calls = () => {
    const log = path.join(dir, 'calls.log');
    return fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : [];
  };
  return { dir, calls };
}

const savedEnv = { PATH: process.env.PATH, AWS_REGION: process.env.AWS_REGION, AWS_DEFAULT_REGION: process.env.AWS_DEFAULT_REGION };
const made: string[] = [];

beforeEach(() => {
  delete process.env.AWS_REGION;
  delete process.env.AWS_DEFAULT_REGION;
});

afterEach(() => {
  for (const [k, v] of Object.entries(savedEnv)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

afterAll(() => made.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

/** PATH holds only the stand-in (plus what its /bin/sh script needs), or, with no stand-in, nothing with `aws`. */
function usePath(stub?: { dir: string }): void {
  if (stub) {
    made.push(stub.dir);
    process.env.PATH = `${stub.dir}${path.delimiter}/usr/bin${path.delimiter}/bin`;
  } else {
    const empty = tmpdir('preflight-noaws');
    made.push(empty);
    process.env.PATH = empty;
  }
}

describe('disagg preflight without the aws CLI: prints the commands and what their answers must show', () => {
  beforeEach(() => usePath());

  test('p5en.48xlarge, the default deployment: zone offerings and the P On-Demand quota for 2 x 192 vCPUs, exit 4', async () => {
    // WHEN
    const { code, out, err } = await disagg('preflight', '--region', 'us-east-1');
    // THEN the two commands are printed with the values filled in
    expect(code).toBe(4);
    expect(out).toMatch(/^disagg preflight: 2 x p5en\.48xlarge \(192 vCPUs each\), On-Demand, in us-east-1$/m);
    expect(out).toContain('   aws ec2 describe-instance-type-offerings --location-type availability-zone '
      + '--filters Name=instance-type,Values=p5en.48xlarge --region us-east-1 --output json\n');
    expect(out).toContain('   aws service-quotas get-service-quota --service-code ec2 --quota-code L-417A185B --region us-east-1 --output json\n');
    // AND what each answer must show
    expect(out).toMatch(/must show: at least one zone in InstanceTypeOfferings\[\]\.Location; put one of them first in `disagg synth --azs` and pass it as --az here$/m);
    expect(out).toMatch(/must show: Quota\.Value \(Running On-Demand P instances, in vCPUs\) at least 384 = 2 nodes x 192 vCPUs/);
    expect(out).not.toMatch(/describe-capacity-reservations/);
    expect(err).toMatch(/the aws CLI is not on PATH/);
  });

  test('trn2.48xlarge: the Trn quota, the Region from $AWS_REGION, --nodes and --az', async () => {
    process.env.AWS_REGION = 'us-east-2';
    const { code, out } = await disagg('preflight', '--instance', 'trn2.48xlarge', '--nodes', '4', '--az', 'us-east-2b');
    expect(code).toBe(4);
    expect(out).toContain('--filters Name=instance-type,Values=trn2.48xlarge --region us-east-2 --output json');
    expect(out).toContain('aws service-quotas get-service-quota --service-code ec2 --quota-code L-2C3B7624 --region us-east-2 --output json');
    expect(out).toMatch(/Quota\.Value \(Running On-Demand Trn instances, in vCPUs\) at least 768 = 4 nodes x 192 vCPUs/);
    expect(out).toMatch(/must show: us-east-2b among InstanceTypeOfferings\[\]\.Location/);
  });

  test('g6e.12xlarge: the G and VT quota; the default node count is what synth builds on 4-GPU nodes ($AWS_DEFAULT_REGION)', async () => {
    process.env.AWS_DEFAULT_REGION = 'us-west-2';
    const { code, out } = await disagg('preflight', '--instance', 'g6e.12xlarge');
    expect(code).toBe(4);
    // 2 replicas x TP4 per pool = 8 GPUs = 2 nodes of 4 GPUs, twice
    expect(out).toMatch(/^disagg preflight: 4 x g6e\.12xlarge \(48 vCPUs each\), On-Demand, in us-west-2$/m);
    expect(out).toContain('--quota-code L-DB2E81BA --region us-west-2');
    expect(out).toMatch(/\(Running On-Demand G and VT instances, in vCPUs\) at least 192 = 4 nodes x 48 vCPUs/);
  });

  test('with a Capacity Block: describe-capacity-reservations and what the block must show; no quota call', async () => {
    const { code, out } = await disagg('preflight', '--capacity-block', RESERVATION, '--region', 'us-east-2', '--az', 'us-east-2b');
    expect(code).toBe(4);
    expect(out).toMatch(/, Capacity Block cr-0123456789abcdef0, in us-east-2, zone us-east-2b$/m);
    expect(out).toContain(`   aws ec2 describe-capacity-reservations --capacity-reservation-ids ${RESERVATION} --region us-east-2 --output json\n`);
    expect(out).toMatch(/must show: CapacityReservations\[0\] with InstanceType p5en\.48xlarge, State active, AvailabilityZone us-east-2b, AvailableInstanceCount at least 2, ReservationType capacity-block/);
    expect(out).not.toMatch(/get-service-quota/);
    expect(out).toMatch(/not needed: the nodes launch into cr-0123456789abcdef0/);
  });

  test('--spot checks the family\'s Spot quota', async () => {
    const { out } = await disagg('preflight', '--instance', 'p5.48xlarge', '--spot', '--region', 'us-east-1');
    expect(out).toContain('--quota-code L-7212CCBC');
    expect(out).toMatch(/\(All P Spot Instance Requests, in vCPUs\) at least 384/);
  });

  test('every catalogued type sold On-Demand maps to its family\'s quota code', async () => {
    const expected: Record<string, string> = { p: 'L-417A185B', g: 'L-DB2E81BA', trn: 'L-2C3B7624' };
    const onDemand = AcceleratedInstanceType.all().filter((t) => t.purchaseOptions.includes(PurchaseOption.ON_DEMAND));
    expect(onDemand.length).toBeGreaterThan(8);
    for (const type of onDemand) {
      const family = /^(p|g|trn)\d/.exec(type.name)?.[1];
      expect(family).toBeDefined();
      const { code, out } = await disagg('preflight', '--instance', type.name, '--nodes', '3', '--region', 'eu-west-2');
      expect(code).toBe(4);
      expect(out).toContain(`--quota-code ${expected[family!]} --region eu-west-2`);
      expect(out).toContain(`at least ${(3 * type.vcpus).toLocaleString('en-US')} = 3 nodes x ${type.vcpus} vCPUs`);
    }
  });

  test('--json says the checks did not run and lists each command', async () => {
    const { code, out } = await disagg('preflight', '--region', 'us-east-1', '--json');
    expect(code).toBe(4);
    const json = JSON.parse(out);
    expect(json).toMatchObject({ instanceType: 'p5en.48xlarge', vcpusPerNode: 192, nodes: 2, region: 'us-east-1', ran: false, exitCode: 4 });
    expect(json.checks.map((c: any) => [c.check, c.status])).toEqual([['zone', 'unchecked'], ['quota', 'unchecked']]);
    expect(json.checks[1].command).toBe('aws service-quotas get-service-quota --service-code ec2 --quota-code L-417A185B --region us-east-1 --output json');
  });
});

describe('disagg preflight with the aws CLI (a stand-in on PATH): reads the answers', () => {
  const goodP5en = () => ({
    'sts.get-caller-identity': IDENTITY,
    'ec2.describe-instance-type-offerings': offerings('p5en.48xlarge', ['us-east-1a', 'us-east-1d']),
    'service-quotas.get-service-quota': quota(...P_ON_DEMAND, 384),
  });

  test('all good: the zone offers the type and the quota holds the nodes, exit 0; the exact calls were made', async () => {
    // GIVEN
    const aws = fakeAws(goodP5en());
    usePath(aws);
    // WHEN
    const { code, out, err } = await disagg('preflight', '--region', 'us-east-1', '--az', 'us-east-1a');
    // THEN
    expect(code).toBe(0);
    expect(err).toBe('');
    expect(out).toMatch(/^ {2}account 123456789012 as arn:aws:iam::123456789012:user\/deployer$/m);
    expect(out).toMatch(/^ {2}zone +OK --az us-east-1a offers p5en\.48xlarge \(offered in us-east-1a, us-east-1d\) +-$/m);
    expect(out).toMatch(/^ {2}vCPU quota +OK Running On-Demand P instances \(L-417A185B\) is 384 vCPUs; 2 x p5en\.48xlarge need 384 /m);
    expect(aws.calls()).toEqual([
      'sts get-caller-identity --region us-east-1 --output json',
      'ec2 describe-instance-type-offerings --location-type availability-zone --filters Name=instance-type,Values=p5en.48xlarge --region us-east-1 --output json',
      'service-quotas get-service-quota --service-code ec2 --quota-code L-417A185B --region us-east-1 --output json',
    ]);
  });

  test('a zone that lacks the type fails (exit 1) and names a zone that has it', async () => {
    usePath(fakeAws(goodP5en()));
    const { code, out, err } = await disagg('preflight', '--region', 'us-east-1', '--az', 'us-east-1b');
    expect(code).toBe(1);
    expect(out).toMatch(/^ {2}zone +FAIL us-east-1b does not offer p5en\.48xlarge \(offered in us-east-1a, us-east-1d\) +put us-east-1a first: `disagg synth --azs us-east-1a,us-east-1d` and --az us-east-1a here$/m);
    expect(err).toMatch(/zone failed: the accelerated nodes would not launch \(a deploy that launches them rolls back\)/);
  });

  test('a Region where no zone offers the type fails', async () => {
    usePath(fakeAws({ ...goodP5en(), 'ec2.describe-instance-type-offerings': { InstanceTypeOfferings: [] } }));
    const { code, out } = await disagg('preflight', '--region', 'eu-west-3');
    expect(code).toBe(1);
    expect(out).toMatch(/zone +FAIL no zone of eu-west-3 offers p5en\.48xlarge +deploy to a Region that offers it/);
  });

  test('without --az the zone check warns and names the zone to pass; the exit code stays 0', async () => {
    usePath(fakeAws(goodP5en()));
    const { code, out } = await disagg('preflight', '--region', 'us-east-1');
    expect(code).toBe(0);
    expect(out).toMatch(/zone +WARN offered in us-east-1a, us-east-1d; no zone chosen +put us-east-1a first: `disagg synth --azs us-east-1a,us-east-1d` and --az us-east-1a here \(or another of these\)/);
  });

  test('a quota too small fails (exit 1) with the exact request-service-quota-increase line', async () => {
    usePath(fakeAws({ ...goodP5en(), 'service-quotas.get-service-quota': quota(...P_ON_DEMAND, 192) }));
    const { code, out, err } = await disagg('preflight', '--region', 'us-east-1', '--az', 'us-east-1d');
    expect(code).toBe(1);
    expect(out).toMatch(/vCPU quota +FAIL Running On-Demand P instances \(L-417A185B\) is 192 vCPUs; 2 x p5en\.48xlarge need 384 \(VcpuLimitExceeded\)/);
    expect(out).toContain('request an increase: `aws service-quotas request-service-quota-increase --service-code ec2 '
      + '--quota-code L-417A185B --desired-value 384 --region us-east-1`, or lower --nodes');
    expect(err).toMatch(/vCPU quota failed/);
  });

  test('a quota the account never changed is read from the AWS default', async () => {
    const aws = fakeAws({
      ...goodP5en(),
      'service-quotas.get-service-quota': { error: 'An error occurred (NoSuchResourceException) when calling the GetServiceQuota operation: The request failed because the specified service quota does not exist.' },
      'service-quotas.get-aws-default-service-quota': quota(...P_ON_DEMAND, 0),
    });
    usePath(aws);
    const { code, out } = await disagg('preflight', '--region', 'us-east-1', '--az', 'us-east-1a');
    expect(code).toBe(1);
    expect(out).toMatch(/vCPU quota +FAIL Running On-Demand P instances \(L-417A185B\) is 0 vCPUs/);
    expect(aws.calls()[3]).toBe('service-quotas get-aws-default-service-quota --service-code ec2 --quota-code L-417A185B --region us-east-1 --output json');
  });

  test('a reservation in another zone than --az fails and names its zone; the quota is not asked', async () => {
    const aws = fakeAws({ ...goodP5en(), 'ec2.describe-capacity-reservations': reservation({ ReservationType: 'default', EndDateType: 'unlimited' }) });
    usePath(aws);
    const { code, out } = await disagg('preflight', '--region', 'us-east-1', '--az', 'us-east-1a', '--capacity-reservation', RESERVATION);
    expect(code).toBe(1);
    expect(out).toMatch(/capacity reservation +FAIL cr-0123456789abcdef0: p5en\.48xlarge in us-east-1d, active, 2 of 2 free: it is in us-east-1d, not --az us-east-1a +put us-east-1d first: `disagg synth --azs us-east-1d,<another zone of us-east-1>` and --az us-east-1d here/);
    expect(out).toMatch(/vCPU quota +SKIPPED the nodes launch into cr-0123456789abcdef0/);
    expect(aws.calls().some((c) => c.startsWith('service-quotas'))).toBe(false);
    expect(aws.calls()).toContain(`ec2 describe-capacity-reservations --capacity-reservation-ids ${RESERVATION} --region us-east-1 --output json`);
  });

  test('a Capacity Block that has not started fails: wait for its start', async () => {
    const start = awsDate(3);
    usePath(fakeAws({ ...goodP5en(), 'ec2.describe-capacity-reservations': reservation({ State: 'scheduled', StartDate: start, EndDate: awsDate(5), AvailableInstanceCount: 0 }) }));
    const { code, out } = await disagg('preflight', '--region', 'us-east-1', '--capacity-block', RESERVATION);
    expect(code).toBe(1);
    expect(out).toContain(`it is scheduled, starting ${start}, not active`);
    expect(out).toContain(`wait for its start (${start}) and deploy after it`);
  });

  test('an active Capacity Block with room for the nodes passes; its zone is the zone to pass as --az', async () => {
    const end = awsDate(6);
    usePath(fakeAws({ ...goodP5en(), 'ec2.describe-capacity-reservations': reservation({ EndDate: end }) }));
    const { code, out } = await disagg('preflight', '--region', 'us-east-1', '--capacity-block', RESERVATION);
    expect(code).toBe(0);
    expect(out).toMatch(new RegExp(`capacity block +OK cr-0123456789abcdef0: p5en\\.48xlarge in us-east-1d, active, 2 of 2 free, ends ${end.replace(/\+/g, '\\+')} `
      + `+put us-east-1d first: \`disagg synth --azs us-east-1d,<another zone of us-east-1>\`; EC2 terminates its instances 30 minutes before ${end.replace(/\+/g, '\\+')}$`, 'm'));
    expect(out).toMatch(/zone +OK the reservation's zone us-east-1d offers p5en\.48xlarge/);
  });

  test('a reservation for another type, with too few free instances, passed with the wrong flag: each problem and its fix', async () => {
    usePath(fakeAws({
      ...goodP5en(),
      'ec2.describe-capacity-reservations': reservation({ ReservationType: 'default', InstanceType: 'p5.48xlarge', AvailableInstanceCount: 1 }),
    }));
    const { code, out } = await disagg('preflight', '--region', 'us-east-1', '--capacity-block', RESERVATION);
    expect(code).toBe(1);
    expect(out).toContain('it is an On-Demand Capacity Reservation, not a Capacity Block');
    expect(out).toContain('pass it as --capacity-reservation');
    expect(out).toContain('it reserves p5.48xlarge, not p5en.48xlarge');
    expect(out).toContain('1 of its 2 instances are free; 2 nodes are wanted');
  });

  test('an expired reservation and an unknown id fail', async () => {
    usePath(fakeAws({ ...goodP5en(), 'ec2.describe-capacity-reservations': reservation({ State: 'expired', AvailableInstanceCount: 0 }) }));
    let run = await disagg('preflight', '--region', 'us-east-1', '--capacity-block', RESERVATION);
    expect(run.code).toBe(1);
    expect(run.out).toMatch(/it is expired +reserve capacity again \(`aws ec2 describe-capacity-block-offerings`\)/);

    usePath(fakeAws({
      ...goodP5en(),
      'ec2.describe-capacity-reservations': { error: `An error occurred (InvalidCapacityReservationId.NotFound) when calling the DescribeCapacityReservations operation: The capacity reservation ID '${RESERVATION}' does not exist` },
    }));
    run = await disagg('preflight', '--region', 'us-west-2', '--capacity-reservation', RESERVATION);
    expect(run.code).toBe(1);
    expect(run.out).toMatch(/FAIL cr-0123456789abcdef0 does not exist in us-west-2 \(InvalidCapacityReservationId\.NotFound\) +check --capacity-reservation and --region/);
  });

  test('no working credentials: the commands are printed instead and the exit code is 4', async () => {
    const aws = fakeAws({ 'sts.get-caller-identity': { error: 'Unable to locate credentials. You can configure credentials by running "aws configure".' } });
    usePath(aws);
    const { code, out, err } = await disagg('preflight', '--region', 'us-east-1');
    expect(code).toBe(4);
    expect(out).toMatch(/not checked: `aws sts get-caller-identity` failed, so there are no working AWS credentials: Unable to locate credentials\./);
    expect(out).toContain('aws service-quotas get-service-quota --service-code ec2 --quota-code L-417A185B --region us-east-1 --output json');
    expect(err).toMatch(/the checks did not run/);
    expect(aws.calls()).toEqual(['sts get-caller-identity --region us-east-1 --output json']);
  });

  test('a denied call is NOT CHECKED with the permission to grant (exit 4); a failure elsewhere still wins (exit 1)', async () => {
    const denied = { error: 'An error occurred (AccessDeniedException) when calling the GetServiceQuota operation: User is not authorized to perform: servicequotas:GetServiceQuota' };
    usePath(fakeAws({ ...goodP5en(), 'service-quotas.get-service-quota': denied }));
    let run = await disagg('preflight', '--region', 'us-east-1', '--az', 'us-east-1a');
    expect(run.code).toBe(4);
    expect(run.out).toMatch(/vCPU quota +NOT CHECKED the call failed: An error occurred \(AccessDeniedException\).* +grant servicequotas:GetServiceQuota to this identity/);

    usePath(fakeAws({ ...goodP5en(), 'service-quotas.get-service-quota': denied }));
    run = await disagg('preflight', '--region', 'us-east-1', '--az', 'us-east-1c');
    expect(run.code).toBe(1);
  });

  test('--json carries each check\'s command, status, result and action', async () => {
    usePath(fakeAws({ ...goodP5en(), 'service-quotas.get-service-quota': quota(...P_ON_DEMAND, 192) }));
    const { code, out } = await disagg('preflight', '--region', 'us-east-1', '--az', 'us-east-1a', '--json');
    expect(code).toBe(1);
    const json = JSON.parse(out);
    expect(json).toMatchObject({ ran: true, account: '123456789012', availabilityZone: 'us-east-1a', purchaseOption: 'on-demand', exitCode: 1 });
    expect(json.checks.map((c: any) => [c.check, c.status])).toEqual([['zone', 'ok'], ['quota', 'fail']]);
    expect(json.checks[1].action).toMatch(/--desired-value 384/);
  });
});

describe('disagg preflight flag errors name the flag, the value and the fix (exit 2)', () => {
  beforeEach(() => usePath());

  test.each([
    [['--nodes', '0', '--region', 'us-east-1'], /--nodes \(0\) must be a positive integer/],
    [['--nodes', '1.5', '--region', 'us-east-1'], /--nodes \(1\.5\) must be a positive integer/],
    [[], /--region is required: neither --region, \$AWS_REGION nor \$AWS_DEFAULT_REGION is set; pass the Region you deploy to, e\.g\. --region us-east-1/],
    [['--region', 'Virginia'], /--region \(Virginia\) is not an AWS Region code; pass one such as us-east-1/],
    [['--region', 'us-east-1', '--az', 'us-west-2a'], /--az \(us-west-2a\) is not an Availability Zone of us-east-1 \(--region\); pass a zone of that Region, e\.g\. us-east-1a/],
    [['--region', 'us-east-1', '--az', 'use1-az4'], /--az \(use1-az4\) is a zone ID; pass the zone name, e\.g\. us-east-1a/],
    [['--region', 'us-east-1', '--capacity-reservation', 'cr-xyz'], /--capacity-reservation \(cr-xyz\) is not an EC2 capacity reservation id; pass the id that `aws ec2 describe-capacity-reservations --region us-east-1` shows/],
    [['--region', 'us-east-1', '--capacity-reservation', RESERVATION, '--capacity-block', RESERVATION], /both given; a deployment's nodes launch into one of them: pass one/],
    [['--region', 'us-east-1', '--spot', '--capacity-block', RESERVATION], /--spot and --capacity-block both given; nodes in a reservation run On-Demand: drop --spot/],
    [['--region', 'us-east-1', '--instance', 'p9.huge'], /Unknown instance type 'p9\.huge'; known: .*p5en\.48xlarge.* \(--instance\)/],
    [['--region', 'us-east-1', '--instance', 'g6e.48xlarge', '--capacity-block', RESERVATION], /--instance g6e\.48xlarge is not sold as Capacity Block \(--capacity-block cr-\.\.\.\); it is sold as On-Demand, Spot, On-Demand Capacity Reservation: use no capacity flag, --spot, --capacity-reservation cr-\.\.\./],
    [['--region', 'us-east-1', '--instance', 'p6e-gb200.36xlarge'], /--instance p6e-gb200\.36xlarge is not sold as On-Demand \(no capacity flag\); it is sold as Capacity Block: use --capacity-block cr-\.\.\./],
    [['--region', 'us-east-1', '--zone', 'us-east-1a'], /Unknown option '--zone'/],
  ])('disagg preflight %j', async (args, message) => {
    const { code, err } = await disagg('preflight', ...args);
    expect(code).toBe(2);
    expect(err).toMatch(message);
    expect(err).toMatch(/Run 'disagg preflight --help' for the options\./);
  });

  test('an $AWS_REGION that is not a Region code is named as such', async () => {
    process.env.AWS_REGION = 'us-east1';
    const { code, err } = await disagg('preflight');
    expect(code).toBe(2);
    expect(err).toMatch(/\$AWS_REGION \(us-east1\) is not an AWS Region code/);
  });
});

test('disagg preflight --help lists the checks, the options and the exit codes', async () => {
  const { code, out } = await disagg('preflight', '--help');
  expect(code).toBe(0);
  expect(out).toMatch(/^Usage: disagg preflight \[options\]$/m);
  for (const call of ['aws ec2 describe-instance-type-offerings', 'aws service-quotas get-service-quota', 'aws ec2 describe-capacity-reservations']) {
    expect(out).toContain(call);
  }
  for (const flag of ['--instance NAME', '--nodes N', '--region REGION', '--az ZONE', '--capacity-reservation ID', '--capacity-block ID', '--spot', '--json']) {
    expect(out).toMatch(new RegExp(`^ {2}${flag} `, 'm'));
  }
  expect(out).toMatch(/decode: 2 on p5en\.48xlarge\)/);
  expect(out).toMatch(/Exit codes: 0 every check passed, 1 a check failed/);
  expect(out).toMatch(/4 the checks could not run/);
});
