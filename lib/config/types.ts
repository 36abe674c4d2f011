/**
 * The agent's settings once loaded and validated: one field per entry of the settings table
 * (lib/config/settings.ts, which says what each means), durations in milliseconds.
 */
import type { SelfIdentity } from "../core/self.ts";
import type { SettingsConfig } from "./settings.ts";

export { KUBELET_CA_OFF } from "./kinds.ts";

export interface Config extends SettingsConfig {
  /** Set only when deployed as a pod (NODE_NAME, POD_NAME, POD_NAMESPACE). */
  self?: SelfIdentity;
}
