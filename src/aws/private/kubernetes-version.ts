/**
 * The kubectl minor version of the default kubectl layer (`@aws-cdk/lambda-layer-kubectl-v35`).
 * Keep it equal to the layer InferenceCluster imports.
 */
export const DEFAULT_KUBECTL_MINOR = 35;

/** Minor version of a `1.x` Kubernetes version string, or undefined when it is not one. */
export function kubernetesMinor(version: string): number | undefined {
  const m = /^1\.(\d+)$/.exec(version.trim());
  return m ? Number(m[1]) : undefined;
}

/**
 * Throws when kubectl 1.`kubectlMinor` would be more than one minor version away from the cluster:
 * kubectl is supported within one minor version (older or newer) of kube-apiserver.
 * @see https://kubernetes.io/releases/version-skew-policy/#kubectl
 */
export function checkKubectlSkew(kubernetesVersion: string, kubectlMinor: number): void {
  const minor = kubernetesMinor(kubernetesVersion);
  if (minor === undefined || Math.abs(minor - kubectlMinor) <= 1) {
    return;
  }
  throw new Error(`'kubernetesVersion' (${kubernetesVersion}) is ${Math.abs(minor - kubectlMinor)} minor versions away from kubectl 1.${kubectlMinor} `
    + 'of the default kubectl layer, and kubectl supports one minor version of skew with the API server '
    + '(https://kubernetes.io/releases/version-skew-policy/#kubectl); pass \'kubectlLayer\' with the matching layer, '
    + `e.g. kubectlLayer: new KubectlV${minor}Layer(this, 'KubectlLayer') from @aws-cdk/lambda-layer-kubectl-v${minor}, `
    + `or use a kubernetesVersion from 1.${kubectlMinor - 1} to 1.${kubectlMinor + 1}`);
}
