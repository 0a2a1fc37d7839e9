/**
 * What is wrong with a list of Availability Zone names for a new VPC, or undefined when nothing is: EKS
 * needs two different zones, and every name must be a zone of the first one's Region (`us-east-2b`).
 * The prop (`availabilityZones`) and the CLI flag (`--azs`) word their errors around it.
 */
export function zoneListProblem(zones: string[]): string | undefined {
  if (zones.length < 2 || new Set(zones).size !== zones.length) {
    return 'EKS requires subnets in at least two different Availability Zones';
  }
  const region = zones[0].replace(/[a-z]$/, '');
  const bad = zones.find((z) => !/^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$/.test(z) || z.replace(/[a-z]$/, '') !== region);
  return bad === undefined ? undefined : `'${bad}' is not a zone of ${region}`;
}
