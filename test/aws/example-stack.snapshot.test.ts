import * as os from 'os';
import * as path from 'path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { DockerImageAsset } from 'aws-cdk-lib/aws-ecr-assets';
import { InferenceStack } from '../../examples/cdk-app/inference-stack';

// One synthesis of the example stack (cluster + p5en + trn2 groups + the Llama P/D workload) for the
// whole file: a full cluster synthesis takes several seconds.
//
// The template is deterministic across machines: the stack is environment-agnostic (no account,
// region or AZ lookups), and the asset hashes come from files inside npm packages that the lockfile
// pins (aws-cdk-lib's kubectl provider handlers, @aws-cdk/lambda-layer-kubectl-v34), except the
// engine image's, a hash of engine/ and images/: it is replaced by a placeholder so that engine
// changes do not churn this snapshot (the image URI's shape is still checked below).
// Update on purpose with `npx jest test/aws/example-stack.snapshot.test.ts -u` and review the diff.
let stack: InferenceStack;
let json: any;

beforeAll(() => {
  // GIVEN the example app
  const app = new App();
  stack = new InferenceStack(app, 'Example');
  // WHEN it is synthesized
  const engineImages = stack.node.findAll().filter((c): c is DockerImageAsset => c instanceof DockerImageAsset);
  // images/engine for the workers, images/engine-slim for the router
  expect(engineImages.map((i) => i.dockerfilePath)).toEqual(['images/engine/Dockerfile', 'images/engine-slim/Dockerfile']);
  json = JSON.parse(JSON.stringify(Template.fromStack(stack).toJSON())
    .split(engineImages[0].assetHash).join('ENGINE_IMAGE_ASSET_HASH')
    .split(engineImages[1].assetHash).join('ENGINE_SLIM_IMAGE_ASSET_HASH'));
});

test('the workload runs on the cluster with the engine image built from images/engine', () => {
  // THEN the chart is applied as a manifest whose router and workers use the image asset's URI
  const manifests = Object.values(json.Resources as Record<string, any>)
    .filter((r) => r.Type === 'Custom::AWSCDK-EKS-KubernetesResource');
  const workload = JSON.stringify(manifests.find((m) => JSON.stringify(m).includes('disagg-engine')));
  expect(workload).toMatch(/container-assets.*:ENGINE_IMAGE_ASSET_HASH/);
  expect(workload).toMatch(/container-assets.*:ENGINE_SLIM_IMAGE_ASSET_HASH/);
  expect(workload).toMatch(/--tensor-parallel-size/);
  expect(stack.workload.prefillTensorParallel).toBe(4);
});

test('the example stack matches its snapshot', () => {
  // THEN
  expect(json).toMatchSnapshot();
});

test('the template carries nothing machine-specific', () => {
  // THEN no absolute path of this checkout, home or temp directory leaks into the template
  const text = JSON.stringify(json);
  // (a trailing separator: the Inference Extension CRD Job legitimately mounts a volume at /tmp)
  for (const dir of [path.resolve(__dirname, '..', '..'), os.homedir(), os.tmpdir()]) {
    expect(text).not.toContain(dir + path.sep);
  }
  // and every asset key is a content hash
  const keys = [...text.matchAll(/"S3Key":"([^"]+)"/g)].map((m) => m[1]);
  expect(keys.length).toBeGreaterThan(0);
  for (const key of keys) {
    expect(key).toMatch(/^[0-9a-f]{64}\.zip$/);
  }
});

test('the Helm ingress gateway Service gets the annotations workloads put on their Gateway', () => {
  // GIVEN the Istio gateway chart of the template
  const charts = Object.values(json.Resources as Record<string, any>)
    .filter((r) => r.Type === 'Custom::AWSCDK-EKS-HelmChart' && r.Properties.Chart === 'gateway');
  expect(charts).toHaveLength(1);
  // THEN both paths to an NLB use one set of annotations
  const values = JSON.parse(charts[0].Properties.Values);
  expect(values.service.annotations).toEqual(stack.inference.gatewayInfrastructureAnnotations);
});
