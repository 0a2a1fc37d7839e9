import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import { AcceleratedNodeGroup, AcceleratedNodeGroupOptions } from '../../src/aws';

/** Availability Zones of the fixture VPC when the stack has a concrete environment. */
export const FIXTURE_AZS = ['us-east-2a', 'us-east-2b'];

export interface Fixture {
  readonly stack: Stack;
  readonly vpc: ec2.Vpc;
  readonly cluster: eks.ICluster;
}

/**
 * A stack with a VPC and an imported cluster: node groups synthesize in milliseconds, without the
 * kubectl provider of a full cluster. `knownAzs` gives the stack an environment and the VPC
 * concrete zones (no lookup: the zones are passed in).
 */
export function fixture(knownAzs = false): Fixture {
  const app = new App();
  const stack = knownAzs
    ? new Stack(app, 'Test', { env: { account: '111111111111', region: 'us-east-2' } })
    : new Stack(app, 'Test');
  const vpc = knownAzs
    ? new ec2.Vpc(stack, 'Vpc', { availabilityZones: FIXTURE_AZS })
    : new ec2.Vpc(stack, 'Vpc', { maxAzs: 2 });
  const cluster = eks.Cluster.fromClusterAttributes(stack, 'Cluster', {
    clusterName: 'test',
    vpc,
    clusterSecurityGroupId: 'sg-0cluster0000000000',
  });
  return { stack, vpc, cluster };
}

/** Adds one node group to a fresh fixture and returns the group and the synthesized template. */
export function synthGroup(options: AcceleratedNodeGroupOptions, knownAzs = false): {
  group: AcceleratedNodeGroup; template: Template; fx: Fixture;
} {
  const fx = fixture(knownAzs);
  const group = new AcceleratedNodeGroup(fx.stack, 'Gpu', { cluster: fx.cluster, ...options });
  return { group, template: Template.fromStack(fx.stack), fx };
}

/** The single resource of a type in a template (fails when there is not exactly one). */
export function onlyResource(template: Template, type: string): any {
  const all = Object.values(template.findResources(type));
  if (all.length !== 1) {
    throw new Error(`expected one ${type}, found ${all.length}`);
  }
  return all[0];
}
