import * as path from 'path';
import { zoneListProblem } from '../../aws/private/zones';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../catalog';
import { ServingPlan } from '../../sizing';
import { formatGib, formatInt, formatSeconds } from '../../sizing/private/units';
import { CliIo, Command, ExitCode, UsageError, parseOptions } from '../command';
import {
  defaultDeploymentSpec, DeploymentSpec, HF_TOKEN_SECRET, poolPipelineParallel, STACK_NAME, synthesizeDeployment, SynthResult, WORKLOAD_NAMESPACE,
} from '../default-deployment';
import { DEFAULT_DEPLOYMENT, defaultTensorParallel, MODEL_FLAG_OPTIONS, defaultKvPrecision, effectiveWeightsFlag } from '../defaults';
import { NagSummary } from '../nag-report';
import { renderTable } from '../table';
import { CliVocabulary } from '../vocabulary';

const DEFAULT_OUT = 'disagg.out';

const HELP = `Usage: disagg synth [options]

Synthesizes a disaggregated (prefill/decode) deployment with no AWS account and no Docker, then prints
what was written and the plan of each pool:
  <out>/cdk  one CloudFormation stack: VPC, EKS with its add-ons (VPC CNI, EFA and NVIDIA device
             plugins, LeaderWorkerSet, Gateway API, Istio), an EFA node group per pool, the engine
             image as a Docker asset built at deploy time, and the serving workloads on the cluster
  <out>/k8s  the same workloads as plain Kubernetes YAML, for a cluster that already exists
It runs cdk-nag's AwsSolutions rules on the stack and prints the findings that nothing acknowledged
(the constructs acknowledge what they reviewed on each resource, with the reason, in
<out>/cdk/validation-report.json).
With no options it synthesizes the default deployment: ${DEFAULT_DEPLOYMENT.model}, ${DEFAULT_DEPLOYMENT.weights} weights and ${DEFAULT_DEPLOYMENT.kv} KV cache,
${DEFAULT_DEPLOYMENT.prefillReplicas} prefill and ${DEFAULT_DEPLOYMENT.decodeReplicas} decode replicas of TP${DEFAULT_DEPLOYMENT.tensorParallel} on ${DEFAULT_DEPLOYMENT.instance}, ${DEFAULT_DEPLOYMENT.context} tokens of context.

Options:
  --model NAME             catalog model name or Hugging Face id (default ${DEFAULT_DEPLOYMENT.model})
  --instance NAME          EC2 instance type of both pools (default ${DEFAULT_DEPLOYMENT.instance})
  --weight-precision P     weight precision (default ${DEFAULT_DEPLOYMENT.weights}; on Trainium the model's own,
                           since vLLM Neuron quantizes nothing at load time; was --weights)
  --kv-cache-precision P   KV cache precision (default ${DEFAULT_DEPLOYMENT.kv} with the default
                           weights, else bf16 = vLLM's auto; was --kv)
  --max-context TOKENS     longest sequence (default ${DEFAULT_DEPLOYMENT.context}, or the model's own if shorter;
                           was --context)
  --tp N                   tensor-parallel size of every pod, in devices (default ${DEFAULT_DEPLOYMENT.tensorParallel} where it is valid and
                           fits, else the smallest size that fits: what \`disagg plan\` describes);
                           on Trainium vLLM gets N x the logical NeuronCores of a device
  --pp N                   pipeline-parallel size: a replica is N stages of --tp devices, across nodes
                           (a LeaderWorkerSet group) when they do not fit one (default 1)
  --prefill-tp N, --prefill-pp N, --decode-tp N, --decode-pp N
                           one pool's own sizes (default: --tp and --pp)
  --prefill-replicas N     prefill replicas (default ${DEFAULT_DEPLOYMENT.prefillReplicas})
  --decode-replicas N      decode replicas (default ${DEFAULT_DEPLOYMENT.decodeReplicas})
  --gpu-memory-utilization F
                           fraction of accelerator memory vLLM may use in both pools (vLLM
                           --gpu-memory-utilization; default 0.9)
  --azs ZONE,ZONE[,...]    Availability Zones of the new VPC; both node groups go into the first, which
                           must offer the instance type (\`disagg preflight\` lists the zones that do)
                           (default: two zones CloudFormation picks, the groups in the first)
  --vpc ID --subnets SUBNET,SUBNET[,...]
                           deploy into an existing VPC instead of a new one: its private subnets with a
                           route to a NAT gateway, in the order of --azs (required with them, one zone per
                           subnet); the node groups go into the first subnet's zone. The VPC keeps its own
                           endpoints: without S3, ECR, STS and Logs endpoints, pulls cross the NAT gateway
  --capacity-reservation ID  launch both pools into this On-Demand Capacity Reservation (cr-...)
  --capacity-block ID      launch both pools into this Capacity Block for ML (cr-...)
  --admin-role-arn ARN     an IAM role that gets cluster-admin (repeatable; the CDK deploy role always does)
  --out DIR                output folder (default ${DEFAULT_OUT})
  --json                   print a machine-readable summary only
  -h, --help               show this help

The accelerated node groups are created empty, so nothing scarce launches while the stack is created;
the summary ends with the steps: preflight, deploy, the Hugging Face token Secret, and the stack outputs
that scale each group up once capacity is there.

Exit codes: 0 synthesized with no cdk-nag findings, 1 synthesized (everything is written) but cdk-nag
reported findings (listed with resource, rule and what the rule asks), 2 usage error or a configuration
that cannot run (the reason is printed).`;

/** The flags of `disagg synth`, as its parser reads them (tests parse the README's commands with them). */
const OPTIONS = {
  ...MODEL_FLAG_OPTIONS,
  'tp': { type: 'string' },
  'pp': { type: 'string' },
  'prefill-tp': { type: 'string' },
  'decode-tp': { type: 'string' },
  'prefill-pp': { type: 'string' },
  'decode-pp': { type: 'string' },
  'gpu-memory-utilization': { type: 'string' },
  'prefill-replicas': { type: 'string' },
  'decode-replicas': { type: 'string' },
  'azs': { type: 'string' },
  'vpc': { type: 'string' },
  'subnets': { type: 'string' },
  'capacity-reservation': { type: 'string' },
  'capacity-block': { type: 'string' },
  'admin-role-arn': { type: 'string', multiple: true },
  'out': { type: 'string' },
  'json': { type: 'boolean' },
} as const;

/** `disagg synth`: the whole deployment as CloudFormation and as Kubernetes YAML, plus its plan. */
export const command: Command = {
  name: 'synth',
  options: OPTIONS,
  summary: 'Synthesize a P/D deployment (CloudFormation + Kubernetes YAML) and print its plan; no AWS account needed',
  help: HELP,
  vocabulary: CliVocabulary.SYNTH,
  run: runSynth,
};

async function runSynth(argv: string[], io: CliIo): Promise<number> {
  const values = parseSynthOptions(argv, io);
  const spec = specFrom(values);
  const outdir = path.resolve(values.out ?? DEFAULT_OUT);

  let result;
  try {
    result = synthesizeDeployment(spec, outdir);
  } catch (e) {
    // Construct validation errors name the prop, the value and the fix: show them as they are.
    throw new UsageError((e as Error).message);
  }

  const plans = {
    prefill: poolPlan(spec, 'prefill', result.inference.prefillTensorParallel),
    decode: poolPlan(spec, 'decode', result.inference.decodeTensorParallel),
  };
  const resourceTypes = countBy(Object.values(result.template.Resources).map((r) => r.Type));
  const kinds = countBy(result.manifests.map((m) => m.kind));

  if (values.json) {
    io.out(JSON.stringify({
      model: spec.model.name,
      instanceType: spec.instanceType.name,
      cloudFormation: { templateFile: result.templateFile, resources: Object.keys(result.template.Resources).length, resourceTypes },
      kubernetes: { manifestFile: result.manifestFile, objects: result.manifests.length, kinds },
      pools: {
        prefill: poolJson(plans.prefill, spec.prefillReplicas, result.nodesPerPool.prefill),
        decode: poolJson(plans.decode, spec.decodeReplicas, result.nodesPerPool.decode),
      },
      warnings: result.inference.warnings.map(w => CliVocabulary.SYNTH.speak(w)),
      nextSteps: nextSteps(spec, result, outdir).map((step) => step.command),
      nag: { pack: result.nag.pack, findings: result.nag.findings, acknowledged: result.nag.acknowledged, reportFile: result.nag.reportFile },
    }, undefined, 2));
    return nagExitCode(result.nag);
  }

  const rel = (file: string) => {
    const relative = path.relative(process.cwd(), file);
    return relative && !relative.startsWith('..') ? relative : file;
  };
  io.out(`disagg synth: ${spec.model.name} (${spec.weights.name} weights, ${spec.kv.name} KV), prefill/decode on ${spec.instanceType.name}`);
  io.out(`  wrote ${rel(result.templateFile)}  (CloudFormation, ${Object.keys(result.template.Resources).length} resources)`);
  io.out(`  wrote ${rel(result.manifestFile)}  (${result.manifests.length} Kubernetes objects, for an existing cluster)`);
  io.out('');
  io.out('CloudFormation resources by type');
  io.out(renderTable(['type', 'count'], topCounts(resourceTypes, 16), [false, true]).join('\n'));
  io.out('');
  io.out('Kubernetes objects by kind');
  io.out(renderTable(['kind', 'count'], topCounts(kinds, 20), [false, true]).join('\n'));
  io.out('');
  io.out(`Pools (roofline estimates at ${formatInt(spec.context)} tokens of context; \`disagg plan\` explains each number)`);
  const unit = spec.instanceType.isNeuron ? 'device' : 'GPU';
  const headers = ['pool', 'replicas', 'TP', 'nodes', 'EFA/pod', `weights/${unit}`, `KV/${unit}`, 'KV tokens/replica', 'max seqs', 'TTFT 1k', 'TPOT b32'];
  const row = (name: string, plan: ServingPlan, replicas: number, nodes: number) => {
    const ttft = plan.roofline.prefill(1024).seconds;
    const tpot = plan.roofline.decodeStep(32, spec.context).stepSeconds;
    const p = plan.parallelism;
    return [name, String(replicas), p.pipelineParallel > 1 ? `${p.tensorParallel} x PP${p.pipelineParallel}` : String(p.tensorParallel), String(nodes),
      String(plan.layout.efaInterfacesPerPod), formatGib(plan.weightBytesPerRank), formatGib(plan.kvCacheBytesPerRank),
      formatInt(plan.kvTokens), formatInt(plan.maxConcurrency), formatSeconds(ttft), formatSeconds(tpot)];
  };
  io.out(renderTable(headers, [
    row('prefill', plans.prefill, spec.prefillReplicas, result.nodesPerPool.prefill),
    row('decode', plans.decode, spec.decodeReplicas, result.nodesPerPool.decode),
  ], headers.map((_, i) => i > 0)).join('\n'));
  if (spec.instanceType.isNeuron) {
    const lnc = spec.instanceType.logicalNeuronCoreConfigs[0];
    io.out(`TP counts Trainium devices; vLLM Neuron gets --tensor-parallel-size TP x ${spec.instanceType.logicalNeuronCoresPerDevice(lnc)} ` +
      `(logical NeuronCores per device at LNC ${lnc}).`);
  }
  for (const warning of result.inference.warnings) {
    io.err(`warning: ${CliVocabulary.SYNTH.speak(warning)}`);
  }
  io.out('');
  printNag(result.nag, rel, io);
  io.out('');
  io.out('Next steps (the node groups are created empty: no accelerated instance launches with the stack)');
  nextSteps(spec, result, outdir).forEach((step, i) => {
    io.out(`  ${i + 1}. ${step.what}`);
    io.out(`       ${step.command}`);
  });
  io.out(`Or, on an existing cluster: \`kubectl apply -f ${rel(result.manifestFile)}\` (the namespace comes first in the file), then step 3.`);
  return nagExitCode(result.nag);
}

/** What a user does after synth, in order, with the exact commands. */
function nextSteps(spec: DeploymentSpec, result: SynthResult, outdir: string): Array<{ what: string; command: string }> {
  const rel = path.relative(process.cwd(), path.join(outdir, 'cdk')) || '.';
  const total = result.nodesPerPool.prefill + result.nodesPerPool.decode;
  const reservation = spec.reservation ? ` --${spec.reservation.kind} ${spec.reservation.id}` : '';
  const az = spec.availabilityZones ? ` --az ${spec.availabilityZones[0]}` : '';
  return [
    {
      what: `Check that a zone offers ${spec.instanceType.name} and that the vCPU quota allows ${total} of them (prints the AWS CLI calls without credentials)`,
      command: `npx disagg preflight --instance ${spec.instanceType.name} --nodes ${total} --region <region>${az}${reservation}`,
    },
    {
      what: 'Deploy (about 30-40 minutes; needs `cdk bootstrap` once per account and Region)',
      command: `CDK_DISABLE_CLI_TELEMETRY=true npx cdk deploy --app ${rel} --no-notices`,
    },
    {
      what: 'From inside the VPC (the API endpoint is private), e.g. AWS CloudShell in a VPC environment on a private subnet: '
        + 'kubectl as the CDK deploy role (the stack output KubeconfigCommand), then the Hugging Face token Secret the workers mount',
      command: `eval "$(${stackOutput('KubeconfigCommand')})" && kubectl -n ${WORKLOAD_NAMESPACE} create secret generic ${HF_TOKEN_SECRET} `
        + '--from-literal=token=<your Hugging Face token>',
    },
    {
      what: `Scale the node groups up once capacity is there (${result.nodesPerPool.prefill} prefill + ${result.nodesPerPool.decode} decode nodes): `
        + 'the stack outputs <Pool>ScaleUp hold one command each',
      command: `${stackOutput('ScaleUp')} | tr '\\t' '\\n' | sh`,
    },
  ];
}

/** The AWS CLI call that prints the values of the stack outputs whose key contains `key`. */
function stackOutput(key: string): string {
  return `aws cloudformation describe-stacks --stack-name ${STACK_NAME} --query "Stacks[0].Outputs[?contains(OutputKey, '${key}')].OutputValue" --output text`;
}

/** Findings that nothing acknowledged make the answer negative: the files are written, but review them first. */
function nagExitCode(nag: NagSummary): number {
  return nag.findings.length === 0 ? ExitCode.OK : ExitCode.NEGATIVE;
}

function printNag(nag: NagSummary, rel: (file: string) => string, io: CliIo): void {
  const acknowledged = `${nag.acknowledged} acknowledged by disagg on their resources, with reasons in ${rel(nag.reportFile)}`;
  if (nag.findings.length === 0) {
    io.out(`cdk-nag ${nag.pack}: no findings (${acknowledged})`);
    return;
  }
  io.out(`cdk-nag ${nag.pack}: ${nag.findings.length} finding${nag.findings.length === 1 ? '' : 's'} (${acknowledged})`);
  io.out(renderTable(['resource', 'rule', 'what the rule asks'],
    nag.findings.map((f) => [f.path, f.rule, f.description]), [false, false, false]).join('\n'));
  io.err(`error: cdk-nag ${nag.pack} reported ${nag.findings.length} finding${nag.findings.length === 1 ? '' : 's'} on the `
    + 'synthesized stack (listed above); the files are written, but review each finding before deploying');
}

interface SynthValues {
  'model'?: string;
  'instance'?: string;
  'weight-precision'?: string;
  'kv-cache-precision'?: string;
  'max-context'?: string;
  'tp'?: string;
  'pp'?: string;
  'prefill-tp'?: string;
  'decode-tp'?: string;
  'prefill-pp'?: string;
  'decode-pp'?: string;
  'gpu-memory-utilization'?: string;
  'prefill-replicas'?: string;
  'decode-replicas'?: string;
  'azs'?: string;
  'vpc'?: string;
  'subnets'?: string;
  'capacity-reservation'?: string;
  'capacity-block'?: string;
  'admin-role-arn'?: string[];
  'out'?: string;
  'json'?: boolean;
}

function parseSynthOptions(argv: string[], io: CliIo): SynthValues {
  return parseOptions(argv, OPTIONS, io);
}

function specFrom(values: SynthValues): DeploymentSpec {
  const base = defaultDeploymentSpec();
  const lookup = <T>(flag: string, value: string | undefined, fallback: T, parse: (v: string) => T): T => {
    if (value === undefined) return fallback;
    try {
      return parse(value);
    } catch (e) {
      throw new UsageError(`${(e as Error).message} (--${flag})`);
    }
  };
  const model = lookup('model', values.model, base.model, ModelArchitecture.fromName);
  const instanceType = lookup('instance', values.instance, base.instanceType, AcceleratedInstanceType.fromName);
  // vLLM Neuron runs FP8 only from a static-FP8 checkpoint, which the synth cannot name: on Trainium the
  // defaults are the checkpoint's own weights and a BF16 KV cache (src/k8s/private/neuron.ts), as in plan.
  const weightsFlag = effectiveWeightsFlag(values['weight-precision'], instanceType, model);
  const weightsFallback = values['weight-precision'] === undefined && weightsFlag !== undefined ? Precision.of(weightsFlag) : base.weights;
  const kvFallback = Precision.of(defaultKvPrecision(weightsFlag));
  const weights = lookup('weight-precision', values['weight-precision'], weightsFallback, Precision.of);
  const kv = lookup('kv-cache-precision', values['kv-cache-precision'], kvFallback, Precision.of);
  const context = positiveInt('max-context', values['max-context'], values.model === undefined ? base.context : Math.min(base.context, model.maxContext));
  const pipelineParallel = positiveInt('pp', values.pp, undefined);
  const gpuMemoryUtilization = fraction('gpu-memory-utilization', values['gpu-memory-utilization']);
  return {
    model,
    instanceType,
    weights,
    kv,
    context,
    // The pods `disagg plan` describes without --tp (one rule for every command).
    tensorParallel: positiveInt('tp', values.tp, defaultTensorParallel({
      model, instanceType, weightPrecision: weights, kvCachePrecision: kv, maxContext: context, pipelineParallel, gpuMemoryUtilization,
    })),
    prefillTensorParallel: positiveInt('prefill-tp', values['prefill-tp'], undefined),
    decodeTensorParallel: positiveInt('decode-tp', values['decode-tp'], undefined),
    pipelineParallel,
    prefillPipelineParallel: positiveInt('prefill-pp', values['prefill-pp'], undefined),
    decodePipelineParallel: positiveInt('decode-pp', values['decode-pp'], undefined),
    gpuMemoryUtilization,
    prefillReplicas: positiveInt('prefill-replicas', values['prefill-replicas'], base.prefillReplicas),
    decodeReplicas: positiveInt('decode-replicas', values['decode-replicas'], base.decodeReplicas),
    availabilityZones: zonesFrom(values.azs),
    existingVpc: vpcFrom(values),
    reservation: reservationFrom(values),
    adminRoleArns: rolesFrom(values['admin-role-arn']),
  };
}

function zonesFrom(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const zones = value.split(',').map((z) => z.trim()).filter((z) => z !== '');
  const problem = zoneListProblem(zones);
  if (problem !== undefined) {
    throw new UsageError(`--azs (${value}) must list at least two different zones of one Region, the node groups' zone first (${problem}), `
      + 'e.g. --azs us-east-2b,us-east-2a (`disagg preflight` lists the zones that offer the instance type)');
  }
  return zones;
}

function vpcFrom(values: SynthValues): DeploymentSpec['existingVpc'] {
  const { vpc, subnets, azs } = values;
  if (vpc === undefined && subnets === undefined) return undefined;
  const example = '--vpc vpc-0123456789abcdef0 --subnets subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2 --azs us-east-2a,us-east-2b';
  if (vpc === undefined || subnets === undefined || azs === undefined) {
    const missing = [vpc === undefined ? '--vpc' : '', subnets === undefined ? '--subnets' : '', azs === undefined ? '--azs' : ''].filter((f) => f).join(' and ');
    throw new UsageError(`an existing VPC needs --vpc, --subnets and --azs together (${missing} missing): the stack must know each subnet's zone `
      + `without an AWS lookup, e.g. ${example} (aws ec2 describe-subnets --filters Name=vpc-id,Values=<vpc> lists them)`);
  }
  if (!/^vpc-[0-9a-f]{8,17}$/.test(vpc)) {
    throw new UsageError(`--vpc (${vpc}) must be a VPC id like vpc-0123456789abcdef0 (aws ec2 describe-vpcs lists yours)`);
  }
  const ids = subnets.split(',').map((x) => x.trim()).filter((x) => x !== '');
  const bad = ids.find((x) => !/^subnet-[0-9a-f]{8,17}$/.test(x));
  if (bad !== undefined) {
    throw new UsageError(`--subnets (${subnets}): '${bad}' is not a subnet id like subnet-0123456789abcdef0`);
  }
  const zones = zonesFrom(azs)!;
  if (ids.length !== zones.length || new Set(ids).size !== ids.length) {
    throw new UsageError(`--subnets (${subnets}) must list one different private subnet per zone of --azs (${azs}), in the same order, e.g. ${example}`);
  }
  return { vpcId: vpc, privateSubnetIds: ids };
}

function reservationFrom(values: SynthValues): DeploymentSpec['reservation'] {
  const odcr = values['capacity-reservation'];
  const block = values['capacity-block'];
  if (odcr !== undefined && block !== undefined) {
    throw new UsageError(`--capacity-reservation (${odcr}) and --capacity-block (${block}) exclude each other; keep the one you bought`);
  }
  const id = odcr ?? block;
  if (id === undefined) return undefined;
  const flag = odcr !== undefined ? 'capacity-reservation' : 'capacity-block';
  if (!/^cr-[0-9a-f]{8,17}$/.test(id)) {
    throw new UsageError(`--${flag} (${id}) must be a Capacity Reservation id like cr-0123456789abcdef0 (aws ec2 describe-capacity-reservations lists yours)`);
  }
  return { kind: flag, id };
}

function rolesFrom(values: string[] | undefined): string[] | undefined {
  for (const arn of values ?? []) {
    if (!/^arn:aws[a-z-]*:iam::\d{12}:(role|user)\/.+$/.test(arn)) {
      throw new UsageError(`--admin-role-arn (${arn}) must be an IAM role or user ARN, e.g. arn:aws:iam::111122223333:role/PlatformAdmin`);
    }
  }
  return values;
}

function positiveInt<F extends number | undefined>(flag: string, value: string | undefined, fallback: F): number | F {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) {
    throw new UsageError(`--${flag} (${value}) must be a positive integer`);
  }
  return n;
}

function fraction(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const f = Number(value);
  if (!(f > 0 && f <= 1)) {
    throw new UsageError(`--${flag} (${value}) must be a fraction in (0, 1], e.g. 0.9 (vLLM's default) or 0.95`);
  }
  return f;
}

function poolPlan(spec: DeploymentSpec, role: 'prefill' | 'decode', tensorParallel: number): ServingPlan {
  const pp = poolPipelineParallel(spec, role);
  return ServingPlan.create({
    model: spec.model,
    instanceType: spec.instanceType,
    maxContext: spec.context,
    weightPrecision: spec.weights,
    kvCachePrecision: spec.kv,
    tensorParallel,
    ...(pp !== undefined ? { pipelineParallel: pp } : {}),
    ...(spec.gpuMemoryUtilization !== undefined ? { gpuMemoryUtilization: spec.gpuMemoryUtilization } : {}),
  });
}

function poolJson(plan: ServingPlan, replicas: number, nodes: number) {
  return {
    replicas,
    nodes,
    tensorParallel: plan.parallelism.tensorParallel,
    pipelineParallel: plan.parallelism.pipelineParallel,
    efaInterfacesPerPod: plan.layout.efaInterfacesPerPod,
    weightBytesPerRank: plan.weightBytesPerRank,
    kvCacheBytesPerRank: plan.kvCacheBytesPerRank,
    kvTokensPerReplica: plan.kvTokens,
    maxConcurrency: plan.maxConcurrency,
  };
}

function countBy(items: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[item] = (counts[item] ?? 0) + 1;
  return counts;
}

function topCounts(counts: Record<string, number>, limit: number): string[][] {
  const sorted = Object.entries(counts).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const rows = sorted.slice(0, limit).map(([k, n]) => [k, String(n)]);
  const rest = sorted.slice(limit);
  if (rest.length > 0) {
    rows.push([`(${rest.length} more types)`, String(rest.reduce((sum, [, n]) => sum + n, 0))]);
  }
  return rows;
}
