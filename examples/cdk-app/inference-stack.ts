import { Stack, StackProps, Validations } from 'aws-cdk-lib';
import * as cdk8s from 'cdk8s';
import { Construct } from 'constructs';
import {
  AcceleratedInstanceType, DisaggregatedInference, EngineImage, GatewayExposure, InferenceCluster, ModelArchitecture,
  ModelSource, Precision,
} from '../../src';

/**
 * One EKS cluster with a P5en (H200) node group and a Trn2 node group, and Llama-3.3-70B served
 * disaggregated on the P5en nodes (two prefill and two decode replicas of TP4, one node per pool)
 * behind the KV-aware router. The Trn2 group shows the Neuron layout (16 EFA interfaces, Neuron AMI
 * and device plugin); it runs no workload here. Environment-agnostic: `cdk synth` needs no AWS account.
 */
export class InferenceStack extends Stack {
  public readonly inference: InferenceCluster;
  public readonly workload: DisaggregatedInference;

  constructor(scope: Construct, id: string, props: StackProps = {}) {
    super(scope, id, props);
    this.inference = new InferenceCluster(this, 'Inference');
    this.inference.addAcceleratedNodeGroup('H200', {
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      desiredSize: 2,
      poolRole: 'llama-pd',
    });
    this.inference.addAcceleratedNodeGroup('Trainium2', {
      instanceType: AcceleratedInstanceType.TRN2_48XLARGE,
      desiredSize: 1,
      poolRole: 'neuron',
    });

    // The engine image is built from images/engine at deploy time (a Docker asset).
    const image = EngineImage.fromAsset().bind(this);
    const chart = new cdk8s.Chart(new cdk8s.App(), 'llama-pd', { namespace: 'inference' });
    const h200 = { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4, nodePoolRole: 'llama-pd' };
    this.workload = new DisaggregatedInference(chart, 'Llama', {
      model: ModelArchitecture.LLAMA_3_3_70B,
      modelSource: ModelSource.huggingFace('meta-llama/Llama-3.3-70B-Instruct', { tokenSecret: { name: 'hf-token' } }),
      image: image.imageUri,
      weightPrecision: Precision.FP8,
      kvCachePrecision: Precision.FP8,
      maxContext: 8192,
      prefill: h200,
      decode: h200,
      gateway: GatewayExposure.gateway(),
    });
    this.inference.addWorkload(chart);
    suppressReviewedFindings(this);
  }
}

const MANAGED = 'Policy::arn:<AWS::Partition>:iam::aws:policy/';
const ACCOUNT_ARN = (service: string, resource: string) =>
  `Resource::arn:<AWS::Partition>:${service}:<AWS::Region>:<AWS::AccountId>:${resource}`;

/**
 * cdk-nag AwsSolutions findings that were reviewed and accepted (cdk-nag v3 acknowledges each
 * finding through CDK's `Validations` API; v2's NagSuppressions is gone). Each group has its reason.
 */
const REVIEWED: Array<{ reason: string; ids: string[] }> = [
  {
    reason: 'EKS requires these AWS-managed policies: AmazonEKSClusterPolicy on the cluster role; AmazonEKSWorkerNodePolicy, '
      + 'AmazonEKS_CNI_Policy and AmazonEC2ContainerRegistryReadOnly on node roles (EKS node IAM role docs).',
    ids: ['AmazonEKSClusterPolicy', 'AmazonEKSWorkerNodePolicy', 'AmazonEKS_CNI_Policy', 'AmazonEC2ContainerRegistryReadOnly']
      .map((p) => `AwsSolutions-IAM4[${MANAGED}${p}]`),
  },
  {
    reason: 'Basic and VPC execution roles of the kubectl provider Lambdas that aws-cdk-lib creates; they grant logging and ENI management only.',
    ids: ['service-role/AWSLambdaBasicExecutionRole', 'service-role/AWSLambdaVPCAccessExecutionRole']
      .map((p) => `AwsSolutions-IAM4[${MANAGED}${p}]`),
  },
  {
    reason: 'aws-cdk-lib gives the kubectl handler read-only ECR Public access to pull OCI Helm charts from public.ecr.aws (Neuron chart).',
    ids: ['AwsSolutions-IAM4[Policy::{"Fn::If":["InferenceClusterKubectlProviderHandlerHasEcrPublicEE9FF9E7",{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}]'],
  },
  {
    reason: 'Load Balancer Controller discovery calls (ec2:Describe*, elasticloadbalancing:Describe*, acm:List/Describe) have no resource-level permissions; Resource "*" is the only value IAM accepts for them.',
    ids: ['AwsSolutions-IAM5[Resource::*]'],
  },
  {
    reason: 'The custom-resource provider framework (aws-cdk-lib) invokes any version of its own kubectl handler function.',
    ids: ['AwsSolutions-IAM5[Resource::<InferenceClusterKubectlProviderHandlerC0AB386D.Arn>:*]'],
  },
  {
    reason: 'Load Balancer Controller: the names of the load balancers, target groups, listeners and security groups it creates are not known in advance; '
      + 'ARNs are limited to this account and region and mutations require the controller\'s elbv2.k8s.aws/cluster tag.',
    ids: [
      ACCOUNT_ARN('ec2', 'security-group/*'), ACCOUNT_ARN('ec2', 'vpc/*'),
      ...['loadbalancer/*', 'loadbalancer/app/*/*', 'loadbalancer/net/*/*', 'targetgroup/*/*',
        'listener/app/*/*/*', 'listener/net/*/*/*', 'listener-rule/app/*/*/*', 'listener-rule/net/*/*/*']
        .map((r) => ACCOUNT_ARN('elasticloadbalancing', r)),
      'Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:role/aws-service-role/elasticloadbalancing.amazonaws.com/*',
    ].map((r) => `AwsSolutions-IAM5[${r}]`),
  },
  {
    reason: 'The Lambda runtimes belong to aws-cdk-lib\'s kubectl provider and custom-resource framework and move with aws-cdk-lib upgrades.',
    ids: ['AwsSolutions-L1'],
  },
];

export function suppressReviewedFindings(stack: Stack): void {
  for (const group of REVIEWED) {
    for (const id of group.ids) {
      Validations.of(stack).acknowledge({ id: `AwsSolutions::${id}`, reason: group.reason });
    }
  }
  Validations.of(stack).acknowledge({
    id: 'CloudFormation-Validate::W9009',
    reason: 'aws-cdk-lib\'s CfnCluster writes EncryptionConfig.Resources: ["secrets"], which EKS still requires for secrets envelope encryption.',
  });
}
