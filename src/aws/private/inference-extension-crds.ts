/**
 * Installs the Gateway API Inference Extension CRDs at deploy time.
 *
 * Why a Job: the project publishes its CRDs only as release manifests (no Helm chart carries
 * them), synthesis must work offline, and the upstream YAML must not be copied into this package.
 * So a one-shot Job in the cluster server-side-applies the pinned release manifest. It runs on the
 * system nodes, needs egress to github.com (NAT), and has RBAC for CRDs only. The Job name carries
 * the version, so a version bump creates a new Job instead of patching an immutable one.
 *
 * The Job completes only once the API server serves the new kinds: an init container applies the
 * manifest, then the main container runs `kubectl wait --for condition=established` on the same
 * CRDs. Whatever must come after the CRDs waits for the Job's `status.succeeded` (see
 * {@link INFERENCE_EXTENSION_JOB_NAMESPACE} and the waiter in InferenceCluster).
 * @see https://gateway-api-inference-extension.sigs.k8s.io/guides/ (CRD installation)
 * @see https://kubernetes.io/docs/reference/kubectl/generated/kubectl_wait/ (`--for condition=established`)
 */
export interface InferenceExtensionCrdJobProps {
  /** Release tag, e.g. v1.6.0. */
  readonly version: string;
  /** kubectl image. */
  readonly image: string;
}

const NAMESPACE = 'kube-system';
const NAME = 'disagg-inference-extension-crds';

/** Namespace of the CRD Job. */
export const INFERENCE_EXTENSION_JOB_NAMESPACE = NAMESPACE;

/** How long the Job may take to apply the CRDs and see them established. */
export const INFERENCE_EXTENSION_WAIT_SECONDS = 300;

/** Name of the CRD Job for a release tag (the version is part of it: Job specs are immutable). */
export function inferenceExtensionJobName(version: string): string {
  return `${NAME}-${version.replace(/[^0-9a-z]+/gi, '-').toLowerCase()}`.replace(/-+$/, '');
}

export function inferenceExtensionManifestUrl(version: string): string {
  return `https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/${version}/manifests.yaml`;
}

export function inferenceExtensionCrdJob(props: InferenceExtensionCrdJobProps): Record<string, any>[] {
  const labels = { 'app.kubernetes.io/name': NAME, 'app.kubernetes.io/managed-by': 'disagg' };
  const jobName = inferenceExtensionJobName(props.version);
  const url = inferenceExtensionManifestUrl(props.version);
  const kubectl = (name: string, args: string[]) => ({
    name,
    image: props.image,
    command: ['kubectl'],
    args,
    // kubectl writes its discovery cache under $HOME: give it a writable scratch dir.
    env: [{ name: 'HOME', value: '/tmp' }],
    volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
    resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
  });
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: NAME, namespace: NAMESPACE, labels } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: NAME, labels },
      rules: [{
        apiGroups: ['apiextensions.k8s.io'],
        resources: ['customresourcedefinitions'],
        // watch: `kubectl wait` watches the CRDs until they are established.
        verbs: ['get', 'list', 'watch', 'create', 'patch', 'update'],
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
            // Init containers run to completion in order, so the wait starts after the apply.
            initContainers: [kubectl('apply', ['apply', '--server-side', '--force-conflicts', '-f', url])],
            containers: [kubectl('wait-established', [
              'wait', '--for', 'condition=established', `--timeout=${INFERENCE_EXTENSION_WAIT_SECONDS}s`, '-f', url,
            ])],
            volumes: [{ name: 'tmp', emptyDir: {} }],
          },
        },
      },
    },
  ];
}
