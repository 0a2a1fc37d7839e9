import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Construct } from 'constructs';

/** Properties of an {@link EfaSecurityGroup}. */
export interface EfaSecurityGroupProps {
  /** The VPC of the cluster. */
  readonly vpc: ec2.IVpc;

  /**
   * A description shown in the EC2 console.
   *
   * @default 'EFA traffic between accelerated nodes (all traffic to and from itself)'
   */
  readonly description?: string;
}

/**
 * The security group that EFA requires on every EFA interface: all traffic in from itself and all
 * traffic out to itself. Nothing else is allowed out, so it adds no egress beyond what the cluster
 * security group (also attached to every interface) already grants.
 *
 * Share one group between node groups whose pods exchange KV cache over EFA (prefill and decode
 * pools): EFA only talks to interfaces that carry the same group.
 *
 * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html#efa-start-security
 */
export class EfaSecurityGroup extends Construct {
  /** The security group. */
  public readonly securityGroup: ec2.SecurityGroup;

  constructor(scope: Construct, id: string, props: EfaSecurityGroupProps) {
    super(scope, id);
    this.securityGroup = new ec2.SecurityGroup(this, 'Resource', {
      vpc: props.vpc,
      description: props.description ?? 'EFA traffic between accelerated nodes (all traffic to and from itself)',
      // EFA's OS-bypass traffic is not IP: only a self-referencing all-traffic rule lets it through.
      allowAllOutbound: false,
      allowAllIpv6Outbound: false,
    });
    this.securityGroup.addIngressRule(this.securityGroup, ec2.Port.allTraffic(), 'EFA: all traffic from the EFA group itself');
    this.securityGroup.addEgressRule(this.securityGroup, ec2.Port.allTraffic(), 'EFA: all traffic to the EFA group itself');
  }
}
