/**
 * ComputeDomains for pools on p6e-gb200 UltraServers (internal): Multi-Node NVLink between the GPUs of
 * several instances needs IMEX, which the NVIDIA DRA driver sets up for the pods that claim a channel of a
 * ComputeDomain. EKS requires DRA for these instances.
 *
 * @see https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html
 * @see https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/blob/v0.4.0/docs/install.md (ComputeDomain example)
 */
import { ApiObject, ApiObjectMetadata, JsonPatch } from 'cdk8s';
import { Construct } from 'constructs';
import { AcceleratedInstanceType, AcceleratorVendor } from '../../catalog';

/**
 * The ComputeDomain API: group `resource.nvidia.com`, version `v1beta1`, namespaced, with `spec.numNodes`
 * and `spec.channel.resourceClaimTemplate.name` (the ResourceClaimTemplate the driver's controller
 * creates, in the ComputeDomain's namespace).
 * @see https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/blob/v0.4.0/deployments/helm/dra-driver-nvidia-gpu/crds/resource.nvidia.com_computedomains.yaml
 */
export const COMPUTE_DOMAIN_API_VERSION = 'resource.nvidia.com/v1beta1';
export const COMPUTE_DOMAIN_KIND = 'ComputeDomain';

/**
 * The node label of a node's NVLink partition (`<cluster UUID>.<clique id>`), set by GPU Feature
 * Discovery on Multi-Node NVLink systems; pods that share GPU memory over NVLink must be in one clique.
 * @see https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/docs/gpu-feature-discovery/README.md
 */
export const GPU_CLIQUE_LABEL = 'nvidia.com/gpu.clique';

/**
 * LeaderWorkerSet's label with a hash shared by the pods of one group.
 * @see https://lws.sigs.k8s.io/docs/reference/labels-annotations-and-environment-variables/
 */
export const LWS_GROUP_KEY = 'leaderworkerset.sigs.k8s.io/group-key';

/** Name of the pod's claim on the ComputeDomain's IMEX channel. */
export const IMEX_CHANNEL_CLAIM = 'imex-channel';

/**
 * Whether pools on an instance type get a ComputeDomain: NVIDIA types whose NVLink domain spans
 * instances (p6e-gb200). Same rule as the InferenceCluster's choice to install the NVIDIA DRA driver.
 */
export function needsComputeDomain(type: AcceleratedInstanceType): boolean {
  return type.accelerator.vendor === AcceleratorVendor.NVIDIA && (type.ultraServerSize ?? 1) > 1;
}

/**
 * Adds a ComputeDomain named like the pool and returns the name of its channel ResourceClaimTemplate.
 * `numNodes` is 0: with the driver's default `IMEXDaemonsWithDNSNames` gate, IMEX daemons start without
 * waiting for their peers and the field only feeds the status (the CRD calls it deprecated).
 */
export function addComputeDomain(scope: Construct, id: string, metadata: ApiObjectMetadata): string {
  const claimTemplateName = `${metadata.name}-imex-channel`;
  new ApiObject(scope, id, {
    apiVersion: COMPUTE_DOMAIN_API_VERSION,
    kind: COMPUTE_DOMAIN_KIND,
    metadata,
    spec: {
      numNodes: 0,
      channel: { resourceClaimTemplate: { name: claimTemplateName } },
    },
  });
  return claimTemplateName;
}

/**
 * Makes the pods of `workload` claim the ComputeDomain's IMEX channel (container 0, the engine), at each
 * pod template path (e.g. `/spec/template`). With `oneCliquePerGroup` (a LeaderWorkerSet whose replica
 * spans nodes), the pods of one group must share an NVLink clique: a required pod affinity on the clique
 * label to pods of the same group (`matchLabelKeys` on LWS's group key; Kubernetes >= 1.33 has it on by
 * default), and a required node affinity on nodes that carry the label, so the leader never lands where
 * no clique is known.
 *
 * The bindings of cdk8s-plus-28 (Kubernetes 1.28) lack `resourceClaimTemplateName` and `matchLabelKeys`
 * and their renderers drop unknown keys (after `addJsonPatch` patches, too), so the fields go in as JSON
 * patches applied to the object's rendered JSON.
 * @see https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/
 * @see https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#matchlabelkeys
 */
export function claimComputeDomain(workload: ApiObject, templatePaths: string[], claimTemplateName: string,
  podLabels: Record<string, string>, oneCliquePerGroup: boolean): void {
  const ops: JsonPatch[] = [];
  for (const path of templatePaths) {
    ops.push(
      JsonPatch.add(`${path}/spec/resourceClaims`, [{ name: IMEX_CHANNEL_CLAIM, resourceClaimTemplateName: claimTemplateName }]),
      JsonPatch.add(`${path}/spec/containers/0/resources/claims`, [{ name: IMEX_CHANNEL_CLAIM }]),
    );
    if (oneCliquePerGroup) {
      ops.push(
        JsonPatch.add(`${path}/spec/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution`, [{
          labelSelector: { matchLabels: podLabels },
          matchLabelKeys: [LWS_GROUP_KEY],
          topologyKey: GPU_CLIQUE_LABEL,
        }]),
        JsonPatch.add(`${path}/spec/affinity/nodeAffinity`, {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: GPU_CLIQUE_LABEL, operator: 'Exists' }] }],
          },
        }),
      );
    }
  }
  const render = workload.toJson.bind(workload);
  Object.defineProperty(workload, 'toJson', { value: () => JsonPatch.apply(render(), ...ops) });
}
