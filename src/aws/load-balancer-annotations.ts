import { LoadBalancerScheme } from './cluster-addons';

/** Annotation keys read by the AWS Load Balancer Controller on a Service of type LoadBalancer. */
const TYPE = 'service.beta.kubernetes.io/aws-load-balancer-type';
const TARGET_TYPE = 'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type';
const SCHEME = 'service.beta.kubernetes.io/aws-load-balancer-scheme';

/**
 * Service annotations that make the AWS Load Balancer Controller put a Network Load Balancer in front
 * of a Service.
 *
 * They go on the Istio ingress gateway chart's Service, and under `spec.infrastructure.annotations` of
 * a Gateway API `Gateway` with `gatewayClassName: istio`: Istio deploys such a Gateway itself (a
 * Deployment and a Service named `<gateway>-istio`) and copies `spec.infrastructure.annotations` onto
 * that Service. When `spec.infrastructure` is absent Istio copies the Gateway's own
 * `metadata.annotations` instead, so either place works; `spec.infrastructure` is the portable one.
 *
 * @see https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/
 * @see https://gateway-api.sigs.k8s.io/guides/infrastructure/
 */
export class LoadBalancerAnnotations {
  /**
   * Annotations for an NLB that targets pod IPs (`external` type, `ip` targets) with the given scheme.
   * Three entries, well under the 8 that Gateway API v1.4 allows in `spec.infrastructure.annotations`.
   *
   * @param scheme internal (default) or internet-facing
   */
  public static networkLoadBalancer(scheme: LoadBalancerScheme = LoadBalancerScheme.INTERNAL): { [key: string]: string } {
    return {
      // `external` hands the Service to the AWS Load Balancer Controller instead of the legacy
      // in-tree provider (which would create a Classic Load Balancer).
      [TYPE]: 'external',
      // Pod IPs as targets: traffic skips kube-proxy and the extra node hop.
      [TARGET_TYPE]: 'ip',
      [SCHEME]: scheme,
    };
  }

  private constructor() {}
}
