import { AcceleratedInstanceType, NetworkInterfaceType } from '../../catalog';

/** True when the type's launch template carries `efa-only` interfaces (they need VPC CNI >= 1.18.5). */
export function usesEfaOnlyInterfaces(type: AcceleratedInstanceType): boolean {
  return type.supportsEfa && type.networkInterfaceLayout().some((s) => s.interfaceType === NetworkInterfaceType.EFA_ONLY);
}
