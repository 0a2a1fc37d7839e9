import * as path from 'path';
import * as cdk from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as cdk8s from 'cdk8s';
import { EngineImage, EngineImageVariant, InferenceCluster, NodeCapacity } from '../aws';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../catalog';
import { DisaggregatedInference, DisaggregatedInferenceProps, GatewayExposure, ModelSource, RouterPolicy, WorkloadNamespace } from '../k8s';
import { DEFAULT_DEPLOYMENT } from './defaults';
import { addNagChecks, NAG_APP_CONTEXT, NagSummary, readNagReport } from './nag-report';

/** What `disagg synth` builds: one P/D deployment of one model on one instance type. */
export interface DeploymentSpec {
  readonly model: ModelArchitecture;
  readonly instanceType: AcceleratedInstanceType;
  readonly weights: Precision;
  readonly kv: Precision;
  readonly context: number;
  readonly prefillReplicas: number;
  readonly decodeReplicas: number;
  /** Tensor-parallel size of prefill and decode pods; undefined: the smallest that fits. */
  readonly tensorParallel?: number;
  /** The prefill pool's own tensor-parallel size; undefined: tensorParallel. */
  readonly prefillTensorParallel?: number;
  /** The decode pool's own tensor-parallel size; undefined: tensorParallel. */
  readonly decodeTensorParallel?: number;
  /** Pipeline stages of every replica (each of tensorParallel devices; across nodes over EFA); undefined: 1. */
  readonly pipelineParallel?: number;
  /** The prefill pool's own pipeline stages; undefined: pipelineParallel. */
  readonly prefillPipelineParallel?: number;
  /** The decode pool's own pipeline stages; undefined: pipelineParallel. */
  readonly decodePipelineParallel?: number;
  /** Fraction of accelerator memory vLLM may use in both pools; undefined: vLLM's 0.9. */
  readonly gpuMemoryUtilization?: number;
  /** Zones of the new VPC, the accelerated node groups in the first; undefined: two zones chosen at deploy time. */
  readonly availabilityZones?: string[];
  /**
   * An existing VPC: its private subnets, one per zone of `availabilityZones` in the same order; undefined:
   * a new VPC.
   */
  readonly existingVpc?: { readonly vpcId: string; readonly privateSubnetIds: string[] };
  /** A Capacity Reservation or Capacity Block both pools launch into; undefined: On-Demand. */
  readonly reservation?: { readonly kind: 'capacity-reservation' | 'capacity-block'; readonly id: string };
  /** IAM principals that get cluster-admin besides the CDK deploy role. */
  readonly adminRoleArns?: string[];
}

/** The Namespace of the workloads, in both outputs. */
export const WORKLOAD_NAMESPACE = 'inference';

/** The Secret that holds the Hugging Face token, in the workload namespace (the user creates it). */
export const HF_TOKEN_SECRET = 'hf-token';

/** The CloudFormation stack `disagg synth` writes. */
export const STACK_NAME = 'DisaggDefault';

/**
 * The default deployment: Llama-3.3-70B with FP8 weights and KV cache, prefill and decode pools of
 * two TP4 replicas each on p5en.48xlarge (one node per pool). Prefill is compute-bound and decode is
 * bandwidth-bound, so they get separate nodes; TP4 leaves ~100 GiB of KV cache per H200 for decode.
 */
export function defaultDeploymentSpec(): DeploymentSpec {
  return {
    model: ModelArchitecture.fromName(DEFAULT_DEPLOYMENT.model),
    instanceType: AcceleratedInstanceType.fromName(DEFAULT_DEPLOYMENT.instance),
    weights: Precision.of(DEFAULT_DEPLOYMENT.weights),
    kv: Precision.of(DEFAULT_DEPLOYMENT.kv),
    context: DEFAULT_DEPLOYMENT.context,
    prefillReplicas: DEFAULT_DEPLOYMENT.prefillReplicas,
    decodeReplicas: DEFAULT_DEPLOYMENT.decodeReplicas,
    tensorParallel: DEFAULT_DEPLOYMENT.tensorParallel,
  };
}

/** A pool's tensor-parallel size in `spec`: its own, else both pools'. */
export function poolTensorParallel(spec: DeploymentSpec, role: 'prefill' | 'decode'): number | undefined {
  return (role === 'prefill' ? spec.prefillTensorParallel : spec.decodeTensorParallel) ?? spec.tensorParallel;
}

/** A pool's pipeline stages in `spec`: its own, else both pools'. */
export function poolPipelineParallel(spec: DeploymentSpec, role: 'prefill' | 'decode'): number | undefined {
  return (role === 'prefill' ? spec.prefillPipelineParallel : spec.decodePipelineParallel) ?? spec.pipelineParallel;
}

/** The workload props shared by the CDK stack and the plain-YAML chart. */
export function workloadProps(spec: DeploymentSpec, image: string, routerImage: string): DisaggregatedInferenceProps {
  const pool = (replicas: number, role: 'prefill' | 'decode') => ({
    instanceType: spec.instanceType,
    replicas,
    tensorParallel: poolTensorParallel(spec, role),
    pipelineParallel: poolPipelineParallel(spec, role),
    gpuMemoryUtilization: spec.gpuMemoryUtilization,
  });
  return {
    model: spec.model,
    modelSource: ModelSource.huggingFace(spec.model.huggingFaceId, { tokenSecret: { name: HF_TOKEN_SECRET } }),
    image,
    // The router runs no model: the slim image (~300 MB) on the system nodes, not vLLM's tens of GB.
    routerImage,
    weightPrecision: spec.weights,
    kvCachePrecision: spec.kv,
    maxContext: spec.context,
    prefill: pool(spec.prefillReplicas, 'prefill'),
    decode: pool(spec.decodeReplicas, 'decode'),
    routerPolicy: RouterPolicy.KV_AWARE,
    gateway: GatewayExposure.gateway({ loadBalancerScheme: 'internal' }),
  };
}

/** What a synthesis produced, for the summary `disagg synth` prints. */
export interface SynthResult {
  readonly templateFile: string;
  readonly template: { Resources: Record<string, { Type: string }> };
  readonly manifestFile: string;
  readonly manifests: Array<{ kind: string; metadata: { name: string } }>;
  readonly inference: DisaggregatedInference;
  readonly nodesPerPool: { prefill: number; decode: number };
  /** cdk-nag's AwsSolutions checks on the CloudFormation stack. */
  readonly nag: NagSummary;
}

/**
 * Synthesizes the deployment twice, without AWS credentials or Docker:
 * - `<outdir>/cdk`: one CloudFormation stack (VPC, EKS with add-ons, an EFA node group per pool, the
 *   engine image as a Docker asset built at deploy time) with the workloads on the cluster, checked
 *   with cdk-nag's AwsSolutions rules (its validation report in the same folder);
 * - `<outdir>/k8s`: the same workloads as plain YAML for an existing cluster.
 */
export function synthesizeDeployment(spec: DeploymentSpec, outdir: string): SynthResult {
  // Plain YAML first: it validates the workload (and fails fast) before the slower CDK synthesis.
  const k8sDir = path.join(outdir, 'k8s');
  const yamlApp = new cdk8s.App({ outdir: k8sDir });
  const yamlChart = new cdk8s.Chart(yamlApp, 'disagg', { namespace: WORKLOAD_NAMESPACE });
  // First in the file: `kubectl apply -f` creates nothing in a namespace that does not exist yet.
  new WorkloadNamespace(yamlChart, 'Namespace');
  // Trainium workers run vLLM Neuron: the engine-neuron image (the Neuron vLLM DLC with EFA), not the CUDA one.
  const neuron = spec.instanceType.isNeuron;
  const inference = new DisaggregatedInference(yamlChart, 'Inference',
    workloadProps(spec, neuron ? 'REPLACE_WITH_ENGINE_NEURON_IMAGE_URI' : 'REPLACE_WITH_ENGINE_IMAGE_URI', 'REPLACE_WITH_ENGINE_SLIM_IMAGE_URI'));
  yamlApp.synth();
  const manifests = yamlApp.charts.flatMap((c) => c.toJson());

  const acceleratorsPerNode = spec.instanceType.acceleratorCount;
  const nodes = (replicas: number, tp: number, pp: number) => Math.ceil((replicas * tp * pp) / acceleratorsPerNode);
  const nodesPerPool = {
    prefill: nodes(spec.prefillReplicas, inference.prefillTensorParallel, poolPipelineParallel(spec, 'prefill') ?? 1),
    decode: nodes(spec.decodeReplicas, inference.decodeTensorParallel, poolPipelineParallel(spec, 'decode') ?? 1),
  };

  const cdkDir = path.join(outdir, 'cdk');
  const app = new cdk.App({ outdir: cdkDir, context: NAG_APP_CONTEXT });
  addNagChecks(app);
  const stack = new cdk.Stack(app, STACK_NAME, {
    description: `disagg: ${spec.model.name} prefill/decode on ${spec.instanceType.name}`,
  });
  const zones = spec.availabilityZones;
  const vpc = spec.existingVpc && zones
    ? ec2.Vpc.fromVpcAttributes(stack, 'Vpc', { vpcId: spec.existingVpc.vpcId, availabilityZones: zones, privateSubnetIds: spec.existingVpc.privateSubnetIds })
    : undefined;
  const cluster = new InferenceCluster(stack, 'Inference', vpc ? { vpc, adminRoleArns: spec.adminRoleArns } : { availabilityZones: zones, adminRoleArns: spec.adminRoleArns });
  const capacity = spec.reservation === undefined ? undefined
    : spec.reservation.kind === 'capacity-block'
      ? NodeCapacity.capacityBlock(spec.reservation.id, { availabilityZone: zones?.[0] })
      : NodeCapacity.capacityReservation(spec.reservation.id, { availabilityZone: zones?.[0] });
  // Created empty: nothing accelerated launches while the stack is created (a launch that fails rolls the
  // whole stack back); the stack's <Pool>ScaleUp outputs scale each group to maxSize once capacity is there.
  const group = (id: string, count: number, poolRole: string) => cluster.addAcceleratedNodeGroup(id, {
    instanceType: spec.instanceType,
    maxSize: count,
    poolRole,
    capacity,
    subnets: zones ? { availabilityZones: [zones[0]] } : undefined,
  });
  group('Prefill', nodesPerPool.prefill, 'prefill');
  group('Decode', nodesPerPool.decode, 'decode');
  const image = EngineImage.fromAsset({
    variant: neuron ? EngineImageVariant.NEURON : EngineImageVariant.FULL,
    platform: EngineImage.platformFor(spec.instanceType),
  }).bind(stack);
  // The system nodes are m7i (x86): the slim image for the router.
  const slim = EngineImage.fromAsset({ variant: EngineImageVariant.SLIM }).bind(stack);
  const chart = new cdk8s.Chart(new cdk8s.App(), 'disagg', { namespace: WORKLOAD_NAMESPACE });
  new DisaggregatedInference(chart, 'Inference', workloadProps(spec, image.imageUri, slim.imageUri));
  cluster.addWorkload(chart);
  const assembly = app.synth();
  const artifact = assembly.getStackByName(stack.stackName);

  return {
    templateFile: path.join(cdkDir, artifact.templateFile),
    template: artifact.template,
    manifestFile: path.join(k8sDir, 'disagg.k8s.yaml'),
    manifests,
    inference,
    nodesPerPool,
    nag: readNagReport(assembly.directory),
  };
}
