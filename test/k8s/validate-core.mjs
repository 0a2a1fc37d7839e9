// Validates core Kubernetes objects with the ESM-only `kubernetes-models` package, and prometheus-operator's
// (monitoring.coreos.com/v1: PodMonitor, ServiceMonitor, PrometheusRule) with its companion
// `@kubernetes-models/prometheus-operator` (../shared/schemas has no prometheus-operator CRD). Run by
// util.ts in a child process, because jest runs the tests as CommonJS. Input: a JSON file holding an
// array of manifests. Output on stdout: a JSON array of { index, kind, name, error } for every invalid object.
import { readFileSync } from 'node:fs';

/** The package that models an apiVersion: kubernetes-models for core groups, a companion package for the others. */
const PACKAGES = { 'monitoring.coreos.com/v1': '@kubernetes-models/prometheus-operator' };

const manifests = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const problems = [];
for (const [index, manifest] of manifests.entries()) {
  const name = manifest.metadata?.name;
  let module;
  try {
    module = await import(`${PACKAGES[manifest.apiVersion] ?? 'kubernetes-models'}/${manifest.apiVersion}`);
  } catch (e) {
    problems.push({ index, kind: manifest.kind, name, error: `no kubernetes-models module for ${manifest.apiVersion}: ${e.message}` });
    continue;
  }
  const Model = module[manifest.kind];
  if (typeof Model !== 'function') {
    problems.push({ index, kind: manifest.kind, name, error: `kubernetes-models has no ${manifest.kind} in ${manifest.apiVersion}` });
    continue;
  }
  try {
    new Model(manifest).validate();
  } catch (e) {
    problems.push({ index, kind: manifest.kind, name, error: e.message });
  }
}
process.stdout.write(JSON.stringify(problems));
