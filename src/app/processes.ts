// What runs a controller process (`jaco controller`, `up`, `agent`, `ingress`, `hollow-nodes`) and
// the agent's flags and defaults. A command starting a process imports it from here, never from controllers/.
export { CONTROLLERS } from '../../controllers/index.js';
export { NodeAgent, NodeRemovedError, type AgentExit } from '../../controllers/node-agent/agent.js';
export { defaultAddress } from '../../controllers/node-agent/address.js';
export { AgentFlagError, dockerConnection, parseCapacity, parseDevices, parseLabels, checkStatusInterval, resolveCapacity } from '../../controllers/node-agent/capacity.js';
export { PRESSURE_MODES, type PressureMode } from '../../controllers/node-agent/node-usage.js';
export { DEFAULT_CNI_BIN_DIR } from '../../controllers/node-agent/cni.js';
export { DEFAULT_SANDBOX_IMAGE } from '../../controllers/node-agent/sandbox.js';
export { DEFAULT_API_PORT } from '../../controllers/node-agent/api-server.js';
export { Ingress } from '../../controllers/ingress/ingress.js';
export { HollowFleet } from '../../controllers/hollow/fleet.js';
