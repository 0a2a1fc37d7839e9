/**
 * Installs the Gateway API Inference Extension CRDs at deploy time.
 *
 * Why a Job: the project publishes its CRDs only as release manifests (no Helm chart carries
 * them), synthesis must work offline, and the upstream YAML must not be copied into this package.
 * So a one-shot Job in the cluster server-side-applies the pinned release manifest. It runs on the
 * system nodes, needs egress to github.com (NAT), and has RBAC for CRDs only. The Job name carries
 * the version, so a version bump creates a new Job instead of patching an immutable one.
 * @see https://gateway-api-inference-extension.sigs.k8s.io/guides/ (CRD installation)
 */
export interface InferenceExtensionCrdJobProps {
  /** Release tag, e.g. v1.6.0. */
  readonly version: string;
  /** kubectl image. */
  readonly image: string;
}

const NAMESPACE = 'kube-system';
const NAME = 'disagg-inference-extension-crds';

export function inferenceExtensionManifestUrl(version: string): string {
  return `https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/${version}/manifests.yaml`;
}

export function inferenceExtensionCrdJob(props: InferenceExtensionCrdJobProps): Record<string, any>[] {
  const labels = { 'app.kubernetes.io/name': NAME, 'app.kubernetes.io/managed-by': 'disagg' };
  const jobName = `${NAME}-${props.version.replace(/[^0-9a-z]+/gi, '-').toLowerCase()}`.replace(/-+$/, '');
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: NAME, namespace: NAMESPACE, labels } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: NAME, labels },
      rules: [{
        apiGroups: ['apiextensions.k8s.io'],
        resources: ['customresourcedefinitions'],
        verbs: ['get', 'list', 'create', 'patch', 'update'],
      }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: NAME, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: NAME },
      subjects: [{ kind: 'ServiceAccount', name: NAME, namespace: NAMESPACE }],
    },
    {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: jobName, namespace: NAMESPACE, labels },
      spec: {
        backoffLimit: 6,
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: NAME,
            restartPolicy: 'OnFailure',
            securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
            containers: [{
              name: 'apply',
              image: props.image,
              command: ['kubectl'],
              args: ['apply', '--server-side', '--force-conflicts', '-f', inferenceExtensionManifestUrl(props.version)],
              // kubectl writes its discovery cache under $HOME: give it a writable scratch dir.
              env: [{ name: 'HOME', value: '/tmp' }],
              volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
              resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
            }],
            volumes: [{ name: 'tmp', emptyDir: {} }],
          },
        },
      },
    },
  ];
}
