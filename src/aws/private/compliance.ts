import { Aws, Stack, Validations } from 'aws-cdk-lib';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct, IConstruct } from 'constructs';

/**
 * Reviewed findings of the rule packs that users run on their apps, acknowledged on the resource each
 * one concerns, with its reason, so that a user's stack starts with no findings and a new one is not
 * hidden behind a stack-wide acknowledgement.
 *
 * Acknowledgements go through aws-cdk-lib's `Validations.of(construct).acknowledge()`: they cover the
 * construct and its children, and need no dependency on the packs. An id is `<plugin name>::<rule>`,
 * the plugin name being the one the pack reports under.
 *
 * @see https://github.com/cdklabs/cdk-nag#acknowledging-a-rule
 */

/** cdk-nag's AwsSolutions pack (`new AwsSolutionsChecks(app)`). */
const AWS_SOLUTIONS = 'AwsSolutions';
/** The AWS Control Tower proactive controls of `@cdklabs/cdk-validator-cfnguard` (`new CfnGuardValidator()`). */
const CONTROL_TOWER = 'cdk-validator-cfnguard';

/**
 * Acknowledge a cdk-nag AwsSolutions finding on `scope` and its children.
 *
 * @param rule the rule without its pack prefix, e.g. 'IAM4'
 * @param finding what cdk-nag puts between brackets for rules with several findings per resource
 *   (e.g. 'Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy'); none for the others
 */
export function acknowledgeAwsSolutions(scope: IConstruct, rule: string, reason: string, finding?: string): void {
  const id = `${AWS_SOLUTIONS}-${rule}${finding === undefined ? '' : `[${finding}]`}`;
  Validations.of(scope).acknowledge({ id: `${AWS_SOLUTIONS}::${id}`, reason });
}

/**
 * Acknowledge an AWS Control Tower proactive control on `scope` and its children.
 *
 * @param rule the cfn-guard rule name, e.g. 'ec2_launch_template_token_hop_limit_check' (CT.EC2.PR.2)
 */
export function acknowledgeControlTower(scope: IConstruct, rule: string, reason: string): void {
  Validations.of(scope).acknowledge({ id: `${CONTROL_TOWER}::${rule}`, reason });
}

/**
 * Acknowledge AwsSolutions-IAM4 (AWS managed policy) on `role` for each AWS managed policy in `reasons`
 * that the role has now. Policies not in `reasons`, or attached later, stay findings.
 *
 * @param reasons AWS managed policy name (with its path, e.g. 'service-role/AWSLambdaBasicExecutionRole') -> reason
 */
export function acknowledgeManagedPolicies(role: iam.IRole, reasons: Record<string, string>): void {
  const cfnRole = role.node.defaultChild;
  if (!(cfnRole instanceof iam.CfnRole)) {
    return; // an imported role: not ours to acknowledge
  }
  const stack = Stack.of(role);
  const attached: unknown[] = stack.resolve(cfnRole.managedPolicyArns) ?? [];
  for (const arn of attached.map((a) => flattenCfnReference(stack.resolve(a)))) {
    for (const [name, reason] of Object.entries(reasons)) {
      if (new RegExp(`:iam::aws:policy/${escapeRegExp(name)}(?![\\w+=,.@/-])`).test(arn)) {
        acknowledgeAwsSolutions(role, 'IAM4', reason, `Policy::${arn}`);
      }
    }
  }
}

/**
 * Acknowledge AwsSolutions-IAM5 (wildcard permissions) on `policy` for each wildcard resource of its
 * Allow statements that `reasonFor` explains; the resources it returns undefined for stay findings.
 *
 * @param reasonFor receives the resource as cdk-nag names it (e.g. 'arn:<AWS::Partition>:ec2:<AWS::Region>:...:vpc/*')
 */
export function acknowledgeWildcardResources(policy: iam.Policy, reasonFor: (resource: string) => string | undefined): void {
  // toJSON renders the statements without freezing them (resolving the document itself would).
  const document = Stack.of(policy).resolve(policy.document.toJSON());
  const resources = new Set<string>();
  for (const statement of document?.Statement ?? []) {
    if (statement.Effect !== 'Allow') continue;
    const listed = Array.isArray(statement.Resource) ? statement.Resource : [statement.Resource];
    listed.map(flattenCfnReference).filter((r: string) => r.includes('*')).forEach((r: string) => resources.add(r));
  }
  for (const resource of resources) {
    const reason = reasonFor(resource);
    if (reason) {
      acknowledgeAwsSolutions(policy, 'IAM5', reason, `Resource::${resource}`);
    }
  }
}

/**
 * The reviewed findings of the kubectl provider that aws-cdk-lib's EKS cluster creates (its handler
 * Lambda and the custom-resource framework's onEvent Lambda, their roles and policies). The provider's
 * construct ids are aws-cdk-lib's, so its functions are found by type under it, not by path.
 */
export function acknowledgeKubectlProvider(provider: IConstruct): void {
  const functions = provider.node.findAll().filter((c): c is lambda.Function => c instanceof lambda.Function);
  for (const fn of functions) {
    acknowledgeAwsSolutions(fn, 'L1',
      'The runtime of aws-cdk-lib\'s kubectl provider and custom-resource framework Lambdas is chosen by aws-cdk-lib '
      + 'and moves with its upgrades.');
    if (fn.role) {
      acknowledgeManagedPolicies(fn.role, {
        'service-role/AWSLambdaBasicExecutionRole': 'aws-cdk-lib\'s kubectl provider Lambda writes its logs with the basic execution role (logs only).',
        'service-role/AWSLambdaVPCAccessExecutionRole': 'aws-cdk-lib\'s kubectl provider Lambda runs in the VPC to reach the private API endpoint; '
          + 'this role only manages its network interfaces.',
        'AmazonEC2ContainerRegistryReadOnly': 'aws-cdk-lib gives the kubectl handler read-only ECR access to pull OCI Helm charts.',
        'AmazonElasticContainerRegistryPublicReadOnly': 'aws-cdk-lib gives the kubectl handler read-only ECR Public access '
          + '(in the aws partition) to pull OCI Helm charts from public.ecr.aws, e.g. the Neuron chart.',
      });
    }
  }
  const stack = Stack.of(provider);
  const invokable = new Set(functions.map((fn) => `${flattenCfnReference(stack.resolve(fn.functionArn))}:*`));
  for (const policy of provider.node.findAll().filter((c): c is iam.Policy => c instanceof iam.Policy)) {
    acknowledgeWildcardResources(policy, (resource) => invokable.has(resource)
      ? 'The custom-resource framework (aws-cdk-lib) may invoke any version of the kubectl handler function it fronts.'
      : undefined);
  }
}

/**
 * The reviewed findings of the EKS cluster construct (aws-cdk-lib): the cluster role's managed policy, the
 * kubectl provider, and the Control Tower grant control on a secrets key that the library created.
 */
export function acknowledgeClusterFindings(cluster: eks.Cluster, createdSecretsKey?: IConstruct): void {
  acknowledgeManagedPolicies(cluster.role, {
    AmazonEKSClusterPolicy: 'EKS requires the AWS managed AmazonEKSClusterPolicy on the cluster role, which AWS updates as EKS needs '
      + '(https://docs.aws.amazon.com/eks/latest/userguide/cluster-iam-role.html).',
  });
  const provider = cluster.node.findAll().find((c) => c instanceof eks.KubectlProvider);
  if (provider) {
    acknowledgeKubectlProvider(provider);
  }
  if (createdSecretsKey) {
    acknowledgeControlTower(createdSecretsKey, 'kms_create_grant_aws_service_check',
      'EKS creates a grant on the secrets key when it enables envelope encryption, and AWS does not document that the call '
      + 'carries kms:GrantIsForAWSResource; a Deny that caught it would fail cluster creation. Pass `secretsEncryptionKey` '
      + 'to use a key with your own grant policy.');
  }
}

/**
 * AwsSolutions-IAM4 on a node role that the library created: the three AWS managed policies EKS requires on node roles.
 *
 * @see https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html
 */
export function acknowledgeNodeRole(role: iam.IRole): void {
  const required = 'EKS requires this AWS managed policy on node roles (https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html)';
  acknowledgeManagedPolicies(role, {
    AmazonEKSWorkerNodePolicy: `${required}: the kubelet describes its instance and joins the cluster with it.`,
    AmazonEKS_CNI_Policy: `${required}: the VPC CNI manages the node's network interfaces and pod IPs with it.`,
    AmazonEC2ContainerRegistryReadOnly: `${required}: the kubelet pulls images from ECR (the engine image, EKS add-ons) with it.`,
  });
}

/**
 * The Control Tower controls that an accelerated node group's launch template keeps failing, with their reasons.
 *
 * @param multipleInterfaces whether the template lists network interfaces (EFA types)
 */
export function acknowledgeLaunchTemplateControls(launchTemplate: IConstruct, multipleInterfaces: boolean): void {
  acknowledgeControlTower(launchTemplate, 'ec2_launch_template_nitro_instance_type_check',
    'Every accelerated instance type is built on the AWS Nitro System (https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-nitro-instances.html); '
    + 'the control\'s list of Nitro types stops before p5en, p6 and trn2.');
  if (multipleInterfaces) {
    acknowledgeControlTower(launchTemplate, 'ec2_launch_template_public_ip_disabled_check',
      'The nodes launch in private subnets; EC2 rejects AssociatePublicIpAddress on a launch with several network '
      + 'interfaces, which EFA instances need, so the interfaces cannot carry it.');
  }
}

/**
 * A CloudWatch log group encrypted at rest with a KMS key of its own (yearly rotation; CloudWatch Logs of this
 * account and Region may use it for log groups only; grants only for AWS services), for Control Tower CT.CLOUDWATCH.PR.3.
 *
 * @see https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
 */
export function encryptedLogGroup(scope: Construct, id: string, props: Omit<logs.LogGroupProps, 'encryptionKey'> = {}): logs.LogGroup {
  return new logs.LogGroup(scope, id, { ...props, encryptionKey: logGroupKey(scope, `${id}Key`) });
}

/** A KMS key (rotated yearly) that CloudWatch Logs may use for the log groups of this account and Region. */
export function logGroupKey(scope: Construct, id: string): kms.Key {
  const key = new kms.Key(scope, id, {
    description: 'Encryption at rest of CloudWatch log groups',
    enableKeyRotation: true,
  });
  key.addToResourcePolicy(new iam.PolicyStatement({
    principals: [new iam.ServicePrincipal(`logs.${Aws.REGION}.amazonaws.com`)],
    actions: ['kms:Encrypt*', 'kms:Decrypt*', 'kms:ReEncrypt*', 'kms:GenerateDataKey*', 'kms:Describe*'],
    resources: ['*'],
    conditions: { ArnLike: { 'kms:EncryptionContext:aws:logs:arn': `arn:${Aws.PARTITION}:logs:${Aws.REGION}:${Aws.ACCOUNT_ID}:log-group:*` } },
  }));
  denyGrantsExceptForAwsServices(key);
  return key;
}

/**
 * The key policy statement of Control Tower CT.KMS.PR.3: only AWS services (or calls they make for a principal)
 * may create grants on the key.
 *
 * @see https://docs.aws.amazon.com/controltower/latest/controlreference/kms-rules.html
 */
export function denyGrantsExceptForAwsServices(key: kms.Key): void {
  key.addToResourcePolicy(new iam.PolicyStatement({
    effect: iam.Effect.DENY,
    principals: [new iam.AnyPrincipal()],
    actions: ['kms:CreateGrant'],
    resources: ['*'],
    conditions: { BoolIfExists: { 'kms:GrantIsForAWSResource': 'false', 'aws:PrincipalIsAWSService': 'false' } },
  }));
}

/**
 * A resolved CloudFormation value as the flat string cdk-nag names findings with: Fn::Join joined,
 * Fn::Sub's `${X}` as `<X>`, Ref as `<X>`, Fn::GetAtt as `<X.Attr>`, anything else as JSON.
 * The same rules as cdk-nag's `flattenCfnReference` (src/utils/flatten-cfn-reference.ts, Apache-2.0),
 * so that acknowledgements match its finding ids; test/aws/compliance.test.ts fails if they drift.
 */
export function flattenCfnReference(reference: unknown): string {
  const visit = (node: any): string => {
    if (node === undefined) return '';
    if (typeof node === 'string') return node.replace(/\${/g, '<').replace(/}/g, '>');
    if (node['Fn::Join']) {
      const [delimiter, items] = node['Fn::Join'];
      return items.map(visit).join(delimiter);
    }
    if (node['Fn::Sub']) return visit(node['Fn::Sub']);
    if (node['Fn::GetAtt']) {
      const [resource, attribute] = node['Fn::GetAtt'];
      return `<${visit(resource)}.${visit(attribute)}>`;
    }
    if (node['Fn::ImportValue']) return visit(node['Fn::ImportValue']);
    if (node.Ref) return `<${visit(node.Ref)}>`;
    return JSON.stringify(node);
  };
  return visit(reference);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
