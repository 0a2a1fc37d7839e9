// Monitoring of a DisaggregatedInference and a TieredKvCache (issue 39): the prometheus-operator objects
// (PodMonitor, ServiceMonitor, PrometheusRule; validated with @kubernetes-models/prometheus-operator), the
// Grafana dashboards' ConfigMaps and JSON, the options and their errors. The rules' and panels' PromQL is
// run through promtool in monitoring-promtool.test.ts.
import * as fs from 'fs';
import * as path from 'path';
import { Duration, Size } from 'cdk8s';
import { defaultProps, deepseekEpPdProps, find, monitoredProps, reportSkipped, synthChart, synthInference, validateManifests } from './util';
import {
  Autoscaler, DisaggregatedInference, KvStoreEndpoint, KvTier, KvTransfer, Monitoring, NetworkIsolation, TieredKvCache, TrafficSource,
} from '../../src';
import { GRAFANA_DASHBOARD_LABEL } from '../../src/k8s/private/monitoring-objects';

const SLO = { ttftSeconds: 2, tpotSeconds: 0.05, targetShare: 0.99 };

function monitoringObjects(manifests: any[]): any[] {
  return manifests.filter(m => m.apiVersion === 'monitoring.coreos.com/v1' || m.metadata?.labels?.[GRAFANA_DASHBOARD_LABEL] !== undefined);
}

describe('monitoring: objects', () => {
  test('Monitoring.none() (the default) emits nothing and no dashboards', () => {
    // GIVEN the default props, and the same with monitoring none
    const plain = synthInference(defaultProps());
    const none = synthInference(defaultProps({ monitoring: Monitoring.none() }));
    // THEN neither has a monitoring object, and both synthesize the same manifests
    expect(monitoringObjects(plain.manifests)).toEqual([]);
    expect(none.manifests).toEqual(plain.manifests);
    expect(plain.inference.dashboards).toEqual({});
  });

  test('prometheusOperator() emits a PodMonitor, a ServiceMonitor, a PrometheusRule and dashboards, valid for prometheus-operator', () => {
    // GIVEN a monitored deployment
    const { manifests, inference } = synthInference(monitoredProps());
    const objects = monitoringObjects(manifests);
    // THEN the objects are named after the deployment, carry the user's labels, and validate
    expect(objects.map(o => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ConfigMap/llama-dashboard-autoscaler', 'ConfigMap/llama-dashboard-cost', 'ConfigMap/llama-dashboard-kv-transfer',
      'ConfigMap/llama-dashboard-phases', 'ConfigMap/llama-dashboard-prefix-cache', 'ConfigMap/llama-dashboard-slo',
      'PodMonitor/llama-workers', 'PrometheusRule/llama', 'ServiceMonitor/llama-router',
    ]);
    for (const o of objects) {
      expect(o.metadata.namespace).toBe('inference');
      expect(o.metadata.labels).toMatchObject({ 'release': 'kube-prometheus-stack', 'app.kubernetes.io/instance': 'llama' });
    }
    const result = validateManifests(objects);
    reportSkipped(result);
    expect(result.errors).toEqual([]);
    expect(result.skipped).toEqual([]);
    expect(Object.keys(inference.dashboards)).toEqual(['slo', 'phases', 'kv-transfer', 'prefix-cache', 'autoscaler', 'cost']);
  });

  test('the PodMonitor scrapes every vLLM API port of the prefill and decode pods and labels the series deployment and pool', () => {
    // GIVEN a monitored deployment
    const { manifests } = synthInference(monitoredProps());
    // THEN it selects both pools' pods of this deployment
    const pm = find(manifests, 'PodMonitor');
    expect(pm.spec.selector).toEqual({
      matchLabels: { 'app.kubernetes.io/name': 'disagg', 'app.kubernetes.io/instance': 'llama' },
      matchExpressions: [{ key: 'app.kubernetes.io/component', operator: 'In', values: ['prefill', 'decode'] }],
    });
    // AND scrapes port http every 15 s, adding deployment and pool to every series
    expect(pm.spec.podMetricsEndpoints).toEqual([{
      port: 'http',
      path: '/metrics',
      interval: '15s',
      relabelings: [
        { targetLabel: 'deployment', replacement: 'llama' },
        { sourceLabels: ['__meta_kubernetes_pod_label_app_kubernetes_io_component'], targetLabel: 'pool' },
      ],
    }]);
    // AND those labels select the pods the pools run
    const decode = find(manifests, 'Deployment', 'llama-decode');
    expect(decode.spec.template.metadata.labels).toMatchObject({ 'app.kubernetes.io/instance': 'llama', 'app.kubernetes.io/component': 'decode' });
    expect(decode.spec.template.spec.containers[0].ports.map((p: any) => p.name)).toContain('http');
  });

  test('per-rank expert-parallel pods are scraped on each rank\'s port', () => {
    // GIVEN a tensor-parallel prefill pool and a per-rank expert-parallel decode pool (8 ranks per pod)
    const { manifests } = synthInference(deepseekEpPdProps(undefined, { monitoring: Monitoring.prometheusOperator() }));
    // THEN the PodMonitor lists 'http' (prefill) and 'http-0' to 'http-7' (decode)
    const pm = find(manifests, 'PodMonitor');
    expect(pm.spec.podMetricsEndpoints.map((e: any) => e.port)).toEqual(['http', ...Array.from({ length: 8 }, (_, r) => `http-${r}`)]);
    const template = find(manifests, 'LeaderWorkerSet', '-decode').spec.leaderWorkerTemplate.workerTemplate;
    expect(template.spec.containers[0].ports.map((p: any) => p.name)).toEqual(expect.arrayContaining(['http-0', 'http-7']));
    // AND the expert-parallel pods carry the labels it selects
    expect(template.metadata.labels).toMatchObject({ ...pm.spec.selector.matchLabels, 'app.kubernetes.io/component': 'decode' });
    expect(validateManifests(monitoringObjects(manifests)).errors).toEqual([]);
  });

  test('the router\'s ServiceMonitor scrapes its Service\'s http port, keeping the router\'s endpoint label', () => {
    // GIVEN a monitored deployment
    const { manifests, inference } = synthInference(monitoredProps());
    // THEN the ServiceMonitor selects the router Service by its labels and port name
    const sm = find(manifests, 'ServiceMonitor', '-router');
    const svc = manifests.find(m => m.kind === 'Service' && m.metadata.name === inference.routerServiceName);
    expect(sm.spec.selector.matchLabels).toEqual({ 'app.kubernetes.io/name': 'disagg', 'app.kubernetes.io/instance': 'llama', 'app.kubernetes.io/component': 'router' });
    expect(svc.metadata.labels).toMatchObject(sm.spec.selector.matchLabels);
    expect(svc.spec.ports.map((p: any) => p.name)).toContain('http');
    // AND it adds deployment (not pool: the router's own series have a pool label) and honors scraped labels
    expect(sm.spec.endpoints).toEqual([{
      port: 'http', path: '/metrics', interval: '15s', honorLabels: true, relabelings: [{ targetLabel: 'deployment', replacement: 'llama' }],
    }]);
  });

  test('a NetworkPolicy that admits no Prometheus to the workers is a warning', () => {
    // GIVEN monitoring with the default isolation (no metricsFrom), and with a Prometheus namespace admitted
    const blocked = synthInference(monitoredProps()).inference;
    const open = synthInference(monitoredProps(undefined, {
      networkIsolation: NetworkIsolation.workersBehindRouter({ metricsFrom: [TrafficSource.namespace('monitoring')] }),
    })).inference;
    // THEN the first warns, naming the fix; the second does not
    expect(blocked.warnings.filter(w => w.startsWith('disagg:monitoringBlocked'))).toEqual([
      expect.stringMatching(/lets no Prometheus reach their \/metrics.*metricsFrom: \[TrafficSource.namespace/),
    ]);
    expect(open.warnings.filter(w => w.startsWith('disagg:monitoringBlocked'))).toEqual([]);
  });

  test('scrapeInterval, alerts: false and dashboards: false', () => {
    // GIVEN monitoring without alerts or dashboards, scraping every 30 s
    const { manifests, inference } = synthInference(monitoredProps(Monitoring.prometheusOperator({
      scrapeInterval: Duration.seconds(30), alerts: false, dashboards: false,
    })));
    // THEN only the scrape objects are there
    expect(monitoringObjects(manifests).map(o => o.kind).sort()).toEqual(['PodMonitor', 'ServiceMonitor']);
    expect(find(manifests, 'PodMonitor').spec.podMetricsEndpoints[0].interval).toBe('30s');
    expect(inference.dashboards).toEqual({});
  });

  test('without instancePricePerHour the cost dashboard is left out', () => {
    // GIVEN monitoring without a price
    const { manifests, inference } = synthInference(monitoredProps(Monitoring.prometheusOperator()));
    // THEN five dashboards, no cost
    expect(Object.keys(inference.dashboards)).toEqual(['slo', 'phases', 'kv-transfer', 'prefix-cache', 'autoscaler']);
    expect(manifests.some(m => m.metadata.name === 'llama-dashboard-cost')).toBe(false);
  });
});

describe('monitoring: alerts', () => {
  function rules(props = monitoredProps()): any[] {
    const { manifests } = synthInference(props);
    const rule = find(manifests, 'PrometheusRule');
    expect(rule.spec.groups.map((g: any) => g.name)).toEqual(['disagg-llama']);
    return rule.spec.groups[0].rules;
  }

  test('every alert has a severity, a summary, a description and a runbook in docs/monitoring.md', () => {
    // GIVEN the alerts of a monitored deployment with an SLO, EFA and an autoscaled pool
    const all = rules();
    // THEN each kind is there
    expect([...new Set(all.map(r => r.alert))]).toEqual([
      'DisaggSloBudgetBurn', 'DisaggKvTransferFailing', 'DisaggKvTransferOnTcp', 'DisaggPrefixHitsBelowPrediction', 'DisaggEndpointHerding',
      'DisaggAutoscalerAtMax', 'DisaggWorkerFailingHealth',
    ]);
    // AND each says how bad it is, what happened and where its runbook is
    const docs = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'monitoring.md'), 'utf8');
    for (const r of all) {
      expect(['page', 'ticket', 'warning']).toContain(r.labels.severity);
      expect(r.annotations.summary).toMatch(/inference\/llama/);
      expect(r.annotations.description.length).toBeGreaterThan(40);
      expect(r.annotations.runbook_url).toBe(`https://github.com/disagg/disagg/blob/main/docs/monitoring.md#${r.alert.toLowerCase()}`);
      expect(docs).toContain(`### ${r.alert}\n`);
    }
  });

  test('docs/monitoring.md describes every metric the alerts and dashboards read', () => {
    // GIVEN every series name the alerts and the dashboards of two configurations query
    const docs = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'monitoring.md'), 'utf8');
    const names = new Set<string>();
    for (const props of [monitoredProps(), deepseekEpPdProps({ autoscaling: { maxReplicas: 3 } }, {
      name: 'ds', slo: { ttftSeconds: 4, tpotSeconds: 0.1 }, autoscaler: Autoscaler.HPA, monitoring: Monitoring.prometheusOperator(),
    })]) {
      const { manifests, inference } = synthInference(props);
      const exprs = [...find(manifests, 'PrometheusRule').spec.groups[0].rules.map((r: any) => r.expr as string),
        ...Object.values(inference.dashboards).flatMap(j => JSON.parse(j).panels.flatMap((p: any) => p.targets.map((t: any) => t.expr as string)))];
      for (const e of exprs) for (const m of e.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\{/g)) names.add(m[1].replace(/_(bucket|sum|count)$/, ''));
    }
    expect(names.size).toBeGreaterThan(50);
    // THEN each is named in the docs' metric tables
    expect([...names].filter(n => !docs.includes(`\`${n}\``))).toEqual([]);
  });

  test('every expression keeps to the deployment\'s series', () => {
    // GIVEN the alerts
    for (const r of rules()) {
      // THEN every metric the expression reads is filtered to deployment and namespace
      const metrics = [...(r.expr as string).matchAll(/\b(disagg_router_\w+|vllm:\w+)(.)/g)];
      expect(metrics.length).toBeGreaterThan(0);
      for (const m of metrics) {
        expect(`${m[1]}${m[2]}`).toBe(`${m[1]}{`);
      }
      expect((r.expr as string).split('{').length - 1).toBe((r.expr as string).split('{deployment="llama",namespace="inference"').length - 1);
    }
  });

  test('burn-rate pairs: 14.4x pages only when the budget allows it; no emitted pair has a threshold of 1 or more', () => {
    // GIVEN the default targetShare (0.9: a 10% budget) and 0.99 (1%)
    const pairs = (targetShare?: number) => rules(monitoredProps(undefined, { slo: { ...SLO, targetShare } }))
      .filter(r => r.alert === 'DisaggSloBudgetBurn').map(r => r.labels);
    // THEN with 10%, 14.4 x 0.1 >= 1 can never fire and is left out; 6x, 3x and 1x remain
    expect(pairs(undefined).map(l => `${l.severity} ${l.burn_rate}x ${l.long_window}/${l.short_window}`)).toEqual([
      'page 6x 6h/30m', 'ticket 3x 1d/2h', 'ticket 1x 3d/6h',
    ]);
    // AND with 1% all four pairs
    expect(pairs(0.99).map(l => l.burn_rate)).toEqual(['14.4', '6', '3', '1']);
    for (const targetShare of [0.5, 0.8, 0.9, 0.95, 0.99, 0.999]) {
      for (const r of rules(monitoredProps(undefined, { slo: { ...SLO, targetShare } })).filter(x => x.alert === 'DisaggSloBudgetBurn')) {
        const threshold = Number(/> ([\d.e-]+)$/.exec(r.expr)![1]);
        expect(threshold).toBeLessThan(1);
        expect(threshold).toBeCloseTo(Number(r.labels.burn_rate) * (1 - targetShare), 10);
      }
    }
  });

  test('alerts that do not apply are left out: no SLO, UCX, no autoscaling', () => {
    // GIVEN a deployment without an SLO or autoscaling, moving KV over UCX
    const all = rules(defaultProps({ name: 'llama', monitoring: Monitoring.prometheusOperator(), kvTransfer: KvTransfer.NIXL_UCX }));
    // THEN no burn rate, no TCP fallback, no autoscaler ceiling
    expect([...new Set(all.map(r => r.alert))]).toEqual([
      'DisaggKvTransferFailing', 'DisaggPrefixHitsBelowPrediction', 'DisaggEndpointHerding', 'DisaggWorkerFailingHealth',
    ]);
  });

  test('the autoscaler ceiling counts every endpoint of the pool at maxReplicas; the HPA names follow the autoscaler', () => {
    // GIVEN a per-rank expert-parallel decode pool (16 ranks per group) autoscaled to 3 groups with HPAs
    const props = deepseekEpPdProps({ autoscaling: { maxReplicas: 3 } }, {
      name: 'ds', slo: { ttftSeconds: 4, tpotSeconds: 0.1 }, autoscaler: Autoscaler.HPA, monitoring: Monitoring.prometheusOperator(),
    });
    const { manifests, inference } = synthInference(props);
    const at = find(manifests, 'PrometheusRule').spec.groups[0].rules.find((r: any) => r.alert === 'DisaggAutoscalerAtMax');
    // THEN the ceiling is 3 x 16 endpoints
    expect(at.expr).toContain('disagg_router_pool_ready_endpoints{deployment="ds",namespace="inference",pool="decode"}) >= 48');
    // AND the replicas panel reads the HPA by its own name (KEDA's would be keda-hpa-<name>)
    const panels = JSON.parse(inference.dashboards.autoscaler).panels;
    const replicas = panels.find((p: any) => p.title.startsWith('Replicas'));
    expect(replicas.targets[0].expr).toBe('kube_horizontalpodautoscaler_status_current_replicas{namespace="inference",horizontalpodautoscaler=~"ds-decode"}');
    const keda = JSON.parse(synthInference(monitoredProps()).inference.dashboards.autoscaler).panels.find((p: any) => p.title.startsWith('Replicas'));
    expect(keda.targets[0].expr).toContain('horizontalpodautoscaler=~"keda-hpa-llama-decode"');
  });
});

describe('monitoring: dashboards', () => {
  test('Grafana JSON models: schema 39, a prometheus datasource variable, a stable uid from the deployment', () => {
    // GIVEN the same deployment twice, and one in another namespace
    const a = synthInference(monitoredProps()).inference.dashboards;
    const b = synthInference(monitoredProps()).inference.dashboards;
    const other = synthInference(monitoredProps(), 'other').inference.dashboards;
    for (const [slug, json] of Object.entries(a)) {
      const d = JSON.parse(json);
      // THEN each dashboard is a schema-39 model whose panels query the datasource variable
      expect(d.schemaVersion).toBe(39);
      expect(d.templating.list).toEqual([expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' })]);
      expect(d.uid.length).toBeLessThanOrEqual(40);
      expect(d.uid).toBe(JSON.parse(b[slug]).uid);
      expect(d.uid).not.toBe(JSON.parse(other[slug]).uid);
      expect(d.title).toMatch(/^disagg inference\/llama: /);
      expect(d.panels.length).toBeGreaterThan(3);
      for (const p of d.panels) {
        expect(p.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
        for (const t of p.targets) {
          // AND no template variable but $__rate_interval inside PromQL, and every series of this deployment
          expect(t.expr.replace(/\$__rate_interval/g, '')).not.toContain('$');
          for (const m of t.expr.matchAll(/\b(disagg_router_\w+|vllm:\w+|up)\{([^}]*)\}/g)) {
            expect(m[2]).toMatch(/^deployment="llama",namespace="inference"/);
          }
        }
      }
    }
  });

  test('each dashboard is a ConfigMap the Grafana sidecar loads, holding the JSON on the construct', () => {
    // GIVEN a monitored deployment
    const { manifests, inference } = synthInference(monitoredProps());
    // THEN each ConfigMap is labelled grafana_dashboard: "1" and holds <slug>.json
    for (const [slug, json] of Object.entries(inference.dashboards)) {
      const cm = find(manifests, 'ConfigMap', `-dashboard-${slug}`);
      expect(cm.metadata.labels[GRAFANA_DASHBOARD_LABEL]).toBe('1');
      expect(cm.data).toEqual({ [`${slug}.json`]: json });
    }
  });

  test('the cost dashboard counts the instances each scraped endpoint stands for', () => {
    // GIVEN TP4 pods on 8-GPU p5en (half an instance each) at $63.30 an hour
    const cost = JSON.parse(synthInference(monitoredProps()).inference.dashboards.cost);
    const perHour = cost.panels.find((p: any) => p.title === 'Cost per hour').targets[0].expr;
    // THEN the cost per hour is scraped endpoints x 0.5 x 63.3
    expect(perHour).toBe('((count(up{deployment="llama",namespace="inference",pool="prefill"}) * 0.5 or vector(0)) + '
      + '(count(up{deployment="llama",namespace="inference",pool="decode"}) * 0.5 or vector(0))) * 63.3');
  });
});

describe('monitoring: the kvstore', () => {
  test('a TieredKvCache with an engine kvstore gets a ServiceMonitor on its metrics port', () => {
    // GIVEN a cache with the engine's kvstore and monitoring
    const { manifests } = synthChart(c => {
      const inference = new DisaggregatedInference(c, 'Llama', defaultProps());
      new TieredKvCache(c, 'Cache', {
        tiers: [KvTier.hostMemory(Size.gibibytes(500)), KvTier.remote(KvStoreEndpoint.engineKvStore({ image: 'engine-slim:0.1.0', memory: Size.gibibytes(600) }))],
        monitoring: Monitoring.prometheusOperator({ labels: { release: 'kps' }, scrapeInterval: Duration.seconds(10) }),
      }).attachTo(inference.decode);
    });
    // THEN the ServiceMonitor selects the kvstore's Service and scrapes its metrics port
    const sm = find(manifests, 'ServiceMonitor');
    const svc = find(manifests, 'Service', 'kvstore');
    expect(sm.metadata).toMatchObject({ name: 'kvstore', namespace: 'inference', labels: { release: 'kps' } });
    expect(sm.spec.selector.matchLabels).toEqual(svc.spec.selector);
    expect(svc.metadata.labels).toMatchObject(sm.spec.selector.matchLabels);
    expect(sm.spec.endpoints).toEqual([{ port: 'metrics', path: '/metrics', interval: '10s' }]);
    expect(svc.spec.ports.map((p: any) => p.name)).toContain('metrics');
    expect(validateManifests([sm]).errors).toEqual([]);
  });

  test('without monitoring, or without an engine kvstore, no ServiceMonitor', () => {
    // GIVEN a cache without monitoring, and one with monitoring but a host tier only
    for (const monitoring of [undefined, Monitoring.prometheusOperator()]) {
      const { manifests } = synthChart(c => {
        const inference = new DisaggregatedInference(c, 'Llama', defaultProps());
        new TieredKvCache(c, 'Cache', {
          tiers: monitoring ? [KvTier.hostMemory(Size.gibibytes(500))]
            : [KvTier.hostMemory(Size.gibibytes(500)), KvTier.remote(KvStoreEndpoint.engineKvStore({ image: 'i', memory: Size.gibibytes(600) }))],
          monitoring,
        }).attachTo(inference.decode);
      });
      // THEN nothing to scrape
      expect(manifests.filter(m => m.kind === 'ServiceMonitor')).toEqual([]);
    }
  });
});

describe('monitoring: errors', () => {
  test.each([
    [{ instancePricePerHour: 0 }, /'instancePricePerHour' \(0\) must be a positive number of US dollars per instance-hour.*leave it out to omit the cost dashboard/],
    [{ instancePricePerHour: -2 }, /'instancePricePerHour' \(-2\) must be a positive number/],
    [{ instancePricePerHour: NaN }, /'instancePricePerHour' \(NaN\)/],
    [{ scrapeInterval: Duration.millis(500) }, /'scrapeInterval' \(500 milli\w*\) must be a whole number of seconds from 1 to 60.*Duration.seconds\(15\)/],
    [{ scrapeInterval: Duration.minutes(2) }, /'scrapeInterval' \(2 minutes\) must be a whole number of seconds from 1 to 60/],
    [{ labels: { 'release!': 'x' } }, /'labels' \('release!': 'x'\) is not a Kubernetes label.*release: 'kube-prometheus-stack'/],
    [{ labels: { release: 'a b' } }, /'labels' \('release': 'a b'\) is not a Kubernetes label/],
  ])('Monitoring.prometheusOperator(%p) names the field, the value and the fix', (options, message) => {
    // GIVEN bad options WHEN the monitoring is made THEN the error teaches
    expect(() => Monitoring.prometheusOperator(options as any)).toThrow(message);
  });

  test('an SLO that leaves no error budget is refused with monitoring', () => {
    // GIVEN targetShare 1 WHEN synthesized with monitoring THEN the error names the field and a fix
    expect(() => synthInference(monitoredProps(undefined, { slo: { ...SLO, targetShare: 1 } })))
      .toThrow(/'slo.targetShare' \(1\) must be between 0 and 1 \(exclusive\) for the SLO burn-rate alerts.*e\.g\. 0\.99/);
  });
});
