import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { parseAllDocuments } from 'yaml';
import { disagg } from './util';
import { DEFAULT_DEPLOYMENT } from '../../src/cli/defaults';

describe('disagg synth', () => {
  let outdir: string;
  let json: any;
  let text: string;

  beforeAll(async () => {
    // GIVEN an empty output folder, WHEN the default deployment is synthesized (once, twice printed)
    outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-synth-'));
    const run = await disagg('synth', '--out', outdir, '--json');
    expect(run.code).toBe(0);
    json = JSON.parse(run.out);
    text = (await disagg('synth', '--out', outdir)).out;
  });

  afterAll(() => fs.rmSync(outdir, { recursive: true, force: true }));

  test('writes one CloudFormation template with the cluster, a node group per pool and the workloads', () => {
    const template = JSON.parse(fs.readFileSync(json.cloudFormation.templateFile, 'utf8'));
    const resources = Object.values<any>(template.Resources);
    const nodegroups = resources.filter((r) => r.Type === 'AWS::EKS::Nodegroup');
    // THEN: the system group plus one EFA group per pool, on the GPU AMI
    expect(nodegroups).toHaveLength(3);
    expect(nodegroups.filter((n) => n.Properties.AmiType === 'AL2023_x86_64_NVIDIA')).toHaveLength(2);
    const launchTemplates = resources.filter((r) => r.Type === 'AWS::EC2::LaunchTemplate');
    for (const lt of launchTemplates) {
      expect(lt.Properties.LaunchTemplateData.InstanceType).toBe(DEFAULT_DEPLOYMENT.instance);
    }
    // AND the workloads ride on the cluster as a manifest that names the engine image asset
    const manifests = resources.filter((r) => r.Type === 'Custom::AWSCDK-EKS-KubernetesResource');
    expect(JSON.stringify(manifests)).toMatch(/disagg-engine/);
    expect(json.cloudFormation.resources).toBe(resources.length);
  });

  test('writes the same workloads as plain YAML for an existing cluster', () => {
    const docs = parseAllDocuments(fs.readFileSync(json.kubernetes.manifestFile, 'utf8')).map((d) => d.toJS());
    expect(docs).toHaveLength(json.kubernetes.objects);
    const deployments = docs.filter((d) => d.kind === 'Deployment').map((d) => d.metadata.name);
    expect(deployments).toEqual(expect.arrayContaining([expect.stringMatching(/prefill/), expect.stringMatching(/decode/), expect.stringMatching(/router/)]));
    const prefill = docs.find((d) => d.kind === 'Deployment' && /prefill/.test(d.metadata.name));
    expect(prefill.spec.replicas).toBe(DEFAULT_DEPLOYMENT.prefillReplicas);
    const args: string[] = prefill.spec.template.spec.containers[0].args;
    expect(args.join(' ')).toMatch(new RegExp(`--tensor-parallel-size[ =]${DEFAULT_DEPLOYMENT.tensorParallel}\\b`));
  });

  test('prints what it wrote and the plan of each pool', () => {
    expect(text).toMatch(/^disagg synth: llama-3\.3-70b \(fp8 weights, fp8 KV\), prefill\/decode on p5en\.48xlarge$/m);
    expect(text).toMatch(/wrote .*DisaggDefault\.template\.json {2}\(CloudFormation, \d+ resources\)/);
    expect(text).toMatch(/^ {2}AWS::EKS::Nodegroup +3$/m);
    expect(text).toMatch(/^ {2}prefill +2 +4 +1 +8 /m);
    expect(text).toMatch(/^ {2}decode +2 +4 +1 +8 /m);
    expect(json.pools.decode).toMatchObject({ replicas: 2, nodes: 1, tensorParallel: 4, efaInterfacesPerPod: 8 });
    expect(json.pools.decode.kvTokensPerReplica).toBeGreaterThan(1_000_000);
  });

  test('runs cdk-nag\'s AwsSolutions rules on the stack: no findings, the library\'s acknowledgements counted', () => {
    // THEN the default deployment has no finding (exit 0 above) and says where the reasons are
    expect(json.nag).toMatchObject({ pack: 'AwsSolutions', findings: [] });
    expect(json.nag.acknowledged).toBeGreaterThan(0);
    expect(fs.existsSync(json.nag.reportFile)).toBe(true);
    expect(text).toMatch(/^cdk-nag AwsSolutions: no findings \(\d+ acknowledged by disagg on their resources, with reasons in .*validation-report\.json\)$/m);
  });

  test('a configuration that cannot run is a usage error naming the field and the fix', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-synth-bad-'));
    try {
      // GIVEN TP 3, which does not divide Llama-3.3-70B's 64 attention heads
      const { code, err } = await disagg('synth', '--out', dir, '--tp', '3');
      // THEN exit 2, and the message names the prop and the valid sizes
      expect(code).toBe(2);
      expect(err).toMatch(/tensorParallel'? \(3\)/);
      expect(err).toMatch(/use .*\b4\b/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
