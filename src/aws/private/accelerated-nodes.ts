// What managed node groups (AcceleratedNodeGroup) and Karpenter pools (KarpenterNodePool) give an
// accelerated node alike: the device-plugin labels, the accelerators a node offers, the root volume.
import { Size } from 'aws-cdk-lib';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import { AcceleratedInstanceType, AcceleratorVendor, NetworkInterfaceType } from '../../catalog';
import { EFA_HUGEPAGES_MIB_PER_NODE } from '../../catalog/private/efa';
import { NodeLabels } from '../node-labels';

/** The root volume unless a prop says otherwise: room for several engine images next to the OS. */
export const DEFAULT_ROOT_VOLUME = Size.gibibytes(300);

/**
 * Smallest root volume: the root snapshot of the EKS-optimized AL2023 AMIs (accelerated variants
 * included) is 20 GiB (`ami_block_device_mappings.volume_size = 20` in
 * https://github.com/awslabs/amazon-eks-ami/blob/main/templates/al2023/template.pkr.hcl, and EKS's
 * default disk size is 20 GiB: https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html),
 * and a block device mapping cannot be smaller than its snapshot
 * (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateEbsBlockDeviceRequest.html).
 */
const MIN_ROOT_VOLUME_GIB = 20;

/**
 * Largest root volume: gp3 in a launch template block device mapping is documented as 1 - 16,384 GiB
 * (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateEbsBlockDeviceRequest.html).
 * CreateVolume now documents gp3 up to 65,536 GiB
 * (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateVolume.html); we keep the bound the
 * launch template documents, which no root volume of an inference node comes near.
 */
const MAX_ROOT_VOLUME_GIB = 16_384;

/** The root volume in whole GiB, within what EBS and the AMI allow. */
export function checkRootVolume(size: Size): number {
  let gib: number;
  try {
    gib = size.toGibibytes();
  } catch (e) {
    throw new Error(`'rootVolumeSize' (${size}) must be a whole number of GiB (EBS sizes volumes in GiB); use e.g. Size.gibibytes(${DEFAULT_ROOT_VOLUME.toGibibytes()})`);
  }
  if (!(Number.isInteger(gib) && gib >= MIN_ROOT_VOLUME_GIB && gib <= MAX_ROOT_VOLUME_GIB)) {
    throw new Error(`'rootVolumeSize' (${gib} GiB) must be from ${MIN_ROOT_VOLUME_GIB} GiB (the EKS AMI's root snapshot) to `
      + `${MAX_ROOT_VOLUME_GIB.toLocaleString('en-US')} GiB (gp3 in a launch template); use e.g. Size.gibibytes(${DEFAULT_ROOT_VOLUME.toGibibytes()}), `
      + 'and keep model files and KV cache on local NVMe (localNvmeRaid0)');
  }
  return gib;
}

/**
 * The labels of an accelerated node: its type, accelerator and vendor, its pool role (the workload
 * constructs select on these), the device plugins' presence labels, then the user's `extra`.
 */
export function acceleratedNodeLabels(type: AcceleratedInstanceType, poolRole: string | undefined,
  extra: Record<string, string> | undefined): Record<string, string> {
  return {
    [NodeLabels.INSTANCE_TYPE]: type.name,
    [NodeLabels.ACCELERATOR]: type.accelerator.name.toLowerCase(),
    [NodeLabels.ACCELERATOR_VENDOR]: type.accelerator.vendor,
    [NodeLabels.POOL_ROLE]: poolRole ?? 'inference',
    ...presenceLabels(type),
    ...extra,
  };
}

/** The taint that keeps other pods off an accelerated node (the pools tolerate it), then the user's. */
export function acceleratedNodeTaints(type: AcceleratedInstanceType, extra: eks.TaintSpec[] | undefined): eks.TaintSpec[] {
  return [
    { key: type.acceleratorResourceName, value: 'true', effect: eks.TaintEffect.NO_SCHEDULE },
    ...extra ?? [],
  ];
}

/** Labels the device-plugin DaemonSets select on. */
function presenceLabels(type: AcceleratedInstanceType): Record<string, string> {
  const labels: Record<string, string> = {};
  if (type.accelerator.vendor === AcceleratorVendor.NVIDIA) {
    // The NVIDIA device plugin chart's default node affinity accepts this label (no NFD needed).
    labels['nvidia.com/gpu.present'] = 'true';
  }
  if (type.isNeuron) {
    labels['aws.amazon.com/neuron.present'] = 'true';
  }
  if (type.supportsEfa) {
    labels['vpc.amazonaws.com/efa.present'] = 'true';
  }
  return labels;
}

/**
 * Accelerator resources one node of `type` offers, by resource name: devices, and for Neuron types
 * also physical NeuronCores (an upper bound of what the device plugin advertises).
 */
export function acceleratorsPerNode(type: AcceleratedInstanceType): Record<string, number> {
  const perNode: Record<string, number> = { [type.acceleratorResourceName]: type.acceleratorCount };
  if (type.isNeuron && type.neuronCoresPerDevice) {
    perNode['aws.amazon.com/neuroncore'] = type.acceleratorCount * type.neuronCoresPerDevice;
  }
  return perNode;
}

/**
 * The label Cluster Autoscaler's AWS provider takes for a GPU node (`GPULabel`,
 * cluster-autoscaler/cloudprovider/aws/aws_cloud_provider.go): a node with it that does not yet offer
 * `nvidia.com/gpu` (the device plugin has not registered) counts as not ready, so Cluster Autoscaler
 * does not launch another node for the same pods meanwhile (its AWS README, "Special note on GPU
 * instances"). The value names the GPU.
 */
export const CLUSTER_AUTOSCALER_GPU_LABEL = 'k8s.amazonaws.com/accelerator';

/** Prefix of the node group tags that tell Cluster Autoscaler what a node of the group offers. */
export const NODE_TEMPLATE_RESOURCES = 'k8s.io/cluster-autoscaler/node-template/resources/';

/**
 * Node group tags `k8s.io/cluster-autoscaler/node-template/resources/<resource>`: the extended
 * resources one node offers (GPUs or Neuron devices and cores, EFA interfaces, hugepages), which Cluster
 * Autoscaler reads through `eks:DescribeNodegroup` to scale a managed node group up from zero nodes
 * (it knows CPU, memory and GPUs of an instance type, not Neuron or EFA).
 * @see https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/cloudprovider/aws/README.md
 */
export function clusterAutoscalerResourceTags(type: AcceleratedInstanceType): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const [resource, count] of Object.entries(acceleratorsPerNode(type))) {
    tags[`${NODE_TEMPLATE_RESOURCES}${resource}`] = String(count);
  }
  if (type.supportsEfa) {
    // One EFA device per efa / efa-only interface of the launch template (the EFA device plugin's count).
    const efa = type.networkInterfaceLayout().filter((slot) => slot.interfaceType !== NetworkInterfaceType.INTERFACE).length;
    tags[`${NODE_TEMPLATE_RESOURCES}${type.efaResourceName}`] = String(efa);
    // The hugepages EFA pods request: without this tag Cluster Autoscaler's template node offers none, so
    // a group at zero nodes is never scaled up for them.
    tags[`${NODE_TEMPLATE_RESOURCES}hugepages-2Mi`] = `${EFA_HUGEPAGES_MIB_PER_NODE}Mi`;
  }
  return tags;
}
