// A real Prometheus reads a `disagg local` run as it reads a cluster (issue 39): Debian's `prometheus`
// scrapes the router and sim-workers of `disagg local --autoscale --prefill-replicas 2
// --decode-replicas 2` through the run's --scrape-targets file (the labels the constructs' PodMonitor
// and ServiceMonitor add), loads the deployment's alert rules from Monitoring.prometheusOperator(), and
// then every panel of every dashboard must return data, every rule must evaluate, and the router's
// per-phase means must add up to the TTFT and E2E it measured. Skipped (saying so) without the
// `prometheus` binary, the engine or its addon.
import { ChildProcess, spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Chart, Testing } from 'cdk8s';
import { stringify } from 'yaml';
import { localAutoscaleProps } from '../../src/cli/local/deployment';
import { freePort } from '../../src/cli/local/processes';
import { engineAddonPath, loadEngine } from '../../src/engine';
import { DisaggregatedInference, Monitoring } from '../../src/k8s';
import { disagg } from '../cli/util';

const ROOT = path.join(__dirname, '..', '..');
const BINARY = process.env.DISAGG_ENGINE_BIN ?? path.join(ROOT, 'engine', 'build', 'disagg-engine');
const PROMETHEUS = ['/usr/bin/prometheus', '/usr/local/bin/prometheus'].find(p => fs.existsSync(p));
const engineBuilt = fs.existsSync(BINARY) && ['router', 'sim-worker'].every(r => spawnSync(BINARY, [r, '--help']).status === 0)
  && fs.existsSync(engineAddonPath()) && typeof (loadEngine() as unknown as { PoolAutoscaler?: unknown }).PoolAutoscaler === 'function';
const missing = [!PROMETHEUS && 'the prometheus binary (apt-get install prometheus)', !engineBuilt && 'the engine binary and addon (npx projen compile)']
  .filter(Boolean);
if (missing.length > 0) {
  // eslint-disable-next-line no-console
  console.warn(`SKIPPED the live Prometheus test: no ${missing.join(' and no ')}`);
}
const testIfReady = missing.length === 0 ? test : test.skip;

jest.setTimeout(300_000);

/** Panels whose data comes from outside a local run, with why. */
const NEEDS_A_CLUSTER: Record<string, string> = {
  kube_horizontalpodautoscaler: 'the HPA replicas come from kube-state-metrics, which a local run has not',
};

const AUTOSCALE = { minReplicas: 2, maxReplicas: 3, scaleDownWindowSeconds: 10, ttftSeconds: 2, tpotSeconds: 0.05 };

/** The local run's deployment with monitoring: its dashboards and alert rules, as the constructs emit them. */
function monitoredLocalDeployment(): { dashboards: Record<string, string>; rules: unknown } {
  const chart = new Chart(Testing.app(), 'disagg', { namespace: 'inference' });
  const inference = new DisaggregatedInference(chart, 'Inference', {
    ...localAutoscaleProps(AUTOSCALE),
    monitoring: Monitoring.prometheusOperator({ instancePricePerHour: 63.3 }),
  });
  const rule = Testing.synth(chart).find((m: any) => m.kind === 'PrometheusRule');
  return { dashboards: inference.dashboards, rules: { groups: rule.spec.groups } };
}

/** Every PromQL expression of a dashboard's panels, with the panel's title. */
function panelQueries(dashboard: string): Array<{ title: string; expr: string }> {
  const model = JSON.parse(dashboard);
  return (model.panels as any[]).flatMap(p => (p.targets ?? []).map((t: any) => ({ title: `${model.title} / ${p.title}`, expr: t.expr as string })));
}

async function query(base: string, expr: string, time: number): Promise<any> {
  const url = `${base}/api/v1/query?query=${encodeURIComponent(expr)}&time=${time}`;
  const r = await (await fetch(url)).json() as any;
  if (r.status !== 'success') throw new Error(`${expr}: ${r.error}`);
  return r.data;
}

async function scalar(base: string, expr: string, time: number): Promise<number> {
  const data = await query(base, expr, time);
  return Number(data.result[0]?.value?.[1] ?? NaN);
}

describe('a real Prometheus scraping disagg local', () => {
  let prometheus: ChildProcess | undefined;
  let dir = '';
  afterAll(async () => {
    if (prometheus && prometheus.exitCode === null) {
      const exited = new Promise(resolve => prometheus!.once('exit', resolve));
      prometheus.kill('SIGTERM');
      await exited;
    }
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  testIfReady('every dashboard panel has data, every rule evaluates, and the phases add up to TTFT and E2E', async () => {
    // GIVEN the deployment's dashboards and alert rules, and a Prometheus scraping every second whatever
    // the run's target file lists, with those rules loaded
    const { dashboards, rules } = monitoredLocalDeployment();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-prometheus-'));
    const targets = path.join(dir, 'targets.json');
    fs.writeFileSync(path.join(dir, 'rules.yaml'), stringify(rules));
    fs.writeFileSync(path.join(dir, 'prometheus.yml'), stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [path.join(dir, 'rules.yaml')],
      // honor_labels as the router's ServiceMonitor: its series' own endpoint and pool labels win
      scrape_configs: [{ job_name: 'disagg-local', honor_labels: true, file_sd_configs: [{ files: [targets], refresh_interval: '1s' }] }],
    }));
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    let log = '';
    prometheus = spawn(PROMETHEUS!, [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`], { stdio: ['ignore', 'ignore', 'pipe'] });
    prometheus.stderr!.on('data', d => { log = (log + d.toString()).slice(-4000); });
    for (let i = 0; i < 100; i++) {
      if (await fetch(`${base}/-/ready`).then(r => r.ok, () => false)) break;
      await new Promise(r => setTimeout(r, 100));
    }

    // WHEN disagg local runs P/D with two prefill and two decode sim-workers under its rising and falling load
    const run = await disagg('local', '--autoscale', '--prefill-replicas', '2', '--decode-replicas', '2',
      '--min-replicas', String(AUTOSCALE.minReplicas), '--max-replicas', String(AUTOSCALE.maxReplicas),
      '--scale-down-window', String(AUTOSCALE.scaleDownWindowSeconds), '--duration', '20',
      '--scrape-targets', targets, '--json', '--engine', BINARY);
    if (run.out.trim() === '') throw new Error(`disagg local printed no summary (exit ${run.code}): ${run.err.slice(-2000)}`);
    expect(JSON.parse(run.out).requests.failed).toBe(0);
    // The moment to read: the last second at which the router and workers of both pools were all still
    // scraped. The processes stop one by one at the end; a worker's series go stale as soon as it leaves
    // the target file, possibly before the router's last scrape.
    const now = Date.now() / 1000;
    const allUp = 'count(count by (job, pool) (up{deployment="llama-3-3-70b"} == 1)) >= 3';
    const range = await (await fetch(`${base}/api/v1/query_range?query=${encodeURIComponent(allUp)}&start=${now - 240}&end=${now}&step=1`)).json() as any;
    const values: Array<[number, string]> = range.data.result[0]?.values ?? [];
    expect(values.length).toBeGreaterThan(10);
    const at = values[values.length - 1][0] - 1;

    // THEN every panel of every dashboard returns data at that moment (Grafana's $__rate_interval as 30s)
    const empty: string[] = [];
    const slugs = Object.keys(dashboards);
    expect(slugs).toEqual(expect.arrayContaining(['slo', 'phases', 'kv-transfer', 'prefix-cache', 'autoscaler', 'cost']));
    let panels = 0;
    for (const slug of slugs) {
      for (const { title, expr } of panelQueries(dashboards[slug])) {
        if (Object.keys(NEEDS_A_CLUSTER).some(k => expr.includes(k))) continue;
        panels++;
        const data = await query(base, expr.replace(/\$__rate_interval/g, '30s'), at);
        if (data.result.length === 0) empty.push(`${title}: ${expr}`);
      }
    }
    expect(empty).toEqual([]);
    expect(panels).toBeGreaterThan(50);

    // AND every alert rule evaluated without an error
    const groups = ((await (await fetch(`${base}/api/v1/rules`)).json()) as any).data.groups as any[];
    const bad = groups.flatMap(g => g.rules).filter((r: any) => r.health !== 'ok').map((r: any) => `${r.name}: ${r.lastError}`);
    expect(groups.flatMap(g => g.rules).length).toBeGreaterThan(5);
    expect(bad).toEqual([]);

    // AND the router's phases, read through Prometheus, add up to the TTFT and E2E it measured (5%)
    const sel = 'deployment="llama-3-3-70b",namespace="inference"';
    const served = `sum(disagg_router_request_phase_seconds_count{${sel},phase="queue"})`;
    const ttftPhases = await scalar(base, `sum(disagg_router_request_phase_seconds_sum{${sel},phase!="decode"}) / ${served}`, at);
    const allPhases = await scalar(base, `sum(disagg_router_request_phase_seconds_sum{${sel}}) / ${served}`, at);
    const ttft = await scalar(base, `sum(disagg_router_ttft_seconds_sum{${sel}}) / sum(disagg_router_ttft_seconds_count{${sel}})`, at);
    const e2e = await scalar(base, `sum(disagg_router_e2e_seconds_sum{${sel}}) / sum(disagg_router_e2e_seconds_count{${sel}})`, at);
    expect(Math.abs(ttftPhases - ttft) / ttft).toBeLessThan(0.05);
    expect(Math.abs(allPhases - e2e) / e2e).toBeLessThan(0.05);
    // AND most requests went P/D, with a KV transfer per pair
    expect(await scalar(base, `sum(disagg_router_request_phase_seconds_count{${sel},path="pd",phase="kv_transfer"})`, at)).toBeGreaterThan(0);
    if (log.includes('level=error')) expect(log).toBe('');
  });
});
