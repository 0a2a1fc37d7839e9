/**
 * Label keys and well-known names shared by the workload builders (internal).
 */

/** Kubernetes recommended labels. */
export const APP_NAME = 'app.kubernetes.io/name';
export const APP_INSTANCE = 'app.kubernetes.io/instance';
export const APP_COMPONENT = 'app.kubernetes.io/component';
export const APP_PART_OF = 'app.kubernetes.io/part-of';

/** Well-known node labels, set on every node by the kubelet / cloud provider. */
export const NODE_INSTANCE_TYPE = 'node.kubernetes.io/instance-type';
export const TOPOLOGY_ZONE = 'topology.kubernetes.io/zone';
export const HOSTNAME = 'kubernetes.io/hostname';

/** The pool-role node label of an AcceleratedNodeGroup (same key as `NodeLabels.POOL_ROLE` in src/aws). */
export const NODE_POOL_ROLE = 'disagg.dev/pool-role';

/** LeaderWorkerSet's label of a pod's index in its group ('0' for the leader). */
export const LWS_WORKER_INDEX = 'leaderworkerset.sigs.k8s.io/worker-index';

/** Ports every vLLM worker uses. */
export const PORTS = {
  /** vLLM's OpenAI-compatible HTTP server (and /metrics, /health). */
  http: 8000,
  /** vLLM's ZMQ PUB socket for KV cache events (KVEventsConfig.endpoint default tcp://*:5557). */
  kvEvents: 5557,
  /**
   * vLLM's KV-event replay socket (KVEventsConfig.replay_endpoint, a ZMQ ROUTER over the last
   * `buffer_steps` batches): a router that restarts, or sees a sequence gap, asks it for what it
   * missed. vLLM adds the data-parallel rank to it as to kvEvents; 10000 above that keeps the ranges apart.
   */
  kvEventsReplay: 15557,
  /** NIXL side channel (VLLM_NIXL_SIDE_CHANNEL_PORT, set explicitly: its default moved from 5557 to 5600). */
  nixlSideChannel: 5600,
  /** Ray head port for multi-node replicas. */
  ray: 6379,
  /** The router's HTTP port. */
  router: 8000,
  /**
   * The router's peer port: a starting router loads a running peer's KV-block index from it
   * (`GET /snapshot`). Not behind any Service a gateway routes to.
   */
  routerPeer: 8100,
};

/** Labels of one component: the selector labels plus the name. */
export function componentLabels(instance: string, component: string): Record<string, string> {
  return { [APP_NAME]: 'disagg', [APP_INSTANCE]: instance, [APP_COMPONENT]: component };
}
