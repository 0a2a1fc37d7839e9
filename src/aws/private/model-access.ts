import { createHash } from 'crypto';
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { podIdentityAssociation, podIdentityRole } from './pod-identity';
import { podSpecsOf } from '../../k8s/private/pod-security';
import { S3_READ_ANNOTATION } from '../../k8s/private/service-account';

/** A ServiceAccount whose pods read an S3 prefix (the chart's S3_READ_ANNOTATION). */
export interface S3Reader {
  readonly namespace: string;
  readonly serviceAccount: string;
  /** 's3://bucket/prefix' (the prefix may be empty). */
  readonly uri: string;
}

/** The ServiceAccounts of a chart that ask for read access to an S3 prefix. */
export function s3Readers(objects: any[]): S3Reader[] {
  return objects
    .filter((o) => o?.kind === 'ServiceAccount' && typeof o.metadata?.annotations?.[S3_READ_ANNOTATION] === 'string')
    .map((o) => ({
      namespace: o.metadata.namespace ?? 'default',
      serviceAccount: o.metadata.name,
      uri: o.metadata.annotations[S3_READ_ANNOTATION],
    }));
}

/**
 * Least privilege for a model under an S3 prefix: list the prefix, get its objects. vLLM's Run:ai
 * streamer and `aws s3 cp` need nothing else. A bucket encrypted with a customer-managed KMS key also
 * needs kms:Decrypt on that key, which the user grants (the key is not known here).
 */
export function s3ReadStatements(uri: string): iam.PolicyStatement[] {
  const { bucket, prefix } = splitS3Uri(uri);
  const objects = prefix === '' ? '*' : `${prefix}/*`;
  return [
    new iam.PolicyStatement({
      actions: ['s3:ListBucket'],
      resources: [`arn:aws:s3:::${bucket}`],
      ...(prefix === '' ? {} : { conditions: { StringLike: { 's3:prefix': [prefix, `${prefix}/*`] } } }),
    }),
    new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [`arn:aws:s3:::${bucket}/${objects}`] }),
  ];
}

/** 's3://bucket/a/b/' -> { bucket, prefix: 'a/b' }. */
export function splitS3Uri(uri: string): { bucket: string; prefix: string } {
  const rest = uri.replace(/^s3:\/\//, '');
  const slash = rest.indexOf('/');
  return slash < 0
    ? { bucket: rest, prefix: '' }
    : { bucket: rest.slice(0, slash), prefix: rest.slice(slash + 1).replace(/\/+$/, '') };
}

/**
 * Sets AWS_REGION on every container of the pods that run as one of `readers` and do not set it:
 * with IMDS limited to one hop, a pod cannot ask the node which Region it is in, and the SDKs (the
 * Run:ai streamer's included) then refuse to sign requests. Mutates `objects`; returns how many
 * containers it set.
 */
export function setRegionOfReaders(objects: any[], readers: S3Reader[], region: string): number {
  let set = 0;
  const reading = new Set(readers.map((r) => `${r.namespace}/${r.serviceAccount}`));
  for (const o of objects) {
    const namespace = o?.metadata?.namespace ?? 'default';
    for (const { spec } of podSpecsOf([o])) {
      if (!reading.has(`${namespace}/${spec.serviceAccountName ?? 'default'}`)) continue;
      for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
        const env: any[] = c.env ?? [];
        if (env.some((e) => e.name === 'AWS_REGION')) continue;
        c.env = [...env, { name: 'AWS_REGION', value: region }];
        set++;
      }
    }
  }
  return set;
}

/**
 * The Pod Identity roles of a cluster's S3 model readers (construct id `ModelAccess`): one role per S3
 * prefix, allowed to read only that prefix, bound to each ServiceAccount that reads it. EKS keeps one
 * association per ServiceAccount, so one account reading two prefixes is refused.
 */
export class ModelAccess extends Construct {
  private readonly roles = new Map<string, iam.Role>();
  private readonly bindings = new Map<string, { uri: string; chart: string; association: eks.CfnPodIdentityAssociation }>();

  constructor(scope: Construct, id: string, private readonly cluster: eks.ICluster) {
    super(scope, id);
  }

  /** Grants each reader its prefix; returns the associations its pods must not start before. */
  public grant(chart: string, readers: S3Reader[]): eks.CfnPodIdentityAssociation[] {
    return readers.map((r) => {
      const key = `${r.namespace}/${r.serviceAccount}`;
      const bound = this.bindings.get(key);
      if (bound) {
        if (bound.uri !== r.uri) {
          throw new Error(`addWorkload('${chart}'): ServiceAccount '${key}' reads '${r.uri}', but chart '${bound.chart}' already bound it to `
            + `'${bound.uri}', and EKS Pod Identity gives a ServiceAccount one role: give the deployments different names or namespaces.`);
        }
        return bound.association;
      }
      const role = this.roleFor(r.uri);
      const scope = new Construct(this, `Reader-${r.namespace}-${r.serviceAccount}`);
      const association = podIdentityAssociation(scope, this.cluster, r.namespace, r.serviceAccount, role);
      this.bindings.set(key, { uri: r.uri, chart, association });
      return association;
    });
  }

  private roleFor(uri: string): iam.Role {
    let role = this.roles.get(uri);
    if (!role) {
      const id = createHash('sha256').update(uri).digest('hex').slice(0, 12);
      role = podIdentityRole(new Construct(this, `Prefix-${id}`), `Reads the model under ${uri} (vLLM workers, the router's tokenizer download)`);
      for (const statement of s3ReadStatements(uri)) {
        role.addToPrincipalPolicy(statement);
      }
      this.roles.set(uri, role);
    }
    return role;
  }
}
