import { ApiObject } from 'cdk8s';
import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { ScaledObject, ScaledObjectSpecTriggers } from '../../imports/keda.sh';
import { Autoscaler } from '../autoscaler';
import { PoolAutoscaling } from '../pool-autoscaling';
import { ServingSlo } from '../pool-sizing';
import { PoolPlan } from './pool-plan';

/**
 * SLO autoscaling of the prefill and decode pools (issue 24 contract): the router computes each pool's
 * SLO pressure from the capacity written here (`autoscaling` in its configuration) and serves it on
 * `GET /scaling` and `/metrics`; a KEDA ScaledObject (metrics-api) or an autoscaling/v2 HPA (external
 * metric) per pool turns it into replicas with the HPA algorithm.
 */

/** KEDA's polling interval of the router's `/scaling`, seconds (KEDA's default is 30). */
export const KEDA_POLLING_SECONDS = 15;
/** The `/scaling` field that says a pool has work in flight (scale-to-zero activity). */
const ACTIVITY_FIELD: Record<string, string> = { prefill: 'waitingPromptTokens', decode: 'runningSequences' };
/** A target no pool reaches: the activity trigger never asks for replicas itself. */
const UNREACHABLE_TARGET = '1000000000';
/** The external metric an HPA scales on (served by a metrics adapter from the router's /metrics). */
export const PRESSURE_METRIC = 'disagg_router_pool_slo_pressure';

/** A pool's autoscaling with defaults applied (internal). */
export interface ResolvedAutoscaling {
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly targetPressure: number;
  readonly scaleUpStabilizationSeconds: number;
  readonly scaleDownStabilizationSeconds: number;
  readonly scaleToZero: boolean;
  readonly idleSecondsBeforeZero: number;
}

/**
 * The pools' default `targetPressure` (PoolAutoscaling): 1 is the SLO, so 0.95 keeps 5% headroom;
 * the engine's rule (AutoscalePolicy::target) and `disagg simulate --autoscale` use the same.
 */
export const DEFAULT_TARGET_PRESSURE = 0.95;

/**
 * Checks a pool's `autoscaling` and applies the defaults; every error names the field (`field` is the
 * prop path, e.g. 'decode.autoscaling'), the value and a fix.
 */
export function resolveAutoscaling(where: string, field: string, a: PoolAutoscaling, kind: Autoscaler): ResolvedAutoscaling {
  const fail = (message: string): never => {
    throw new Error(`${where}: ${message}`);
  };
  const min = a.minReplicas ?? 1;
  if (!(Number.isInteger(a.maxReplicas) && a.maxReplicas >= 1)) {
    fail(`'${field}.maxReplicas' (${a.maxReplicas}) must be a positive integer: the most replicas the pool may have`);
  }
  if (!Number.isInteger(min) || min < 0) {
    fail(`'${field}.minReplicas' (${min}) must be a positive integer`);
  }
  if (min === 0) {
    fail(`'${field}.minReplicas' (0): to release every replica when idle set 'scaleToZero: true' (and minReplicas 1 or more, the floor while in use)`);
  }
  if (min > a.maxReplicas) {
    fail(`'${field}.minReplicas' (${min}) exceeds 'maxReplicas' (${a.maxReplicas}); lower minReplicas or raise maxReplicas`);
  }
  const target = a.targetPressure ?? DEFAULT_TARGET_PRESSURE;
  if (!(Number.isFinite(target) && target > 0 && target <= 1)) {
    fail(`'${field}.targetPressure' (${target}) must be in (0, 1]: 1 is the SLO itself, 0.95 (the default) keeps 5% headroom`);
  }
  const windows = {
    scaleUpStabilizationSeconds: a.scaleUpStabilizationSeconds ?? 0,
    scaleDownStabilizationSeconds: a.scaleDownStabilizationSeconds ?? 300,
  };
  for (const [name, v] of Object.entries(windows)) {
    if (!(Number.isInteger(v) && v >= 0 && v <= 3600)) {
      fail(`'${field}.${name}' (${v}) must be a whole number of seconds from 0 to 3600 (the HPA's limit)`);
    }
  }
  const toZero = a.scaleToZero ?? false;
  const idle = a.idleSecondsBeforeZero ?? 600;
  if (a.idleSecondsBeforeZero !== undefined && !toZero) {
    fail(`'${field}.idleSecondsBeforeZero' (${idle}) applies only with 'scaleToZero: true'; set it, or remove idleSecondsBeforeZero`);
  }
  if (!(Number.isInteger(idle) && idle >= 1)) {
    fail(`'${field}.idleSecondsBeforeZero' (${idle}) must be a positive whole number of seconds (KEDA's cooldownPeriod; 600 by default)`);
  }
  if (toZero && kind !== Autoscaler.KEDA) {
    fail(`'${field}.scaleToZero' needs Autoscaler.KEDA: a plain HPA never goes below one replica (its HPAScaleToZero feature gate is alpha ` +
      "and off on EKS); set 'autoscaler: Autoscaler.KEDA' or 'scaleToZero: false'");
  }
  return { minReplicas: min, maxReplicas: a.maxReplicas, targetPressure: target, ...windows, scaleToZero: toZero, idleSecondsBeforeZero: idle };
}

/** Checks an SLO's values (internal). */
export function checkSlo(where: string, slo: ServingSlo): void {
  for (const f of ['ttftSeconds', 'tpotSeconds'] as const) {
    if (!(Number.isFinite(slo[f]) && slo[f] > 0)) {
      throw new Error(`${where}: 'slo.${f}' (${slo[f]}) must be a positive number of seconds`);
    }
  }
}

/** The router's capacity model of a prefill pool: per endpoint (contract, section 2). */
export interface PrefillCapacity {
  readonly tokensPerSecond: number;
  readonly fixedSeconds: number;
}

/**
 * The router's step model of a decode pool: TPOT = base + perSequence x (running per endpoint + 1),
 * and the sequences one endpoint holds (its share of the replica's concurrency at the planned context).
 * The router's pressure counts the output tokens per second its running sequences ask for, running /
 * step(running per endpoint), against what full endpoints make, maxSequences / step(maxSequences), as
 * the simulator does: both from this step model. Waiting sequences are a backlog and stay out.
 */
export interface DecodeCapacity {
  readonly stepSecondsBase: number;
  readonly stepSecondsPerSequence: number;
  readonly maxSequences: number;
}

/** The router configuration's `autoscaling` block (issue 24 contract, section 2). */
export interface RouterAutoscaling {
  readonly slo: { readonly ttftSeconds: number; readonly tpotSeconds: number };
  readonly prefill: PrefillCapacity;
  readonly decode: DecodeCapacity;
}

/** Rounds to 4 significant digits (the router's model is an estimate; stable, readable config). */
function sig(x: number): number {
  return Number(x.toPrecision(4));
}

/**
 * A prefill pool's throughput per endpoint from the roofline (src/sizing): full chunks of
 * `maxNumBatchedTokens` (or the context, if shorter) give the throughput of a busy replica; a
 * one-token pass is the fixed cost. A replica of several endpoints (per-rank expert parallelism)
 * shares its throughput among them.
 */
export function prefillCapacity(pool: PoolPlan, maxContext: number, endpointsPerReplica = 1): PrefillCapacity {
  const roofline = pool.plan.roofline;
  const chunk = Math.min(roofline.maxNumBatchedTokens, maxContext);
  return {
    tokensPerSecond: sig(roofline.prefill(chunk).tokensPerSecond / endpointsPerReplica),
    fixedSeconds: sig(roofline.prefill(1).seconds),
  };
}

/**
 * A decode pool's step time as a line in the sequences an endpoint runs, fitted through the roofline's
 * steps at 1 and at the endpoint's concurrency (at most 64) at the plan's decode context, and the
 * endpoint's concurrency itself.
 */
export function decodeCapacity(pool: PoolPlan, endpointsPerReplica = 1): DecodeCapacity {
  const plan = pool.plan;
  const step = (perEndpoint: number) => plan.roofline.decodeStep(perEndpoint * endpointsPerReplica, plan.decodeContextTokens).stepSeconds;
  const n = Math.max(2, Math.min(64, Math.floor(plan.maxConcurrency / endpointsPerReplica)));
  const perSequence = Math.max(0, (step(n) - step(1)) / (n - 1));
  return {
    stepSecondsBase: sig(Math.max(0, step(1) - perSequence)),
    stepSecondsPerSequence: sig(perSequence),
    maxSequences: Math.max(1, Math.floor(plan.maxConcurrency / endpointsPerReplica)),
  };
}

/**
 * An SLO the pools cannot meet even idle is an error: the shortest prompt the prefill pool gets
 * (`disaggregationThresholdTokens`) against the TTFT SLO, one sequence's decode step against the TPOT
 * SLO. More replicas would not help, so an autoscaler would only grow the pool to its maximum.
 */
export function checkSloReachable(
  where: string, slo: ServingSlo, prefill: PoolPlan, decode: PoolPlan, promptTokens: number, maxContext: number,
): void {
  const prompt = Math.max(1, Math.min(promptTokens, maxContext));
  const ttft = prefill.plan.roofline.prefill(prompt).seconds;
  if (ttft > slo.ttftSeconds) {
    throw new Error(`${where}: 'slo.ttftSeconds' (${slo.ttftSeconds}) is below what an idle prefill replica can do: a ${prompt}-token prompt ` +
      `(disaggregationThresholdTokens, the shortest the prefill pool gets) takes about ${sig(ttft)} s on ${prefill.parallelism.tensorParallel} x ` +
      `${prefill.options.instanceType.accelerator.name} (roofline, src/sizing), and more replicas do not shorten one prompt; ` +
      `raise the SLO above ${sig(ttft)} s, or give the prefill pool a larger tensorParallel or a faster instance type`);
  }
  const tpot = decode.plan.roofline.decodeStep(1, decode.plan.decodeContextTokens).stepSeconds;
  if (tpot > slo.tpotSeconds) {
    throw new Error(`${where}: 'slo.tpotSeconds' (${slo.tpotSeconds}) is below what an idle decode replica can do: one sequence's step takes about ` +
      `${sig(tpot)} s on ${decode.parallelism.tensorParallel} x ${decode.options.instanceType.accelerator.name} (roofline, src/sizing), and more ` +
      `replicas do not speed up one sequence; raise the SLO above ${sig(tpot)} s, or give the decode pool a larger tensorParallel or a faster instance type`);
  }
}

/** What an autoscaler object scales (internal). */
export interface ScaleTarget {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
}

/** Inputs of {@link addAutoscaler} (internal). */
export interface AutoscalerInputs {
  readonly kind: Autoscaler;
  readonly scaling: ResolvedAutoscaling;
  readonly target: ScaleTarget;
  /** The pool's name in the router's configuration and signals ('prefill' or 'decode'). */
  readonly pool: string;
  /** The router's `/scaling` URL, reachable from KEDA's namespace. */
  readonly scalingUrl: string;
  /** The router's Service, whose scrape target labels the HPA's metric selector names. */
  readonly routerService: string;
  readonly metadata: k8s.ObjectMeta;
}

/**
 * The labels an HPA selects this deployment's pressure of one pool with. The router labels its gauges
 * only with `pool` (engine/src/servers/router/scaling_signals.cc, write_pool_signals), so every router
 * in the cluster exports `disagg_router_pool_slo_pressure{pool="decode"}`; the scrape adds the target's
 * labels, and a Service scrape (a prometheus-operator ServiceMonitor, or a scrape config relabelling
 * `__meta_kubernetes_service_name`) gives `service`, the router's Service name, unique in its namespace.
 * prometheus-adapter passes the selector's labels into its query (`<<.LabelMatchers>>`) and, for a
 * namespaced external rule (its default), adds the HPA's namespace, the router's
 * (https://github.com/kubernetes-sigs/prometheus-adapter/blob/master/docs/externalmetrics.md).
 */
export function pressureSelector(pool: string, routerService: string): Record<string, string> {
  return { pool, service: routerService };
}

/** The HPA behavior: the pool's stabilization windows (HPA's default policies otherwise). */
function behavior(s: ResolvedAutoscaling) {
  return {
    scaleUp: { stabilizationWindowSeconds: s.scaleUpStabilizationSeconds },
    scaleDown: { stabilizationWindowSeconds: s.scaleDownStabilizationSeconds },
  };
}

/**
 * Adds a pool's KEDA ScaledObject or autoscaling/v2 HorizontalPodAutoscaler. The metric is of type
 * Value (one number for the whole pool): the HPA computes `ceil(current x pressure / target)`.
 */
export function addAutoscaler(scope: Construct, id: string, inputs: AutoscalerInputs): ApiObject {
  const s = inputs.scaling;
  if (inputs.kind === Autoscaler.HPA) {
    return new k8s.KubeHorizontalPodAutoscalerV2(scope, id, {
      metadata: inputs.metadata,
      spec: {
        scaleTargetRef: inputs.target,
        minReplicas: s.minReplicas,
        maxReplicas: s.maxReplicas,
        metrics: [{
          type: 'External',
          external: {
            metric: { name: PRESSURE_METRIC, selector: { matchLabels: pressureSelector(inputs.pool, inputs.routerService) } },
            target: { type: 'Value', value: k8s.Quantity.fromString(String(s.targetPressure)) },
          },
        }],
        behavior: behavior(s),
      },
    });
  }
  // https://keda.sh/docs/2.20/reference/scaledobject-spec/ and .../scalers/metrics-api/
  const trigger = (name: string, field: string, targetValue: string, activationTargetValue: string): ScaledObjectSpecTriggers => ({
    type: 'metrics-api',
    name,
    metricType: 'Value',
    metadata: { url: inputs.scalingUrl, format: 'json', valueLocation: `pools.${inputs.pool}.${field}`, targetValue, activationTargetValue },
  });
  // KEDA keeps a ScaledObject active while any trigger's value exceeds its activation value. An idle
  // pool with ready endpoints still has some pressure (the next request's own prefill or step), so to
  // go to zero the pressure activates only above 1 (requests held for a pool at zero give 1 + held),
  // and the pool's work in flight keeps it active: prompt tokens waiting or in prefill, or running
  // sequences. That trigger's target is out of reach, so it never adds replicas itself.
  const triggers = s.scaleToZero
    ? [
      trigger('slo-pressure', 'pressure', String(s.targetPressure), '1'),
      trigger('work-in-flight', ACTIVITY_FIELD[inputs.pool] ?? 'runningSequences', UNREACHABLE_TARGET, '0'),
    ]
    : [trigger('slo-pressure', 'pressure', String(s.targetPressure), '0')];
  return new ScaledObject(scope, id, {
    metadata: inputs.metadata,
    spec: {
      scaleTargetRef: inputs.target,
      pollingInterval: KEDA_POLLING_SECONDS,
      minReplicaCount: s.minReplicas,
      maxReplicaCount: s.maxReplicas,
      // Idle (no pressure, so no request for the pool) for cooldownPeriod: to idleReplicaCount 0;
      // activation (pressure > 0) brings it back to minReplicaCount.
      ...(s.scaleToZero ? { idleReplicaCount: 0, cooldownPeriod: s.idleSecondsBeforeZero } : {}),
      advanced: { horizontalPodAutoscalerConfig: { behavior: behavior(s) } },
      triggers,
    },
  });
}
