import { k8s } from 'cdk8s-plus-28';
import { PoolPlan } from './pool-plan';

/**
 * Scale-down that loses nothing, on the pod side (issue 24 contract, section 3): when a worker pod is
 * deleted it leaves the Service's ready endpoints at once; its `preStop` hook first sleeps while the
 * router's DNS discovery drops it (CoreDNS answers a headless Service with a 5 s TTL, and the router
 * re-resolves every `refresh_seconds`, 5 s: engine/src/servers/router/router_config.h), then runs
 * `disagg-engine drain-wait`, which polls the worker's Prometheus page until
 * `vllm:num_requests_running + vllm:num_requests_waiting` has been 0 for `--quiet-s` seconds; on a
 * prefill pod (`--held-kv`) also until `vllm:kv_cache_usage_perc` is 0, i.e. the decode pods have read
 * every finished prompt's KV blocks (vLLM holds them for that, and has no gauge of the transfers).
 * Only then does the kubelet send SIGTERM to vLLM. The grace period bounds the whole hook.
 */

/** Seconds the hook waits for the router's DNS refresh to drop the pod: CoreDNS TTL 5 s + router refresh 5 s. */
export const DRAIN_DNS_SECONDS = 10;
/** Seconds between the drain's end and SIGKILL that vLLM gets to exit on SIGTERM. */
export const DRAIN_MARGIN_SECONDS = 15;
/** The shortest grace period (Kubernetes' default is 30 s). */
export const MIN_GRACE_SECONDS = 30;
/**
 * The lease NixlConnector pools give a finished prompt's KV blocks (`kv_connector_extra_config.kv_lease_duration`,
 * vLLM PR #41383): the decode side renews it while it waits to read them, and prefill frees them when it
 * runs out. vLLM's 30 s default let decode pods read freed blocks under load (aws-samples/aws-do-eks#84,
 * 8 of 42 requests answered from overwritten blocks with HTTP 200), so the pools set 300 s.
 */
export const NIXL_KV_LEASE_SECONDS = 300;
/**
 * How long a prefill worker may hold a finished prompt's KV blocks for the decode pod to read: the lease
 * above on current vLLM, `VLLM_NIXL_ABORT_REQUEST_TIMEOUT` (480 s) on releases before the lease; the
 * longer of the two, since the drain does not know which one a user's image runs.
 */
export const NIXL_KV_HOLD_SECONDS = Math.max(480, NIXL_KV_LEASE_SECONDS);
/** The TPOT a grace period assumes without an SLO: the router's default (issue 24 contract, section 2). */
export const DEFAULT_DRAIN_TPOT_SECONDS = 0.1;
/** The engine binary in the worker images (images/engine, images/engine-neuron: /usr/local/bin). */
export const ENGINE_BINARY = 'disagg-engine';

/** How one pool's pods drain (internal). */
export interface DrainPlan {
  /** `terminationGracePeriodSeconds`. */
  readonly graceSeconds: number;
  /** The hook's first sleep. */
  readonly dnsSeconds: number;
  /** `drain-wait --timeout-s`: the grace less the DNS wait and the margin. */
  readonly timeoutSeconds: number;
  /** `drain-wait --quiet-s`. */
  readonly quietSeconds: number;
  /** `drain-wait --held-kv`: wait for KV blocks held for transfers (prefill pools). */
  readonly heldKv: boolean;
}

/** What sizes a drain (internal). */
export interface DrainInputs {
  /** The TPOT SLO, or the default. */
  readonly tpotSeconds: number;
  /** The longest output a request may ask for, tokens. */
  readonly maxOutputTokens: number;
  /** The longest prompt, tokens (maxContext). */
  readonly maxContext: number;
}

/**
 * The drain of one pool:
 * - decode (and whole-request) pools: the longest output at 1.5 x the TPOT SLO;
 * - prefill pools: the longest prompt's prefill on an idle replica x 1.5, plus vLLM's KV hold time, so
 *   a decode pod still pulling a finished prompt's KV blocks gets them (the quiet period is longer too:
 *   the pulls follow the last prefill).
 * Each adds the DNS wait and the margin, and is at least 30 s.
 */
export function drainPlan(pool: PoolPlan, inputs: DrainInputs): DrainPlan {
  const work = pool.role === 'prefill'
    ? 1.5 * pool.plan.roofline.prefill(inputs.maxContext).seconds + NIXL_KV_HOLD_SECONDS
    : 1.5 * inputs.maxOutputTokens * inputs.tpotSeconds;
  const graceSeconds = Math.max(MIN_GRACE_SECONDS, Math.ceil(DRAIN_DNS_SECONDS + work + DRAIN_MARGIN_SECONDS));
  return {
    graceSeconds,
    dnsSeconds: DRAIN_DNS_SECONDS,
    timeoutSeconds: graceSeconds - DRAIN_DNS_SECONDS - DRAIN_MARGIN_SECONDS,
    quietSeconds: pool.role === 'prefill' ? 5 : 2,
    heldKv: pool.role === 'prefill',
  };
}

/**
 * The `preStop` hook of a worker container: sleep for the DNS refresh, then wait until every listed
 * vLLM server is idle (in parallel; each within the timeout). `metricsHosts` are shell words: a pod's
 * own servers are `127.0.0.1`; a LeaderWorkerSet worker pod (no server of its own) waits on its leader,
 * `$LWS_LEADER_ADDRESS`, so the group's collective outlives the leader's drain. A missing
 * `disagg-engine` (an image other than the project's) leaves only the DNS wait, and says so.
 */
export function preStopHook(drain: DrainPlan, ports: number[], host = '127.0.0.1'): k8s.Lifecycle {
  const waits = ports.map(p => `${ENGINE_BINARY} drain-wait --metrics-url "http://${host}:${p}/metrics" --timeout-s ${drain.timeoutSeconds} ` +
    `--quiet-s ${drain.quietSeconds}${drain.heldKv ? ' --held-kv' : ''}`);
  const script = [
    `sleep ${drain.dnsSeconds}`,
    `if ! command -v ${ENGINE_BINARY} >/dev/null 2>&1; then echo "preStop: ${ENGINE_BINARY} is not in the image; not waiting for in-flight requests" >&2; exit 0; fi`,
    waits.length === 1 ? waits[0] : `${waits.map(w => `${w} &`).join(' ')} wait`,
  ].join('; ');
  return { preStop: { exec: { command: ['/bin/sh', '-c', script] } } };
}
