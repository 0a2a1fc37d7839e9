import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';

const PODS = 'pods.eks.amazonaws.com';

/**
 * A role that EKS Pod Identity can hand to a pod (construct id `Role`). Pod Identity assumes it with
 * sts:AssumeRole and sts:TagSession; the trust policy allows both, and nothing else.
 */
export function podIdentityRole(scope: Construct, description: string): iam.Role {
  const role = new iam.Role(scope, 'Role', { description, assumedBy: new iam.ServicePrincipal(PODS) });
  role.assumeRolePolicy?.addStatements(new iam.PolicyStatement({
    actions: ['sts:TagSession'],
    principals: [new iam.ServicePrincipal(PODS)],
  }));
  return role;
}

/** Binds `role` to one service account of `cluster` (construct id `PodIdentity`). */
export function podIdentityAssociation(scope: Construct, cluster: eks.ICluster, namespace: string, serviceAccount: string,
  role: iam.IRole): eks.CfnPodIdentityAssociation {
  return new eks.CfnPodIdentityAssociation(scope, 'PodIdentity', {
    clusterName: cluster.clusterName, namespace, serviceAccount, roleArn: role.roleArn,
  });
}
