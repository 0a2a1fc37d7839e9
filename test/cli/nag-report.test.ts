import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { readNagReport } from '../../src/cli/nag-report';

describe('readNagReport', () => {
  let dir: string;
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-nag-')); });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const write = (report: unknown) => fs.writeFileSync(path.join(dir, 'validation-report.json'), JSON.stringify(report));

  test('lists each unacknowledged finding per resource and counts the acknowledged ones', () => {
    // GIVEN aws-cdk-lib's validation report with one rule on two resources and one acknowledged finding
    write({
      pluginReports: [
        { pluginName: 'CloudFormation Validate', violations: [{ ruleName: 'W1', violatingConstructs: [{ constructPath: 'S/X' }] }] },
        {
          pluginName: 'AwsSolutions',
          violations: [{
            ruleName: 'AwsSolutions-S1',
            description: 'The S3 Bucket has server access logs disabled.',
            violatingConstructs: [{ constructPath: 'S/A/Resource' }, { constructPath: 'S/B/Resource' }],
          }],
          suppressedViolations: [{ ruleName: 'AwsSolutions-L1', reason: 'why', violatingConstructs: [{ constructPath: 'S/F/Resource' }] }],
        },
      ],
    });
    // WHEN it is read
    const nag = readNagReport(dir);
    // THEN the AwsSolutions findings come one per resource, other plugins are ignored
    expect(nag.findings).toEqual([
      { rule: 'AwsSolutions-S1', path: 'S/A/Resource', description: 'The S3 Bucket has server access logs disabled.' },
      { rule: 'AwsSolutions-S1', path: 'S/B/Resource', description: 'The S3 Bucket has server access logs disabled.' },
    ]);
    expect(nag.acknowledged).toBe(1);
  });

  test('a report without the pack says the checks did not run', () => {
    write({ pluginReports: [] });
    expect(() => readNagReport(dir)).toThrow(/no AwsSolutions report: the checks did not run/);
  });
});
