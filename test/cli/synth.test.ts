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

  test('ends with the steps around the deploy: preflight, deploy, access and the token Secret, scaling up', () => {
    // THEN each step is an exact command, in order
    const steps = text.slice(text.indexOf('Next steps'));
    expect(steps).toMatch(/created empty: no accelerated instance launches with the stack/);
    expect(steps).toContain('npx disagg preflight --instance p5en.48xlarge --nodes 2 --region <region>');
    expect(steps).toMatch(/npx cdk deploy --app \S+ --no-notices/);
    expect(steps).toMatch(/KubeconfigCommand.*kubectl -n inference create secret generic hf-token --from-literal=token=/s);
    expect(steps).toMatch(/contains\(OutputKey, 'ScaleUp'\).* \| sh/);
    expect(json.nextSteps).toHaveLength(4);
    // AND the stack has the outputs the steps read: the cluster, kubectl, one scale-up command per pool
    const template = JSON.parse(fs.readFileSync(json.cloudFormation.templateFile, 'utf8'));
    const outputs = Object.entries<any>(template.Outputs);
    expect(outputs.filter(([k]) => /ScaleUp/.test(k)).map(([, o]) => JSON.stringify(o.Value)))
      .toEqual([expect.stringMatching(/update-nodegroup-config.*minSize=0,maxSize=1,desiredSize=1/), expect.stringMatching(/maxSize=1,desiredSize=1/)]);
    expect(JSON.stringify(outputs.find(([k]) => /KubeconfigCommand/.test(k)))).toMatch(/update-kubeconfig.*--role-arn.*deploy-role/);
  });

  test('--azs, --capacity-block and --admin-role-arn reach the stack; bad values name the flag', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-synth-azs-'));
    try {
      // GIVEN the node groups' zone first and a Capacity Block there
      const run = await disagg('synth', '--out', dir, '--json', '--azs', 'us-east-2b,us-east-2a', '--capacity-block', 'cr-0123456789abcdef0',
        '--admin-role-arn', 'arn:aws:iam::111122223333:role/PlatformAdmin');
      const out = JSON.parse(run.out);
      const template = JSON.parse(fs.readFileSync(out.cloudFormation.templateFile, 'utf8'));
      const resources = Object.values<any>(template.Resources);
      // THEN the VPC has those zones, the block is targeted, the admin has an access entry, and preflight is told
      const subnets = resources.filter((r) => r.Type === 'AWS::EC2::Subnet').map((r) => r.Properties.AvailabilityZone);
      expect(new Set(subnets)).toEqual(new Set(['us-east-2b', 'us-east-2a']));
      const lts = resources.filter((r) => r.Type === 'AWS::EC2::LaunchTemplate').map((r) => r.Properties.LaunchTemplateData);
      expect(lts.map((d) => d.InstanceMarketOptions)).toEqual([{ MarketType: 'capacity-block' }, { MarketType: 'capacity-block' }]);
      expect(resources.some((r) => r.Type === 'AWS::EKS::AccessEntry' && r.Properties.PrincipalArn === 'arn:aws:iam::111122223333:role/PlatformAdmin')).toBe(true);
      expect(out.nextSteps[0]).toBe('npx disagg preflight --instance p5en.48xlarge --nodes 2 --region <region> --az us-east-2b --capacity-block cr-0123456789abcdef0');
      // AND bad values are usage errors that name the flag and show the form
      const oneZone = await disagg('synth', '--out', dir, '--azs', 'us-east-2b');
      expect(oneZone.code).toBe(2);
      expect(oneZone.err).toMatch(/--azs \(us-east-2b\) must list at least two different zones.*--azs us-east-2b,us-east-2a/);
      const both = await disagg('synth', '--out', dir, '--capacity-block', 'cr-0123456789abcdef0', '--capacity-reservation', 'cr-0123456789abcdef1');
      expect(both.err).toMatch(/exclude each other/);
      const badId = await disagg('synth', '--out', dir, '--capacity-block', 'block-1');
      expect(badId.err).toMatch(/--capacity-block \(block-1\) must be a Capacity Reservation id like cr-0123456789abcdef0/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('--vpc and --subnets deploy into an existing VPC, the node groups in the first subnet; partial or bad values name the flags', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-synth-vpc-'));
    try {
      // GIVEN an existing VPC's private subnets, one per zone
      const run = await disagg('synth', '--out', dir, '--json', '--vpc', 'vpc-0123456789abcdef0',
        '--subnets', 'subnet-0bbbbbbbbbbbbbbb2,subnet-0aaaaaaaaaaaaaaa1', '--azs', 'us-east-2b,us-east-2a');
      expect(run.code).toBe(0);
      const template = JSON.parse(fs.readFileSync(JSON.parse(run.out).cloudFormation.templateFile, 'utf8'));
      const resources = Object.values<any>(template.Resources);
      // THEN no VPC or subnet is created, and both accelerated groups use the first zone's subnet
      expect(resources.filter((r) => ['AWS::EC2::VPC', 'AWS::EC2::Subnet', 'AWS::EC2::NatGateway'].includes(r.Type))).toEqual([]);
      const groups = Object.entries<any>(template.Resources).filter(([id, r]) => r.Type === 'AWS::EKS::Nodegroup' && /Prefill|Decode/.test(id));
      expect(groups.map(([, r]) => r.Properties.Subnets)).toEqual([['subnet-0bbbbbbbbbbbbbbb2'], ['subnet-0bbbbbbbbbbbbbbb2']]);
      expect(JSON.stringify(resources.find((r) => r.Type === 'AWS::EKS::Cluster')?.Properties.ResourcesVpcConfig.SubnetIds))
        .toMatch(/subnet-0bbbbbbbbbbbbbbb2.*subnet-0aaaaaaaaaaaaaaa1/);
      // AND partial or malformed values are usage errors that show the whole form
      const noZones = await disagg('synth', '--out', dir, '--vpc', 'vpc-0123456789abcdef0', '--subnets', 'subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2');
      expect(noZones.code).toBe(2);
      expect(noZones.err).toMatch(/--vpc, --subnets and --azs together \(--azs missing\).*--vpc vpc-/);
      const count = await disagg('synth', '--out', dir, '--vpc', 'vpc-0123456789abcdef0', '--subnets', 'subnet-0aaaaaaaaaaaaaaa1', '--azs', 'us-east-2a,us-east-2b');
      expect(count.err).toMatch(/one different private subnet per zone of --azs/);
      const badVpc = await disagg('synth', '--out', dir, '--vpc', 'default', '--subnets', 'subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2', '--azs', 'us-east-2a,us-east-2b');
      expect(badVpc.err).toMatch(/--vpc \(default\) must be a VPC id like vpc-0123456789abcdef0/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a configuration that cannot run is a usage error naming the field and the fix', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-synth-bad-'));
    try {
      // GIVEN TP 3, which does not divide Llama-3.3-70B's 64 attention heads
      const { code, err } = await disagg('synth', '--out', dir, '--tp', '3');
      // THEN exit 2, and the message names the prop and the valid sizes
      expect(code).toBe(2);
      expect(err).toMatch(/--prefill-tp 3 must divide/);
      expect(err).toMatch(/use .*\b4\b/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
