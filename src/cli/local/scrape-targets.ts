/**
 * `disagg local --scrape-targets FILE`: the run's processes as a Prometheus file_sd target file, with
 * the labels the constructs' PodMonitor and ServiceMonitor give a deployment's series in a cluster
 * (`deployment`, `namespace`, the workers' `pool`), so that the dashboards and alerts of
 * `Monitoring.prometheusOperator()` read a local run as they read the cluster. Rewritten (atomically: a
 * rename) whenever a process starts or exits; Prometheus re-reads a file_sd file when it changes.
 * @see https://prometheus.io/docs/prometheus/latest/configuration/configuration/#file_sd_config
 */
import * as fs from 'fs';
import * as path from 'path';
import { UsageError } from '../command';

/** Where and as what deployment to write the targets. */
export interface ScrapeTargetsOptions {
  readonly file: string;
  /** The deployment's name (its DisaggregatedInference's `name`). */
  readonly deployment: string;
  /** Its namespace, when the chart has one. */
  readonly namespace?: string;
}

/** What a target needs of a process (processes.ts ScrapedProcess has it). */
export interface ScrapedProcess {
  /** 'router', or the sim-worker's name. */
  readonly name: string;
  /** Its HTTP base URL, e.g. http://127.0.0.1:41000. */
  readonly url: string;
}

/** One file_sd target group. */
export interface ScrapeTargetGroup {
  readonly targets: string[];
  readonly labels: Record<string, string>;
}

/**
 * The target groups of the live processes. A process's role comes from its name, as `disagg local`
 * names them: 'router'; '<pool>-<n>' or '<pool>-g<group>-pod<pod>-rank<rank>' for a sim-worker of pool
 * prefill, decode or aggregated. Workers are grouped per pool under job `<deployment>-workers`, the
 * router under `<deployment>-router`.
 */
export function scrapeTargetGroups(live: readonly ScrapedProcess[], o: Omit<ScrapeTargetsOptions, 'file'>): ScrapeTargetGroup[] {
  const common = { deployment: o.deployment, ...(o.namespace ? { namespace: o.namespace } : {}) };
  const host = (p: ScrapedProcess) => new URL(p.url).host;
  const groups: ScrapeTargetGroup[] = [];
  const router = live.filter(p => p.name === 'router');
  if (router.length > 0) groups.push({ targets: router.map(host), labels: { job: `${o.deployment}-router`, ...common } });
  const pools = new Map<string, string[]>();
  for (const p of live) {
    if (p.name === 'router') continue;
    const pool = p.name.split('-')[0];
    pools.set(pool, [...(pools.get(pool) ?? []), host(p)]);
  }
  for (const [pool, targets] of [...pools].sort(([a], [b]) => a.localeCompare(b))) {
    groups.push({ targets, labels: { job: `${o.deployment}-workers`, ...common, pool } });
  }
  return groups;
}

/** Writes the target file for the live processes (a temporary file renamed over it). */
export function writeScrapeTargets(live: readonly ScrapedProcess[], o: ScrapeTargetsOptions): void {
  const tmp = path.join(path.dirname(o.file), `.${path.basename(o.file)}.${process.pid}.tmp`);
  fs.writeFileSync(tmp, `${JSON.stringify(scrapeTargetGroups(live, o), undefined, 2)}\n`);
  fs.renameSync(tmp, o.file);
}

/** --scrape-targets: the file and the deployment's labels, or undefined without the flag. */
export function scrapeTargetsOf(file: unknown, d: { readonly name: string; readonly namespace: string }): ScrapeTargetsOptions | undefined {
  if (file === undefined) return undefined;
  if (typeof file !== 'string' || file === '' || !fs.existsSync(path.dirname(path.resolve(file)))) {
    throw new UsageError(`--scrape-targets '${String(file)}' must be a file in an existing folder, e.g. /tmp/disagg-targets.json`);
  }
  return { file: path.resolve(file), deployment: d.name, namespace: d.namespace };
}
