import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { CfnGuardValidator } from '@cdklabs/cdk-validator-cfnguard';
import { App, Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as cxapi from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';
// cdk-nag's own flattening, which names the findings that the library acknowledges.
import { flattenCfnReference as nagFlatten } from 'cdk-nag/lib/utils/flatten-cfn-reference';
import { IConstruct } from 'constructs';
import { InferenceStack } from '../../examples/cdk-app/inference-stack';
import { flattenCfnReference } from '../../src/aws/private/compliance';

// The example app under cdk-nag's AwsSolutions rules and the AWS Control Tower proactive controls
// (@cdklabs/cdk-validator-cfnguard, which runs its bundled cfn-guard binary), as a user runs them: the
// plugins on the app, no acknowledgement in the user's code. Two full syntheses: the example as it is,
// and the example with resources a user might add.
const AWS_SOLUTIONS = 'AwsSolutions';
const CONTROL_TOWER = 'cdk-validator-cfnguard';
const ACKNOWLEDGED_RULES = Validations.ACKNOWLEDGED_RULES_METADATA_KEY;

interface Synthesized {
  readonly stack: InferenceStack;
  readonly reports: Record<string, any>;
}

/** Synthesizes the example (plus `extend`) with both rule packs and returns the validation report per plugin. */
function synthesize(extend?: (stack: InferenceStack) => void): Synthesized {
  const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-compliance-'));
  try {
    // Report without failing, so that a test can read the findings.
    const app = new App({ outdir, context: { [cxapi.FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT]: false } });
    const stack = new InferenceStack(app, 'Example');
    extend?.(stack);
    Validations.of(app).addPlugins(
      new AwsSolutionsChecks(app),
      new CfnGuardValidator({ maxBuffer: 64 * 1024 * 1024 }),
    );
    app.synth();
    const report = JSON.parse(fs.readFileSync(path.join(outdir, cxapi.VALIDATION_REPORT_FILE), 'utf8'));
    const reports = Object.fromEntries(report.pluginReports.map((p: any) => [p.pluginName, p]));
    return { stack, reports };
  } finally {
    fs.rmSync(outdir, { recursive: true, force: true });
  }
}

/** `rule at path` for each finding (per resource), for readable failures. */
function findings(report: any): string[] {
  return report.violations.flatMap((v: any) => v.violatingConstructs.map((c: any) => `${v.ruleName} at ${c.constructPath}`));
}

let example: Synthesized;
let extended: Synthesized;

beforeAll(() => {
  // GIVEN the example app, WHEN it is synthesized with both rule packs
  example = synthesize();
  // AND the same app with what a user might add: a bucket in their stack, an admin policy on a node role
  extended = synthesize((stack) => {
    new s3.Bucket(stack, 'UserBucket');
    stack.inference.acceleratedNodeGroups[0].role.addManagedPolicy(iam.ManagedPolicy.fromAwsManagedPolicyName('AdministratorAccess'));
  });
}, 600_000);

describe('cdk-nag AwsSolutions', () => {
  test('the example has no finding and acknowledges none in the user\'s code', () => {
    // THEN every finding was acknowledged by the library, on its resource
    expect(findings(example.reports[AWS_SOLUTIONS])).toEqual([]);
    const acknowledged = example.reports[AWS_SOLUTIONS].suppressedViolations;
    expect(acknowledged.length).toBeGreaterThan(0);
    for (const a of acknowledged) {
      expect(a.reason.length).toBeGreaterThan(20);
      // Under the InferenceCluster construct, never on the stack or the app
      expect(a.acknowledgedAt).toMatch(/^Example\/Inference\/./);
    }
  });

  test('only the library\'s constructs acknowledge rules of the two packs', () => {
    // (aws-cdk-lib acknowledges a CloudFormation-Validate rule on the stack itself, which is not ours)
    const ids = (c: IConstruct) => c.node.metadata
      .filter((m) => m.type === ACKNOWLEDGED_RULES)
      .flatMap((m) => Object.keys(m.data))
      .filter((id) => id.startsWith(`${AWS_SOLUTIONS}::`) || id.startsWith(`${CONTROL_TOWER}::`));
    const carriers = example.stack.node.findAll().filter((c) => ids(c).length > 0).map((c) => c.node.path);
    expect(carriers.length).toBeGreaterThan(0);
    expect(carriers.filter((p) => !p.startsWith('Example/Inference/'))).toEqual([]);
  });

  test('a finding the user adds is reported, even on a resource the library created', () => {
    const reported = findings(extended.reports[AWS_SOLUTIONS]);
    // THEN the bucket's findings (server access logs, SSL) are reported
    expect(reported).toEqual(expect.arrayContaining([
      expect.stringMatching(/^AwsSolutions-S1 at Example\/UserBucket\//),
      expect.stringMatching(/^AwsSolutions-S10 at Example\/UserBucket\//),
    ]));
    // AND the admin policy on the node role: the library acknowledges the EKS node policies by name, not IAM4
    expect(reported).toContainEqual(expect.stringMatching(
      /^AwsSolutions-IAM4\[Policy::arn:<AWS::Partition>:iam::aws:policy\/AdministratorAccess\] at Example\/Inference\/H200\/Nodegroup\/NodeGroupRole\//));
    expect(reported.filter((f) => !/UserBucket|AdministratorAccess/.test(f))).toEqual([]);
  });
});

describe('AWS Control Tower proactive controls', () => {
  test('the example has no finding that is not fixed or acknowledged with a reason', () => {
    expect(findings(example.reports[CONTROL_TOWER])).toEqual([]);
    for (const a of example.reports[CONTROL_TOWER].suppressedViolations) {
      expect(a.reason.length).toBeGreaterThan(20);
      expect(a.acknowledgedAt).toMatch(/^Example\/Inference\/./);
    }
  });

  test('the example\'s README lists each acknowledged control with its reason', () => {
    // GIVEN the table in examples/cdk-app/README.md: | control | rule | resources | handling |
    const readme = fs.readFileSync(path.join(__dirname, '../../examples/cdk-app/README.md'), 'utf8');
    const reasoned = [...readme.matchAll(/^\| CT\.[A-Z0-9.]+ \| `(\w+)` \|[^|]+\| reasoned:/gm)].map((m) => m[1]).sort();
    // THEN it names exactly the controls the library acknowledges
    const acknowledged = [...new Set<string>(example.reports[CONTROL_TOWER].suppressedViolations.map((a: any) => a.ruleName))].sort();
    expect(reasoned).toEqual(acknowledged);
  });
});

describe('finding ids', () => {
  test('the library flattens CloudFormation values as cdk-nag names findings', () => {
    const stack = new Stack();
    const values = [
      'arn:aws:s3:::bucket/*',
      { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':iam::aws:policy/AmazonEKSClusterPolicy']] },
      { 'Fn::Join': ['', [{ 'Fn::GetAtt': ['Handler886CB40B', 'Arn'] }, ':*']] },
      { 'Fn::Sub': 'arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:*' },
      { 'Fn::If': ['HasEcrPublic', { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':iam::aws:policy/X']] }, { Ref: 'AWS::NoValue' }] },
      { 'Fn::ImportValue': 'Exported' },
    ];
    for (const value of values) {
      expect(flattenCfnReference(stack.resolve(value))).toBe(nagFlatten(stack.resolve(value)));
    }
  });
});
