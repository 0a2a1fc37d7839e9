/**
 * The DRA (Dynamic Resource Allocation) drivers an InferenceCluster can install, as Helm chart options,
 * and the checks of the add-on switches that choose them (internal).
 */
import * as eks from 'aws-cdk-lib/aws-eks-v2';
import { AcceleratedInstanceType, AcceleratorVendor } from '../../catalog';
import { AddonOptions, AddonVersions } from '../cluster-addons';

/** Taints this library puts on accelerated nodes, which node DaemonSets must tolerate. */
const ACCELERATOR_TOLERATIONS = [
  { key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' },
  { key: 'aws.amazon.com/neuron', operator: 'Exists', effect: 'NoSchedule' },
];

/**
 * Whether an instance type needs the NVIDIA DRA driver: NVIDIA types whose NVLink domain spans instances
 * (p6e-gb200 UltraServers). EKS requires DRA for them and Multi-Node NVLink needs a ComputeDomain (IMEX).
 * @see https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html
 */
export function needsComputeDomain(type: AcceleratedInstanceType): boolean {
  return type.accelerator.vendor === AcceleratorVendor.NVIDIA && (type.ultraServerSize ?? 1) > 1;
}

/** A driver that is off unless its options are given (and `enabled` is not false). */
export function optedIn(options: AddonOptions | undefined): boolean {
  return options !== undefined && options !== null && options.enabled !== false;
}

/** `[major, minor]` of a Kubernetes version such as '1.35', or undefined for a token. */
function minorOf(version: string): [number, number] | undefined {
  const m = /^(\d+)\.(\d+)/.exec(version);
  return m ? [+m[1], +m[2]] : undefined;
}

function below(version: string, major: number, minor: number): boolean {
  const v = minorOf(version);
  return v !== undefined && (v[0] < major || (v[0] === major && v[1] < minor));
}

/**
 * Checks the DRA switches against each other and the Kubernetes version; each error names the prop,
 * the value and the fix.
 *
 * - EFA and Neuron DRA drivers: Kubernetes >= 1.34, where DRA (`resource.k8s.io/v1`) is GA and EKS
 *   documents both drivers (https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html,
 *   https://docs.aws.amazon.com/eks/latest/userguide/device-management-neuron.html).
 * - NVIDIA DRA driver: Kubernetes >= 1.33, the first version EKS supports p6e-gb200 on, with DRA enabled
 *   (https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html).
 * - Neuron DRA driver and Neuron device plugin cannot run on the same node (Neuron DRA docs: "Do not
 *   install the Neuron device plugin"; https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/neuron-dra.html).
 */
export function checkDraAddons(addons: {
  readonly efaDraDriver?: AddonOptions;
  readonly neuronDraDriver?: AddonOptions;
  readonly neuronDevicePlugin?: AddonOptions;
  readonly nvidiaDraDriver?: AddonOptions;
}, kubernetesVersion: string): void {
  const fix = (min: string) => `use kubernetesVersion: eks.KubernetesVersion.V${min.replace('.', '_')} or later`;
  if (optedIn(addons.efaDraDriver) && below(kubernetesVersion, 1, 34)) {
    throw new Error('\'addons.efaDraDriver\' needs Kubernetes 1.34 or later (DRA is GA from 1.34 and EKS supports the EFA DRA driver from it), '
      + `but 'kubernetesVersion' is ${kubernetesVersion}; ${fix('1.34')}, or remove 'efaDraDriver' and keep the EFA device plugin`);
  }
  if (optedIn(addons.neuronDraDriver) && below(kubernetesVersion, 1, 34)) {
    throw new Error('\'addons.neuronDraDriver\' needs Kubernetes 1.34 or later (EKS supports the Neuron DRA driver from 1.34), '
      + `but 'kubernetesVersion' is ${kubernetesVersion}; ${fix('1.34')}, or remove 'neuronDraDriver' and keep the Neuron device plugin`);
  }
  if (addons.nvidiaDraDriver?.enabled === true && below(kubernetesVersion, 1, 33)) {
    throw new Error('\'addons.nvidiaDraDriver\' needs Kubernetes 1.33 or later (EKS enables DRA and supports p6e-gb200 from 1.33), '
      + `but 'kubernetesVersion' is ${kubernetesVersion}; ${fix('1.33')}`);
  }
  if (optedIn(addons.neuronDraDriver) && addons.neuronDevicePlugin?.enabled !== false) {
    throw new Error("'addons.neuronDraDriver' is on while 'addons.neuronDevicePlugin' is on (the default); the Neuron DRA driver and the "
      + 'Neuron device plugin cannot run on the same node. Add `neuronDevicePlugin: { enabled: false }` to the addons (pools that request '
      + "aws.amazon.com/neuron then need the device plugin: keep it and remove 'neuronDraDriver' for them)");
  }
}

/**
 * The NVIDIA DRA driver chart: ComputeDomains (IMEX) only, GPU allocation left to the device plugin so
 * that pods keep requesting `nvidia.com/gpu`. The kubelet plugin's default node affinity accepts the
 * `nvidia.com/gpu.present=true` label the node groups carry and tolerates the `nvidia.com/gpu` taint; the
 * controller runs on the system nodes.
 * @see https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/blob/v0.4.0/docs/install.md
 * @see https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/blob/v0.4.0/deployments/helm/dra-driver-nvidia-gpu/values.yaml
 */
export function nvidiaDraChart(options: AddonOptions | undefined): eks.HelmChartOptions {
  return {
    // OCI: the kubectl handler pulls `repository` (which names the chart) and ignores `chart`.
    chart: 'dra-driver-nvidia-gpu',
    repository: 'oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu',
    version: options?.version ?? AddonVersions.NVIDIA_DRA_DRIVER,
    release: 'dra-driver-nvidia-gpu',
    namespace: 'dra-driver-nvidia-gpu',
    createNamespace: true,
    // The ComputeDomain CRD ships in the chart's crds/ and the controller must answer before a workload's
    // ComputeDomain is applied.
    wait: true,
    values: {
      resources: { gpus: { enabled: false }, computeDomains: { enabled: true } },
    },
  };
}

/**
 * A second release of the NVIDIA device plugin chart that runs only GPU Feature Discovery (and the Node
 * Feature Discovery it feeds): GFD labels each Multi-Node-NVLink node with `nvidia.com/gpu.clique`
 * (`<cluster UUID>.<clique id>`), which ComputeDomain placement needs. NFD's worker tolerates only
 * `nvidia.com/gpu=present` by default; the node groups taint `nvidia.com/gpu=true`.
 * @see https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/blob/v0.4.0/docs/prerequisites.md (GFD generates the clique labels)
 * @see https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/deployments/helm/nvidia-device-plugin/values.yaml (devicePlugin.enabled, gfd.enabled, nfd.worker.tolerations)
 * @see https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/docs/gpu-feature-discovery/README.md (nvidia.com/gpu.clique)
 */
export function gpuFeatureDiscoveryChart(devicePluginVersion: string): eks.HelmChartOptions {
  return {
    chart: 'nvidia-device-plugin',
    repository: 'https://nvidia.github.io/k8s-device-plugin',
    version: devicePluginVersion,
    release: 'nvidia-gpu-feature-discovery',
    namespace: 'kube-system',
    values: {
      devicePlugin: { enabled: false },
      gfd: { enabled: true },
      nfd: { worker: { tolerations: [ACCELERATOR_TOLERATIONS[0]] } },
    },
  };
}

/**
 * The EFA DRA driver (DRANET). Its DaemonSet tolerates only CriticalAddonsOnly by default, so it is
 * told to tolerate the accelerator taints; its node affinity already lists the EFA instance types.
 * @see https://github.com/aws/eks-charts/tree/master/stable/aws-dranet
 */
export function efaDraChart(options: AddonOptions | undefined): eks.HelmChartOptions {
  return {
    chart: 'aws-dranet',
    repository: 'https://aws.github.io/eks-charts',
    version: options?.version ?? AddonVersions.EFA_DRA_DRIVER,
    release: 'aws-dranet',
    namespace: 'kube-system',
    values: { tolerations: ACCELERATOR_TOLERATIONS },
  };
}

/**
 * The Neuron DRA driver: the Neuron Helm chart with the device plugin and the node problem detector off
 * and `draDriver.enabled` on, as the Neuron DRA guide installs it. The chart version that first carries
 * the `draDriver` values could not be confirmed offline; AddonVersions.NEURON_HELM_CHART (1.10.0) is later
 * than the Neuron DRA launch (Neuron SDK 2.28).
 * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/neuron-dra.html
 */
export function neuronDraChart(options: AddonOptions | undefined): eks.HelmChartOptions {
  return {
    chart: 'neuron-helm-chart',
    repository: 'oci://public.ecr.aws/neuron/neuron-helm-chart',
    version: options?.version ?? AddonVersions.NEURON_HELM_CHART,
    release: 'neuron-helm-chart',
    namespace: 'kube-system',
    values: { devicePlugin: { enabled: false }, npd: { enabled: false }, draDriver: { enabled: true } },
  };
}
