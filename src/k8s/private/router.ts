import { createHash } from 'crypto';
import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { ApiKeySecret } from '../api-key-secret';
import { ModelSource } from '../model-source';
import { RouterTokenizer } from '../router-tokenizer';
import { APP_PART_OF, PORTS } from './labels';
import { ROUTER_API_KEYS_DIR, ROUTER_TOKENIZER_DIR, RouterConfigFile } from './router-config';
import { workloadServiceAccount } from './service-account';

/** Inputs of a {@link Router} (internal). */
export interface RouterInputs {
  /** Base name: the objects (ServiceAccount included) are `<name>-router` and `<name>-router-config`. */
  readonly name: string;
  /** @default - the chart's namespace */
  readonly namespace?: string;
  /** The router's component labels (also its pods' selector). */
  readonly labels: Record<string, string>;
  readonly image: string;
  /** @default - Kubernetes' default */
  readonly imagePullPolicy?: string;
  /**
   * Annotations of the router's ServiceAccount when it downloads its tokenizer from the model source
   * itself (IRSA for an S3 source).
   * @default - none
   */
  readonly serviceAccountAnnotations?: { [key: string]: string };
  readonly replicas: number;
  /** The file `disagg-engine router --config` reads. */
  readonly config: RouterConfigFile;
  /**
   * Where the served model's tokenizer files come from (mounted at ROUTER_TOKENIZER_DIR), and the
   * workers' model source (what RouterTokenizer.fromModelSource() downloads).
   * @default - none
   */
  readonly tokenizer?: { readonly from: RouterTokenizer; readonly modelSource: ModelSource };
  /**
   * The Secret of the API keys, mounted at ROUTER_API_KEYS_DIR as the file `keys`.
   * @default - none
   */
  readonly apiKeys?: ApiKeySecret;
}

/** Where the ConfigMap is mounted in the router container. */
const CONFIG_DIR = '/etc/disagg';

/**
 * The KV-aware router of a DisaggregatedInference (internal): its configuration as a ConfigMap, a
 * Deployment of `disagg-engine router` that reads it, a ClusterIP Service on port 80, a
 * PodDisruptionBudget, and its own ServiceAccount (the workers' may be granted what the router must not).
 */
export class Router extends Construct {
  /** The router Service's name. */
  public readonly serviceName: string;
  /** The configuration as written into the ConfigMap. */
  public readonly configJson: string;

  constructor(scope: Construct, id: string, inputs: RouterInputs) {
    super(scope, id);
    const { name, labels } = inputs;
    const objectName = `${name}-router`;
    const configName = `${name}-router-config`;
    this.serviceName = objectName;
    this.configJson = JSON.stringify(inputs.config, undefined, 2);
    const metadata = (n: string): k8s.ObjectMeta => ({
      name: n,
      ...(inputs.namespace ? { namespace: inputs.namespace } : {}),
      labels: { ...labels, [APP_PART_OF]: 'disagg' },
    });
    const health = (periodSeconds: number, failureThreshold: number, timeoutSeconds?: number): k8s.Probe => ({
      httpGet: { path: '/health', port: k8s.IntOrString.fromString('http') },
      periodSeconds,
      failureThreshold,
      ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
    });

    // Only a tokenizer downloaded from an S3 model source needs AWS access; then the account says which prefix.
    const downloads = inputs.tokenizer?.from.kind === 'model-source' ? inputs.tokenizer.modelSource : undefined;
    workloadServiceAccount(this, 'ServiceAccount', {
      name: objectName,
      namespace: inputs.namespace,
      labels,
      annotations: downloads?.kind === 's3' ? inputs.serviceAccountAnnotations : undefined,
      reads: downloads,
    });

    new k8s.KubeConfigMap(this, 'Config', {
      metadata: metadata(configName),
      data: { 'config.json': this.configJson },
    });

    const securityContext: k8s.SecurityContext = {
      runAsNonRoot: true,
      // 65532: the conventional 'nonroot' UID of distroless-style slim images.
      runAsUser: 65532,
      runAsGroup: 65532,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    };
    const tokenizer = tokenizerParts(inputs, securityContext);

    const container: k8s.Container = {
      name: 'router',
      image: inputs.image,
      ...(inputs.imagePullPolicy ? { imagePullPolicy: inputs.imagePullPolicy } : {}),
      command: ['disagg-engine'],
      args: ['router', '--config', `${CONFIG_DIR}/config.json`],
      ports: [
        { name: 'http', containerPort: PORTS.router, protocol: 'TCP' },
        ...(inputs.config.router.peerPort ? [{ name: 'peer', containerPort: inputs.config.router.peerPort, protocol: 'TCP' }] : []),
      ],
      resources: {
        requests: { cpu: k8s.Quantity.fromString('2'), memory: k8s.Quantity.fromString('4Gi') },
        limits: { memory: k8s.Quantity.fromString('4Gi') },
      },
      readinessProbe: health(5, 3),
      livenessProbe: health(15, 4, 5),
      volumeMounts: [
        { name: 'config', mountPath: CONFIG_DIR, readOnly: true },
        ...tokenizer.mounts,
        ...(inputs.apiKeys ? [{ name: 'api-keys', mountPath: ROUTER_API_KEYS_DIR, readOnly: true }] : []),
      ],
      securityContext,
    };
    new k8s.KubeDeployment(this, 'Deployment', {
      metadata: metadata(objectName),
      spec: {
        replicas: inputs.replicas,
        selector: { matchLabels: labels },
        template: {
          metadata: {
            labels,
            // Roll the router when its configuration changes.
            annotations: { 'disagg.dev/config-sha256': createHash('sha256').update(this.configJson).digest('hex') },
          },
          spec: {
            serviceAccountName: objectName,
            automountServiceAccountToken: false,
            securityContext: { seccompProfile: { type: 'RuntimeDefault' } },
            affinity: {
              podAntiAffinity: {
                preferredDuringSchedulingIgnoredDuringExecution: [{
                  weight: 100,
                  podAffinityTerm: { labelSelector: { matchLabels: labels }, topologyKey: 'kubernetes.io/hostname' },
                }],
              },
            },
            ...(tokenizer.init.length > 0 ? { initContainers: tokenizer.init } : {}),
            containers: [container],
            volumes: [
              { name: 'config', configMap: { name: configName } },
              ...tokenizer.volumes,
              // Not a subPath mount: the kubelet's updates (key rotation) reach a directory mount only.
              ...(inputs.apiKeys ? [{
                name: 'api-keys',
                secret: { secretName: inputs.apiKeys.name, items: [{ key: inputs.apiKeys.key ?? 'keys', path: 'keys' }] },
              }] : []),
            ],
          },
        },
      },
    });

    new k8s.KubeService(this, 'Service', {
      metadata: metadata(objectName),
      spec: {
        type: 'ClusterIP',
        selector: labels,
        ports: [{ name: 'http', port: 80, targetPort: k8s.IntOrString.fromString('http'), protocol: 'TCP' }],
      },
    });

    // The routers' peer link: a headless Service of their ready pods, which a starting router (not yet
    // ready, so not listed) asks for a running one's index. Kept apart from the client Service.
    if (inputs.config.router.peerPort) {
      new k8s.KubeService(this, 'PeerService', {
        metadata: metadata(`${objectName}-peers`),
        spec: {
          clusterIp: 'None',
          selector: labels,
          ports: [{ name: 'peer', port: inputs.config.router.peerPort, targetPort: k8s.IntOrString.fromString('peer'), protocol: 'TCP' }],
        },
      });
    }

    // One router may be down at a time; with a single replica, eviction is still allowed (drains).
    const one = k8s.IntOrString.fromNumber(1);
    new k8s.KubePodDisruptionBudget(this, 'Budget', {
      metadata: metadata(objectName),
      spec: inputs.replicas > 1
        ? { minAvailable: one, selector: { matchLabels: labels } }
        : { maxUnavailable: one, selector: { matchLabels: labels } },
    });
  }
}

/** The tokenizer's volumes, the router's mounts of them and the download init container (internal). */
interface TokenizerParts {
  readonly volumes: k8s.Volume[];
  readonly mounts: k8s.VolumeMount[];
  readonly init: k8s.Container[];
}

// Files the router reads (engine/src/lib/text/model_text.cc); the last is optional.
const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja'];

/**
 * The init container's script. It never fails the pod: a file it cannot fetch is reported, and the
 * router (prefixSource auto) then routes approximately and says so. Each file lands under its own
 * name only when complete, so a partial download is never read. `fetch FILE TARGET` is the source's
 * copy command; FETCH_STATUS says why one failed.
 */
function downloadScript(fetchCommand: string): string {
  return [
    'set -u',
    `out=${ROUTER_TOKENIZER_DIR}`,
    fetchCommand,
    `for f in ${TOKENIZER_FILES.join(' ')}; do`,
    '  if fetch "$f" "$out/$f.part"; then mv "$out/$f.part" "$out/$f"; echo "fetched $f";',
    '  else rm -f "$out/$f.part";',
    '    if [ "$f" = chat_template.jinja ]; then echo "no chat_template.jinja ($FETCH_STATUS): the template is the one in tokenizer_config.json";',
    '    else echo "could not fetch $f ($FETCH_STATUS): the router will route on its own history (approximate prefix routing)" >&2; fi',
    '  fi',
    'done',
    'exit 0',
  ].join('\n');
}

// curl: -L follows the Hub's redirect to its CDN; retries cover transient errors; the status code is
// what failed (401/403: a gated repository without a token Secret, 404: no such file).
// The token goes to curl as a config on stdin, so it is never on a command line (/proc/PID/cmdline).
const HF_FETCH = [
  'base="${HF_ENDPOINT:-https://huggingface.co}/$DISAGG_MODEL/resolve/$DISAGG_REVISION"',
  'auth() { if [ -n "${HF_TOKEN:-}" ]; then printf \'header = "Authorization: Bearer %s"\\n\' "$HF_TOKEN"; fi; }',
  'fetch() {',
  '  FETCH_STATUS=$(auth | curl -sS -L --retry 5 --retry-all-errors --connect-timeout 10 --max-time 600 -K - -o "$2" -w "HTTP %{http_code}" "$base/$1") || FETCH_STATUS="curl failed, $FETCH_STATUS"',
  '  [ "$FETCH_STATUS" = "HTTP 200" ]',
  '}',
].join('\n');

const S3_FETCH = [
  'fetch() {',
  '  FETCH_STATUS=$(aws s3 cp --only-show-errors "$DISAGG_MODEL/$1" "$2" 2>&1) && return 0',
  '  return 1',
  '}',
].join('\n');

function tokenizerParts(inputs: RouterInputs, securityContext: k8s.SecurityContext): TokenizerParts {
  const t = inputs.tokenizer;
  if (!t || t.from.kind === 'none') return { volumes: [], mounts: [], init: [] };
  const mount: k8s.VolumeMount = { name: 'tokenizer', mountPath: ROUTER_TOKENIZER_DIR, readOnly: true };
  if (t.from.kind === 'config-map') {
    return { volumes: [{ name: 'tokenizer', configMap: { name: t.from.name! } }], mounts: [mount], init: [] };
  }
  if (t.from.kind === 'persistent-volume-claim') {
    return {
      volumes: [{ name: 'tokenizer', persistentVolumeClaim: { claimName: t.from.name!, readOnly: true } }],
      mounts: [{ ...mount, ...(t.from.subPath ? { subPath: t.from.subPath } : {}) }],
      init: [],
    };
  }
  // Downloaded from the model source into an emptyDir before the router starts.
  const source = t.modelSource;
  const hf = source.kind === 'huggingface';
  const env: k8s.EnvVar[] = [{ name: 'DISAGG_MODEL', value: hf ? source.uri : source.uri.replace(/\/+$/, '') }];
  if (hf) {
    env.push({ name: 'DISAGG_REVISION', value: source.revision ?? 'main' });
    if (source.tokenSecret) {
      env.push({ name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: source.tokenSecret.name, key: source.tokenSecret.key ?? 'token' } } });
    }
  } else {
    // The AWS CLI keeps caches under $HOME; the root filesystem is read-only.
    env.push({ name: 'HOME', value: '/tmp' });
    if (source.region) env.push({ name: 'AWS_REGION', value: source.region });
  }
  const init: k8s.Container = {
    name: 'fetch-tokenizer',
    image: t.from.image ?? (hf ? inputs.image : RouterTokenizer.AWS_CLI_IMAGE),
    ...(inputs.imagePullPolicy ? { imagePullPolicy: inputs.imagePullPolicy } : {}),
    command: ['sh', '-c', downloadScript(hf ? HF_FETCH : S3_FETCH)],
    env,
    resources: {
      requests: { cpu: k8s.Quantity.fromString('100m'), memory: k8s.Quantity.fromString('128Mi') },
      limits: { memory: k8s.Quantity.fromString('512Mi') },
    },
    volumeMounts: [{ name: 'tokenizer', mountPath: ROUTER_TOKENIZER_DIR }, { name: 'tmp', mountPath: '/tmp' }],
    securityContext,
  };
  return {
    volumes: [
      // Tokenizer files are 1-20 MB; the bound keeps a wrong repository from filling the node's disk.
      { name: 'tokenizer', emptyDir: { sizeLimit: k8s.Quantity.fromString('256Mi') } },
      { name: 'tmp', emptyDir: { sizeLimit: k8s.Quantity.fromString('64Mi') } },
    ],
    mounts: [mount],
    init: [init],
  };
}
