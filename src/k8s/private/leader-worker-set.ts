import { ApiObjectMetadata, Lazy } from 'cdk8s';
import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import {
  LeaderWorkerSet, LeaderWorkerSetSpecLeaderWorkerTemplateRestartPolicy as RestartPolicy,
  LeaderWorkerSetSpecRolloutStrategyRollingUpdateConfigurationMaxSurge as MaxSurge,
  LeaderWorkerSetSpecRolloutStrategyRollingUpdateConfigurationMaxUnavailable as MaxUnavailable,
  LeaderWorkerSetSpecRolloutStrategyType as RolloutStrategyType, LeaderWorkerSetSpecStartupPolicy as StartupPolicy,
} from '../../imports/leaderworkerset.x-k8s.io';

/** Inputs of {@link addLeaderWorkerSet} (internal). */
export interface LeaderWorkerSetInputs {
  readonly metadata: ApiObjectMetadata;
  /** Groups; undefined when an autoscaler owns the count (the LWS then starts with 1). */
  readonly replicas?: number;
  /** Pods per group, the leader included. */
  readonly size: number;
  /** The leader's pod template, produced at synthesis (env, arguments and caches added later land in it). */
  readonly leaderTemplate: () => k8s.PodTemplateSpec;
  /** The workers' pod template, produced at synthesis. */
  readonly workerTemplate: () => k8s.PodTemplateSpec;
}

/**
 * Adds a LeaderWorkerSet of a multi-node pool: groups start with their leader, roll one at a time with
 * no surge (no spare accelerators), and restart whole when a pod restarts: every pod of a group joins
 * one collective (Ray or torch.distributed), which a lost pod takes down.
 */
export function addLeaderWorkerSet(scope: Construct, id: string, inputs: LeaderWorkerSetInputs): LeaderWorkerSet {
  return new LeaderWorkerSet(scope, id, {
    metadata: inputs.metadata,
    spec: {
      replicas: inputs.replicas,
      startupPolicy: StartupPolicy.LEADER_CREATED,
      rolloutStrategy: {
        type: RolloutStrategyType.ROLLING_UPDATE,
        rollingUpdateConfiguration: { maxSurge: MaxSurge.fromNumber(0), maxUnavailable: MaxUnavailable.fromNumber(1) },
      },
      leaderWorkerTemplate: {
        size: inputs.size,
        restartPolicy: RestartPolicy.RECREATE_GROUP_ON_POD_RESTART,
        leaderTemplate: renderedPodTemplate(inputs.leaderTemplate),
        workerTemplate: renderedPodTemplate(inputs.workerTemplate),
      },
    },
  });
}

/**
 * The CRD binding leaves the templates open (`any`: they embed the core PodTemplateSpec, which the
 * minimal CRD does not repeat), so a template is built with the core types and rendered to JSON here.
 */
function renderedPodTemplate(produce: () => k8s.PodTemplateSpec): unknown {
  return Lazy.any({ produce: () => k8s.toJson_PodTemplateSpec(produce()) });
}
