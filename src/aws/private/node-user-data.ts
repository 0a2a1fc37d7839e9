/**
 * AL2023 managed node groups read extra `nodeadm` configuration from MIME multipart user data;
 * EKS merges its own part (cluster name, endpoint, CA) with ours.
 * @see https://awslabs.github.io/amazon-eks-ami/nodeadm/doc/api/ (NodeConfig, LocalStorageOptions)
 * @see https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html#launch-template-user-data
 */
const BOUNDARY = '==DISAGG-NODEADM==';

/** Options for the nodeadm NodeConfig part. */
export interface NodeadmOptions {
  /** Assemble the instance-store NVMe drives into one RAID0 array (nodeadm `localStorage.strategy: RAID0`). */
  readonly localNvmeRaid0: boolean;
}

/**
 * The user data for a node, or undefined when nothing needs to differ from the EKS default.
 * With RAID0, nodeadm builds /dev/md/kubernetes from every instance-store volume, mounts it under
 * /mnt/k8s-disks/0 and moves kubelet and containerd state onto it, so model files, image layers
 * and disk-tier KV cache (emptyDir / hostPath) land on local NVMe.
 */
export function nodeadmUserData(options: NodeadmOptions): string | undefined {
  if (!options.localNvmeRaid0) {
    return undefined;
  }
  const nodeConfig = [
    'apiVersion: node.eks.aws/v1alpha1',
    'kind: NodeConfig',
    'spec:',
    '  instance:',
    '    localStorage:',
    '      strategy: RAID0',
  ].join('\n');
  return [
    'MIME-Version: 1.0',
    `Content-Type: multipart/mixed; boundary="${BOUNDARY}"`,
    '',
    `--${BOUNDARY}`,
    'Content-Type: application/node.eks.aws',
    '',
    nodeConfig,
    '',
    `--${BOUNDARY}--`,
    '',
  ].join('\n');
}
