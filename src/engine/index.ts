/**
 * TypeScript face of the C++ engine: the addon loader and calls (./addon), the configuration's types
 * generated from engine/schema (./engine-config), the addon's results (./results), and the builder
 * that turns catalog and sizing objects into configurations (./engine-config-builder).
 *
 * Internal: not exported from src/index.ts, so importing the construct library never needs the addon.
 */
export * from './addon';
export * from './engine-config';
export * from './results';
export * from './engine-config-builder';
export * from './engine-profile';
export * from './pd-crossover';
