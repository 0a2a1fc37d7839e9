import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { ModelSource } from '../model-source';
import { APP_PART_OF } from './labels';

/**
 * Annotation on a ServiceAccount whose pods read an S3 prefix (the value, 's3://bucket/prefix'). It is
 * how the chart tells the AWS side what to grant: `InferenceCluster.addWorkload` binds a Pod Identity
 * role that may read exactly that prefix to the account. A user's own cluster can read it the same way.
 */
export const S3_READ_ANNOTATION = 'disagg.dev/s3-read';

/** What one ServiceAccount is for (internal). */
export interface ServiceAccountInputs {
  readonly name: string;
  readonly namespace?: string;
  readonly labels: Record<string, string>;
  /** The user's annotations (IRSA's `eks.amazonaws.com/role-arn`, ...). */
  readonly annotations?: { [key: string]: string };
  /** The model source the pods read, when they read it themselves. */
  readonly reads?: ModelSource;
}

/**
 * A ServiceAccount for one kind of pod: none of them calls the Kubernetes API, so no token is mounted.
 * Pods that read an S3 model source say which prefix (S3_READ_ANNOTATION); EKS Pod Identity projects
 * its own token whatever `automountServiceAccountToken` says.
 */
export function workloadServiceAccount(scope: Construct, id: string, inputs: ServiceAccountInputs): k8s.KubeServiceAccount {
  const annotations: Record<string, string> = { ...(inputs.annotations ?? {}) };
  if (inputs.reads?.kind === 's3') {
    annotations[S3_READ_ANNOTATION] = inputs.reads.uri;
  }
  return new k8s.KubeServiceAccount(scope, id, {
    metadata: {
      name: inputs.name,
      ...(inputs.namespace ? { namespace: inputs.namespace } : {}),
      labels: { ...inputs.labels, [APP_PART_OF]: 'disagg' },
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
    automountServiceAccountToken: false,
  });
}
