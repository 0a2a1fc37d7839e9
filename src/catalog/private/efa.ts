/**
 * MiB of 2 MiB hugepages an EFA node offers (`hugepages-2Mi` allocatable): the EFA driver of the EKS
 * accelerated AMIs pre-allocates 5128 pages of 2 MiB at boot, which libfabric uses for its bounce buffers.
 * Pods with EFA request a share of it; a node without EFA offers none.
 *
 * @see https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html
 */
export const EFA_HUGEPAGES_MIB_PER_NODE = 5128 * 2;
