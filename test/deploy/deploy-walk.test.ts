// The deploy walk (test/deploy/walk.ts) on the documented paths: `disagg synth`'s default deployment (its
// CloudFormation stack and its plain YAML), examples/cdk-app, and an autoscaled deployment; the README's
// quick start is walked in test/aws/readme-snippets.test.ts, which synthesizes it. Each blocker the first
// operator review found is put back into a template that passes, and the walk must report it.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { App, Stack } from 'aws-cdk-lib';
import * as cdk8s from 'cdk8s';
import { imageDiskGib } from './images';
import { DeployFinding, RULES, walkDeploy } from './walk';
import { InferenceStack } from '../../examples/cdk-app/inference-stack';
import { AcceleratedInstanceType, DisaggregatedInference, InferenceCluster, ModelArchitecture, ModelSource, Precision } from '../../src';
import { defaultDeploymentSpec, synthesizeDeployment } from '../../src/cli/default-deployment';

/** What the user creates after the deploy, as `disagg synth` and the README say. */
const USER_SECRETS = ['inference/hf-token'];

const blockers = (findings: DeployFinding[]) => findings.filter((f) => f.blocker);
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v));

/** Logical ids of a template's resources of a type whose id matches `pattern`. */
function ids(template: any, type: string, pattern: RegExp = /./): string[] {
  return Object.entries<any>(template.Resources).filter(([id, r]) => r.Type === type && pattern.test(id)).map(([id]) => id);
}

/** Removes resources and every DependsOn on them. */
function remove(template: any, doomed: string[]): void {
  for (const id of doomed) delete template.Resources[id];
  for (const r of Object.values<any>(template.Resources)) {
    if (Array.isArray(r.DependsOn)) r.DependsOn = r.DependsOn.filter((d: string) => !doomed.includes(d));
  }
}

describe('disagg synth, default deployment', () => {
  let template: any;
  let imageGib: (image: string) => number | undefined;
  let yamlObjects: any[];

  beforeAll(() => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-walk-'));
    const result = synthesizeDeployment(defaultDeploymentSpec(), out);
    template = JSON.parse(fs.readFileSync(result.templateFile, 'utf8'));
    imageGib = imageDiskGib(path.dirname(result.templateFile));
    yamlObjects = result.manifests;
    fs.rmSync(out, { recursive: true, force: true });
  });

  const walk = (t: any) => walkDeploy(t, { userSecrets: USER_SECRETS, imageGib });

  test('has no blocker; the token Secret is the documented user step', () => {
    // WHEN
    const findings = walk(template);
    // THEN
    expect(blockers(findings)).toEqual([]);
    expect(findings.filter((f) => f.rule === RULES.reference).map((f) => f.message).join('\n')).toMatch(/Secret 'inference\/hf-token'/);
  });

  test('on delete, every load balancer is waited for before the controller goes', () => {
    // GIVEN the template without the cleanup step between the gateway and the controller
    const cleanup = ids(template, 'Custom::LoadBalancerCleanup');
    expect(cleanup.length).toBe(1);
    const without = clone(template);
    remove(without, cleanup);
    // THEN the walk names the gateway's manifest and the Istio ingress chart
    const found = walk(without).filter((f) => f.rule === RULES.loadBalancers);
    expect(found.length).toBeGreaterThan(0);
    expect(found.every((f) => f.blocker && /DependencyViolation/.test(f.message))).toBe(true);
    expect(walk(template).filter((f) => f.rule === RULES.loadBalancers)).toEqual([]);
  });

  test('launches no accelerated instance while the stack is created', () => {
    // THEN every accelerated node group starts at 0 and can grow to the pool's nodes
    const groups = ids(template, 'AWS::EKS::Nodegroup', /Prefill|Decode/).map((id) => template.Resources[id].Properties.ScalingConfig);
    expect(groups).toEqual([
      { DesiredSize: 0, MinSize: 0, MaxSize: 1 },
      { DesiredSize: 0, MinSize: 0, MaxSize: 1 },
    ]);
  });

  test('the plain YAML creates its namespace first, and kubectl apply of the file finds it', () => {
    // GIVEN the file as one manifest, in its order
    const asManifest = { Resources: { Yaml: { Type: 'Custom::AWSCDK-EKS-KubernetesResource', Properties: { Manifest: JSON.stringify(yamlObjects) } } } };
    // THEN
    expect(yamlObjects[0]).toMatchObject({ kind: 'Namespace', metadata: { name: 'inference' } });
    expect(yamlObjects[0].metadata.namespace).toBeUndefined();
    expect(walkDeploy(asManifest, { userSecrets: USER_SECRETS }).filter((f) => f.rule === RULES.namespace)).toEqual([]);
    // AND the walk sees it when the namespace comes last
    const late = { Resources: { Yaml: { Type: 'Custom::AWSCDK-EKS-KubernetesResource', Properties: { Manifest: JSON.stringify([...yamlObjects.slice(1), yamlObjects[0]]) } } } };
    expect(walkDeploy(late).filter((f) => f.rule === RULES.namespace).length).toBeGreaterThan(0);
  });

  test('the namespace enforces the Pod Security level its pods meet and warns at restricted', () => {
    // THEN vLLM workers add IPC_LOCK for EFA: privileged; the walk checks every pod against it
    const labels = {
      'pod-security.kubernetes.io/enforce': 'privileged',
      'pod-security.kubernetes.io/warn': 'restricted',
      'pod-security.kubernetes.io/audit': 'restricted',
    };
    const created = JSON.parse(template.Resources[ids(template, 'Custom::AWSCDK-EKS-KubernetesResource', /Namespaceinference/)[0]].Properties.Manifest);
    expect(created[0].metadata.labels).toMatchObject(labels);
    // AND a level the workers do not meet is a blocker
    const strict = clone(template);
    const nsId = ids(strict, 'Custom::AWSCDK-EKS-KubernetesResource', /Namespaceinference/)[0];
    strict.Resources[nsId].Properties.Manifest = strict.Resources[nsId].Properties.Manifest.replace('/enforce":"privileged"', '/enforce":"baseline"');
    const refused = blockers(walk(strict)).filter((f) => f.rule === RULES.podSecurity);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0].message).toMatch(/adds IPC_LOCK/);
    expect(yamlObjects[0].metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'privileged',
      'pod-security.kubernetes.io/warn': 'restricted',
      'pod-security.kubernetes.io/audit': 'restricted',
    });
  });

  describe('each blocker of the first review, put back, is found', () => {
    test('no Namespace for the workloads', () => {
      // GIVEN the template without the namespace manifest
      const t = clone(template);
      remove(t, ids(t, 'Custom::AWSCDK-EKS-KubernetesResource', /Namespaceinference/));
      // THEN
      const found = blockers(walk(t)).filter((f) => f.rule === RULES.namespace);
      expect(found.length).toBeGreaterThan(0);
      expect(found[0].message).toMatch(/namespaces "inference" not found/);
    });

    test('accelerated node groups launched at creation', () => {
      // GIVEN the prefill group at desired 1, as synth made it before
      const t = clone(template);
      const prefill = ids(t, 'AWS::EKS::Nodegroup', /Prefill/)[0];
      t.Resources[prefill].Properties.ScalingConfig = { DesiredSize: 1, MinSize: 1, MaxSize: 1 };
      // THEN
      const found = blockers(walk(t)).filter((f) => f.rule === RULES.capacityAtCreate);
      expect(found.map((f) => f.resource)).toEqual([prefill]);
      expect(found[0].message).toMatch(/1 x p5en\.48xlarge.*InsufficientInstanceCapacity/);
    });

    test('the router on the vLLM image on the system nodes', () => {
      // GIVEN the router's images swapped for the worker image
      const t = clone(template);
      const slim = /cdk-hnb659fds-container-assets[^"]*?:([0-9a-f]{64})/g;
      const hashes = [...JSON.stringify(t).matchAll(slim)].map((m) => m[1]);
      const full = hashes.find((h) => imageGib(`x:${h}`)! > 10)!;
      const light = hashes.find((h) => imageGib(`x:${h}`)! < 1)!;
      const swapped = JSON.parse(JSON.stringify(t).split(light).join(full));
      // THEN
      const found = blockers(walk(swapped)).filter((f) => f.rule === RULES.disk);
      expect(found.map((f) => f.resource)).toEqual([ids(t, 'AWS::EKS::Nodegroup', /System/)[0]]);
      expect(found[0].message).toMatch(/m7i\.xlarge nodes with a 50 GiB root volume pull 37\.0 GiB/);
    });

    test('the system nodes at EKS\'s 20 GiB default disk would not even hold the vLLM image; the slim image fits there', () => {
      // GIVEN the default disk
      const t = clone(template);
      t.Resources[ids(t, 'AWS::EKS::Nodegroup', /System/)[0]].Properties.DiskSize = 20;
      // THEN the slim router fits
      expect(blockers(walk(t))).toEqual([]);
    });

    test('no operator access to a private API', () => {
      // GIVEN the template without the deploy role's access entry
      const t = clone(template);
      remove(t, ids(t, 'AWS::EKS::AccessEntry', /DeployRole/));
      // THEN
      expect(blockers(walk(t)).map((f) => f.rule)).toEqual([RULES.access]);
    });

    test('a workload applied before the webhook and CRD providers it needs', () => {
      // GIVEN the workload manifest with its DependsOn cut to the namespace alone
      const t = clone(template);
      const workload = ids(t, 'Custom::AWSCDK-EKS-KubernetesResource', /Workload/)[0];
      t.Resources[workload].DependsOn = t.Resources[workload].DependsOn.filter((d: string) => /Namespace|KubectlReadyBarrier/.test(d));
      // THEN the Services race the Load Balancer Controller's webhook, the Gateway races its CRDs, and on
      // delete nothing waits for the Gateway's NLB
      const rules = new Set(blockers(walk(t)).map((f) => f.rule));
      expect(rules).toEqual(new Set([RULES.webhook, RULES.crd, RULES.loadBalancers]));
    });

    test('a Secret nobody creates is a blocker; a documented one is a user step', () => {
      // GIVEN no documented user step
      const found = blockers(walkDeploy(template, { imageGib }));
      // THEN the workers' token Secret blocks
      expect(found.length).toBeGreaterThan(0);
      expect(found.every((f) => f.rule === RULES.reference && /Secret 'inference\/hf-token'/.test(f.message))).toBe(true);
    });

    test('IMDS reachable from pods on the accelerated nodes is reported', () => {
      // GIVEN hop limit 2, as the launch templates had it
      const t = clone(template);
      for (const id of ids(t, 'AWS::EC2::LaunchTemplate')) {
        t.Resources[id].Properties.LaunchTemplateData.MetadataOptions.HttpPutResponseHopLimit = 2;
      }
      // THEN
      expect(walk(t).filter((f) => f.rule === RULES.imds)).toHaveLength(2);
      expect(walk(template).filter((f) => f.rule === RULES.imds)).toHaveLength(0);
    });
  });
});

describe('examples/cdk-app', () => {
  test('has no blocker', () => {
    // GIVEN the example app, synthesized
    const app = new App();
    const stack = new InferenceStack(app, 'DisaggInference');
    const assembly = app.synth();
    const template = assembly.getStackByName(stack.stackName).template;
    // WHEN
    const findings = walkDeploy(template, { userSecrets: USER_SECRETS, imageGib: imageDiskGib(assembly.directory) });
    // THEN
    expect(blockers(findings)).toEqual([]);
  });
});

describe('an autoscaled deployment, whose node groups grow from zero', () => {
  let template: any;

  beforeAll(() => {
    // GIVEN a decode pool autoscaled by KEDA on an empty p5en group: the Cluster Autoscaler comes with it
    const app = new App();
    const stack = new Stack(app, 'Autoscaled');
    const cluster = new InferenceCluster(stack, 'Inference');
    const p5en = AcceleratedInstanceType.P5EN_48XLARGE;
    cluster.addAcceleratedNodeGroup('Pool', { instanceType: p5en, maxSize: 2, poolRole: 'pd' });
    const chart = new cdk8s.Chart(new cdk8s.App(), 'llama', { namespace: 'inference' });
    const pool = { instanceType: p5en, tensorParallel: 4, nodePoolRole: 'pd', autoscaling: { minReplicas: 1, maxReplicas: 2 } };
    new DisaggregatedInference(chart, 'Llama', {
      model: ModelArchitecture.LLAMA_3_3_70B,
      modelSource: ModelSource.huggingFace('meta-llama/Llama-3.3-70B-Instruct', { tokenSecret: { name: 'hf-token' } }),
      image: 'public.ecr.aws/example/vllm:0.19.1',
      routerImage: 'public.ecr.aws/example/disagg-engine-slim:0.1.0',
      weightPrecision: Precision.FP8,
      kvCachePrecision: Precision.FP8,
      maxContext: 8192,
      slo: { ttftSeconds: 2, tpotSeconds: 0.05 },
      prefill: pool,
      decode: pool,
    });
    cluster.addWorkload(chart);
    template = app.synth().getStackByName(stack.stackName).template;
  });

  test('has no blocker: the Cluster Autoscaler sees the GPUs, EFA and hugepages a node would offer', () => {
    expect(blockers(walkDeploy(template, { userSecrets: USER_SECRETS }))).toEqual([]);
  });

  test('without the hugepages tag the group never grows from zero', () => {
    // GIVEN the node group tags without hugepages, as before
    const t = clone(template);
    const pool = ids(t, 'AWS::EKS::Nodegroup', /Pool/)[0];
    delete t.Resources[pool].Properties.Tags['k8s.io/cluster-autoscaler/node-template/resources/hugepages-2Mi'];
    // THEN
    const found = blockers(walkDeploy(t, { userSecrets: USER_SECRETS }));
    expect(found.map((f) => f.rule)).toContain(RULES.scaleFromZero);
    expect(found.find((f) => f.rule === RULES.scaleFromZero)!.message).toMatch(/hugepages-2Mi/);
  });
});
