import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { AcceleratedInstanceType, PurchaseOption } from '../../catalog';
import { formatInt } from '../../sizing/private/units';
import { CliIo, Command, ExitCode, UsageError, parseOptions } from '../command';
import { DEFAULT_DEPLOYMENT } from '../defaults';
import { renderTable } from '../table';

/**
 * `disagg preflight`'s own exit code beyond ExitCode: the checks could not run (no aws CLI on PATH, no
 * working credentials, or a call failed), so nothing is known; the commands to run by hand are printed.
 */
export const PREFLIGHT_NOT_CHECKED = ExitCode.UNCHECKED;

/** How long one aws CLI call may take before it counts as failed. */
const AWS_CALL_TIMEOUT_MS = 60_000;

/**
 * The Service Quotas codes of the EC2 vCPU quotas for the accelerated families the catalog lists
 * (service code `ec2`; each limits the vCPUs of all running instances of the family in one Region).
 * Codes as `aws service-quotas list-service-quotas --service-code ec2` names them.
 * @see https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html
 */
const VCPU_QUOTAS: ReadonlyArray<{ prefix: RegExp; onDemand: Quota; spot: Quota }> = [
  {
    prefix: /^p\d/,
    onDemand: { code: 'L-417A185B', name: 'Running On-Demand P instances' },
    spot: { code: 'L-7212CCBC', name: 'All P Spot Instance Requests' },
  },
  {
    prefix: /^g\d/,
    onDemand: { code: 'L-DB2E81BA', name: 'Running On-Demand G and VT instances' },
    spot: { code: 'L-3819A6DF', name: 'All G and VT Spot Instance Requests' },
  },
  {
    prefix: /^trn\d/,
    onDemand: { code: 'L-2C3B7624', name: 'Running On-Demand Trn instances' },
    spot: { code: 'L-6B0D517C', name: 'All Trn Spot Instance Requests' },
  },
];

interface Quota {
  readonly code: string;
  readonly name: string;
}

const HELP = `Usage: disagg preflight [options]

Checks, before \`cdk deploy\` and before scaling the node groups up, that the accelerated nodes of a
deployment can launch (a deploy that launches them rolls back when they cannot):
  zone         which Availability Zones of the Region offer the instance type, and that --az is one of
               them (aws ec2 describe-instance-type-offerings)
  vCPU quota   the account's EC2 vCPU quota for the type's family (Running On-Demand P, G and VT, or Trn
               instances; with --spot the family's Spot request quota) holds nodes x the type's vCPUs
               (aws service-quotas get-service-quota)
  reservation  with --capacity-reservation or --capacity-block: the reservation's instance type, zone,
               state (active, not scheduled or expired), free instances and, for a Capacity Block, its
               start and end (aws ec2 describe-capacity-reservations)
It prints each check, its result and what to do: the zone to put first in \`disagg synth --azs\`, the
exact \`aws service-quotas request-service-quota-increase\` line, when a Capacity Block starts.
The checks run through the aws CLI when it is on PATH and \`aws sts get-caller-identity\` succeeds; every
call is read-only (IAM: ec2:DescribeInstanceTypeOfferings, servicequotas:GetServiceQuota,
ec2:DescribeCapacityReservations). Without the aws CLI or working credentials it prints each command with
the values filled in, and what its answer must show, and exits ${PREFLIGHT_NOT_CHECKED}.

Options:
  --instance NAME              EC2 instance type (default ${DEFAULT_DEPLOYMENT.instance})
  --nodes N                    accelerated nodes to launch (default: what \`disagg synth --instance NAME\`
                               builds, ceil(replicas x TP / accelerators per node) per pool, prefill plus
                               decode: ${defaultNodes(AcceleratedInstanceType.fromName(DEFAULT_DEPLOYMENT.instance))} on ${DEFAULT_DEPLOYMENT.instance})
  --region REGION              the Region to deploy to (default $AWS_REGION, else $AWS_DEFAULT_REGION)
  --az ZONE                    the Availability Zone the nodes go to, e.g. us-east-1a: the first of
                               \`disagg synth --azs\` (default: none chosen; the zone check lists the
                               zones that offer the type)
  --capacity-reservation ID    an On-Demand Capacity Reservation (cr-...) the nodes launch into
  --capacity-block ID          a Capacity Block for ML (cr-...) the nodes launch into
  --spot                       Spot nodes: check the family's Spot quota instead of the On-Demand one
  --json                       print machine-readable JSON only
  -h, --help                   show this help

Exit codes: 0 every check passed, 1 a check failed (the nodes would not launch; what to do is printed),
2 usage error, 3 internal error, ${PREFLIGHT_NOT_CHECKED} the checks could not run (no aws CLI on PATH, no working
credentials, or a call failed): the commands to run by hand are printed.`;

/** The flags of `disagg preflight`, as its parser reads them (tests parse the README's commands with them). */
const OPTIONS = {
  'instance': { type: 'string' },
  'nodes': { type: 'string' },
  'region': { type: 'string' },
  'az': { type: 'string' },
  'capacity-reservation': { type: 'string' },
  'capacity-block': { type: 'string' },
  'spot': { type: 'boolean' },
  'json': { type: 'boolean' },
} as const;

/** `disagg preflight`: will the accelerated nodes launch? Zone offerings, vCPU quota, reservation. */
export const command: Command = {
  name: 'preflight',
  options: OPTIONS,
  summary: 'Check before deploying that the zone offers the instance type, the vCPU quota holds the nodes, and a reservation fits',
  help: HELP,
  run: runPreflight,
};

/** The deployment's capacity, as the checks see it. */
interface PreflightInputs {
  readonly instanceType: AcceleratedInstanceType;
  readonly nodes: number;
  readonly region: string;
  readonly az?: string;
  readonly purchase: PurchaseOption;
  readonly reservationId?: string;
}

type Status = 'ok' | 'warn' | 'fail' | 'unchecked' | 'skipped';

/** What one check found. */
interface Verdict {
  readonly status: Status;
  /** What the answer shows. */
  readonly result: string;
  /** What to do about it; '' when nothing. */
  readonly action: string;
}

/** One check: the aws CLI call that answers it, what the answer must show, and how to read it. */
interface Check {
  readonly id: 'zone' | 'quota' | 'reservation';
  readonly title: string;
  /** The aws CLI arguments (after `aws`), `--output json` included; absent for a skipped check. */
  readonly argv?: string[];
  /** For a person running `argv` by hand: what the answer must show for the check to pass. */
  readonly mustShow: string;
}

/** An aws CLI call's outcome: its parsed JSON, or the error it printed. */
type AwsAnswer = { ok: true; json: any } | { ok: false; error: string; errorCode?: string };

interface PreflightValues {
  'instance'?: string;
  'nodes'?: string;
  'region'?: string;
  'az'?: string;
  'capacity-reservation'?: string;
  'capacity-block'?: string;
  'spot'?: boolean;
  'json'?: boolean;
}

async function runPreflight(argv: string[], io: CliIo): Promise<number> {
  const values: PreflightValues = parseOptions(argv, OPTIONS, io);
  const inputs = inputsFrom(values);
  const checks = planChecks(inputs);
  const env: NodeJS.ProcessEnv = { ...process.env, AWS_PAGER: '' };

  // Plan, then run: the commands are fixed before any call, so the printed ones are the ones run.
  const aws = findOnPath('aws', env);
  let notRunReason: string | undefined;
  let identity: { Account?: string; Arn?: string } | undefined;
  if (!aws) {
    notRunReason = 'the aws CLI is not on PATH (install AWS CLI v2: https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html)';
  } else {
    const who = await callAws(aws, ['sts', 'get-caller-identity', '--region', inputs.region, '--output', 'json'], env);
    if (who.ok) {
      identity = who.json;
    } else {
      notRunReason = `\`aws sts get-caller-identity\` failed, so there are no working AWS credentials: ${who.error} `
        + '(configure them: `aws configure`, `aws sso login`, AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)';
    }
  }

  const verdicts = notRunReason === undefined ? await runChecks(inputs, checks, aws!, env) : notRunVerdicts(inputs, checks);
  const rows = checks.map((check) => ({ check, verdict: verdicts.get(check.id)! }));
  const failed = rows.filter((r) => r.verdict.status === 'fail');
  const unchecked = rows.filter((r) => r.verdict.status === 'unchecked');
  const code = failed.length > 0 ? ExitCode.NEGATIVE : (unchecked.length > 0 ? PREFLIGHT_NOT_CHECKED : ExitCode.OK);

  if (values.json) {
    io.out(JSON.stringify({
      instanceType: inputs.instanceType.name,
      vcpusPerNode: inputs.instanceType.vcpus,
      nodes: inputs.nodes,
      region: inputs.region,
      availabilityZone: inputs.az ?? null,
      purchaseOption: inputs.purchase,
      reservationId: inputs.reservationId ?? null,
      ran: notRunReason === undefined,
      notRunReason: notRunReason ?? null,
      account: identity?.Account ?? null,
      checks: rows.map(({ check, verdict }) => ({
        check: check.id,
        command: check.argv ? shellLine(check.argv) : null,
        mustShow: check.mustShow,
        status: verdict.status,
        result: verdict.result,
        action: verdict.action,
      })),
      exitCode: code,
    }, undefined, 2));
    return code;
  }

  const capacity = inputs.reservationId ? `${purchaseWords(inputs.purchase)} ${inputs.reservationId}` : purchaseWords(inputs.purchase);
  io.out(`disagg preflight: ${inputs.nodes} x ${inputs.instanceType.name} (${inputs.instanceType.vcpus} vCPUs each), ${capacity}, `
    + `in ${inputs.region}${inputs.az ? `, zone ${inputs.az}` : ''}`);
  if (notRunReason !== undefined) {
    io.out(`  not checked: ${notRunReason}.`);
    io.out('  Run these read-only commands with credentials for the account you deploy to, and compare:');
    io.out('');
    checks.forEach((check, i) => {
      io.out(`${i + 1}. ${check.title}`);
      if (check.argv) {
        io.out(`   ${shellLine(check.argv)}`);
        io.out(`   The answer must show: ${check.mustShow}`);
      } else {
        io.out(`   not needed: ${skippedQuota(inputs).result}`);
      }
    });
    io.err(`error: the checks did not run (${notRunReason}); the commands above answer them (exit ${PREFLIGHT_NOT_CHECKED})`);
    return code;
  }
  io.out(`  account ${identity?.Account ?? '(unknown)'}${identity?.Arn ? ` as ${identity.Arn}` : ''}`);
  io.out('');
  io.out(renderTable(['check', 'result', 'what to do'],
    rows.map(({ check, verdict }) => [check.title, `${statusWord(verdict.status)} ${verdict.result}`, verdict.action || '-']),
    [false, false, false]).join('\n'));
  io.out('');
  io.out('Checked with:');
  for (const check of checks) {
    if (check.argv) io.out(`  ${shellLine(check.argv)}`);
  }
  if (failed.length > 0) {
    io.err(`error: ${failed.map((r) => r.check.title).join(', ')} failed: the accelerated nodes would not launch (a deploy that `
      + 'launches them rolls back); do what the table says, then run this check again');
  } else if (unchecked.length > 0) {
    io.err(`error: ${unchecked.map((r) => r.check.title).join(', ')} could not be checked (see the table; exit ${PREFLIGHT_NOT_CHECKED})`);
  }
  return code;
}

/** Runs each check's call and judges the answer; the reservation first, since its zone is the nodes' zone. */
async function runChecks(inputs: PreflightInputs, checks: Check[], aws: string, env: NodeJS.ProcessEnv): Promise<Map<Check['id'], Verdict>> {
  const verdicts = new Map<Check['id'], Verdict>();
  const byId = new Map(checks.map((c) => [c.id, c]));
  let reservationAz: string | undefined;
  const reservation = byId.get('reservation');
  if (reservation) {
    const judged = judgeReservation(inputs, await callAws(aws, reservation.argv!, env), new Date());
    reservationAz = judged.facts?.availabilityZone;
    verdicts.set('reservation', judged.verdict);
  }
  verdicts.set('zone', judgeZone(inputs, await callAws(aws, byId.get('zone')!.argv!, env), reservationAz));
  const quota = byId.get('quota')!;
  verdicts.set('quota', quota.argv ? judgeQuota(inputs, await quotaAnswer(aws, quota.argv, env)) : skippedQuota(inputs));
  return verdicts;
}

/** Without the aws CLI or credentials: every call is left to the user. */
function notRunVerdicts(inputs: PreflightInputs, checks: Check[]): Map<Check['id'], Verdict> {
  return new Map(checks.map((check) => [check.id, check.argv
    ? { status: 'unchecked', result: 'not run', action: `run \`${shellLine(check.argv)}\`: ${check.mustShow}` }
    : skippedQuota(inputs)]));
}

// ---------------------------------------------------------------------------------------------
// Inputs

function inputsFrom(values: PreflightValues): PreflightInputs {
  let instanceType: AcceleratedInstanceType;
  try {
    instanceType = AcceleratedInstanceType.fromName(values.instance ?? DEFAULT_DEPLOYMENT.instance);
  } catch (e) {
    throw new UsageError(`${(e as Error).message} (--instance)`);
  }
  const nodes = values.nodes === undefined ? defaultNodes(instanceType) : positiveInt('nodes', values.nodes);

  const region = values.region ?? nonEmpty(process.env.AWS_REGION) ?? nonEmpty(process.env.AWS_DEFAULT_REGION);
  if (region === undefined) {
    throw new UsageError('--region is required: neither --region, $AWS_REGION nor $AWS_DEFAULT_REGION is set; '
      + 'pass the Region you deploy to, e.g. --region us-east-1');
  }
  const regionSource = values.region !== undefined ? '--region' : (nonEmpty(process.env.AWS_REGION) ? '$AWS_REGION' : '$AWS_DEFAULT_REGION');
  if (!/^[a-z]{2}(-[a-z]+)+-\d+$/.test(region)) {
    throw new UsageError(`${regionSource} (${region}) is not an AWS Region code; pass one such as us-east-1 or eu-west-2`);
  }

  const az = values.az;
  if (az !== undefined) {
    if (/^[a-z]{2,4}\d+-az\d+$/.test(az)) {
      throw new UsageError(`--az (${az}) is a zone ID; pass the zone name, e.g. ${region}a (\`aws ec2 describe-availability-zones --region ${region}\` maps IDs to names)`);
    }
    if (!az.startsWith(region) || !/^(-[a-z0-9-]+)?[a-z]$/.test(az.slice(region.length))) {
      throw new UsageError(`--az (${az}) is not an Availability Zone of ${region} (${regionSource}); pass a zone of that Region, e.g. ${region}a, `
        + 'or the Region the zone belongs to as --region');
    }
  }

  const reservation = values['capacity-reservation'];
  const block = values['capacity-block'];
  if (reservation !== undefined && block !== undefined) {
    throw new UsageError(`--capacity-reservation (${reservation}) and --capacity-block (${block}) both given; a deployment's nodes launch `
      + 'into one of them: pass one');
  }
  if (values.spot && (reservation !== undefined || block !== undefined)) {
    throw new UsageError(`--spot and ${reservation !== undefined ? '--capacity-reservation' : '--capacity-block'} both given; nodes in a `
      + 'reservation run On-Demand: drop --spot');
  }
  const reservationId = reservation ?? block;
  if (reservationId !== undefined && !/^cr-[0-9a-f]{8,17}$/.test(reservationId)) {
    const flag = reservation !== undefined ? '--capacity-reservation' : '--capacity-block';
    throw new UsageError(`${flag} (${reservationId}) is not an EC2 capacity reservation id; pass the id that `
      + `\`aws ec2 describe-capacity-reservations --region ${region}\` shows, e.g. cr-0123456789abcdef0`);
  }
  const purchase = reservation !== undefined ? PurchaseOption.CAPACITY_RESERVATION
    : block !== undefined ? PurchaseOption.CAPACITY_BLOCK
      : values.spot ? PurchaseOption.SPOT : PurchaseOption.ON_DEMAND;
  if (!instanceType.purchaseOptions.includes(purchase)) {
    const sold = instanceType.purchaseOptions;
    throw new UsageError(`--instance ${instanceType.name} is not sold as ${purchaseWords(purchase)} (${PURCHASE_FLAGS[purchase]}); `
      + `it is sold as ${sold.map(purchaseWords).join(', ')}: use ${sold.map((p) => PURCHASE_FLAGS[p]).join(', ')}`);
  }
  return { instanceType, nodes, region, az, purchase, reservationId };
}

/**
 * The accelerated nodes `disagg synth --instance <type>` builds with its other defaults: per pool,
 * ceil(replicas x TP / accelerators per node), as `synthesizeDeployment` sizes its node groups.
 */
function defaultNodes(type: AcceleratedInstanceType): number {
  const pool = (replicas: number) => Math.ceil((replicas * DEFAULT_DEPLOYMENT.tensorParallel) / type.acceleratorCount);
  return pool(DEFAULT_DEPLOYMENT.prefillReplicas) + pool(DEFAULT_DEPLOYMENT.decodeReplicas);
}

function positiveInt(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) {
    throw new UsageError(`--${flag} (${value}) must be a positive integer, the accelerated nodes to launch (prefill plus decode)`);
  }
  return n;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

// ---------------------------------------------------------------------------------------------
// Plan: the calls and what their answers must show

/** The vCPU quota that limits `type` bought as `purchase` (On-Demand, or Spot). */
function vcpuQuota(type: AcceleratedInstanceType, purchase: PurchaseOption): Quota {
  const family = VCPU_QUOTAS.find((q) => q.prefix.test(type.name));
  if (!family) {
    throw new Error(`no EC2 vCPU quota code is known for ${type.name}; add its family to VCPU_QUOTAS in src/cli/commands/preflight.ts`);
  }
  return purchase === PurchaseOption.SPOT ? family.spot : family.onDemand;
}

function neededVcpus(inputs: PreflightInputs): number {
  return inputs.nodes * inputs.instanceType.vcpus;
}

function planChecks(inputs: PreflightInputs): Check[] {
  const { instanceType: type, region } = inputs;
  const checks: Check[] = [];
  if (inputs.reservationId) {
    const block = inputs.purchase === PurchaseOption.CAPACITY_BLOCK;
    checks.push({
      id: 'reservation',
      title: block ? 'capacity block' : 'capacity reservation',
      argv: ['ec2', 'describe-capacity-reservations', '--capacity-reservation-ids', inputs.reservationId, '--region', region, '--output', 'json'],
      mustShow: `CapacityReservations[0] with InstanceType ${type.name}, State active, `
        + `AvailabilityZone ${inputs.az ?? '(the zone to put first in `disagg synth --azs` and pass as --az)'}, AvailableInstanceCount at least ${inputs.nodes}, `
        + `ReservationType ${block ? 'capacity-block, a StartDate already past and an EndDate after the deployment is done '
          + '(EC2 terminates the instances 30 minutes before it)' : 'default'}`,
    });
  }
  checks.push({
    id: 'zone',
    title: 'zone',
    argv: ['ec2', 'describe-instance-type-offerings', '--location-type', 'availability-zone',
      '--filters', `Name=instance-type,Values=${type.name}`, '--region', region, '--output', 'json'],
    mustShow: inputs.az
      ? `${inputs.az} among InstanceTypeOfferings[].Location`
      : 'at least one zone in InstanceTypeOfferings[].Location; put one of them first in `disagg synth --azs` and pass it as --az here',
  });
  const quota = vcpuQuota(type, inputs.purchase);
  checks.push({
    id: 'quota',
    title: 'vCPU quota',
    argv: inputs.reservationId ? undefined
      : ['service-quotas', 'get-service-quota', '--service-code', 'ec2', '--quota-code', quota.code, '--region', region, '--output', 'json'],
    mustShow: `Quota.Value (${quota.name}, in vCPUs) at least ${formatInt(neededVcpus(inputs))} = ${inputs.nodes} nodes x ${type.vcpus} vCPUs, `
      + `plus the vCPUs of the family's instances already running in ${region}`,
  });
  return checks;
}

// ---------------------------------------------------------------------------------------------
// Judge: what each answer means

function judgeZone(inputs: PreflightInputs, answer: AwsAnswer, reservationAz: string | undefined): Verdict {
  const type = inputs.instanceType.name;
  if (!answer.ok) return callFailed(answer, 'ec2:DescribeInstanceTypeOfferings');
  const offerings: any[] = Array.isArray(answer.json?.InstanceTypeOfferings) ? answer.json.InstanceTypeOfferings : [];
  const zones = [...new Set(offerings.filter((o) => o?.InstanceType === undefined || o.InstanceType === type)
    .map((o) => o?.Location).filter((l): l is string => typeof l === 'string'))].sort();
  if (zones.length === 0) {
    return {
      status: 'fail',
      result: `no zone of ${inputs.region} offers ${type}`,
      action: 'deploy to a Region that offers it: `aws ec2 describe-instance-type-offerings --location-type region --filters '
        + `Name=instance-type,Values=${type} --region <region>\` lists it there`,
    };
  }
  const listed = zones.join(', ');
  const target = inputs.az ?? reservationAz;
  if (target === undefined) {
    return {
      status: 'warn',
      result: `offered in ${listed}; no zone chosen`,
      action: `${placeIn(zones[0], zones, inputs.region, true)} (or another of these): without --azs the nodes go to the zone CloudFormation `
        + `picks first, which may not offer ${type}`,
    };
  }
  const source = inputs.az !== undefined ? `--az ${target}` : `the reservation's zone ${target}`;
  if (!zones.includes(target)) {
    return {
      status: 'fail',
      result: `${target} does not offer ${type} (offered in ${listed})`,
      action: inputs.az !== undefined
        ? placeIn(reservationAz !== undefined && zones.includes(reservationAz) ? reservationAz : zones[0], zones, inputs.region, true)
        : `the reservation's zone must offer ${type}; use a reservation in ${listed}`,
    };
  }
  return {
    status: 'ok',
    result: `${source} offers ${type} (offered in ${listed})`,
    action: inputs.az === undefined ? placeIn(target, zones, inputs.region, false) : '',
  };
}

function judgeQuota(inputs: PreflightInputs, answer: AwsAnswer): Verdict {
  const quota = vcpuQuota(inputs.instanceType, inputs.purchase);
  if (!answer.ok) return callFailed(answer, 'servicequotas:GetServiceQuota');
  const value = Number(answer.json?.Quota?.Value);
  if (!Number.isFinite(value)) {
    return { status: 'unchecked', result: `the answer has no Quota.Value for ${quota.code}`, action: 'run the command by hand and read Quota.Value' };
  }
  const needed = neededVcpus(inputs);
  const family = `${quota.name} (${quota.code})`;
  if (value < needed) {
    return {
      status: 'fail',
      result: `${family} is ${formatInt(value)} vCPUs; ${inputs.nodes} x ${inputs.instanceType.name} need ${formatInt(needed)} (VcpuLimitExceeded)`,
      action: `request an increase: \`${shellLine(['service-quotas', 'request-service-quota-increase', '--service-code', 'ec2',
        '--quota-code', quota.code, '--desired-value', String(needed), '--region', inputs.region])}\`, or lower --nodes`,
    };
  }
  return {
    status: 'ok',
    result: `${family} is ${formatInt(value)} vCPUs; ${inputs.nodes} x ${inputs.instanceType.name} need ${formatInt(needed)}`,
    action: `instances of the family already running in ${inputs.region} count against it too`,
  };
}

function skippedQuota(inputs: PreflightInputs): Verdict {
  return {
    status: 'skipped',
    result: `the nodes launch into ${inputs.reservationId}, capacity the account already holds; the reservation check decides`,
    action: '',
  };
}

/** The parts of a reservation the zone check needs. */
interface ReservationFacts {
  readonly availabilityZone?: string;
}

function judgeReservation(inputs: PreflightInputs, answer: AwsAnswer, now: Date): { verdict: Verdict; facts?: ReservationFacts } {
  const id = inputs.reservationId!;
  const flag = inputs.purchase === PurchaseOption.CAPACITY_BLOCK ? '--capacity-block' : '--capacity-reservation';
  if (!answer.ok) {
    if (answer.errorCode?.startsWith('InvalidCapacityReservationId')) {
      return {
        verdict: {
          status: 'fail',
          result: `${id} does not exist in ${inputs.region} (${answer.errorCode})`,
          action: `check ${flag} and --region: \`aws ec2 describe-capacity-reservations --region ${inputs.region}\` lists the account's reservations there`,
        },
      };
    }
    return { verdict: callFailed(answer, 'ec2:DescribeCapacityReservations') };
  }
  const r = (Array.isArray(answer.json?.CapacityReservations) ? answer.json.CapacityReservations : [])
    .find((c: any) => c?.CapacityReservationId === undefined || c.CapacityReservationId === id);
  if (!r) {
    return { verdict: { status: 'fail', result: `${id} is not in the answer`, action: `check ${flag} and --region ${inputs.region}` } };
  }
  const facts: ReservationFacts = { availabilityZone: typeof r.AvailabilityZone === 'string' ? r.AvailabilityZone : undefined };
  const problems: string[] = [];
  const actions: string[] = [];

  const isBlock = r.ReservationType === 'capacity-block';
  if (r.ReservationType !== undefined && isBlock !== (inputs.purchase === PurchaseOption.CAPACITY_BLOCK)) {
    problems.push(isBlock ? 'it is a Capacity Block' : 'it is an On-Demand Capacity Reservation, not a Capacity Block');
    actions.push(`pass it as ${isBlock ? '--capacity-block' : '--capacity-reservation'} (the launch template's market type differs)`);
  }
  if (r.InstanceType !== inputs.instanceType.name) {
    problems.push(`it reserves ${r.InstanceType}, not ${inputs.instanceType.name}`);
    actions.push(`pass --instance ${r.InstanceType}, or a reservation for ${inputs.instanceType.name}`);
  }
  if (inputs.az !== undefined && facts.availabilityZone !== undefined && facts.availabilityZone !== inputs.az) {
    problems.push(`it is in ${facts.availabilityZone}, not --az ${inputs.az}`);
    actions.push(`${placeIn(facts.availabilityZone, [], inputs.region, true)} (a reservation only serves launches in its own zone)`);
  }

  const start = Date.parse(r.StartDate);
  const end = Date.parse(r.EndDate);
  const state = String(r.State);
  let usable: number;
  switch (state) {
    case 'active':
      usable = Number(r.AvailableInstanceCount);
      break;
    case 'scheduled':
    case 'payment-pending':
    case 'pending':
    case 'assessing':
    case 'delayed':
      usable = Number(r.TotalInstanceCount);
      problems.push(`it is ${state}${Number.isFinite(start) && start > now.getTime() ? `, starting ${r.StartDate}` : ''}, not active`);
      actions.push(Number.isFinite(start) && start > now.getTime()
        ? `wait for its start (${r.StartDate}) and deploy after it`
        : 'wait until `aws ec2 describe-capacity-reservations` shows it active');
      break;
    default:
      // expired, cancelled, failed, payment-failed, unsupported, unavailable: it will not become usable.
      usable = 0;
      problems.push(`it is ${state}`);
      actions.push(`reserve capacity again (${isBlock ? '`aws ec2 describe-capacity-block-offerings`' : '`aws ec2 create-capacity-reservation`'}) and pass the new id`);
  }
  if (Number.isFinite(usable) && usable < inputs.nodes && (state === 'active' || usable > 0)) {
    problems.push(`${usable} of its ${r.TotalInstanceCount} instances ${state === 'active' ? 'are free' : 'are reserved'}; ${inputs.nodes} nodes are wanted`);
    actions.push(`lower --nodes (fewer replicas) to ${usable}, or free or add reserved instances`);
  }

  const summary = `${id}: ${r.InstanceType} in ${facts.availabilityZone ?? '(zone unknown)'}, ${state}, `
    + `${r.AvailableInstanceCount} of ${r.TotalInstanceCount} free${isBlock && Number.isFinite(end) ? `, ends ${r.EndDate}` : ''}`;
  if (problems.length > 0) {
    return { facts, verdict: { status: 'fail', result: `${summary}: ${problems.join('; ')}`, action: actions.join('; ') } };
  }
  const notes: string[] = [];
  if (inputs.az === undefined && facts.availabilityZone !== undefined) {
    notes.push(placeIn(facts.availabilityZone, [], inputs.region, false));
  }
  if (isBlock && Number.isFinite(end)) {
    notes.push(`EC2 terminates its instances 30 minutes before ${r.EndDate}`);
  }
  return { facts, verdict: { status: 'ok', result: summary, action: notes.join('; ') } };
}

/**
 * What to do to put the nodes in `zone`: `disagg synth` puts both node groups in the first of its
 * `--azs` (EKS needs a second zone, which need not offer the type); `here` adds this command's --az.
 */
function placeIn(zone: string, offered: string[], region: string, here: boolean): string {
  const second = offered.find((z) => z !== zone) ?? `<another zone of ${region}>`;
  return `put ${zone} first: \`disagg synth --azs ${zone},${second}\`${here ? ` and --az ${zone} here` : ''}`;
}

function callFailed(answer: { error: string; errorCode?: string }, permission: string): Verdict {
  const denied = answer.errorCode !== undefined && /AccessDenied|UnauthorizedOperation/.test(answer.errorCode);
  return {
    status: 'unchecked',
    result: `the call failed: ${answer.error}`,
    action: denied ? `grant ${permission} to this identity, or run the command with one that has it` : 'run the command by hand and compare',
  };
}

// ---------------------------------------------------------------------------------------------
// Run: the aws CLI

/** The absolute path of `name` on `env.PATH`, or undefined. Resolved here, so the PATH used is `env`'s. */
function findOnPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
  const exts = process.platform === 'win32' ? ['.exe', '.cmd', ''] : [''];
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      try {
        fs.accessSync(candidate, fs.constants.X_OK);
        if (fs.statSync(candidate).isFile()) return candidate;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

/** Runs `aws <argv>` and parses its JSON; an error is the CLI's message, with AWS's error code when it printed one. */
function callAws(aws: string, argv: string[], env: NodeJS.ProcessEnv): Promise<AwsAnswer> {
  return new Promise((resolve) => {
    execFile(aws, argv, { env, timeout: AWS_CALL_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) {
        const text = String(stderr).trim() || error.message;
        const errorCode = /An error occurred \(([^)]+)\)/.exec(text)?.[1];
        const firstLine = text.split('\n').map((l) => l.trim()).find((l) => l !== '') ?? text;
        resolve({ ok: false, error: error.killed ? `timed out after ${AWS_CALL_TIMEOUT_MS / 1000} s` : firstLine, errorCode });
        return;
      }
      try {
        resolve({ ok: true, json: JSON.parse(String(stdout)) });
      } catch {
        resolve({ ok: false, error: `not JSON: ${String(stdout).slice(0, 120)}` });
      }
    });
  });
}

/** get-service-quota, falling back to the AWS default when the account has no applied value (NoSuchResourceException). */
async function quotaAnswer(aws: string, argv: string[], env: NodeJS.ProcessEnv): Promise<AwsAnswer> {
  const answer = await callAws(aws, argv, env);
  if (!answer.ok && answer.errorCode === 'NoSuchResourceException') {
    return callAws(aws, argv.map((a) => (a === 'get-service-quota' ? 'get-aws-default-service-quota' : a)), env);
  }
  return answer;
}

// ---------------------------------------------------------------------------------------------
// Words

/** `aws` and its arguments as one shell line, quoting what the shell would split or expand. */
function shellLine(argv: string[]): string {
  return ['aws', ...argv].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(' ');
}

function statusWord(status: Status): string {
  return { ok: 'OK', warn: 'WARN', fail: 'FAIL', unchecked: 'NOT CHECKED', skipped: 'SKIPPED' }[status];
}

/** The flag that selects each way of buying the nodes. */
const PURCHASE_FLAGS: Record<PurchaseOption, string> = {
  [PurchaseOption.ON_DEMAND]: 'no capacity flag',
  [PurchaseOption.SPOT]: '--spot',
  [PurchaseOption.CAPACITY_RESERVATION]: '--capacity-reservation cr-...',
  [PurchaseOption.CAPACITY_BLOCK]: '--capacity-block cr-...',
};

function purchaseWords(purchase: PurchaseOption): string {
  return {
    [PurchaseOption.ON_DEMAND]: 'On-Demand',
    [PurchaseOption.SPOT]: 'Spot',
    [PurchaseOption.CAPACITY_RESERVATION]: 'On-Demand Capacity Reservation',
    [PurchaseOption.CAPACITY_BLOCK]: 'Capacity Block',
  }[purchase];
}
