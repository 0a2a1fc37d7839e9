import { ApiObject, Chart } from 'cdk8s';
import { Construct } from 'constructs';
import { BUILT_IN_NAMESPACES, podSecurityLabels } from './private/pod-security';

/** Properties of a {@link WorkloadNamespace}. */
export interface WorkloadNamespaceProps {
  /**
   * Name of the namespace (a DNS label: lowercase letters, digits and '-', at most 63 characters).
   *
   * @default - the chart's namespace
   */
  readonly name?: string;

  /**
   * Extra labels of the namespace (the Pod Security labels are set by the construct).
   *
   * @default - none
   */
  readonly labels?: { [key: string]: string };
}

/**
 * The Namespace a chart's workloads live in, emitted first in the chart, with Pod Security Admission labels.
 *
 * `kubectl create -f` (aws-cdk-lib's kubectl handler) and `kubectl apply -f` create nothing in a namespace
 * that does not exist yet (`namespaces "inference" not found`), and the Secrets a deployment mounts, such
 * as the Hugging Face token, go into it before the pods start. This construct puts the Namespace at the
 * top of the chart's output. Its Pod Security labels enforce the strictest standard every pod of the chart
 * meets (vLLM workers with EFA add `IPC_LOCK`, so a chart with workers is `privileged`; a router alone is
 * `restricted`), and warn and audit at `restricted`, so anything that keeps the namespace below it shows.
 *
 * `InferenceCluster.addWorkload` adds the namespace itself (as a manifest applied before the chart) when
 * the chart has none.
 *
 * @see https://kubernetes.io/docs/concepts/security/pod-security-admission/
 */
export class WorkloadNamespace extends Construct {
  /** The namespace's name. */
  public readonly name: string;

  constructor(scope: Construct, id: string, props: WorkloadNamespaceProps = {}) {
    super(scope, id);
    const chart = Chart.of(this);
    const name = props.name ?? chart.namespace;
    if (name === undefined || name === '') {
      throw new Error("WorkloadNamespace needs a name: the chart has no 'namespace'; pass { name: 'inference' } or create the chart "
        + "with new Chart(app, 'id', { namespace: 'inference' })");
    }
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name)) {
      throw new Error(`WorkloadNamespace 'name' (${name}) is not a DNS label: use lowercase letters, digits and '-', at most 63 characters, e.g. 'inference'`);
    }
    if (BUILT_IN_NAMESPACES.has(name)) {
      throw new Error(`WorkloadNamespace 'name' (${name}) is created by Kubernetes itself; put the workloads in a namespace of their own, e.g. 'inference'`);
    }
    this.name = name;
    const object = new NamespaceObject(this, 'Resource', name, chart, this, props.labels ?? {});
    // Emitted before everything else in the chart: cdk8s orders an object after what it depends on, and
    // objects added later come after this one in the construct tree anyway.
    for (const child of chart.node.findAll()) {
      if (child instanceof ApiObject && child !== object && !this.node.findAll().includes(child)) {
        child.node.addDependency(object);
      }
    }
  }
}

/**
 * The Namespace object: its Pod Security labels come from the pods of every other object of the chart,
 * read when the chart is rendered, and it carries no namespace of its own (a chart stamps its namespace on
 * every object, and a Namespace is cluster-scoped).
 */
class NamespaceObject extends ApiObject {
  constructor(scope: Construct, id: string, name: string, private readonly ownerChart: Chart, private readonly owner: WorkloadNamespace,
    private readonly extraLabels: Record<string, string>) {
    super(scope, id, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  }

  public toJson(): any {
    const json = super.toJson();
    delete json.metadata.namespace;
    json.metadata.labels = { ...json.metadata.labels, ...this.extraLabels, ...podSecurityLabels(siblingObjects(this.ownerChart, this.owner)) };
    return json;
  }
}

/** Every API object of the chart but the namespace's own, as JSON. */
function siblingObjects(chart: Chart, ns: WorkloadNamespace): any[] {
  const own = new Set(ns.node.findAll());
  return chart.node.findAll()
    .filter((c): c is ApiObject => c instanceof ApiObject && !own.has(c))
    .map((o) => o.toJson());
}
