import { createHash } from 'crypto';
import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { APP_PART_OF, PORTS } from './labels';
import { RouterConfigFile } from './router-config';

/** Inputs of a {@link Router} (internal). */
export interface RouterInputs {
  /** Base name: the objects are `<name>-router` and `<name>-router-config`. */
  readonly name: string;
  /** @default - the chart's namespace */
  readonly namespace?: string;
  /** The router's component labels (also its pods' selector). */
  readonly labels: Record<string, string>;
  readonly image: string;
  /** @default - Kubernetes' default */
  readonly imagePullPolicy?: string;
  readonly serviceAccountName: string;
  readonly replicas: number;
  /** The file `disagg-engine router --config` reads. */
  readonly config: RouterConfigFile;
}

/** Where the ConfigMap is mounted in the router container. */
const CONFIG_DIR = '/etc/disagg';

/**
 * The KV-aware router of a DisaggregatedInference (internal): its configuration as a ConfigMap, a
 * Deployment of `disagg-engine router` that reads it, a ClusterIP Service on port 80 and a
 * PodDisruptionBudget.
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

    new k8s.KubeConfigMap(this, 'Config', {
      metadata: metadata(configName),
      data: { 'config.json': this.configJson },
    });

    const container: k8s.Container = {
      name: 'router',
      image: inputs.image,
      ...(inputs.imagePullPolicy ? { imagePullPolicy: inputs.imagePullPolicy } : {}),
      command: ['disagg-engine'],
      args: ['router', '--config', `${CONFIG_DIR}/config.json`],
      ports: [{ name: 'http', containerPort: PORTS.router, protocol: 'TCP' }],
      resources: {
        requests: { cpu: k8s.Quantity.fromString('2'), memory: k8s.Quantity.fromString('4Gi') },
        limits: { memory: k8s.Quantity.fromString('4Gi') },
      },
      readinessProbe: health(5, 3),
      livenessProbe: health(15, 4, 5),
      volumeMounts: [{ name: 'config', mountPath: CONFIG_DIR, readOnly: true }],
      securityContext: {
        runAsNonRoot: true,
        // 65532: the conventional 'nonroot' UID of distroless-style slim images.
        runAsUser: 65532,
        runAsGroup: 65532,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      },
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
            serviceAccountName: inputs.serviceAccountName,
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
            containers: [container],
            volumes: [{ name: 'config', configMap: { name: configName } }],
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
