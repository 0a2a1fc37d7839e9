// Peer for bench/cdk-synth.sh: the smallest aws-eks-v2 stack a team would write by hand
// (VPC, cluster with a kubectl layer, one managed node group), no disagg code. Its synth time is
// the floor that aws-cdk-lib itself sets; the example stack's time is read as a ratio to it.
import { KubectlV34Layer } from '@aws-cdk/lambda-layer-kubectl-v34';
import { App, Stack } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as eks from 'aws-cdk-lib/aws-eks-v2';

const app = new App();
const stack = new Stack(app, 'PlainEks');
const vpc = new ec2.Vpc(stack, 'Vpc', { maxAzs: 2 });
const cluster = new eks.Cluster(stack, 'Cluster', {
  vpc,
  version: eks.KubernetesVersion.V1_34,
  defaultCapacityType: eks.DefaultCapacityType.NODEGROUP,
  defaultCapacity: 0,
  kubectlProviderOptions: { kubectlLayer: new KubectlV34Layer(stack, 'Kubectl') },
});
cluster.addNodegroupCapacity('System', {
  instanceTypes: [new ec2.InstanceType('m7i.xlarge')],
  minSize: 2,
});
app.synth();
