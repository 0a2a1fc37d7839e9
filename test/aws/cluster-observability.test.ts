import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { CfnGuardValidator } from '@cdklabs/cdk-validator-cfnguard';
import { App, Duration, Stack, Validations } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as cxapi from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';
import { parse } from 'yaml';
import { onlyResource } from './util';
import { ClusterObservability, InferenceCluster, InferenceClusterProps } from '../../src/aws';
import { toYaml } from '../../src/aws/private/observability';

// Full cluster syntheses (slow) shared by the assertions: one without observability, one with both destinations
// under cdk-nag's AwsSolutions rules and the AWS Control Tower proactive controls; the error cases only construct.
interface Synthesized {
  readonly stack: Stack;
  readonly template: Template;
  readonly cluster: InferenceCluster;
  /** `rule at construct path` of each unacknowledged finding, per plugin (with `validate`). */
  readonly findings: Record<string, string[]>;
}

function synth(props: InferenceClusterProps, validate = false): Synthesized {
  const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-observability-'));
  try {
    const app = new App({ outdir, context: { [cxapi.FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT]: false } });
    const stack = new Stack(app, 'Test', { env: { account: '111111111111', region: 'us-east-2' } });
    const cluster = new InferenceCluster(stack, 'Inference', { clusterName: 'obs', ...props });
    if (validate) {
      Validations.of(app).addPlugins(new AwsSolutionsChecks(app), new CfnGuardValidator({ maxBuffer: 64 * 1024 * 1024 }));
    }
    app.synth();
    const findings: Record<string, string[]> = {};
    const reportFile = path.join(outdir, cxapi.VALIDATION_REPORT_FILE);
    if (fs.existsSync(reportFile)) {
      for (const p of JSON.parse(fs.readFileSync(reportFile, 'utf8')).pluginReports) {
        findings[p.pluginName] = p.violations.flatMap((v: any) => v.violatingConstructs.map((c: any) => `${v.ruleName} at ${c.constructPath}`));
      }
    }
    return { stack, template: Template.fromStack(stack), cluster, findings };
  } finally {
    fs.rmSync(outdir, { recursive: true, force: true });
  }
}

/** The scrape configuration of the template's scraper, decoded. */
function scrapeConfig(template: Template): any {
  const blob = onlyResource(template, 'AWS::APS::Scraper').Properties.ScrapeConfiguration.ConfigurationBlob;
  return parse(Buffer.from(blob, 'base64').toString('utf8'));
}

const NEW_TYPES = ['AWS::APS::Workspace', 'AWS::APS::Scraper'];

describe('observability: default', () => {
  test('nothing new without the prop', () => {
    // GIVEN / WHEN
    const { template, cluster } = synth({});
    // THEN
    for (const type of NEW_TYPES) template.resourceCountIs(type, 0);
    expect(Object.values(template.findResources('AWS::EKS::Addon')).map((a: any) => a.Properties.AddonName))
      .not.toContain('amazon-cloudwatch-observability');
    expect(JSON.stringify(template.toJSON())).not.toContain('containerinsights');
    expect(cluster.prometheusScraper).toBeUndefined();
    expect(cluster.prometheusWorkspaceArn).toBeUndefined();
    expect(cluster.cloudWatchObservability).toBeUndefined();
  });
});

describe('observability: both destinations', () => {
  let result: Synthesized;
  beforeAll(() => {
    // GIVEN a cluster with AMP and Container Insights, checked by the AwsSolutions rules
    // WHEN it is synthesized
    result = synth({ observability: ClusterObservability.of({ managedPrometheus: {}, containerInsights: {} }) }, true);
  }, 600_000);

  test('an AMP workspace and a managed collector on the cluster, its subnets and the cluster security group', () => {
    const { template } = result;
    // THEN
    const workspace = Object.entries<any>(template.findResources('AWS::APS::Workspace'));
    expect(workspace).toHaveLength(1);
    expect(workspace[0][1].Properties.Alias).toBe('obs');
    expect(workspace[0][1].DeletionPolicy).toBe('Delete');
    template.hasResourceProperties('AWS::APS::Scraper', {
      Alias: 'obs',
      Source: {
        EksConfiguration: {
          ClusterArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('Cluster'), 'Arn'] },
          SubnetIds: Match.arrayWith([{ Ref: Match.stringLikeRegexp('privateSubnet1') }]),
          SecurityGroupIds: [{ 'Fn::GetAtt': [Match.anyValue(), 'ClusterSecurityGroupId'] }],
        },
      },
      Destination: { AmpConfiguration: { WorkspaceArn: { 'Fn::GetAtt': [workspace[0][0], 'Arn'] } } },
    });
    expect(onlyResource(template, 'AWS::APS::Scraper').Properties.Source.EksConfiguration.SubnetIds).toHaveLength(2);
    // AND AMP makes the collector's access entry itself (authentication mode API): none in the template for it
    template.hasResourceProperties('AWS::EKS::Cluster', { AccessConfig: Match.objectLike({ AuthenticationMode: 'API' }) });
    expect(result.cluster.prometheusScraper).toBeDefined();
    expect(result.cluster.prometheusWorkspaceArn).toBeDefined();
  });

  test('the scrape configuration decodes to YAML with the relabelings of the prometheus-operator objects', () => {
    // THEN
    const config = scrapeConfig(result.template);
    expect(config.global).toEqual({ scrape_interval: '30s', external_labels: { cluster: 'obs' } });
    const jobs = Object.fromEntries(config.scrape_configs.map((j: any) => [j.job_name, j]));
    expect(Object.keys(jobs)).toEqual(['disagg-workers', 'disagg-router', 'disagg-kvstore']);
    for (const job of Object.values<any>(jobs)) {
      expect(job.kubernetes_sd_configs).toEqual([{ role: 'pod' }]);
      expect(job.metrics_path).toBe('/metrics');
    }
    const workers = jobs['disagg-workers'].relabel_configs;
    expect(workers[0]).toEqual({
      source_labels: ['__meta_kubernetes_pod_label_app_kubernetes_io_name', '__meta_kubernetes_pod_label_app_kubernetes_io_component',
        '__meta_kubernetes_pod_container_port_name'],
      separator: ';',
      regex: 'disagg;(prefill|decode);http(-[0-9]+)?',
      action: 'keep',
    });
    expect(workers).toEqual(expect.arrayContaining([
      { source_labels: ['__meta_kubernetes_pod_label_app_kubernetes_io_instance'], target_label: 'deployment' },
      { source_labels: ['__meta_kubernetes_pod_label_app_kubernetes_io_component'], target_label: 'pool' },
      { source_labels: ['__meta_kubernetes_namespace'], target_label: 'namespace' },
    ]));
    // AND the keep regex (anchored, as Prometheus anchors it) takes every vLLM API port and nothing else
    const keep = new RegExp(`^(?:${workers[0].regex})$`);
    expect(['disagg;prefill;http', 'disagg;decode;http-3'].every((s) => keep.test(s))).toBe(true);
    expect(['disagg;router;http', 'disagg;decode;kv-events', 'other;decode;http'].some((s) => keep.test(s))).toBe(false);
    // AND the router keeps its own labels and gets the deployment, but no pool of the target's
    expect(jobs['disagg-router'].honor_labels).toBe(true);
    expect(jobs['disagg-router'].relabel_configs[0].regex).toBe('disagg;router;http');
    expect(jobs['disagg-router'].relabel_configs.map((r: any) => r.target_label)).toEqual([undefined, 'deployment', 'namespace', 'pod']);
    expect(jobs['disagg-kvstore'].relabel_configs[0].regex).toBe('disagg;kvstore;metrics');
  });

  test('the CloudWatch add-on with a Pod Identity role that has CloudWatchAgentServerPolicy only', () => {
    const { template } = result;
    // THEN
    template.hasResourceProperties('AWS::EKS::Addon', {
      AddonName: 'amazon-cloudwatch-observability',
      ResolveConflicts: 'OVERWRITE',
      PodIdentityAssociations: [{ ServiceAccount: 'cloudwatch-agent', RoleArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('CloudWatchAgentRole'), 'Arn'] } }],
    });
    const [, addon] = Object.entries<any>(template.findResources('AWS::EKS::Addon', { Properties: { AddonName: 'amazon-cloudwatch-observability' } }))[0];
    expect(addon.Properties.AddonVersion).toBeUndefined();
    const [, role] = Object.entries<any>(template.findResources('AWS::IAM::Role')).find(([id]) => /CloudWatchAgentRole/.test(id))!;
    expect(role.Properties.AssumeRolePolicyDocument.Statement).toEqual([
      expect.objectContaining({ Action: 'sts:AssumeRole', Principal: { Service: 'pods.eks.amazonaws.com' } }),
      expect.objectContaining({ Action: 'sts:TagSession', Principal: { Service: 'pods.eks.amazonaws.com' } }),
    ]);
    expect(role.Properties.ManagedPolicyArns).toEqual([
      { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':iam::aws:policy/CloudWatchAgentServerPolicy']] },
    ]);
    expect(role.Properties.Policies).toBeUndefined();
    // AND nothing grants the role more than that managed policy
    const inline = Object.values<any>(template.findResources('AWS::IAM::Policy'))
      .filter((p) => JSON.stringify(p.Properties.Roles ?? []).includes('CloudWatchAgentRole'));
    expect(inline).toEqual([]);
  });

  test('the Container Insights log groups exist first, encrypted, kept a year, deleted with the stack', () => {
    const { template } = result;
    // THEN
    const [addonId, addon] = Object.entries<any>(template.findResources('AWS::EKS::Addon', { Properties: { AddonName: 'amazon-cloudwatch-observability' } }))[0];
    for (const name of ['application', 'dataplane', 'host', 'performance']) {
      const groups = Object.entries<any>(template.findResources('AWS::Logs::LogGroup', {
        Properties: { LogGroupName: `/aws/containerinsights/obs/${name}`, RetentionInDays: 365, KmsKeyId: Match.anyValue() },
        DeletionPolicy: 'Delete',
      }));
      expect(groups).toHaveLength(1);
      expect(addon.DependsOn).toContain(groups[0][0]);
    }
    expect(addonId).toBeDefined();
  });

  test('no unacknowledged AwsSolutions finding, Control Tower control or CloudFormation schema error', () => {
    // THEN both plugins ran, with aws-cdk-lib's own check of the template against the CloudFormation resource
    // schemas, and reported nothing the library did not fix or acknowledge with a reason
    expect(Object.keys(result.findings).sort()).toEqual(['AwsSolutions', 'CloudFormation Validate', 'cdk-validator-cfnguard']);
    expect(result.findings).toEqual({ 'AwsSolutions': [], 'CloudFormation Validate': [], 'cdk-validator-cfnguard': [] });
  });
});

describe('observability: options', () => {
  test('an existing workspace and a longer interval', () => {
    // GIVEN
    const arn = 'arn:aws:aps:us-east-2:111111111111:workspace/ws-0123abcd-4567-89ef-0123-456789abcdef';
    // WHEN
    const { template, cluster } = synth({
      observability: ClusterObservability.managedPrometheus({ workspaceArn: arn, scrapeInterval: Duration.minutes(1) }),
    });
    // THEN
    template.resourceCountIs('AWS::APS::Workspace', 0);
    template.hasResourceProperties('AWS::APS::Scraper', { Destination: { AmpConfiguration: { WorkspaceArn: arn } } });
    expect(scrapeConfig(template).global.scrape_interval).toBe('60s');
    expect(cluster.prometheusWorkspaceArn).toBe(arn);
    // AND Container Insights stays off
    expect(JSON.stringify(template.toJSON())).not.toContain('amazon-cloudwatch-observability');
  });

  test('errors name the field, the value and the fix', () => {
    // GIVEN
    const cluster = (observability: ClusterObservability) => () => new InferenceCluster(new Stack(new App(), 'Test'), 'Inference', { observability });
    // WHEN / THEN
    expect(cluster(ClusterObservability.managedPrometheus({ workspaceArn: 'ws-0123' })))
      .toThrow(/'observability.managedPrometheus.workspaceArn' \(ws-0123\) is not an Amazon Managed Service for Prometheus workspace ARN; write it like 'arn:aws:aps:/);
    expect(cluster(ClusterObservability.managedPrometheus({ scrapeInterval: Duration.seconds(15) })))
      .toThrow(/'observability.managedPrometheus.scrapeInterval' \(15 s\) must be a whole number of seconds, at least 30.*Duration.seconds\(30\)/);
    expect(cluster(ClusterObservability.containerInsights({ logRetention: 31 as logs.RetentionDays })))
      .toThrow(/'observability.containerInsights.logRetention' \(31\) is not a retention CloudWatch Logs offers; use a logs.RetentionDays value/);
  });

  test('a warning when the Pod Identity agent is off', () => {
    // GIVEN / WHEN
    const stack = new Stack(new App(), 'Test');
    new InferenceCluster(stack, 'Inference', {
      addons: { podIdentityAgent: { enabled: false } },
      observability: ClusterObservability.containerInsights({ logRetention: logs.RetentionDays.ONE_WEEK, addonVersion: 'v4.3.0-eksbuild.1' }),
    });
    // THEN
    Annotations.fromStack(stack).hasWarning('*', Match.stringLikeRegexp('disagg:containerInsightsPodIdentity'));
    const template = Template.fromStack(stack);
    template.hasResourceProperties('AWS::EKS::Addon', { AddonName: 'amazon-cloudwatch-observability', AddonVersion: 'v4.3.0-eksbuild.1' });
    template.hasResourceProperties('AWS::Logs::LogGroup', { LogGroupName: Match.stringLikeRegexp('/application$'), RetentionInDays: 7 });
  });
});

describe('toYaml', () => {
  test('round-trips plain data through a YAML parser', () => {
    // GIVEN
    const data = {
      a: 'x: y', b: 30, c: true, d: [], e: {}, f: [{ g: ['1', 2], h: { i: '#j' } }, 'k', [3, [4]]], l: '(-[0-9]+)?', m: "it's \"q\"\n",
    };
    // WHEN / THEN
    expect(parse(toYaml(data))).toEqual(data);
  });
});
