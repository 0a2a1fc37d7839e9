import * as fs from 'fs';
import * as path from 'path';
import { App, Validations } from 'aws-cdk-lib';
import * as cxapi from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';

/** The rule pack `disagg synth` runs. */
export const NAG_PACK = 'AwsSolutions';

/**
 * App context for a synthesis that runs the checks: aws-cdk-lib writes its validation report but neither
 * prints it nor fails, and `disagg synth` prints its own summary.
 */
export const NAG_APP_CONTEXT = { [cxapi.FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT]: false };

/** One finding that nothing acknowledged. */
export interface NagFinding {
  /** e.g. 'AwsSolutions-IAM5[Resource::*]' */
  readonly rule: string;
  /** The construct path of the resource. */
  readonly path: string;
  /** What the rule asks for, in cdk-nag's words. */
  readonly description: string;
}

/** The result of the AwsSolutions checks on a synthesized app. */
export interface NagSummary {
  readonly pack: string;
  /** The findings that nothing acknowledged. */
  readonly findings: NagFinding[];
  /** How many findings (rule and resource) the constructs acknowledged, each with its reason in `reportFile`. */
  readonly acknowledged: number;
  /** aws-cdk-lib's validation report: every finding, acknowledged ones with their reason. */
  readonly reportFile: string;
}

/** Runs cdk-nag's AwsSolutions pack on every stack of `app` when it is synthesized (with {@link NAG_APP_CONTEXT}). */
export function addNagChecks(app: App): void {
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
}

/** Reads the AwsSolutions part of the validation report that synthesis wrote into `assemblyDir`. */
export function readNagReport(assemblyDir: string): NagSummary {
  const reportFile = path.join(assemblyDir, cxapi.VALIDATION_REPORT_FILE);
  const report = JSON.parse(fs.readFileSync(reportFile, 'utf8'));
  const plugin = (report.pluginReports ?? []).find((p: any) => p.pluginName === NAG_PACK);
  if (!plugin) {
    throw new Error(`${reportFile} has no ${NAG_PACK} report: the checks did not run`);
  }
  const perResource = (violations: any[]) => violations.flatMap((v: any) =>
    (v.violatingConstructs ?? []).map((c: any) => ({ rule: v.ruleName, path: c.constructPath ?? '', description: v.description ?? '' })));
  return {
    pack: NAG_PACK,
    findings: perResource(plugin.violations ?? []),
    acknowledged: perResource(plugin.suppressedViolations ?? []).length,
    reportFile,
  };
}
