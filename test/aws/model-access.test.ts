// Workers that load their model from S3 on an InferenceCluster: a Pod Identity role that reads that
// prefix and nothing else, one association per ServiceAccount (workers, and the router when it downloads
// its tokenizer), created before the pods, and the Region in each container (IMDS answers one hop only).
import { App, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as cdk8s from 'cdk8s';
import { AcceleratedInstanceType, DisaggregatedInference, InferenceCluster, ModelArchitecture, ModelSource, Precision, RouterTokenizer } from '../../src';
import { RULES, walkDeploy } from '../deploy/walk';

const P5EN = AcceleratedInstanceType.P5EN_48XLARGE;
const URI = 's3://acme-models/llama/3.3-70b-fp8/';

interface Options {
  readonly source?: ModelSource;
  readonly routerTokenizer?: RouterTokenizer;
  readonly podIdentityAgent?: boolean;
}

/** A cluster with one p5en group and a DisaggregatedInference 'llama' in namespace 'inference'. */
function deploy(options: Options = {}): { stack: Stack; cluster: InferenceCluster; chart: (id?: string) => cdk8s.Chart } {
  const app = new App();
  const stack = new Stack(app, 'S3Model');
  const cluster = new InferenceCluster(stack, 'Inference', options.podIdentityAgent === false ? { addons: { podIdentityAgent: { enabled: false } } } : {});
  cluster.addAcceleratedNodeGroup('Pool', { instanceType: P5EN, maxSize: 2, poolRole: 'pd' });
  const charts = new cdk8s.App();
  const chart = (id = 'llama') => {
    const c = new cdk8s.Chart(charts, id, { namespace: 'inference' });
    new DisaggregatedInference(c, 'Llama', {
      name: 'llama',
      model: ModelArchitecture.LLAMA_3_3_70B,
      modelSource: options.source ?? ModelSource.s3(URI),
      prequantizedCheckpoint: true,
      image: 'public.ecr.aws/example/vllm:0.19.1',
      routerImage: 'public.ecr.aws/example/disagg-engine-slim:0.1.0',
      routerTokenizer: options.routerTokenizer,
      weightPrecision: Precision.FP8,
      kvCachePrecision: Precision.FP8,
      maxContext: 8192,
      prefill: { instanceType: P5EN, tensorParallel: 4, replicas: 1, nodePoolRole: 'pd' },
      decode: { instanceType: P5EN, tensorParallel: 4, replicas: 1, nodePoolRole: 'pd' },
    });
    return c;
  };
  return { stack, cluster, chart };
}

/** The workload manifest's objects, CloudFormation references rendered as '${Ref}'. */
function workloadObjects(template: any): any[] {
  const [resource] = Object.entries<any>(template.Resources).filter(([id]) => /Workloadllama/.test(id)).map(([, r]) => r);
  const render = (v: any): string => (typeof v === 'string' ? v : v.Ref ? `\${${v.Ref}}` : JSON.stringify(v));
  const manifest = resource.Properties.Manifest;
  const text = typeof manifest === 'string' ? manifest : manifest['Fn::Join'][1].map(render).join('');
  return JSON.parse(text);
}

function envOf(objects: any[], deployment: string): Array<Record<string, string>> {
  const d = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === deployment);
  const spec = d.spec.template.spec;
  return [...(spec.initContainers ?? []), ...spec.containers].map((c: any) => Object.fromEntries((c.env ?? []).map((e: any) => [e.name, e.value])));
}

describe('a model in S3', () => {
  let template: any;

  beforeAll(() => {
    const { stack, cluster, chart } = deploy();
    cluster.addWorkload(chart());
    template = Template.fromStack(stack).toJSON();
  });

  test('one role reads the prefix and nothing else; Pod Identity may assume it', () => {
    // THEN the role's only policy lists the prefix and gets its objects
    const t = Template.fromJSON(template);
    const roles = t.findResources('AWS::IAM::Role', { Properties: { Description: Match.stringLikeRegexp('acme-models') } });
    expect(Object.keys(roles)).toHaveLength(1);
    const [roleId, role] = Object.entries<any>(roles)[0];
    const pods = { Effect: 'Allow', Principal: { Service: 'pods.eks.amazonaws.com' } };
    expect(role.Properties.AssumeRolePolicyDocument.Statement).toEqual([
      { Action: 'sts:AssumeRole', ...pods }, { Action: 'sts:TagSession', ...pods },
    ]);
    const policies = Object.values<any>(t.findResources('AWS::IAM::Policy')).filter((p) => JSON.stringify(p.Properties.Roles).includes(roleId));
    expect(policies).toHaveLength(1);
    expect(policies[0].Properties.PolicyDocument.Statement).toEqual([
      {
        Action: 's3:ListBucket',
        Effect: 'Allow',
        Resource: 'arn:aws:s3:::acme-models',
        Condition: { StringLike: { 's3:prefix': ['llama/3.3-70b-fp8', 'llama/3.3-70b-fp8/*'] } },
      },
      { Action: 's3:GetObject', Effect: 'Allow', Resource: 'arn:aws:s3:::acme-models/llama/3.3-70b-fp8/*' },
    ]);
  });

  test('the workers and the router each have their account, bound to that role before the pods start', () => {
    // THEN one association per ServiceAccount, both with the one role
    const associations = Object.entries<any>(template.Resources).filter(([, r]) => r.Type === 'AWS::EKS::PodIdentityAssociation'
      && r.Properties.Namespace === 'inference');
    expect(associations.map(([, r]) => r.Properties.ServiceAccount).sort()).toEqual(['llama', 'llama-router']);
    expect(new Set(associations.map(([, r]) => JSON.stringify(r.Properties.RoleArn))).size).toBe(1);
    // AND the manifest waits for both and for the Pod Identity agent
    const [, manifest] = Object.entries<any>(template.Resources).find(([id]) => /Workloadllama/.test(id))!;
    for (const [id] of associations) expect(manifest.DependsOn).toContain(id);
    expect(manifest.DependsOn.some((d: string) => /PodIdentityAgent/.test(d))).toBe(true);
    // AND the accounts say what they read; the workers run as theirs, the router as its own
    const objects = workloadObjects(template);
    const accounts = objects.filter((o) => o.kind === 'ServiceAccount');
    expect(accounts.map((a) => [a.metadata.name, a.metadata.annotations?.['disagg.dev/s3-read']])).toEqual([['llama', URI], ['llama-router', URI]]);
    const podAccount = (name: string) => objects.find((o) => o.kind === 'Deployment' && o.metadata.name === name).spec.template.spec.serviceAccountName;
    expect([podAccount('llama-prefill'), podAccount('llama-decode'), podAccount('llama-router')]).toEqual(['llama', 'llama', 'llama-router']);
  });

  test('every container that reads the model is told the stack\'s Region', () => {
    // THEN the vLLM containers and the router's tokenizer download carry AWS_REGION
    const objects = workloadObjects(template);
    for (const name of ['llama-prefill', 'llama-decode']) {
      expect(envOf(objects, name).map((e) => e.AWS_REGION)).toEqual(['${AWS::Region}']);
    }
    expect(envOf(objects, 'llama-router').map((e) => e.AWS_REGION)).toEqual(['${AWS::Region}', '${AWS::Region}']);
  });

  test('the deploy walk passes it, and catches each piece when it is taken away', () => {
    const modelFindings = (t: any) => walkDeploy(t).filter((f) => f.rule === RULES.modelAccess);
    // THEN as synthesized
    expect(modelFindings(template)).toEqual([]);
    // AND without the associations
    const noAssociation = JSON.parse(JSON.stringify(template));
    for (const [id, r] of Object.entries<any>(noAssociation.Resources)) {
      if (r.Type === 'AWS::EKS::PodIdentityAssociation' && r.Properties.Namespace === 'inference') delete noAssociation.Resources[id];
    }
    for (const r of Object.values<any>(noAssociation.Resources)) {
      if (Array.isArray(r.DependsOn)) r.DependsOn = r.DependsOn.filter((d: string) => d in noAssociation.Resources);
    }
    expect(modelFindings(noAssociation).map((f) => f.message)).toEqual([
      expect.stringMatching(/'inference\/llama' read the model at s3:\/\/acme-models.*no Pod Identity association/),
      expect.stringMatching(/'inference\/llama-router' read the model/),
    ]);
    // AND with the manifest created before the associations
    const early = JSON.parse(JSON.stringify(template));
    const [manifestId] = Object.keys(early.Resources).filter((id) => /Workloadllama/.test(id));
    early.Resources[manifestId].DependsOn = early.Resources[manifestId].DependsOn.filter((d: string) => !/Reader/.test(d));
    expect(modelFindings(early).map((f) => f.message)).toEqual([expect.stringMatching(/not created before the manifest/), expect.stringMatching(/not created before/)]);
    // AND without the Region
    const blind = JSON.parse(JSON.stringify(template).replace(/\{\\"name\\":\\"AWS_REGION\\",\\"value\\":\\"/g, '{\\"name\\":\\"NOT_THE_REGION\\",\\"value\\":\\"'));
    expect(modelFindings(blind).length).toBeGreaterThanOrEqual(3);
    expect(modelFindings(blind).every((f) => /no AWS_REGION/.test(f.message))).toBe(true);
  });
});

describe('other sources and choices', () => {
  test('a Hugging Face model creates no role and no association', () => {
    // GIVEN
    const { stack, cluster, chart } = deploy({ source: ModelSource.huggingFace('meta-llama/Llama-3.3-70B-Instruct') });
    cluster.addWorkload(chart());
    // THEN
    const t = Template.fromStack(stack).toJSON();
    expect(Object.values<any>(t.Resources).filter((r) => r.Type === 'AWS::EKS::PodIdentityAssociation' && r.Properties.Namespace === 'inference')).toEqual([]);
    expect(workloadObjects(t).filter((o) => o.kind === 'ServiceAccount').map((a) => a.metadata.annotations)).toEqual([undefined, undefined]);
  });

  test('a router with its tokenizer elsewhere gets no grant; a Region the source names is kept', () => {
    // GIVEN the tokenizer from a ConfigMap and the bucket in another Region
    const { stack, cluster, chart } = deploy({ source: ModelSource.s3(URI, { region: 'us-west-2' }), routerTokenizer: RouterTokenizer.fromConfigMap('tok') });
    cluster.addWorkload(chart());
    // THEN only the workers' account is bound
    const t = Template.fromStack(stack).toJSON();
    const bound = Object.values<any>(t.Resources).filter((r) => r.Type === 'AWS::EKS::PodIdentityAssociation' && r.Properties.Namespace === 'inference');
    expect(bound.map((r) => r.Properties.ServiceAccount)).toEqual(['llama']);
    // AND the workers keep the bucket's Region; the router reads nothing from AWS
    expect(envOf(workloadObjects(t), 'llama-decode').map((e) => e.AWS_REGION)).toEqual(['us-west-2']);
    expect(envOf(workloadObjects(t), 'llama-router').map((e) => e.AWS_REGION)).toEqual([undefined]);
  });

  test('one ServiceAccount cannot read two prefixes: the error names both charts', () => {
    // GIVEN two charts whose 'llama' accounts in 'inference' read different prefixes
    const first = deploy();
    first.cluster.addWorkload(first.chart());
    const other = deploy({ source: ModelSource.s3('s3://acme-models/other/') });
    // WHEN both go onto one cluster
    const second = other.chart('other');
    // THEN
    expect(() => first.cluster.addWorkload(second)).toThrow(/addWorkload\('other'\): ServiceAccount 'inference\/llama' reads 's3:\/\/acme-models\/other\/', but chart 'llama' already bound it to 's3:\/\/acme-models\/llama\/3.3-70b-fp8\/'.*one role/);
  });

  test('without the Pod Identity agent the workload is warned about', () => {
    // GIVEN
    const { stack, cluster, chart } = deploy({ podIdentityAgent: false });
    cluster.addWorkload(chart());
    // THEN
    Annotations.fromStack(stack).hasWarning('*', Match.stringLikeRegexp("ServiceAccount 'inference/llama', ServiceAccount 'inference/llama-router' read s3://acme-models/.* addons.podIdentityAgent is off"));
  });
});
