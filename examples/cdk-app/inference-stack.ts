import { Stack, StackProps } from 'aws-cdk-lib';
import * as cdk8s from 'cdk8s';
import { Construct } from 'constructs';
import {
  AcceleratedInstanceType, DisaggregatedInference, EngineImage, EngineImageVariant, GatewayExposure, InferenceCluster, ModelArchitecture,
  ModelSource, Precision,
} from 'disagg';

/**
 * One EKS cluster with a P5en (H200) node group and a Trn2 node group, both created empty, and Llama-3.3-70B served
 * disaggregated on the P5en nodes (two prefill and two decode replicas of TP4, one node per pool)
 * behind the KV-aware router. The Trn2 group shows the Neuron layout (16 EFA interfaces, Neuron AMI
 * and device plugin); it runs no workload here. Environment-agnostic: `cdk synth` needs no AWS account.
 */
export class InferenceStack extends Stack {
  public readonly inference: InferenceCluster;
  public readonly workload: DisaggregatedInference;

  constructor(scope: Construct, id: string, props: StackProps = {}) {
    super(scope, id, props);
    this.inference = new InferenceCluster(this, 'Inference');
    this.inference.addAcceleratedNodeGroup('H200', {
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      // Created empty (nothing scarce launches with the stack); the stack output H200ScaleUp scales it to 2.
      maxSize: 2,
      poolRole: 'llama-pd',
    });
    this.inference.addAcceleratedNodeGroup('Trainium2', {
      instanceType: AcceleratedInstanceType.TRN2_48XLARGE,
      maxSize: 1,
      poolRole: 'neuron',
    });

    // The engine images are built at deploy time (Docker assets): images/engine (vLLM) for the workers,
    // images/engine-slim for the router, which runs on the system nodes.
    const image = EngineImage.fromAsset().bind(this);
    const slim = EngineImage.fromAsset({ variant: EngineImageVariant.SLIM }).bind(this);
    const chart = new cdk8s.Chart(new cdk8s.App(), 'llama-pd', { namespace: 'inference' });
    const h200 = { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4, nodePoolRole: 'llama-pd' };
    this.workload = new DisaggregatedInference(chart, 'Llama', {
      model: ModelArchitecture.LLAMA_3_3_70B,
      modelSource: ModelSource.huggingFace('meta-llama/Llama-3.3-70B-Instruct', { tokenSecret: { name: 'hf-token' } }),
      image: image.imageUri,
      routerImage: slim.imageUri,
      weightPrecision: Precision.FP8,
      kvCachePrecision: Precision.FP8,
      maxContext: 8192,
      prefill: h200,
      decode: h200,
      gateway: GatewayExposure.gateway(),
    });
    this.inference.addWorkload(chart);
  }
}
